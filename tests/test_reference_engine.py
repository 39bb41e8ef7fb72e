"""The embedded reference engine on tiny generated pairs: greedy losslessness for every EAGLE-3 / 3.1
switch, vLLM's counter semantics, the drafter's cache against a full recompute, sampled decoding,
diagnostics, and verify / forensics wiring. (The real SmolLM2 pair: tests/test_reference_real.py.)"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch
from helpers.checkpoints import (
    BASE_CONFIG,
    add_fc_norm,
    drafter_tensors,
    qwen3_layers,
    target_config,
    target_tensors,
    vocab_maps,
    write_checkpoint,
)

from eaglehub.checks.validate import validate
from eaglehub.engines.base import RunSpec, SpecCounters
from eaglehub.engines.reference import ReferenceEngine, load_drafter
from eaglehub.errors import EaglehubError
from eaglehub.measure import acceptance
from eaglehub.model.eagle3 import DrafterDims, Eagle3Drafter, KVCache
from eaglehub.verify import forensics
from eaglehub.verify import run as verify

PROMPTS = [[3, 17, 45, 9, 200, 31], [1, 2, 3], [250, 4, 4, 4, 4, 8, 100, 61, 7], [60]]


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    """A tiny float32 Llama target (8 layers, hidden 64, vocab 256) that transformers loads."""
    cfg = target_config(8, torch_dtype="float32", eos_token_id=255)
    tensors = {k: v.float() * 8 for k, v in target_tensors(cfg).items()}  # peakier logits than std 0.05
    return write_checkpoint(tmp_path_factory.mktemp("t") / "target", cfg, tensors)


def _drafter(root, name: str, mutate=None, seed: int = 0):
    cfg = dict(copy.deepcopy(BASE_CONFIG), torch_dtype="float32")
    tensors = drafter_tensors(cfg, seed=seed, dtype=torch.float32)
    if mutate:
        mutate(cfg, tensors)
    return write_checkpoint(root / name, cfg, tensors)


def _constant_drafter(root, target, name: str = "const"):
    """A drafter that always drafts the target's most frequent greedy output token (draft id 0, all
    logits 0): acceptance exactly where the target predicts that token, so well above zero."""
    base = ReferenceEngine().run(RunSpec(target, None, 3, 24), PROMPTS, ["a"] * len(PROMPTS))
    counts = np.bincount([t for o in base.outputs for t in o if t != 255], minlength=256)
    tok = int(counts.argmax())
    used = [tok] + list(range(tok + 1, min(256, tok + 32)))

    def constant(cfg, t):
        cfg["draft_vocab_size"] = len(used)
        fresh = drafter_tensors(cfg, dtype=torch.float32)
        t.clear()
        t.update(fresh)
        t["d2t"], t["t2d"] = vocab_maps(used, 256)
        t["norm.weight"] = torch.zeros(cfg["hidden_size"])

    return _drafter(root, name, constant), tok


def _fc_norm(cfg, t):
    add_fc_norm(cfg, t)
    for k in [k for k in t if k.startswith("fc_norm.")]:
        t[k] = t[k].float()


def _norm_before_fc(cfg, t):
    cfg["norm_before_fc"] = True
    t["input_norm.weight"] = torch.linspace(0.5, 1.5, 3 * cfg["hidden_size"])


def _two_layers(cfg, t):
    cfg["num_hidden_layers"] = 2
    h, inter = cfg["hidden_size"], cfg["intermediate_size"]
    q, kv = cfg["num_attention_heads"] * 16, cfg["num_key_value_heads"] * 16
    g = torch.Generator().manual_seed(7)
    shapes = {
        "self_attn.q_proj.weight": (q, h),
        "self_attn.k_proj.weight": (kv, h),
        "self_attn.v_proj.weight": (kv, h),
        "self_attn.o_proj.weight": (h, q),
        "mlp.gate_proj.weight": (inter, h),
        "mlp.up_proj.weight": (inter, h),
        "mlp.down_proj.weight": (h, inter),
    }
    for name, shape in shapes.items():
        t[f"layers.1.{name}"] = torch.randn(*shape, generator=g) * 0.05
    t["layers.1.input_layernorm.weight"] = torch.ones(h)
    t["layers.1.post_attention_layernorm.weight"] = torch.ones(h)


def _full_vocab(cfg, t):
    cfg["draft_vocab_size"] = cfg["vocab_size"]
    t.pop("d2t"), t.pop("t2d")
    t["lm_head.weight"] = torch.randn(cfg["vocab_size"], cfg["hidden_size"]) * 0.05


VARIANTS = {
    "eagle3": None,
    "eagle31": _fc_norm,
    "norm_before_fc": _norm_before_fc,
    "norm_before_residual": lambda cfg, t: cfg.update(norm_before_residual=True),
    "two_layers": _two_layers,
    "full_vocab": _full_vocab,
    "qwen3": qwen3_layers,
    # a window shorter than every prompt plus its output: the drafter's keys slide while it drafts
    "qwen3_window": lambda cfg, t: (_two_layers(cfg, t), qwen3_layers(cfg, t, window=4)),
    "llama_window": lambda cfg, t: cfg.update(layer_types=["sliding_attention"], sliding_window=5),
}


@pytest.mark.slow
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_greedy_speculation_is_token_identical_for_every_switch(tmp_path, target, variant):
    drafter = _drafter(tmp_path, variant, VARIANTS[variant])
    assert [f["code"] for f in validate(drafter)["findings"] if f["severity"] == "error"] == []
    engine = ReferenceEngine()
    groups = ["a", "a", "b", "b"]
    base = engine.run(RunSpec(target, None, 3, 24), PROMPTS, groups)
    run = engine.run(RunSpec(target, drafter, 3, 24), PROMPTS, groups)
    assert run.outputs == base.outputs
    assert all(len(o) == 24 or o[-1] == 255 for o in base.outputs)
    total = acceptance.total(run.group_counters.values())
    assert acceptance.check_consistency(total, 3) == []
    assert total == acceptance.total(run.prompt_counters)
    # every verify step emits accepted + 1 tokens; outputs are cut at max_tokens / EOS afterwards
    produced = len(PROMPTS) + total.num_drafts + total.num_accepted_tokens  # + each prompt's prefill token
    assert produced >= sum(len(o) for o in run.outputs) >= produced - len(PROMPTS) * 3
    assert base.group_counters == {} and base.prompt_counters is None
    assert set(run.group_seconds) == {"a", "b"} and run.generate_seconds == pytest.approx(
        sum(run.group_seconds.values())
    )


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"architectures": ["Eagle3Qwen3ForCausalLM"], "model_type": "qwen3"},
        {"layer_types": ["sliding_attention", "full_attention"], "sliding_window": 3},
    ],
    ids=["llama", "qwen3", "window"],
)
def test_drafter_cache_equals_a_full_recompute(extra):
    torch.manual_seed(0)
    cfg = dict(BASE_CONFIG, num_hidden_layers=2, norm_output=True, **extra)
    m = Eagle3Drafter(DrafterDims.from_config(cfg)).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.05)
        emb, hid = torch.randn(7, 64), torch.randn(7, 64)
        full, fed_full, _ = m.forward_step(emb, hid, torch.arange(7), KVCache(2))
        cache = KVCache(2)
        m.forward_step(emb[:4], hid[:4], torch.arange(4), cache)
        rows = [
            m.forward_step(emb[i : i + 1], hid[i : i + 1], torch.tensor([i]), cache, return_probs=True)
            for i in range(4, 7)
        ]
    assert cache.length == 7
    assert torch.allclose(torch.cat([r[0] for r in rows]), full[4:], atol=1e-5)
    assert torch.allclose(fed_full, full)  # norm_output: the fed-back state is the post-norm one
    probs = rows[-1][2]
    assert len(probs) == 2 and probs[0].shape == (4, 1, 7)
    assert torch.allclose(probs[0].sum(-1), torch.ones(4, 1))
    if "sliding_window" in extra:  # layer 0 slides over 3 positions: the query at 6 sees 4, 5, 6 only
        assert torch.all(probs[0][..., :4] == 0) and torch.all(probs[0][..., 4:] > 0)
        assert torch.all(probs[1] > 0)


def test_state_dict_of_a_two_layer_drafter_is_canonical(tmp_path):
    m = Eagle3Drafter(DrafterDims.from_config(dict(BASE_CONFIG, num_hidden_layers=2)))
    names = set(m.state_dict())
    assert "layers.1.self_attn.q_proj.weight" in names and "layers.1.hidden_norm.weight" not in names
    assert m.state_dict()["layers.1.self_attn.q_proj.weight"].shape == (64, 64)  # reads H, not 2H


@pytest.mark.slow
def test_counters_follow_vllm_semantics_with_a_constant_drafter(tmp_path, target):
    """Every draft is one token c: a step accepts i drafts iff the target's next i tokens are all c."""
    drafter, tok = _constant_drafter(tmp_path, target)
    run = ReferenceEngine().run(RunSpec(target, drafter, 2, 24), PROMPTS, ["a"] * len(PROMPTS))
    for _prompt, out, c in zip(PROMPTS, run.outputs, run.prompt_counters):
        # replay the steps on the output: each step starts after the emitted tokens so far
        pos, drafts, accepted, per_pos = 1, 0, 0, [0, 0]
        while pos < len(out):
            a = 0
            while a < 2 and pos + a < len(out) and out[pos + a] == tok:
                a += 1
            drafts, accepted = drafts + 1, accepted + a
            for i in range(a):
                per_pos[i] += 1
            pos += a + 1
        if out[-1] != 255 and len(out) == 24:  # the last step may have been cut by max_tokens: compare its prefix
            assert c.num_drafts == drafts and c.num_accepted_tokens >= accepted
        else:
            assert (c.num_drafts, c.num_accepted_tokens, list(c.accepted_per_pos)) == (
                drafts,
                accepted,
                per_pos,
            )
    assert acceptance.total(run.prompt_counters).num_accepted_tokens > 0


