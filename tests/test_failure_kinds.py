"""Every entry F1–F26 of the failure-kinds reference (public reports of drafters breaking), each as a
minimal input built here that yields the expected finding code, plus a variant of the same kind
(same fault, another field or size) that is caught too. Each kind is a *kind*: the variants are
what makes a check cover it rather than its one example.

Static kinds run ``validate`` (the drafter D / target T of conftest.py); engine-only kinds (F5, F13's
acceptance side, F23, F24, F26) run verify's rules on a scripted engine or the sampling test.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
from helpers.checkpoints import HD, V, add_fc_norm, vocab_maps
from test_findings import (
    _hidden_undeclared,
    _random_init,
    _t2d_other,
    _t2d_twenty,
    _unpruned,
    both,
    delk,
    delt,
    regenerate,
    setk,
    sett,
    to_mla,
)
from test_quant_findings import IGNORE, LAYER, fp8

from eaglehub.checks.validate import Options, validate
from eaglehub.convert.run import convert
from eaglehub.io.schemas import validate_json

KINDS = [f"F{i}" for i in range(1, 27)]
NORM192 = lambda t: (1 + 0.1 * torch.randn(192)).to(torch.bfloat16)  # noqa: E731 (an input_norm [A·Ht])


@dataclass
class Kind:
    """One input of a failure kind: ``mutate`` D (or build a drafter from scratch with ``drafter``),
    optionally pair it with a target (``make_target`` kwargs) and serving options; expect ``code``
    (on ``subject`` if given)."""

    kind: str
    name: str
    code: str
    mutate: Callable | None = None
    subject: str | None = None
    v31: bool = False
    target: dict | None = None
    target_weights: bool = False
    drafter: Callable | None = None  # (make_drafter, make_target, tmp_path) -> Path
    options: dict = field(default_factory=dict)
    deep: bool = False


def _speculators(make_drafter, tmp_path: Path, name: str, edit: Callable[[dict], None], v31: bool = True) -> Path:
    """D (3.1 by default) converted to the speculators layout, then its stored config edited."""
    dst = tmp_path / f"{name}-spec"
    convert(make_drafter(name, v31=v31), dst, fmt="speculators", verifier="org/target")
    cfg = json.loads((dst / "config.json").read_text())
    edit(cfg)
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


def _flags_into_layer_config(cfg: dict) -> None:
    """F17's repro: the 3.1 switches only inside the speculators layer config."""
    for k in ("fc_norm", "norm_output"):
        cfg["transformer_layer_config"][k] = cfg.pop(k)


def _pruned_bigger(cfg, t):
    """A bigger vocabulary (V 512, Vd 64) for the vocabulary kinds' variants."""
    regenerate(vocab_size=512, draft_vocab_size=64)(cfg, t)


