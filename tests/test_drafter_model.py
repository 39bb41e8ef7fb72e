"""The PyTorch drafter and the training-time-test unroll (eaglehub.model.ttt, used by the recipe and by calibration)
against step-by-step drafting."""

from __future__ import annotations

import json

import pytest
import torch
from helpers.checkpoints import BASE_CONFIG, load_recipe
from safetensors.torch import save_file

from eaglehub.checks.validate import validate
from eaglehub.model.eagle3 import DrafterDims, Eagle3Drafter, attention, causal_mask
from eaglehub.model.ttt import ttt_loss, unroll


def _model(seed: int = 0, **flags) -> Eagle3Drafter:
    torch.manual_seed(seed)
    cfg = dict(BASE_CONFIG, **flags)
    m = Eagle3Drafter(DrafterDims.from_config(cfg)).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.05)
        used = torch.sort(torch.randperm(cfg["vocab_size"])[: cfg["draft_vocab_size"]]).values
        m.d2t.copy_(used - torch.arange(len(used)))
        m.t2d[used] = True
    return m


@pytest.mark.parametrize("flags", [{}, {"fc_norm": True, "norm_output": True}])
def test_state_dict_is_a_checkpoint_that_validates_clean(tmp_path, flags):
    m = _model(**flags)
    save_file({k: v.contiguous() for k, v in m.state_dict().items()}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps(dict(BASE_CONFIG, torch_dtype="float32", **flags)))
    report = validate(tmp_path)
    assert [f["code"] for f in report["findings"] if f["severity"] == "error"] == []
    assert ("fc_norm.2.weight" in m.state_dict()) == bool(flags)


def test_dims_follow_vllm_defaults():
    cfg = {k: v for k, v in BASE_CONFIG.items() if k not in ("num_aux_hidden_states", "target_hidden_size", "head_dim")}
    d = DrafterDims.from_config(cfg)
    assert (d.num_aux, d.target_hidden_size, d.head_dim) == (3, 64, 16)
    assert DrafterDims.from_config(dict(cfg, eagle_config={"norm_before_fc": True})).norm_before_fc


@pytest.mark.parametrize("model_type", ["llama", "qwen3"])
def test_a_missing_rms_norm_eps_is_the_config_class_default_vllm_reads(model_type):
    from transformers import AutoConfig

    cfg = {k: v for k, v in BASE_CONFIG.items() if k != "rms_norm_eps"}
    cfg["model_type"] = model_type
    parsed = AutoConfig.for_model(model_type, **{k: v for k, v in cfg.items() if k != "model_type"})
    assert DrafterDims.from_config(cfg).rms_norm_eps == parsed.rms_norm_eps


def test_to_target_ids_adds_offsets():
    m = _model()
    used = torch.nonzero(m.t2d).flatten()
    assert torch.equal(m.to_target_ids(torch.arange(len(used))), used)


QWEN3 = {"architectures": ["Eagle3Qwen3ForCausalLM"], "model_type": "qwen3"}
WINDOW = {"layer_types": ["sliding_attention"], "sliding_window": 3, "use_sliding_window": True}


@pytest.mark.parametrize(
    "flags",
    [{}, {"norm_output": True}, QWEN3, dict(QWEN3, **WINDOW)],
    ids=["eagle3", "norm_output", "qwen3", "qwen3_window"],
)
def test_ttt_unroll_equals_step_by_step_drafting(flags):
    """Step j at base i must see exactly the keys vLLM's drafter sees: step-1 keys ≤ i and its own chain,
    within the layer's sliding window (a window of 3 cuts into the 7 positions and the 3-step chain)."""
    assert load_recipe("train").ttt_loss is ttt_loss  # the recipe trains with this very unroll
    m = _model(seed=1, **flags)
    window = m.dims.window(0)
    d = m.dims
    steps, L, V = 3, 7, d.vocab_size
    g = torch.Generator().manual_seed(3)
    embed = torch.randn(V, d.hidden_size, generator=g)
    ids = torch.randint(0, V, (1, L + steps + 1), generator=g)
    aux = torch.randn(1, L, d.num_aux * d.target_hidden_size, generator=g) * 3
    with torch.no_grad():
        got = unroll(m, embed, ids, aux, torch.tensor([L]), steps)
        pos = torch.arange(L)
        q, k, v, resid = m.layer_qkv(m.combine(aux[0]), embed[ids[0, 1 : L + 1]], pos)
        normed, fed = m.layer_out(attention(q, k, v, causal_mask(pos, pos, window)), resid)
        assert torch.allclose(got[0][0], normed, atol=1e-5)
        for i in range(L):
            h, ks, vs = fed[i : i + 1], [k[: i + 1]], [v[: i + 1]]
            for j in range(2, steps + 1):
                qj, kj, vj, rj = m.layer_qkv(h, embed[ids[0, i + j]][None], torch.tensor([i + j - 1]))
                ks.append(kj)
                vs.append(vj)
                keys_at = torch.arange(i + j)  # positions 0..i of step 1, then the chain at i+1..i+j-1
                mask = causal_mask(torch.tensor([i + j - 1]), keys_at, window)
                nj, h = m.layer_out(attention(qj, torch.cat(ks), torch.cat(vs), mask), rj)
                assert torch.allclose(got[j - 1][0, i], nj[0], atol=1e-5), (i, j)