@pytest.mark.slow
def test_sampled_decoding_counts_and_emits_valid_tokens(tmp_path, target):
    drafter = _drafter(tmp_path, "d")
    engine = ReferenceEngine()
    run = engine.run(RunSpec(target, drafter, 3, 20, temperature=1.0, seed=5), PROMPTS, ["a"] * 4)
    again = engine.run(RunSpec(target, drafter, 3, 20, temperature=1.0, seed=5), PROMPTS, ["a"] * 4)
    assert run.outputs == again.outputs  # the seed fixes every draw
    assert all(0 <= t < 256 for o in run.outputs for t in o)
    total = acceptance.total(run.group_counters.values())
    assert acceptance.check_consistency(total, 3) == [] and total.num_drafts > 0


@pytest.mark.slow
def test_per_prompt_histograms_and_top_k_1_sampling_is_greedy(tmp_path, target):
    """Each prompt's counters carry vLLM's per-request histogram; at T > 0 with top-k 1 (or a vanishing top-p)
    the target and drafter distributions are one-hot at their argmax, so the sampled run is the greedy run: a
    filter that did not reach both distributions would sample other tokens, as T 0.8 without one does."""
    from eaglehub.measure.distribution import counters_from_histogram

    drafter = _drafter(tmp_path, "d")
    engine = ReferenceEngine()
    greedy = engine.run(RunSpec(target, drafter, 3, 24), PROMPTS, ["a"] * 4)
    for c in greedy.prompt_counters:
        assert len(c.accepted_histogram) == 4 and c == counters_from_histogram(c.accepted_histogram, c.num_draft_tokens)
    assert greedy.group_counters["a"] == acceptance.total(greedy.prompt_counters)
    for top in ({"top_k": 1}, {"top_p": 1e-9}):
        hot = engine.run(RunSpec(target, drafter, 3, 24, temperature=0.8, seed=3, **top), PROMPTS, ["a"] * 4)
        assert hot.outputs == greedy.outputs and hot.prompt_counters == greedy.prompt_counters, top
    free = engine.run(RunSpec(target, drafter, 3, 24, temperature=0.8, seed=3), PROMPTS, ["a"] * 4)
    assert free.outputs != greedy.outputs