STATIC = [
    # F1: target-model class in the drafter config
    Kind(
        "F1",
        "qwen3-class",
        "E-CONFIG-ARCH",
        both(setk("architectures", ["Qwen3ForCausalLM"]), setk("model_type", "qwen3")),
        "architectures",
    ),
    Kind(
        "F1",
        "mistral-class",
        "E-CONFIG-ARCH",
        both(setk("architectures", ["MistralForCausalLM"]), setk("model_type", "mistral")),
        "architectures",
    ),
    Kind(
        "F1",
        "mla-target-class",
        "E-CONFIG-ARCH",
        both(to_mla, setk("architectures", ["DeepseekV3ForCausalLM"])),
        "architectures",
    ),
    # F2: converter silently wrote (or dropped) weights
    Kind(
        "F2",
        "missing-layer-tensor",
        "E-TENSOR-MISSING",
        delt("midlayer.mlp.up_proj.weight"),
        "midlayer.mlp.up_proj.weight",
    ),
    Kind(
        "F2",
        "lost-midlayer-rule",
        "E-TENSOR-UNEXPECTED",
        lambda cfg, t: t.update({"blocks.0." + n[9:]: t.pop(n) for n in [n for n in t if n.startswith("midlayer.")]}),
        "blocks.0.self_attn.q_proj.weight",
    ),
    Kind(
        "F2",
        "random-init-fc",
        "W-TENSOR-INIT",
        sett("fc.weight", lambda t: _random_init(64, 192)),
        "fc.weight",
        deep=True,
    ),
    Kind(
        "F2",
        "ones-norm",
        "W-TENSOR-INIT",
        sett("midlayer.hidden_norm.weight", lambda t: torch.ones(64, dtype=torch.bfloat16)),
        "midlayer.hidden_norm.weight",
        deep=True,
    ),
    # F3: the target passed as drafter
    Kind(
        "F3",
        "target-8",
        "E-NOT-A-DRAFTER",
        drafter=lambda md, mt, tmp: mt(8, weights=True, name="t8-as-drafter"),
        subject="config.json",
    ),
    Kind(
        "F3",
        "target-2-wider",
        "E-NOT-A-DRAFTER",
        drafter=lambda md, mt, tmp: mt(2, weights=True, name="t2", hidden=128),
        subject="config.json",
    ),
    # F4: target type × engine version
    Kind(
        "F4",
        "no-eagle3-arch",
        "E-TARGET-NO-EAGLE3",
        target={"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"},
    ),
    Kind(
        "F4",
        "unknown-arch",
        "W-TARGET-UNKNOWN-ARCH",
        target={"architectures": ["MyOwnForCausalLM"], "model_type": "mine"},
    ),
    Kind(
        "F4",
        "mla-31-on-0.22",
        "E-ENGINE-VERSION",
        both(to_mla, add_fc_norm),
        "fc_norm",
        options={"vllm_version": "0.22.0"},
    ),
    # F6: pruned vocabulary without a usable mapping
    Kind("F6", "no-maps", "E-D2T-MISSING", delt("d2t", "t2d"), "d2t"),
    Kind("F6", "no-maps-bigger-vocab", "E-D2T-MISSING", both(_pruned_bigger, delt("d2t", "t2d")), "d2t"),
    Kind(
        "F6",
        "zero-d2t-other-t2d",
        "W-D2T-ZERO",
        both(sett("d2t", lambda t: torch.zeros_like(t["d2t"])), sett("t2d", _t2d_other)),
        "d2t",
    ),
    # F7: t2d count or ids disagree with d2t
    Kind("F7", "t2d-20", "E-T2D-COUNT", sett("t2d", _t2d_twenty), "t2d"),
    Kind("F7", "t2d-40", "E-T2D-COUNT", sett("t2d", lambda t: torch.arange(V) < 40), "t2d"),
    Kind("F7", "t2d-other-ids", "E-T2D-MISMATCH", sett("t2d", _t2d_other), "t2d"),
    # F8: lm_head missing
    Kind(
        "F8",
        "unpruned-no-head",
        "E-LMHEAD-MISSING",
        both(_unpruned, delt("lm_head.weight", "d2t", "t2d")),
        "lm_head.weight",
    ),
    Kind("F8", "pruned-no-head", "E-LMHEAD-MISSING", delt("lm_head.weight"), "lm_head.weight"),
    # F9: own vs shared embedding
    Kind(
        "F9",
        "narrow-no-embed",
        "E-EMBED-MISSING",
        regenerate(hidden_size=48, target_hidden_size=64, head_dim=HD),
        "embed_tokens.weight",
    ),
    Kind(
        "F9",
        "wide-no-embed",
        "E-EMBED-MISSING",
        regenerate(hidden_size=96, target_hidden_size=64, head_dim=HD),
        "embed_tokens.weight",
    ),
    Kind(
        "F9",
        "embed-wrong-width",
        "E-TENSOR-SHAPE",
        both(
            regenerate(hidden_size=48, target_hidden_size=64, head_dim=HD),
            sett("embed_tokens.weight", lambda t: (torch.randn(V, 64) * 0.05).to(torch.bfloat16)),
        ),
        "embed_tokens.weight",
    ),
    # F10: target_hidden_size missing or wrong
    Kind("F10", "narrow-undeclared", "E-HIDDEN-UNDECLARED", _hidden_undeclared, "target_hidden_size"),
    Kind(
        "F10",
        "wide-undeclared",
        "E-HIDDEN-UNDECLARED",
        both(regenerate(hidden_size=96, target_hidden_size=64, head_dim=HD), delk("target_hidden_size")),
        "target_hidden_size",
    ),
    Kind("F10", "declared-wrong", "E-HIDDEN-MISMATCH", None, "target_hidden_size", target={"hidden": 80}),
    # F11: aux-id convention, range, duplicates, order, count — defaults included
    Kind(
        "F11",
        "nested-c-out",
        "W-AUX-CONVENTION",
        both(
            delk("eagle_aux_hidden_state_layer_ids", "num_aux_hidden_states"),
            setk("eagle_config", {"eagle_aux_hidden_state_layer_ids": [1, 3, 4]}),
        ),
        "eagle_config.eagle_aux_hidden_state_layer_ids",
        # the V1 runner captures the nested list as written; MRV2 (the default profile) never reads it
        options={"profiles": ("vllm-0.32-cpu",)},
    ),
    Kind(
        "F11",
        "top-level-c-out",
        "W-AUX-CONVENTION",
        setk("eagle_aux_hidden_state_layer_ids", [1, 3, 4]),
        "eagle_aux_hidden_state_layer_ids",
    ),
    Kind(
        "F11",
        "out-of-range",
        "E-AUX-RANGE",
        setk("eagle_aux_hidden_state_layer_ids", [2, 4, 9]),
        "eagle_aux_hidden_state_layer_ids",
        target={"n_layers": 8},
    ),
    Kind(
        "F11",
        "duplicate",
        "E-AUX-DUPLICATE",
        setk("eagle_aux_hidden_state_layer_ids", [2, 2, 5]),
        "eagle_aux_hidden_state_layer_ids",
    ),
    Kind(
        "F11",
        "unsorted",
        "E-AUX-ORDER",
        setk("eagle_aux_hidden_state_layer_ids", [5, 2, 4]),
        "eagle_aux_hidden_state_layer_ids",
    ),
    Kind(
        "F11",
        "count",
        "E-AUX-COUNT",
        setk("eagle_aux_hidden_state_layer_ids", [2, 4]),
        "eagle_aux_hidden_state_layer_ids",
    ),
    Kind(
        "F11",
        "default-N4",
        "E-AUX-DUPLICATE",
        delk("eagle_aux_hidden_state_layer_ids"),
        "eagle_aux_hidden_state_layer_ids (default for N=4)",
        target={"n_layers": 4},
    ),
    # F12: engines that capture only the defaults
    Kind(
        "F12",
        "ids-3-5-7",
        "W-AUX-NONDEFAULT",
        setk("eagle_aux_hidden_state_layer_ids", [3, 5, 7]),
        "eagle_aux_hidden_state_layer_ids",
        target={"n_layers": 8},
    ),
    Kind(
        "F12",
        "ids-2-4-6-of-16",
        "W-AUX-NONDEFAULT",
        setk("eagle_aux_hidden_state_layer_ids", [2, 4, 6]),
        "eagle_aux_hidden_state_layer_ids",
        target={"n_layers": 16},
    ),
    # F13: short-context drafter (static side; the acceptance side is test_f13_low_acceptance_is_flagged)
    Kind(
        "F13",
        "2k-vs-128k",
        "W-CONTEXT-SHORT",
        setk("max_position_embeddings", 2048),
        "max_position_embeddings",
        target={"max_position_embeddings": 131072},
    ),
    # F14: RoPE dropped, unknown or incomplete
    Kind(
        "F14",
        "llama3-dropped",
        "W-ROPE-MISMATCH",
        None,
        "rope_scaling",
        target={
            "rope_scaling": {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192,
            }
        },
    ),
    Kind(
        "F14",
        "rope-parameters-dropped",
        "W-ROPE-MISMATCH",
        None,
        "rope_scaling",
        target={"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0}},
    ),
    Kind(
        "F14",
        "unknown-type",
        "E-ROPE-TYPE",
        setk("rope_scaling", {"rope_type": "wobbly", "factor": 2.0}),
        "rope_scaling.rope_type",
    ),
    Kind(
        "F14",
        "llama3-incomplete",
        "E-ROPE-PARAMS",
        setk("rope_scaling", {"rope_type": "llama3", "factor": 8.0}),
        "rope_scaling.low_freq_factor",
    ),
    # F15: drafter sliding window
    Kind(
        "F15",
        "layer-types",
        "I-WINDOW-APPLIED",
        both(setk("layer_types", ["sliding_attention"]), setk("sliding_window", 1024)),
        "layer_types",
    ),
    Kind(
        "F15",
        "qwen-switch",
        "W-SLIDING-WINDOW",
        both(setk("use_sliding_window", True), setk("sliding_window", 4096)),
        "use_sliding_window",
    ),
    # F16: norm_before_fc not propagated
    Kind(
        "F16",
        "flag-only-nested",
        "W-INPUTNORM-NESTED",
        both(setk("eagle_config", {"norm_before_fc": True}), sett("input_norm.weight", NORM192)),
        "eagle_config.norm_before_fc",
    ),
    Kind(
        "F16",
        "tensor-without-flag",
        "E-INPUTNORM-UNUSED",
        sett("input_norm.weight", NORM192),
        "input_norm.weight",
    ),
    Kind("F16", "flag-without-tensor", "E-INPUTNORM-MISSING", setk("norm_before_fc", True), "input_norm.weight"),
    # F17: EAGLE-3.1 switches not where vLLM reads them
    Kind(
        "F17",
        "speculators-layer-config",
        "E-FLAG-MISPLACED",
        subject="transformer_layer_config.fc_norm",
        drafter=lambda md, mt, tmp: _speculators(md, tmp, "f17", _flags_into_layer_config),
    ),
    Kind(
        "F17",
        "flat-eagle-config",
        "E-FLAG-MISPLACED",
        both(delk("fc_norm", "norm_output"), setk("eagle_config", {"fc_norm": True})),
        "eagle_config.fc_norm",
        v31=True,
    ),
    Kind(
        "F17",
        "speculators-on-0.24",
        "E-ENGINE-VERSION",
        subject="fc_norm",
        options={"vllm_version": "0.24.1"},
        drafter=lambda md, mt, tmp: _speculators(md, tmp, "f17v", lambda cfg: None),
    ),
    # F18: drafter dtype vs target / config
    Kind(
        "F18",
        "fp16-vs-bf16",
        "W-DTYPE-MISMATCH",
        setk("torch_dtype", "bfloat16"),
        "torch_dtype",
        target={"torch_dtype": "float16"},
    ),
    Kind(
        "F18",
        "config-bf16-tensors-fp32",
        "I-TENSOR-DTYPE-CAST",
        lambda cfg, t: t.update({n: x.float() for n, x in t.items() if x.is_floating_point()}),
    ),
    # F19: quantized target, unquantized drafter
    Kind("F19", "fp8-target", "I-QUANT-PAIRING", target={"quantization_config": {"quant_method": "fp8"}}),
    Kind(
        "F19",
        "ct-target",
        "I-QUANT-PAIRING",
        target={"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {}}},
    ),
    # F20: FP8 drafter fc / scales
    Kind(
        "F20",
        "fp8-without-scale",
        "E-QUANT-SCALE",
        both(fp8(), delt("midlayer.mlp.down_proj.weight_scale")),
        "midlayer.mlp.down_proj.weight_scale",
    ),
    Kind(
        "F20",
        "fc-bare-ignore",
        "E-QUANT-IGNORE",
        fp8(ignore=["re:.*lm_head$", "re:.*embed_tokens$", "fc"]),
        "quantization_config.ignore",
    ),
    Kind("F20", "fc-quantized-but-ignored", "E-QUANT-MISMATCH", fp8(names=LAYER + ["fc"], ignore=IGNORE)),
    # F21: draft TP
    Kind(
        "F21",
        "intermediate-130-tp4",
        "E-TP-DIVISIBILITY",
        regenerate(intermediate_size=130),
        "intermediate_size",
        options={"tp": 4},
    ),
    Kind("F21", "heads-tp8", "E-TP-DIVISIBILITY", None, "num_attention_heads", options={"tp": 8}),
    # F22: MLA drafters
    Kind(
        "F22",
        "mtp-model-type",
        "E-MLA-MODELTYPE",
        both(to_mla, setk("model_type", "deepseek_v3")),
        "model_type",
    ),
    Kind("F22", "qlora-null", "E-MLA-QLORA", both(to_mla, setk("q_lora_rank", None)), "q_lora_rank"),
    Kind(
        "F22",
        "mha-drafter-mla-target",
        "W-TARGET-FAMILY",
        target={"model_type": "kimi_k2", "architectures": ["DeepseekV3ForCausalLM"], "kv_lora_rank": 512},
    ),
]


@pytest.mark.parametrize("case", STATIC, ids=[f"{c.kind}-{c.name}" for c in STATIC])
def test_static_kind(case: Kind, make_drafter, make_target, tmp_path):
    if case.drafter:
        drafter = case.drafter(make_drafter, make_target, tmp_path)
    else:
        drafter = make_drafter(f"{case.kind}-{case.name}", mutate=case.mutate, v31=case.v31)
    target = (
        make_target(weights=case.target_weights, name=f"t-{case.name}", **case.target)
        if case.target is not None
        else None
    )
    report = validate(drafter, target, deep=case.deep, options=Options(**case.options))
    validate_json(report, "validate-report")
    hits = [f for f in report["findings"] if f["code"] == case.code]
    assert hits, json.dumps(report["findings"], indent=1)
    if case.subject:
        assert case.subject in [f["subject"] for f in hits]
    if case.code.startswith("E-"):
        assert report["ok"] is False


#: kind -> engine-side or repair tests that cover it (registered with :func:`covers`)
COVERED_BY_TESTS: dict[str, list[str]] = {}


def covers(*kinds: str):
    def register(fn):
        for k in kinds:
            COVERED_BY_TESTS.setdefault(k, []).append(fn.__name__)
        return fn

    return register


@covers("F5")
def test_f5_d2t_valid_but_unused_is_clean_statically(make_drafter):
    """F5 is an engine fault: a non-trivial, statically valid d2t validates clean, so only verify's
    position-0 rule can catch an engine that drops it."""

    def far_ids(cfg, t):
        t["d2t"], t["t2d"] = vocab_maps(list(range(V - 32, V)), V)  # offsets of 224: far from identity

    assert validate(make_drafter("f5", mutate=far_ids))["findings"] == []


@covers("F17")
def test_f17_convert_moves_misplaced_switches_to_the_top_level(make_drafter, tmp_path):
    """convert repairs F17 (and records it), so the output is read by vLLM as the trainer meant."""
    src = _speculators(make_drafter, tmp_path, "f17c", _flags_into_layer_config)
    for fmt in ("vllm", "speculators"):
        report = convert(src, tmp_path / f"fixed-{fmt}", fmt=fmt)
        moved = {c["key"]: c["new"] for c in report["config_changes"] if "moved to the top level" in c.get("why", "")}
        assert moved == {"fc_norm": True, "norm_output": True}
        cfg = json.loads((tmp_path / f"fixed-{fmt}" / "config.json").read_text())
        assert cfg["fc_norm"] is True and cfg["norm_output"] is True
        assert "fc_norm" not in cfg.get("transformer_layer_config", {})
        assert [f["code"] for f in validate(tmp_path / f"fixed-{fmt}")["findings"]] == []


#: kinds tested where their rules live (verify on scripted engines, the sampling toy, the target's side
#: files): kind -> (module, tests), at least the report's repro and a variant between them and the cases above
ELSEWHERE = {
    "F5": (
        "test_verify",
        [
            "test_f5_valid_nontrivial_d2t_still_not_wired_from_engine_counters",
            "test_several_drafters_share_one_baseline_and_fail_by_code",
        ],
    ),
    "F13": ("test_verify", ["test_low_acceptance_length_warns_per_category_and_overall_without_failing"]),
    "F23": (
        "test_verify",
        ["test_several_drafters_share_one_baseline_and_fail_by_code", "test_lossless_finding_variants"],
    ),
    "F24": (
        "test_sampling",
        [
            "test_broken_variants_are_biased_on_the_f24_toy",
            "test_planted_one_percent_acceptance_bias_is_detected",
            "test_random_16_token_vocabulary",
        ],
    ),
    "F26": (
        "test_verify",
        [
            "test_al_regression_against_reference_names_both_engines_and_k",
            "test_reference_comparison_outcomes",
        ],
    ),
    "F25": (
        "test_target_findings",
        [
            "test_changed_template_file",
            "test_changed_template_in_tokenizer_config_recorded_in_provenance",
            "test_drafter_ships_another_tokenizer",
        ],
    ),
}


def test_every_failure_kind_has_a_repro_and_a_variant():
    """Each F-entry has at least two inputs: the report's repro and a variant (static cases here, the
    repair tests registered with :func:`covers`, and the tests of :data:`ELSEWHERE`)."""
    import importlib

    for module, tests in ELSEWHERE.values():
        mod = importlib.import_module(module)
        assert all(callable(getattr(mod, t, None)) for t in tests), (module, tests)
    count = {
        k: sum(c.kind == k for c in STATIC) + len(COVERED_BY_TESTS.get(k, ())) + len(ELSEWHERE.get(k, ("", []))[1])
        for k in KINDS
    }
    assert {k: n for k, n in count.items() if n < 2} == {}