def test_a_padded_row_past_the_window_keeps_the_loss_and_gradients_finite():
    """Two sequences of 12 and 3 tokens, window 3: the short one's padded rows 6.. see no real key at
    step 1; they must not turn the batch's loss or gradients into NaN (the rows are outside the loss)."""
    m = _model(seed=5, **QWEN3, **WINDOW).train()
    d = m.dims
    g = torch.Generator().manual_seed(6)
    embed = torch.randn(d.vocab_size, d.hidden_size, generator=g)
    used = torch.nonzero(m.t2d).flatten()
    shards = [
        {"ids": used[torch.randint(0, len(used), (12,), generator=g)], "aux": torch.randn(12, 3 * 64, generator=g)}
        for _ in range(2)
    ]
    t2d_index = torch.full((d.vocab_size,), -1, dtype=torch.long)
    t2d_index[used] = torch.arange(len(used))
    loss, parts, _ = ttt_loss(m, embed, shards, [(0, 0, 12, 1), (1, 0, 3, 1)], t2d_index, 3, [1.0, 0.8, 0.6])
    loss.backward()
    assert torch.isfinite(loss) and all(torch.isfinite(p.grad).all() for p in m.parameters() if p.grad is not None)
    alone, _, _ = ttt_loss(m, embed, shards, [(0, 0, 12, 1)], t2d_index, 3, [1.0, 0.8, 0.6])
    assert torch.isfinite(alone)


def _ttt_batch(m, seed: int = 4):
    d = m.dims
    g = torch.Generator().manual_seed(seed)
    embed = torch.randn(d.vocab_size, d.hidden_size, generator=g)
    used = torch.nonzero(m.t2d).flatten()
    ids = used[torch.randint(0, len(used), (2, 9), generator=g)]
    shards = [
        {
            "ids": ids[b],
            "aux": torch.randn(9, d.num_aux * d.target_hidden_size, generator=g) * 3,
            "answer_start": 3,
        }
        for b in range(2)
    ]
    t2d_index = torch.full((d.vocab_size,), -1, dtype=torch.long)
    t2d_index[used] = torch.arange(len(used))
    return embed, shards, [(0, 0, 9, 3), (1, 0, 7, 3)], t2d_index


@pytest.mark.slow
def test_distillation_term_is_the_teacher_kl_and_vanishes_for_an_identical_teacher():
    m = _model(seed=2)
    embed, shards, batch, t2d_index = _ttt_batch(m)
    w = [1.0, 0.8, 0.6]
    with torch.no_grad():
        ce, parts, _ = ttt_loss(m, embed, shards, batch, t2d_index, 3, w)
        same, same_parts, _ = ttt_loss(
            m, embed, shards, batch, t2d_index, 3, w, teacher=_model(seed=2), label_weight=0.3
        )
        other, _, _ = ttt_loss(m, embed, shards, batch, t2d_index, 3, w, teacher=_model(seed=5), label_weight=0.0)
    assert ce.item() > 1.0 and same_parts == parts  # the per-step CE is reported unchanged
    assert same.item() == pytest.approx(0.3 * ce.item(), rel=1e-5)  # KL(p || p) = 0
    assert other.item() > 1e-3
    # the KL's gradient pulls the student towards the teacher
    student, teacher = _model(seed=2), _model(seed=5)
    opt = torch.optim.SGD(student.parameters(), lr=0.5)
    for _ in range(5):
        loss, _, _ = ttt_loss(student, embed, shards, batch, t2d_index, 3, w, teacher=teacher, label_weight=0.0)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        after, _, _ = ttt_loss(student, embed, shards, batch, t2d_index, 3, w, teacher=teacher, label_weight=0.0)
    assert after.item() < 0.8 * other.item()