@pytest.mark.slow
def test_diagnostics_per_depth(tmp_path, target):
    drafter = _drafter(tmp_path, "d")
    run = ReferenceEngine().run(RunSpec(target, drafter, 4, 16, diagnostics=True), PROMPTS, ["a"] * 4)
    d = run.diagnostics
    assert d["sink_tokens"] == 4 and len(d["hidden_state_norm"]) == 4
    assert d["samples"][0] == d["samples"][3] == acceptance.total(run.group_counters.values()).num_drafts
    assert all(0 < m <= 1 for m in d["sink_attention_mass"])  # the first 4 positions always exist here
    assert all(n > 0 for n in d["hidden_state_norm"])


@pytest.mark.slow
def test_quantized_and_incomplete_drafters_are_refused(tmp_path, target):
    engine = ReferenceEngine()
    broken = _drafter(tmp_path, "broken", lambda cfg, t: t.pop("midlayer.mlp.down_proj.weight"))
    with pytest.raises(EaglehubError, match="missing midlayer.mlp.down_proj.weight"):
        load_drafter(broken, engine.target(target, "float32"))
    quant = _drafter(
        tmp_path,
        "quant",
        lambda cfg, t: cfg.update(quantization_config={"quant_method": "compressed-tensors"}),
    )
    with pytest.raises(EaglehubError, match="quantized"):
        load_drafter(quant, engine.target(target, "float32"))
    with pytest.raises(EaglehubError, match="runs float32"):
        ReferenceEngine().target(target, "int8")


