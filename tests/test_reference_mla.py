"""The reference engine on a tiny MLA pair: a DeepSeek-V3 target that transformers loads (MLA attention,
dense then MoE layers) and Kimi/DeepSeek-style EAGLE-3 / 3.1 drafters (``Eagle3DeepseekV2ForCausalLM``,
eaglehub/drafter_mla.py). Greedy speculation must be token-identical to the target alone, the counters
vLLM's (docs/vllm.md §9), and the aux hidden states the inputs of the captured layers (docs/vllm.md §7)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.formats_factory import vocab_maps, write_format, write_weights
from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

from eaglehub.checks.context import Options
from eaglehub.checks.validate import validate
from eaglehub.engines.base import RunSpec, SpecCounters
from eaglehub.engines.reference import ReferenceEngine, load_drafter
from eaglehub.measure import acceptance
from eaglehub.model.mla import MLAAttention
from eaglehub.profiles import LOCAL_PROFILE

PROMPTS = [[3, 17, 45, 9, 200, 31], [250, 4, 4, 4, 4, 8, 100, 61, 7], [60]]
GROUPS = ["a", "a", "b"]
LAYERS, EOS, K, MAX_TOKENS = 8, 255, 3, 24
#: what a drafter copies from this target's config, so that `validate --target` has nothing to say
PAIRED = {
    "rope_theta": 10000.0,
    "rope_scaling": None,
    "bos_token_id": 0,
    "eos_token_id": EOS,
    "max_position_embeddings": 4096,
}


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    """8 MLA layers (hidden 64, 4 heads, q_lora 32, kv_lora 32, qk_nope 16, qk_rope 8, v_head 16), the
    first 2 dense, then MoE (4 routed experts, top-2, 1 shared); vocab 256, float32. Weights std 0.4
    (transformers' init at ``initializer_range``) for peaky logits, so greedy runs have no near-ties."""
    cfg = DeepseekV3Config(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        moe_intermediate_size=32,
        num_hidden_layers=LAYERS,
        num_attention_heads=4,
        num_key_value_heads=4,
        q_lora_rank=32,
        kv_lora_rank=32,
        qk_nope_head_dim=16,
        qk_rope_head_dim=8,
        v_head_dim=16,
        first_k_dense_replace=2,
        n_routed_experts=4,
        num_experts_per_tok=2,
        n_shared_experts=1,
        n_group=1,
        topk_group=1,
        max_position_embeddings=4096,
        bos_token_id=0,
        eos_token_id=EOS,
        pad_token_id=None,
        tie_word_embeddings=False,
        initializer_range=0.4,
        dtype="float32",
    )
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("t") / "deepseek-v3-tiny"
    DeepseekV3ForCausalLM(cfg).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def engine():
    return ReferenceEngine()  # one engine: the target is loaded once for the whole module


@pytest.fixture(scope="module")
def baseline(engine, target):
    return engine.run(RunSpec(target, None, K, MAX_TOKENS), PROMPTS, GROUPS)


def _drafter(root, name: str, fmt: str = "vllm", **spec):
    """A tiny MLA drafter (formats_factory: kimi_k2, MLA ranks 32/32, qk 16+16, v 16, pruned vocab 32
    with d2t/t2d, C-in aux ids [2, 4, 5] = this 8-layer target's defaults) paired with the target."""
    return write_format(root / name, fmt, layer_kind="mla", dtype="float32", base_config=PAIRED, **spec)


VARIANTS = {
    "eagle3": {},
    "eagle31_fc_norm": {"fc_norm": True, "norm_output": True},
    "two_layers": {"layers": 2},
    "torchspec_layout": {"fmt": "torchspec"},  # layers.0.* names, nested C-out aux ids [1, 3, 4]
}
#: validate's legitimate warnings: vLLM's V1 runner reads nested ids as C-in (one layer early), eaglehub as TorchSpec's C-out
WARNINGS = {"torchspec_layout": ["W-AUX-CONVENTION"]}


def _check_run(run, baseline) -> SpecCounters:
    assert run.outputs == baseline.outputs
    total = acceptance.total(run.group_counters.values())
    assert acceptance.check_consistency(total, K) == []
    assert total == acceptance.total(run.prompt_counters)
    assert total.num_draft_tokens == K * total.num_drafts
    # every verify step emits accepted + 1 tokens; outputs are cut at max_tokens / EOS afterwards
    produced = len(PROMPTS) + total.num_drafts + total.num_accepted_tokens  # + each prompt's prefill token
    assert produced >= sum(len(o) for o in run.outputs) >= produced - len(PROMPTS) * K
    return total


@pytest.mark.slow
def test_the_target_is_mla_and_its_greedy_run_is_nontrivial(engine, target, baseline):
    t = engine.target(target, "float32")
    assert type(t.model).__name__ == "DeepseekV3ForCausalLM" and t.num_layers == LAYERS
    assert type(t.model.model.layers[LAYERS - 1].mlp).__name__ == "DeepseekV3MoE"
    assert all(len(o) == MAX_TOKENS or o[-1] == EOS for o in baseline.outputs)
    assert len({tok for o in baseline.outputs for tok in o}) > 20  # not a constant or looping target


@pytest.mark.slow
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_greedy_speculation_with_an_mla_drafter_is_token_identical(tmp_path, engine, target, baseline, variant):
    w = _drafter(tmp_path, variant, **VARIANTS[variant])
    assert [f["code"] for f in validate(w.path)["findings"] if f["severity"] == "error"] == []
    # judged as the engine that runs it here reads it: the reference engine reads drafters as vLLM's V1 runner
    local = Options(profiles=(LOCAL_PROFILE,))
    assert [f["code"] for f in validate(w.path, target=target, options=local)["findings"]] == WARNINGS.get(variant, [])
    loaded = load_drafter(w.path, engine.target(target, "float32"))
    assert loaded.aux_ids == [2, 4, 5]
    layers = [loaded.model.midlayer] + list(getattr(loaded.model, "layers", {}).values())
    assert len(layers) == VARIANTS[variant].get("layers", 1)
    assert all(isinstance(m.self_attn, MLAAttention) for m in layers)
    if VARIANTS[variant].get("fc_norm"):
        assert torch.equal(loaded.model.fc_norm[1].weight, w.canonical["fc_norm.1.weight"])
        assert (loaded.model.fc_norm[1].weight != 1).any()  # the 3.1 norms are live, not identity
    _check_run(engine.run(RunSpec(target, w.path, K, MAX_TOKENS), PROMPTS, GROUPS), baseline)


@pytest.mark.slow
def test_a_constant_mla_drafter_gets_drafts_accepted(tmp_path, engine, target, baseline):
    """An MLA drafter that always drafts one token c (all logits 0 → draft id 0 → c via d2t): drafts are
    accepted wherever the target emits c, so the target's and drafter's caches are cropped after
    accepted drafts too, and the output still equals the target alone."""
    counts = np.bincount([t for o in baseline.outputs for t in o[1:] if t != EOS], minlength=256)
    tok = int(counts[: 256 - 32].argmax())  # room for 31 larger ids: c is the smallest used id, draft id 0
    w = _drafter(tmp_path, "const")
    tensors = dict(w.canonical)
    tensors["d2t"], tensors["t2d"] = vocab_maps(range(tok, tok + 32), 256)
    tensors["norm.weight"] = torch.zeros_like(tensors["norm.weight"])
    write_weights(w.path, tensors)
    assert [f["code"] for f in validate(w.path, target=target)["findings"] if f["severity"] == "error"] == []
    total = _check_run(engine.run(RunSpec(target, w.path, K, MAX_TOKENS), PROMPTS, GROUPS), baseline)
    assert total.num_accepted_tokens >= 1 and total.accepted_per_pos[0] >= 1


@pytest.mark.slow
def test_aux_hidden_states_are_the_inputs_of_the_captured_layers(tmp_path, engine, target):
    """vLLM's DeepSeek/Kimi targets capture the input of layer k for aux id k (docs/vllm.md §7); the engine
    takes transformers' ``hidden_states[k]``, which must be exactly that input (forward pre-hooks)."""
    t = engine.target(target, "float32")
    aux_ids = load_drafter(_drafter(tmp_path, "d").path, t).aux_ids
    inputs = {}

    def capture(i):
        def hook(module, args, kwargs):
            inputs[i] = (args[0] if args else kwargs["hidden_states"])[0].clone()

        return hook

    hooks = [
        layer.register_forward_pre_hook(capture(i), with_kwargs=True) for i, layer in enumerate(t.model.model.layers)
    ]
    try:
        with torch.inference_mode():
            _, aux = t.forward(PROMPTS[1], t.new_cache(), aux_ids)
    finally:
        for h in hooks:
            h.remove()
    chunks = aux.split(t.config.hidden_size, dim=-1)
    assert aux.shape == (len(PROMPTS[1]), 3 * 64) and len(inputs) == LAYERS
    for i, chunk in zip(aux_ids, chunks):
        assert torch.equal(chunk, inputs[i])
        assert not torch.allclose(chunk, inputs[i + 1], atol=1e-3)  # the output of layer k is another state


@pytest.mark.slow
def test_a_bfloat16_mla_pair_runs_with_consistent_counters(tmp_path, engine, target):
    """MLA attention computes in float32 and hands the residual stream back in its dtype, so a bfloat16
    drafter's MLP layers get bfloat16 inputs."""
    w = _drafter(tmp_path, "bf16", layers=2)
    run = engine.run(RunSpec(target, w.path, K, 12, dtype="bfloat16"), PROMPTS, GROUPS)
    assert all(1 <= len(o) <= 12 and all(0 <= t < 256 for t in o) for o in run.outputs)
    total = acceptance.total(run.group_counters.values())
    assert acceptance.check_consistency(total, K) == [] and total.num_drafts >= len(PROMPTS)