@pytest.mark.slow
def test_forensics_classifies_near_ties_and_faults(target):
    t = ReferenceEngine().target(target, "float32")
    prompt = PROMPTS[0]
    logits, _ = t.forward(prompt, t.new_cache(), None)
    top = torch.topk(logits[-1], 3).indices.tolist()
    gap = float(logits[-1][top[0]] - logits[-1][top[1]])
    rows = forensics.explain(
        t,
        [
            forensics.Divergence("tie", prompt, [top[0]], [top[1]], 0),
            forensics.Divergence("third", prompt, [top[0]], [top[2]], 0),
            forensics.Divergence("short", prompt, [top[0], 5], [top[0]], 1),
        ],
        epsilon=gap + 1e-3,
    )
    tie, third, short = rows
    assert tie["classification"] == "near_tie" and tie["gap"] == pytest.approx(gap)
    assert tie["baseline_token"]["rank"] == 1 and tie["candidate_token"]["rank"] == 2
    assert third["classification"] == "fault" and third["candidate_token"]["rank"] == 3
    assert short["classification"] == "fault" and short["candidate_token"] is None
    strict = forensics.explain(t, [forensics.Divergence("tie", prompt, [top[0]], [top[1]], 0)], epsilon=gap / 2)
    assert strict[0]["classification"] == "fault"
    assert forensics.tie_epsilon("bfloat16") > forensics.tie_epsilon("float32") == 0.01


@pytest.mark.slow
def test_verify_with_the_reference_engine_and_near_tie_forensics(tmp_path, target, monkeypatch):
    """End to end through run_verify: lossless pass; a divergence at a near-tie is a warning, not an error."""
    drafter, _ = _constant_drafter(tmp_path, target)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(
        "".join(json.dumps({"id": f"p{i}", "category": c, "prompt": "x"}) + "\n" for i, c in enumerate("aabb"))
    )
    monkeypatch.setattr("eaglehub.engines.chat.encode_chat", lambda t, msgs: PROMPTS[: len(msgs)])
    monkeypatch.setattr(
        verify, "preflight", lambda d, t, profiles=None: None
    )  # tiny target: no tokenizer for validate --target
    opts = verify.VerifyOptions(
        target=str(target),
        drafters=[str(drafter)],
        k=3,
        max_tokens=12,
        prompts_file=str(prompts),
        engines=["reference"],
    )
    report = verify.run_verify(opts)
    d = report["drafters"][0]
    assert report["engine"]["name"] == "reference" and d["lossless"] and d["passed"], d["findings"]
    assert d["acceptance"]["per_request_mean_acceptance_length"] >= 1.0
    verify.validate_report(report)
    # now force a flip at a near-tie: epsilon larger than any gap makes the top-2 swap a near-tie
    engine = ReferenceEngine()
    real_run = engine.run

    def flipped(spec, ids, groups, progress=None):
        res = real_run(spec, ids, groups, progress)
        if spec.drafter:
            t = engine.target(spec.target, "float32")
            logits, _ = t.forward(ids[0] + res.outputs[0][:2], t.new_cache(), None)
            second = int(torch.topk(logits[-1], 2).indices[1])
            res.outputs[0] = res.outputs[0][:2] + [second]
        return res

    monkeypatch.setattr(engine, "run", flipped)
    opts.tie_epsilon = 1e6
    report = verify.run_verify(opts, engine=engine)
    d = report["drafters"][0]
    assert [f["code"] for f in d["findings"] if f["code"] != "W-VERIFY-LOW-AL"] == ["W-VERIFY-NEAR-TIE"]
    assert d["passed"] and not d["lossless"]
    assert d["prompts"][0]["forensics"]["classification"] == "near_tie"
    assert "near_tie: the target's top-2 differ by" in _rendered(report)
    opts.tie_epsilon = 0.0
    report = verify.run_verify(opts, engine=engine)
    assert [f["code"] for f in report["drafters"][0]["findings"] if f["code"] != "W-VERIFY-LOW-AL"] == [
        "E-VERIFY-LOSSLESS"
    ]
    verify.validate_report(report)


@pytest.mark.slow
def test_two_engines_are_compared(tmp_path, target, monkeypatch):
    drafter, _ = _constant_drafter(tmp_path, target)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"p{i}", "category": "a", "prompt": "x"}) + "\n" for i in range(2)))
    monkeypatch.setattr("eaglehub.engines.chat.encode_chat", lambda t, msgs: PROMPTS[: len(msgs)])
    monkeypatch.setattr(verify, "preflight", lambda d, t, profiles=None: None)
    opts = verify.VerifyOptions(
        target=str(target), drafters=[str(drafter)], k=3, max_tokens=12, prompts_file=str(prompts)
    )
    same = ReferenceEngine()
    other = ReferenceEngine()
    other.name = "reference-copy"
    report = verify.run_verify(opts, engines=[same, other])
    row = report["cross_engine"]["engines"][0]["comparison"][0]
    assert row["relative_difference"] == 0.0 and row["agree"] and row["outputs_identical"] == 2
    assert report["passed"], report["drafters"][0]["findings"]
    assert "engines compared (tolerance 5%)" in _rendered(report) and "+0.00%" in _rendered(report)
    # an engine that accepts less: its AL differs beyond 5 %
    real = other.run

    def fewer(spec, ids, groups, progress=None):
        res = real(spec, ids, groups, progress)
        if spec.drafter:
            res.group_counters = {
                g: SpecCounters(c.num_drafts, c.num_draft_tokens, 0, (0,) * spec.k)
                for g, c in res.group_counters.items()
            }
            res.outputs[0] = res.outputs[0][:-1]  # and one output stops a token early in that engine
        return res

    monkeypatch.setattr(other, "run", fewer)
    report = verify.run_verify(opts, engines=[same, other])
    codes = [f["code"] for f in report["drafters"][0]["findings"]]
    assert "E-VERIFY-ENGINES-DISAGREE" in codes and not report["passed"]
    assert any(
        f["subject"] == "engines.reference-copy.outputs"
        for f in report["drafters"][0]["findings"]
        if f["code"] == "E-VERIFY-LOSSLESS"
    )  # the other engine's own errors count too
    verify.validate_report(report)


def _rendered(report: dict) -> str:
    from rich.console import Console

    from eaglehub.views.verify import render_report

    console = Console(record=True, width=250)
    render_report(report, console)
    return console.export_text()


def test_make_engines():
    names = [e.name for e in verify.make_engines(["reference", "auto", "reference"])]
    assert names == ["reference", "vllm"]  # vLLM is installed in this venv; repeats collapse
    with pytest.raises(EaglehubError, match="unknown engine"):
        verify.make_engines(["tgi"])


class _SamplingEngine:
    """Samples two tokens per request like an engine at T = 1: the first always the target's argmax,
    the second from the target's p(· | prompt, first) raised to ``power`` (1 = correct)."""

    name = "fake-sampler"

    def __init__(self, target_path, power: float = 1.0):
        self.t = ReferenceEngine().target(target_path, "float32")
        self.power = power
        self.calls = []

    def version(self):
        return "1"

    def run(self, spec, ids, groups, progress=None):
        from eaglehub.engines.base import RunResult

        self.calls.append((spec.max_tokens, spec.distinct_seeds, len(ids), len(set(groups))))
        rng, dists, outputs = np.random.default_rng(spec.seed), {}, []
        with torch.inference_mode():
            for prompt in ids:
                if tuple(prompt) not in dists:  # the same prompt repeated: its distributions once
                    logits, _ = self.t.forward(prompt, self.t.new_cache(), None)
                    first = int(logits[-1].argmax())
                    logits, _ = self.t.forward(prompt + [first], self.t.new_cache(), None)
                    p = torch.softmax(logits[-1].double(), -1).numpy() ** self.power
                    dists[tuple(prompt)] = first, np.cumsum(p / p.sum())
                first, cdf = dists[tuple(prompt)]
                outputs.append([first, int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))])
        return RunResult(outputs=outputs)


@pytest.mark.slow
def test_engine_sampling_test_on_an_engine_s_own_outputs(target):
    from eaglehub.measure.prompts import Prompt
    from eaglehub.verify.sampling_check import MIN_GROUP, run_engine_sampling_test

    ref = ReferenceEngine().target(target, "float32")
    chosen = [(Prompt("p0", "a", "x"), PROMPTS[0]), (Prompt("p1", "b", "x"), PROMPTS[2])]
    spec = RunSpec(target, None, 3, 32, temperature=1.0)
    good = _SamplingEngine(target)
    section, found = run_engine_sampling_test(good, spec, chosen, 4000, ref)
    assert good.calls == [(2, True, 8000, 2)]  # two tokens, independent seeds, one run, one batch per prefix
    assert found == [] and section["combined"]["passed"] and len(section["groups"]) == 2
    assert section["groups"][0]["samples"] == 4000
    flat = _SamplingEngine(target, power=0.8)  # a broken rule that flattens the target's distribution
    section, found = run_engine_sampling_test(flat, spec, chosen, 4000, ref)
    assert [f.code for f in found] == ["E-SAMPLING-BIASED"] and not section["combined"]["passed"]
    section, found = run_engine_sampling_test(good, spec, chosen, MIN_GROUP - 1, ref)
    assert section["combined"] is None and "not tested" in section["note"] and found == []


@pytest.mark.slow
def test_replaying_a_recorded_target_run_gives_the_engine_s_counters(tmp_path, target):
    """Greedy acceptance from the recorded continuation (drafter passes only) equals a live engine run."""
    from eaglehub.engines.replay import replay_acceptance

    drafter, _ = _constant_drafter(tmp_path, target)
    engine = ReferenceEngine()
    live = engine.target(target, "float32")
    base = engine.run(RunSpec(target, None, 3, 24), PROMPTS, ["a"] * len(PROMPTS))
    run = engine.run(RunSpec(target, drafter, 3, 24), PROMPTS, ["a"] * len(PROMPTS))
    aux_ids = load_drafter(drafter, live).aux_ids
    records = []
    for prompt, out in zip(PROMPTS, base.outputs):
        _, aux = live.forward(prompt + out, live.new_cache(), aux_ids)
        records.append({"ids": torch.tensor(prompt + out), "aux": aux.detach(), "answer_start": len(prompt)})
    replayed = replay_acceptance(engine, live, drafter, records, 3)
    live_total = acceptance.total(run.group_counters.values())
    assert replayed.num_accepted_tokens > 0
    assert (replayed.num_drafts, replayed.num_accepted_tokens, replayed.accepted_per_pos) == (
        live_total.num_drafts,
        live_total.num_accepted_tokens,
        live_total.accepted_per_pos,
    )
