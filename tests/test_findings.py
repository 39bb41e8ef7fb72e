"""Every finding code, each triggered by one broken variant of the tiny drafter D (docs/failure-kinds.md),
or of its MLA sibling (docs/formats.md §5: hidden 64, 4 heads, q_lora 32, kv_lora 32, qk_nope 16,
qk_rope 16, v_head 16, intermediate 128, vocab 256, draft vocab 32, bf16)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
from helpers.checkpoints import (
    BASE_CONFIG,
    HD,
    V,
    add_fc_norm,
    drafter_tensors,
    target_config,
    target_tensors,
    vocab_maps,
)
from helpers.hints import DISCARDING

from eaglehub.checks.validate import Options, validate
from eaglehub.drafter.shapes import expected_tensors, layer_kind
from eaglehub.findings import finding, rule_catalogue
from eaglehub.formats.registry import read_drafter
from eaglehub.io.schemas import load_schema, validate_json

MLA_DIMS = {
    "q_lora_rank": 32,
    "kv_lora_rank": 32,
    "qk_nope_head_dim": 16,
    "qk_rope_head_dim": 16,
    "v_head_dim": 16,
}


AUX = "eagle_aux_hidden_state_layer_ids"


def mla_tensors(cfg: dict, seed: int = 0) -> dict[str, torch.Tensor]:
    """Trained-looking MLA drafter weights for ``cfg`` (docs/formats.md §5 shapes), canonical ``midlayer.`` names;
    fc, MLP, norms, lm_head and vocab maps as for the Llama drafter D."""
    h, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    t = drafter_tensors({**cfg, "num_key_value_heads": nh, "head_dim": h // nh}, seed=seed)
    for n in [n for n in t if n.startswith("midlayer.self_attn.")]:
        del t[n]
    g = torch.Generator().manual_seed(seed + 100)
    q, kv, nope, rope, v = (cfg.get(k) for k in MLA_DIMS)

    def w(*shape):
        return (torch.randn(*shape, generator=g) * 0.05).to(torch.bfloat16)

    a = "midlayer.self_attn."
    t.update(
        {
            a + "kv_a_proj_with_mqa.weight": w(kv + rope, 2 * h),
            a + "kv_a_layernorm.weight": (1 + 0.1 * torch.randn(kv, generator=g)).to(torch.bfloat16),
            a + "kv_b_proj.weight": w(nh * (nope + v), kv),
            a + "o_proj.weight": w(h, nh * v),
        }
    )
    if q:
        t.update(
            {
                a + "q_a_proj.weight": w(q, 2 * h),
                a + "q_b_proj.weight": w(nh * (nope + rope), q),
                a + "q_a_layernorm.weight": (1 + 0.1 * torch.randn(q, generator=g)).to(torch.bfloat16),
            }
        )
    else:
        t[a + "q_proj.weight"] = w(nh * (nope + rope), 2 * h)
    return t


def to_mla(cfg: dict, t: dict) -> None:
    """Mutation D → the tiny MLA drafter (Eagle3DeepseekV2ForCausalLM, deepseek_v2, yarn RoPE)."""
    for k in ("num_key_value_heads", "head_dim"):
        cfg.pop(k)
    cfg.update(
        architectures=["Eagle3DeepseekV2ForCausalLM"],
        model_type="deepseek_v2",
        **MLA_DIMS,
        rope_scaling={
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 1024,
            "beta_fast": 32,
            "beta_slow": 1,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
        },
    )
    t.clear()
    t.update(mla_tensors(cfg))


def regenerate(**cfg_over):
    """Mutation that changes dims and regenerates matching tensors."""

    def mutate(cfg, t):
        cfg.update(cfg_over)
        t.clear()
        t.update(drafter_tensors(cfg))

    return mutate


def both(*fns):
    def mutate(cfg, t):
        for fn in fns:
            fn(cfg, t)

    return mutate


def setk(key, value):
    return lambda cfg, t: cfg.__setitem__(key, value)


def delk(*keys):
    return lambda cfg, t: [cfg.pop(k, None) for k in keys]


def delt(*names):
    return lambda cfg, t: [t.pop(n) for n in names]


def sett(name, fn):
    return lambda cfg, t: t.__setitem__(name, fn(t))


def _d2t_repeated(t):
    d2t = t["d2t"].clone()
    d2t[6] = d2t[5] - 1
    return d2t


def _t2d_other(t):
    _, t2d = vocab_maps(list(range(V - 32, V)), V)
    return t2d if not torch.equal(t2d, t["t2d"]) else ~t2d


def _t2d_twenty(t):
    t2d = torch.zeros(V, dtype=torch.bool)
    t2d[:20] = True
    return t2d


def _unpruned(cfg, t):
    cfg["draft_vocab_size"] = V
    t["lm_head.weight"] = (torch.randn(V, cfg["hidden_size"]) * 0.05).to(torch.bfloat16)
    t["d2t"], t["t2d"] = vocab_maps(list(range(V)), V)


def _qkv_bias_only(cfg, t):
    cfg["attention_bias"] = True
    for p in ("q", "k", "v"):
        t[f"midlayer.self_attn.{p}_proj.bias"] = torch.zeros(t[f"midlayer.self_attn.{p}_proj.weight"].shape[0])


def _hidden_undeclared(cfg, t):
    regenerate(hidden_size=48, target_hidden_size=64, head_dim=HD)(cfg, t)
    del cfg["target_hidden_size"]


def _prefixed(cfg, t):
    for n in list(t):
        t["model." + n] = t.pop(n)


def _eagle1(cfg, t):
    h = cfg["hidden_size"]
    t["fc.weight"] = (torch.randn(h, 2 * h) * 0.05).to(torch.bfloat16)
    t["fc.bias"] = torch.zeros(h, dtype=torch.bfloat16)
    del t["midlayer.hidden_norm.weight"]
    cfg["architectures"] = ["LlamaForCausalLM"]


def _shared_embed(cfg, t):
    t["embed_tokens.weight"] = target_tensors(target_config(8))["model.embed_tokens.weight"]


@dataclass
class Case:
    code: str
    mutate: Callable | None = None
    subject: str | None = None
    v31: bool = False
    target: dict | None = None  # make_target kwargs
    target_weights: bool = False
    id: str = ""
    extra: dict = field(default_factory=dict)
    deep: bool = False  # value checks (validate --deep)
    options: dict = field(default_factory=dict)  # eaglehub.checks.validate.Options (tp, vllm_version)


def _random_init(rows: int, cols: int) -> torch.Tensor:
    """i.i.d. normal entries at std = initializer_range (0.02): what a strict=False loader leaves."""
    w = torch.randn(rows, cols, generator=torch.Generator().manual_seed(5))
    return (w / w.std() * 0.02).to(torch.bfloat16)


TGT = {}
CASES = [
    Case("E-CONFIG-SCHEMA", setk("norm_output", "true"), "norm_output"),
    Case(
        "E-CONFIG-ARCH",
        both(setk("architectures", ["Qwen3ForCausalLM"]), setk("model_type", "qwen3")),
        "architectures",
        id="F1",
    ),
    Case("W-CONFIG-ARCH", setk("architectures", ["LlamaForCausalLM"]), "architectures"),
    Case(
        "W-CONFIG-TIE",
        both(_unpruned, delt("d2t", "t2d"), setk("tie_word_embeddings", True)),
        "tie_word_embeddings",
    ),
    Case("E-CONFIG-TIE-PRUNED", setk("tie_word_embeddings", True), "tie_word_embeddings"),
    Case("E-CONFIG-HEADS", setk("num_key_value_heads", 3), "num_key_value_heads", id="gqa-groups"),
    Case(
        "E-CONFIG-HEADS",
        both(regenerate(num_attention_heads=3, num_key_value_heads=3, head_dim=16), delk("head_dim")),
        "head_dim",
        id="hidden-not-divisible",
    ),
    Case(
        "W-CONFIG-HEADDIM",
        both(setk("architectures", ["LlamaForCausalLM"]), regenerate(head_dim=32)),
        "head_dim",
    ),
    Case(
        "E-ROPE-PARAMS",
        setk(
            "rope_scaling",
            {
                "rope_type": "llama3",
                "factor": 8.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192,
            },
        ),
        "rope_scaling.low_freq_factor",
        id="F14-llama3",
    ),
    Case(
        "E-ROPE-PARAMS",
        setk("rope_parameters", {"rope_type": "yarn", "factor": 0, "rope_theta": 10000.0}),
        "rope_parameters.factor",
        id="yarn-factor-0",
    ),
    Case(
        "E-ROPE-PARAMS",
        setk(
            "rope_scaling",
            {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 4.0,
                "high_freq_factor": 1.0,
                "original_max_position_embeddings": 8192,
            },
        ),
        "rope_scaling.low_freq_factor",
        id="llama3-order",
    ),
    Case(
        "E-FLAG-MISPLACED",
        both(delk("fc_norm", "norm_output"), setk("eagle_config", {"fc_norm": True})),
        "eagle_config.fc_norm",
        v31=True,
        id="F17-nested",
    ),
    Case(
        "E-FLAG-MISPLACED",
        both(delk("target_hidden_size"), setk("eagle_config", {"target_hidden_size": 96})),
        "eagle_config.target_hidden_size",
        id="nested-Ht",
    ),
    Case(
        "W-NORMS-BOTH",
        both(
            setk("norm_before_fc", True),
            sett("input_norm.weight", lambda t: (1 + 0.1 * torch.randn(192)).to(torch.bfloat16)),
        ),
        "norm_before_fc",
        v31=True,
    ),
    Case(
        "W-INPUTNORM-NESTED",
        both(
            setk("eagle_config", {"norm_before_fc": True}),
            sett("input_norm.weight", lambda t: (1 + 0.1 * torch.randn(192)).to(torch.bfloat16)),
        ),
        "eagle_config.norm_before_fc",
        id="F16-nested",
    ),
    Case(
        "I-WINDOW-APPLIED",
        both(setk("layer_types", ["sliding_attention"]), setk("sliding_window", 1024)),
        "layer_types",
        id="F15",
    ),
    Case(
        "W-SLIDING-WINDOW",
        both(setk("use_sliding_window", True), setk("sliding_window", 2048)),
        "use_sliding_window",
        id="F15-qwen",
    ),
    Case(
        "W-FCNORM-UNIT",
        lambda cfg, t: t.update({f"fc_norm.{i}.weight": torch.ones(64, dtype=torch.bfloat16) for i in range(3)}),
        "fc_norm.0.weight",
        v31=True,
        id="uncalibrated-upgrade",
    ),
    Case("E-ENGINE-VERSION", None, "fc_norm", v31=True, options={"vllm_version": "0.21.0"}, id="31-on-0.21"),
    Case(
        "E-ENGINE-VERSION",
        to_mla_31 := lambda cfg, t: (to_mla(cfg, t), add_fc_norm(cfg, t)),
        "fc_norm",
        options={"vllm_version": "0.22.1"},
        id="MLA-31-on-0.22",
    ),
    Case("W-ENGINE-VERSION", to_mla_31, "fc_norm", options={"vllm_version": ""}, id="MLA-31-unknown-version"),
    Case("E-TP-DIVISIBILITY", None, "num_attention_heads", options={"tp": 8}, id="F21-heads"),
    Case(
        "E-TP-DIVISIBILITY",
        regenerate(intermediate_size=130),
        "intermediate_size",
        options={"tp": 4},
        id="F21-intermediate",
    ),
    Case(
        "E-TP-DIVISIBILITY",
        None,
        "target num_key_value_heads",
        target={"num_key_value_heads": 3},
        options={"tp": 2},
        id="F21-target",
    ),
    Case("E-NOT-A-DRAFTER", None, "config.json", id="F3"),  # special-cased: the target is the drafter
    Case("E-LAYOUT-EAGLE1", _eagle1, "fc.weight"),
    Case("E-LAYOUT-UNSUPPORTED", setk("speculators_model_type", "dflash"), "config.json"),
    Case(
        "E-QKNORM-MISSING",
        setk("architectures", ["Eagle3Qwen3ForCausalLM"]),
        "midlayer.self_attn.q_norm.weight",
        id="qwen3-without-qk-norms",
    ),
    Case("E-TENSOR-MISSING", delt("midlayer.mlp.up_proj.weight"), "midlayer.mlp.up_proj.weight", id="F2"),
    Case("E-TENSOR-UNEXPECTED", sett("fc.bias", lambda t: torch.zeros(64, dtype=torch.bfloat16)), "fc.bias"),
    Case(
        "E-TENSOR-SHAPE",
        sett(
            "midlayer.self_attn.q_proj.weight",
            lambda t: t["midlayer.self_attn.q_proj.weight"][:, :64].clone(),
        ),
        "midlayer.self_attn.q_proj.weight",
    ),
    Case(
        "I-TENSOR-DTYPE-CAST",
        lambda cfg, t: t.update({n: x.float() for n, x in t.items() if x.is_floating_point()}),
        id="F18-config",
    ),
    Case(
        "W-TENSOR-DTYPE",
        lambda cfg, t: t.update({n: x.half() for n, x in t.items() if x.is_floating_point()}),
        id="F18-sixteen-bit",
    ),
    Case("E-TENSOR-PREFIX", _prefixed, "model.d2t"),
    Case(
        "W-TENSOR-INIT",
        sett("norm.weight", lambda t: torch.ones(64, dtype=torch.bfloat16)),
        "norm.weight",
        id="F2-init",
        deep=True,
    ),
    Case(
        "W-TENSOR-INIT",
        sett("fc.weight", lambda t: _random_init(64, 192)),
        "fc.weight",
        id="F2-random-init",
        deep=True,
    ),
    Case(
        "E-TENSOR-NONFINITE",
        sett(
            "midlayer.mlp.down_proj.weight",
            lambda t: t["midlayer.mlp.down_proj.weight"].index_fill(1, torch.tensor([3, 70]), float("nan")),
        ),
        "midlayer.mlp.down_proj.weight",
        deep=True,
    ),
    Case(
        "E-TENSOR-NONFINITE",
        sett("norm.weight", lambda t: t["norm.weight"].index_fill(0, torch.tensor([0]), float("inf"))),
        "norm.weight",
        deep=True,
        id="inf-norm",
    ),
    Case("E-LMHEAD-MISSING", delt("lm_head.weight"), "lm_head.weight", id="F8"),
    Case(
        "E-EMBED-MISSING",
        regenerate(hidden_size=48, target_hidden_size=64, head_dim=HD),
        "embed_tokens.weight",
        id="F9",
    ),
    Case("I-EMBED-SHARED", _shared_embed, "embed_tokens.weight", target=TGT, target_weights=True),
    Case(
        "I-EMBED-TRAINED",
        sett("embed_tokens.weight", lambda t: (torch.randn(V, 64) * 0.05).to(torch.bfloat16)),
        "embed_tokens.weight",
        target=TGT,
        target_weights=True,
    ),
    Case("E-D2T-MISSING", delt("d2t", "t2d"), "d2t", id="F6"),
    Case("E-D2T-DTYPE", sett("d2t", lambda t: t["d2t"].float()), "d2t"),
    Case("E-D2T-DUPLICATE", sett("d2t", _d2t_repeated), "d2t"),
    Case("E-D2T-RANGE", sett("d2t", lambda t: torch.cat([t["d2t"][:-1], torch.tensor([1000])])), "d2t"),
    Case("W-D2T-ZERO", sett("d2t", lambda t: torch.zeros_like(t["d2t"])), "d2t", id="F6-zero"),
    Case("E-ENGINE-WEIGHT", _unpruned, "d2t", id="W5-d2t-unpruned"),
    Case("E-ENGINE-LOAD", setk("target_hidden_size", None), "target_hidden_size", id="null-target-hidden-size"),
    Case(
        "W-ENGINE-IGNORED",
        sett("midlayer.self_attn.q_proj.bias", lambda t: torch.zeros(t["midlayer.self_attn.q_proj.weight"].shape[0])),
        "midlayer.self_attn.q_proj.bias",
        id="W6-stray-bias",
    ),
    Case("E-ENGINE-UNFILLED", _qkv_bias_only, "model.layers.0.self_attn.o_proj.bias", id="W7-o-proj-bias"),
    Case(
        "E-AUX-IGNORED",
        both(delk(AUX), setk("eagle_config", {AUX: [2, 3, 4]})),
        f"eagle_config.{AUX}",
        target={"n_layers": 8},
        id="W1-nested-only-mrv2",
    ),
    Case(
        "W-AUX-IGNORED",
        both(delk(AUX), setk("eagle_config", {AUX: [2, 3, 4]})),
        f"eagle_config.{AUX}",
        id="W1-no-target",
    ),
    Case(
        "W-ENGINE-TIED",
        setk("tie_word_embeddings", True),
        "tie_word_embeddings",
        options={"profiles": ("sglang-0.5.23",)},
        id="M4-sglang-tied",
    ),
    Case("W-T2D-MISSING", delt("t2d"), "t2d"),
    Case("E-T2D-DTYPE", sett("t2d", lambda t: t["t2d"].to(torch.uint8)), "t2d"),
    Case("E-T2D-COUNT", sett("t2d", _t2d_twenty), "t2d", id="F7"),
    Case("E-T2D-MISMATCH", sett("t2d", _t2d_other), "t2d"),
    Case(
        "E-VOCAB-DRAFT",
        both(
            setk("draft_vocab_size", 300),
            delt("d2t", "t2d"),
            sett("lm_head.weight", lambda t: (torch.randn(300, 64) * 0.05).to(torch.bfloat16)),
        ),
        "draft_vocab_size",
    ),
    Case("E-VOCAB-MISMATCH", None, "vocab_size", target={"vocab": 512}),
    Case("E-FCNORM-MISSING", delt("fc_norm.1.weight"), "fc_norm.1.weight", v31=True),
    Case(
        "W-FCNORM-UNUSED",
        both(setk("fc_norm", False), setk("norm_output", False)),
        "fc_norm.0.weight",
        v31=True,
        # SGLang skips the gains; vLLM's loader raises on them (E-ENGINE-WEIGHT there)
        options={"profiles": ("sglang-0.5.23",)},
    ),
    Case("W-FCNORM-ALIAS", setk("use_aux_norm", True), "use_aux_norm"),
    Case("E-INPUTNORM-MISSING", setk("norm_before_fc", True), "input_norm.weight", id="F16-flag"),
    Case(
        "E-INPUTNORM-UNUSED",
        sett("input_norm.weight", lambda t: (1 + 0.1 * torch.randn(192)).to(torch.bfloat16)),
        "input_norm.weight",
        id="F16",
    ),
    Case(
        "E-AUX-DUPLICATE",
        setk("eagle_aux_hidden_state_layer_ids", [2, 4, 4]),
        "eagle_aux_hidden_state_layer_ids",
    ),
    Case(
        "E-AUX-DUPLICATE",
        delk("eagle_aux_hidden_state_layer_ids"),
        "eagle_aux_hidden_state_layer_ids (default for N=4)",
        target={"n_layers": 4},
        id="default-N4",
    ),
    Case("E-AUX-ORDER", setk("eagle_aux_hidden_state_layer_ids", [4, 2, 5]), "eagle_aux_hidden_state_layer_ids"),
    Case("E-AUX-RANGE", None, "eagle_aux_hidden_state_layer_ids", target={"n_layers": 4}, id="too-few-layers"),
    Case(
        "E-AUX-COUNT",
        setk("eagle_aux_hidden_state_layer_ids", [2, 3, 4, 5]),
        "eagle_aux_hidden_state_layer_ids",
    ),
    Case(
        "W-AUX-CONVENTION",
        both(
            delk("eagle_aux_hidden_state_layer_ids", "num_aux_hidden_states"),
            setk("eagle_config", {"eagle_aux_hidden_state_layer_ids": [1, 3, 4]}),
        ),
        "eagle_config.eagle_aux_hidden_state_layer_ids",
        # the V1 runner captures the nested list as written; MRV2 never reads it (W-AUX-IGNORED)
        options={"profiles": ("vllm-0.32-cpu",)},
        id="F11",
    ),
    Case(
        "W-AUX-CONFLICT",
        setk("eagle_config", {"eagle_aux_hidden_state_layer_ids": [2, 3, 4]}),
        "eagle_config.eagle_aux_hidden_state_layer_ids",
    ),
    Case("I-AUX-DEFAULT", delk("eagle_aux_hidden_state_layer_ids"), "eagle_aux_hidden_state_layer_ids"),
    Case("E-HIDDEN-MISMATCH", None, "target_hidden_size", target={"hidden": 96}),
    Case("E-HIDDEN-UNDECLARED", _hidden_undeclared, "target_hidden_size", id="F10"),
    Case("W-DTYPE-MISMATCH", None, "torch_dtype", target={"torch_dtype": "float16"}, id="F18"),
    Case(
        "E-ROPE-TYPE",
        setk("rope_scaling", {"rope_type": "wobbly", "factor": 2.0}),
        "rope_scaling.rope_type",
        id="F14",
    ),
    Case(
        "E-ROPE-TYPE",
        setk("rope_scaling", {"rope_type": [], "factor": 2.0}),
        "rope_scaling.rope_type",
        id="rope-type-not-a-string",
    ),
    Case("W-ROPE-MISMATCH", None, "rope_scaling", target={"rope_theta": 500000.0}),
    *[
        Case("E-MLA-MODELTYPE", both(to_mla, setk("model_type", mt)), "model_type", id=f"MLA-{mt}")
        for mt in ("deepseek_v3", "deepseek_v32", "glm_moe_dsa", "deepseek_v4")
    ],
    Case("E-MLA-QLORA", both(to_mla, setk("q_lora_rank", None)), "q_lora_rank", id="MLA-qlora-null"),
    Case("E-MLA-QLORA", both(to_mla, delk("q_lora_rank")), "q_lora_rank", id="MLA-qlora-absent"),
    Case("E-MLA-NORMBEFOREFC", both(to_mla, setk("norm_before_fc", True)), "norm_before_fc", id="MLA-flag"),
    Case(
        "E-MLA-NORMBEFOREFC",
        both(to_mla, sett("input_norm.weight", lambda t: (1 + 0.1 * torch.randn(192)).to(torch.bfloat16))),
        "input_norm.weight",
        id="MLA-tensor",
    ),
]


def test_validate_report_schema_lists_every_validate_code():
    codes = [r["code"] for r in rule_catalogue("validate")]
    assert load_schema("validate-report")["$defs"]["code"]["enum"] == codes, (
        "schemas/validate-report.schema.json $defs.code.enum must list the validate-stage codes of eaglehub/findings.py, in order"
    )


def test_unregistered_code_is_refused():
    with pytest.raises(KeyError):
        finding("E-NOPE", "x", "y")
    assert finding("W-AUX-CONVENTION", "s", "m").severity == "warning"


@pytest.mark.parametrize("case", CASES, ids=[c.id or c.code for c in CASES])
def test_finding(case: Case, make_drafter, make_target):
    target = None
    if case.target is not None:
        target = make_target(weights=case.target_weights, **case.target)
    if case.code == "E-NOT-A-DRAFTER":
        drafter = make_target(weights=True, name="target-as-drafter")
    else:
        drafter = make_drafter(mutate=case.mutate, v31=case.v31)
    options = Options(**case.options)
    report = validate(drafter, target, deep=case.deep, options=options)
    validate_json(report, "validate-report")
    hits = [f for f in report["findings"] if f["code"] == case.code]
    if case.deep:  # value checks run only with --deep
        assert not [f for f in validate(drafter, target, options=options)["findings"] if f["code"] == case.code]
    if case.options:  # serving options decide these: without them the finding is absent
        assert not [
            f
            for f in validate(drafter, target, deep=case.deep, options=Options(vllm_version="0.32.0"))["findings"]
            if f["code"] == case.code
        ]
    assert hits, json.dumps(report["findings"], indent=1)
    assert hits[0]["severity"] == {"E": "error", "W": "warning", "I": "info"}[case.code[0]]
    assert hits[0]["message"] and hits[0]["hint"]
    assert not DISCARDING.search(hits[0]["hint"]), hits[0]
    if case.subject:
        assert hits[0]["subject"] == case.subject
    assert report["ok"] == (report["counts"]["error"] == 0)
    if case.code.startswith("E-"):
        assert report["ok"] is False


@pytest.mark.parametrize("v31", [False, True])
@pytest.mark.parametrize("fmt", ["safetensors", "sharded", "bin"])
def test_clean_drafter_has_no_findings(make_drafter, make_target, fmt, v31):
    report = validate(make_drafter(fmt=fmt, v31=v31), make_target(8))
    assert report["findings"] == []
    assert report["ok"] is True and report["layout"] == "vllm"


def test_exported_layers0_layout_is_clean(make_drafter):
    def rename(cfg, t):
        for n in [n for n in t if n.startswith("midlayer.")]:
            t["layers.0." + n[len("midlayer.") :]] = t.pop(n)

    report = validate(make_drafter(mutate=rename))
    assert report["layout"] == "vllm" and report["findings"] == []


def test_unknown_prefix_gives_unexpected_and_missing(make_drafter):
    def rename(cfg, t):
        for n in [n for n in t if n.startswith("midlayer.")]:
            t["foo." + n[len("midlayer.") :]] = t.pop(n)

    report = validate(make_drafter(mutate=rename))
    codes = [(f["code"], f["subject"]) for f in report["findings"]]
    assert ("E-TENSOR-UNEXPECTED", "foo.self_attn.q_proj.weight") in codes
    assert ("E-TENSOR-MISSING", "midlayer.self_attn.q_proj.weight") in codes
    assert sum(c == "E-TENSOR-MISSING" for c, _ in codes) == 10
    assert sum(c == "E-TENSOR-UNEXPECTED" for c, _ in codes) == 10


def test_a_stored_layer_the_config_does_not_count_is_fixed_by_the_hinted_config_edit(make_drafter, tmp_path):
    """A second decoder layer stored while num_hidden_layers says 1: the finding names the field and the
    layers stored, and its hint is the exact ``convert --set`` that makes the trained layer load."""
    import shlex

    from click.testing import CliRunner

    from eaglehub.cli import main

    def second_layer(cfg, t):
        H = cfg["hidden_size"]
        for n in [n for n in t if n.startswith("midlayer.") and "hidden_norm" not in n]:
            w = t[n]
            reads_2h = n.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight"))
            t["layers.1." + n[len("midlayer.") :]] = w[:, :H].clone() if reads_2h else w.clone()

    report = validate(make_drafter(mutate=second_layer))
    layer1 = [f for f in report["findings"] if f["subject"].startswith("layers.1.")]
    assert layer1 and {f["code"] for f in layer1} == {"E-TENSOR-UNEXPECTED"}
    assert "num_hidden_layers 1" in layer1[0]["message"] and "drop" not in layer1[0]["hint"]
    command = layer1[0]["hint"].split(": ", 1)[1]
    assert command.endswith("--set num_hidden_layers=2"), command
    res = CliRunner().invoke(main, shlex.split(command)[1:])
    assert res.exit_code == 0, res.output
    fixed = validate(Path(shlex.split(command)[3]))
    assert [f for f in fixed["findings"] if f["severity"] == "error"] == [], fixed["findings"]


def _run_hint(finding_: dict) -> Path:
    """Run the command a hint ends with (``...: eaglehub convert SRC DST --set K=V``); its DST."""
    import shlex

    from click.testing import CliRunner

    from eaglehub.cli import main

    command = finding_["hint"].split(": ", 1)[1]
    res = CliRunner().invoke(main, shlex.split(command)[1:])
    assert res.exit_code == 0, res.output
    return Path(shlex.split(command)[3])


def _errors(report: dict) -> list[tuple[str, str]]:
    return [(f["code"], f["subject"]) for f in report["findings"] if f["severity"] == "error"]


@pytest.mark.parametrize(
    "mla,key,wrong,right",
    [
        (False, "hidden_size", 96, 64),
        (False, "target_hidden_size", 32, 64),
        (False, "intermediate_size", 64, 128),
        (False, "head_dim", 8, 16),
        (False, "num_attention_heads", 2, 4),
        (False, "num_key_value_heads", 4, 2),
        (False, "draft_vocab_size", 64, 32),
        (False, "vocab_size", 128, 256),
        (True, "q_lora_rank", 16, 32),
        (True, "kv_lora_rank", 64, 32),
        (True, "qk_nope_head_dim", 8, 16),
        (True, "qk_rope_head_dim", 32, 16),
        (True, "v_head_dim", 32, 16),
        (True, "num_attention_heads", 8, 4),
    ],
)
def test_a_config_dimension_the_tensors_contradict_is_one_finding_with_the_exact_fix(
    make_drafter, mla, key, wrong, right
):
    """One wrong config field, trained tensors as they were: the finding names the field, its value and the
    value the tensors imply, once (no shape error per tensor, nor the vocabulary or aux-count errors that follow
    from it), and its hint is the exact ``convert --set`` whose output validates as the untouched drafter does."""
    good = make_drafter("good", mutate=to_mla if mla else None)
    drafter = make_drafter("bad", mutate=both(to_mla, setk(key, wrong)) if mla else setk(key, wrong))
    report = validate(drafter)
    validate_json(report, "validate-report")
    assert _errors(report) == [("E-CONFIG-DIM", key)], report["findings"]
    dim = report["findings"][0]
    assert dim["message"].startswith(f"{key} is {wrong}, but the tensors imply {right} ("), dim["message"]
    assert dim["hint"].endswith(f"--set {key}={right}") and "drop" not in dim["hint"], dim["hint"]
    fixed = _run_hint(dim)
    assert validate(fixed)["findings"] == validate(good)["findings"]


def test_two_wrong_dimensions_are_two_findings(make_drafter):
    report = validate(make_drafter(mutate=both(setk("hidden_size", 96), setk("intermediate_size", 64))))
    assert sorted(_errors(report)) == [("E-CONFIG-DIM", "hidden_size"), ("E-CONFIG-DIM", "intermediate_size")]


def test_an_absent_head_dim_names_the_value_the_engines_derive(make_drafter):
    """Heads of width 32 trained (Qwen3-style: wider than hidden_size / num_attention_heads), the config without
    head_dim: the engines derive 64 / 4 = 16; the finding says so and the fix writes the field."""
    report = validate(make_drafter(mutate=both(regenerate(head_dim=32), delk("head_dim"))))
    assert _errors(report) == [("E-CONFIG-DIM", "head_dim")], report["findings"]
    dim = report["findings"][0]
    assert dim["message"].startswith("head_dim is absent (so 16 is used), but the tensors imply 32 ("), dim
    assert _errors(validate(_run_hint(dim))) == []


def test_the_fix_names_the_nested_key_of_a_speculators_config(tmp_path):
    """speculators writes the layer's dimensions inside transformer_layer_config: the hinted --set edits them
    there, where the format reads them."""
    from helpers.formats_factory import write_format

    src = write_format(tmp_path / "spec", "speculators").path
    cfg = json.loads((src / "config.json").read_text())
    cfg["transformer_layer_config"]["intermediate_size"] = 64
    (src / "config.json").write_text(json.dumps(cfg))
    report = validate(src)
    assert _errors(report) == [("E-CONFIG-DIM", "transformer_layer_config.intermediate_size")], report["findings"]
    fixed = _run_hint(report["findings"][0])
    assert _errors(validate(fixed)) == []


def test_a_specforge_norm_output_true_names_the_old_meaning_and_the_probe_that_settles_it(tmp_path):
    """SpecForge before its PR #879 wrote norm_output: true for EAGLE-3 (pre-norm) feedback: a SpecForge checkpoint
    saying true gets the warning, whose hint is the probe of that field and the exact edit for the old meaning; a
    vLLM-layout checkpoint saying true, or the edited copy, does not."""
    from helpers.formats_factory import write_format

    src = write_format(tmp_path / "sf", "specforge", fc_norm=True, norm_output=True).path
    report = validate(src)
    assert report["layout"] == "specforge"
    hits = [f for f in report["findings"] if f["code"] == "W-PRODUCER-FLAG"]
    assert [f["subject"] for f in hits] == ["norm_output"], report["findings"]
    assert "PR #879" in hits[0]["message"] and "pre-norm" in hits[0]["message"]
    assert f"eaglehub probe {src} --target TARGET --field norm_output" in hits[0]["hint"]
    assert hits[0]["hint"].endswith("--set norm_output=false")
    fixed = _run_hint(hits[0] | {"hint": "x: " + hits[0]["hint"].rsplit(": ", 1)[1]})
    assert [f for f in validate(fixed)["findings"] if f["code"] == "W-PRODUCER-FLAG"] == []
    vllm = write_format(tmp_path / "v", "vllm", fc_norm=True, norm_output=True).path
    assert [f for f in validate(vllm)["findings"] if f["code"] == "W-PRODUCER-FLAG"] == []


def test_an_unused_fc_norm_hints_the_flag_it_needs(make_drafter):
    report = validate(make_drafter(mutate=lambda cfg, t: cfg.update(fc_norm=False, norm_output=False), v31=True))
    # on the default profile vLLM's loader raises on the gains: the load failure carries the edit
    hints = {f["hint"] for f in report["findings"] if f["subject"].startswith("fc_norm.")}
    assert len(hints) == 1 and "--set fc_norm=true" in hints.pop()


def test_aux_default_without_explicit_ids_is_fine_for_8_layers(make_drafter, make_target):
    report = validate(make_drafter(mutate=delk("eagle_aux_hidden_state_layer_ids")), make_target(8))
    assert [f["code"] for f in report["findings"]] == ["I-AUX-DEFAULT"]
    assert "[2, 4, 5]" in report["findings"][0]["message"]
    assert report["ok"] is True


@pytest.mark.parametrize(
    "over,same",
    [
        ({"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}, True),
        ({"rope_scaling": {"type": "linear", "factor": 2.0}}, False),
        ({"rope_parameters": {"rope_type": "llama3", "factor": 8.0, "rope_theta": 10000.0}}, False),
    ],
)
def test_rope_comparison_reads_both_spellings(make_drafter, make_target, over, same):
    target = make_target(8, name="t", **over)
    if "rope_parameters" in over:
        cfg = json.loads((target / "config.json").read_text())
        del cfg["rope_theta"]
        (target / "config.json").write_text(json.dumps(cfg))
    codes = [f["code"] for f in validate(make_drafter(), target)["findings"]]
    assert codes == ([] if same else ["W-ROPE-MISMATCH"])


def test_too_few_layers_message_names_target(make_drafter, make_target):
    report = validate(make_drafter(), make_target(4))
    f = next(f for f in report["findings"] if f["code"] == "E-AUX-RANGE")
    assert f["message"] == "aux-layer id(s) [5] outside [0, 4] of the 4-layer target"


BAD_VALUES = ["x", -1, 0, None, [], {}, 1.5, True]


@pytest.mark.parametrize("key", list(BASE_CONFIG) + ["eagle_config", "rope_scaling", "rope_parameters", "fc_norm"])
def test_garbage_config_values_give_findings_not_crashes(make_drafter, make_target, key):
    base = make_drafter()
    target = make_target(8)
    good = json.loads((base / "config.json").read_text())
    for value in BAD_VALUES:
        (base / "config.json").write_text(json.dumps({**good, key: value}))
        report = validate(base, target)
        validate_json(report, "validate-report")
        if key in good and good[key] != value and type(good[key]) is not type(value) and value is not None:
            assert any(f["code"] == "E-CONFIG-SCHEMA" for f in report["findings"]), (key, value)


@pytest.mark.parametrize("shape", [(), (2, 2, 2)])
def test_odd_tensor_ranks_give_shape_errors(make_drafter, make_target, shape):
    names = list(drafter_tensors(dict(BASE_CONFIG)))

    def reshape(cfg, t):
        for n in names:
            t[n] = torch.zeros(shape, dtype=t[n].dtype)
        cfg["architectures"] = ["Qwen3ForCausalLM"]

    report = validate(make_drafter(mutate=reshape), make_target(8, weights=True))
    shape_errors = {f["subject"] for f in report["findings"] if f["code"] == "E-TENSOR-SHAPE"}
    assert shape_errors == set(names) and report["ok"] is False


def test_trained_matrix_with_init_like_std_is_not_flagged(make_drafter):
    """Training leaves row norms uneven; a matrix whose overall std merely equals initializer_range
    (0.02) but whose rows differ in scale, as trained ones do, is not called random."""

    def uneven(cfg, t):
        g = torch.Generator().manual_seed(5)
        w = torch.randn(64, 192, generator=g) * torch.linspace(0.5, 1.5, 64)[:, None]
        t["fc.weight"] = (w / w.std() * 0.02).to(torch.bfloat16)

    report = validate(make_drafter("trained-like", mutate=uneven), deep=True)
    assert [f["subject"] for f in report["findings"] if f["code"] == "W-TENSOR-INIT"] == []


# --- MLA drafters (docs/formats.md §5, docs/vllm.md §5) -----------------------------------------------------


def mla_cfg() -> dict:
    cfg, t = copy.deepcopy(BASE_CONFIG), {}
    to_mla(cfg, t)
    return cfg


@pytest.mark.parametrize(
    "cfg,kind",
    [
        ({"architectures": ["Eagle3DeepseekV2ForCausalLM"]}, "mla"),
        ({"architectures": ["Eagle3DeepseekV3ForCausalLM"]}, "mla"),
        ({"architectures": ["LlamaForCausalLMEagle3"], "kv_lora_rank": 512}, "mla"),
        ({"architectures": ["LlamaForCausalLMEagle3"]}, "llama"),
        ({"architectures": ["LlamaForCausalLM"], "q_lora_rank": 32}, "llama"),
        ({"architectures": [{"weird": 1}]}, "llama"),
        ({"architectures": "Eagle3DeepseekV2ForCausalLM"}, "llama"),
        ({}, "llama"),
    ],
)
def test_layer_kind(cfg, kind):
    assert layer_kind(cfg) == kind


@pytest.mark.parametrize("v31", [False, True])
@pytest.mark.parametrize("fmt", ["safetensors", "sharded", "bin"])
def test_clean_mla_drafter_has_no_findings(make_drafter, fmt, v31):
    report = validate(make_drafter(mutate=both(to_mla, add_fc_norm) if v31 else to_mla, fmt=fmt))
    assert report["findings"] == [] and report["ok"] is True and report["layout"] == "vllm"


@pytest.mark.parametrize("model_type", ["kimi_k2", "deepseek_v2"])
def test_mla_model_types_vllm_registers_are_clean(make_drafter, model_type):
    assert validate(make_drafter(mutate=both(to_mla, setk("model_type", model_type))))["findings"] == []


def test_mla_expected_shapes(make_drafter):
    """Layer 0 reads 2H = 128; qk = 16 + 16; kv_a carries kv_lora + qk_rope; kv_b nh·(qk_nope + v_head)."""
    d = read_drafter(make_drafter(mutate=both(to_mla, setk("num_hidden_layers", 2))))
    shapes = {s.name: s.shape for s in expected_tensors(d)}
    a = "midlayer.self_attn."
    assert {n: s for n, s in shapes.items() if n.startswith(a)} == {
        a + "q_a_proj.weight": (32, 128),
        a + "q_a_layernorm.weight": (32,),
        a + "q_b_proj.weight": (128, 32),
        a + "kv_a_proj_with_mqa.weight": (48, 128),
        a + "kv_a_layernorm.weight": (32,),
        a + "kv_b_proj.weight": (128, 32),
        a + "o_proj.weight": (64, 64),
    }
    assert shapes["midlayer.mlp.down_proj.weight"] == (64, 128) and shapes["midlayer.hidden_norm.weight"] == (64,)
    assert shapes["layers.1.self_attn.q_a_proj.weight"] == (32, 64)  # later layers read H
    assert shapes["layers.1.self_attn.kv_a_proj_with_mqa.weight"] == (48, 64)
    assert shapes["fc.weight"] == (64, 192) and shapes["lm_head.weight"] == (32, 64)
    assert not any(n.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight", ".bias")) for n in shapes)
    specs = {s.name: s for s in expected_tensors(d)}
    assert (
        specs["input_norm.weight"].required is False and specs["input_norm.weight"].unused_code == "E-MLA-NORMBEFOREFC"
    )


def test_mla_tensor_errors_name_the_mla_shapes(make_drafter):
    a = "midlayer.self_attn."

    def broken(cfg, t):
        to_mla(cfg, t)
        t[a + "kv_a_proj_with_mqa.weight"] = t[a + "kv_a_proj_with_mqa.weight"][:32].clone()  # rope part dropped
        del t[a + "kv_b_proj.weight"]
        t[a + "k_proj.weight"] = (torch.randn(64, 128) * 0.05).to(torch.bfloat16)  # a Llama tensor in an MLA drafter

    found = {(f["code"], f["subject"]): f["message"] for f in validate(make_drafter(mutate=broken))["findings"]}
    assert found == {
        (
            "E-TENSOR-SHAPE",
            a + "kv_a_proj_with_mqa.weight",
        ): f"{a}kv_a_proj_with_mqa.weight is [32, 128], the config implies [48, 128]",
        ("E-TENSOR-MISSING", a + "kv_b_proj.weight"): f"{a}kv_b_proj.weight [128, 32] is missing",
        (
            "E-TENSOR-UNEXPECTED",
            a + "k_proj.weight",
        ): f"{a}k_proj.weight is not a tensor of this drafter's mla layer (vLLM raises ValueError on it; SGLang's Llama "
        "drafter skips it silently)",
    }


def test_mla_without_query_lora(make_drafter):
    """q_lora_rank null with a plain q_proj: one finding (vLLM cannot load it), no shape noise; with
    q_a_proj stored but the rank missing from the config, the hint names the rank from the tensor."""

    def plain_q(cfg, t):
        cfg["q_lora_rank"] = None
        t.clear()
        t.update(mla_tensors(cfg))  # q_proj [nh·qk, 2H] instead of q_a/q_b

    report = validate(make_drafter("plain-q", mutate=both(to_mla, plain_q)))
    assert [(f["code"], f["subject"]) for f in report["findings"]] == [("E-MLA-QLORA", "q_lora_rank")]
    assert report["findings"][0]["message"].startswith("vLLM 0.33.0 on GPU (Model Runner V2): q_lora_rank is null:")
    report = validate(make_drafter("lost-rank", mutate=both(to_mla, delk("q_lora_rank"))))
    qlora = [f for f in report["findings"] if f["code"] == "E-MLA-QLORA"]
    assert len(qlora) == 1 and qlora[0]["hint"].startswith("q_a_proj has 32 rows: eaglehub convert ")
    assert qlora[0]["hint"].endswith("-fixed --set q_lora_rank=32")
    assert "E-MLA-QLORA" not in [f["code"] for f in validate(_run_hint(qlora[0]))["findings"]]
    assert qlora[0]["message"].startswith("vLLM 0.33.0 on GPU (Model Runner V2): q_lora_rank is absent:")


def test_mla_class_and_model_type_errors(make_drafter):
    report = validate(make_drafter("llama-type", mutate=both(to_mla, setk("model_type", "llama"))))
    assert [(f["code"], f["subject"]) for f in report["findings"]] == [("E-CONFIG-ARCH", "model_type")]
    assert report["findings"][0]["hint"].endswith("-fixed --set model_type=deepseek_v2")
    assert _errors(validate(_run_hint(report["findings"][0]))) == []
    report = validate(
        make_drafter("llama-class", mutate=both(to_mla, setk("architectures", ["LlamaForCausalLMEagle3"])))
    )
    arch = [f for f in report["findings"] if f["code"] == "E-CONFIG-ARCH"]
    assert [f["subject"] for f in arch] == ["architectures"]
    assert arch[0]["hint"].endswith("""-fixed --set 'architectures=["Eagle3DeepseekV2ForCausalLM"]'""")
    assert arch[0]["message"].startswith(
        "LlamaForCausalLMEagle3 is not an MLA drafter class, yet the config is an MLA drafter"
    )


def test_mla_schema_requires_the_mla_dims(make_drafter):
    report = validate(make_drafter(mutate=both(to_mla, delk("qk_rope_head_dim"))))
    schema = [f["message"] for f in report["findings"] if f["code"] == "E-CONFIG-SCHEMA"]
    assert schema == ["config.json: 'qk_rope_head_dim' is a required property"]
    # shapes that need qk_rope (q_b, kv_a) are then checked for presence only: no follow-on shape noise
    assert [f for f in report["findings"] if f["code"] == "E-TENSOR-SHAPE"] == []


def test_mla_nested_norm_before_fc_names_the_nested_key(make_drafter):
    report = validate(make_drafter(mutate=both(to_mla, setk("eagle_config", {"norm_before_fc": True}))))
    hits = [f["subject"] for f in report["findings"] if f["code"] == "E-MLA-NORMBEFOREFC"]
    assert hits == ["eagle_config.norm_before_fc"]


@pytest.mark.parametrize("nested", [[1, 3, 4], [2, 4, 5]])
def test_agreeing_top_level_and_nested_ids_do_not_conflict(make_drafter, nested):
    """C-out [1, 3, 4] and C-in [2, 4, 5] name the layers of top-level C-in [2, 4, 5]: no W-AUX-CONFLICT."""
    drafter = make_drafter(mutate=setk("eagle_config", {"eagle_aux_hidden_state_layer_ids": nested}))
    assert [f for f in validate(drafter)["findings"] if f["code"] == "W-AUX-CONFLICT"] == []


def test_nonfinite_blocks_cover_every_row(make_drafter, monkeypatch):
    """The NaN scan reads big tensors in row blocks; a NaN in the last row of a later block is found."""
    from eaglehub.checks import values as value_checks

    monkeypatch.setattr(value_checks, "NONFINITE_ROWS_BYTES", 3 * 192 * 2)  # 3 rows of fc.weight per block

    def one_nan(t):
        w = t["fc.weight"].clone()
        w[63, 191] = float("nan")
        return w

    drafter = make_drafter(mutate=sett("fc.weight", one_nan))
    hits = [f for f in validate(drafter, deep=True)["findings"] if f["code"] == "E-TENSOR-NONFINITE"]
    assert [(f["subject"], "holds 1 NaN/Inf value(s) of 12288" in f["message"]) for f in hits] == [("fc.weight", True)]


def test_a_qwen3_style_drafter_is_never_told_to_drop_its_qk_norms(make_drafter):
    report = validate(make_drafter(mutate=setk("architectures", ["Eagle3Qwen3ForCausalLM"])))
    (f,) = [f for f in report["findings"] if f["code"] == "E-QKNORM-MISSING" and "q_norm" in f["subject"]]
    assert "unit q/k-norm gains" in f["message"] and "export the tensor" in f["hint"] and "drop" not in f["hint"]


def test_the_fix_of_a_drafter_given_as_dot_goes_beside_it(make_drafter, monkeypatch):
    drafter = make_drafter(mutate=setk("intermediate_size", 64))
    monkeypatch.chdir(drafter)
    (dim,) = [f for f in validate(Path("."))["findings"] if f["code"] == "E-CONFIG-DIM"]
    assert f"eaglehub convert {drafter} {drafter}-fixed --set intermediate_size=128" in dim["hint"]
    assert _errors(validate(_run_hint(dim))) == []


@pytest.mark.parametrize(
    ("arch", "says", "not_says"),
    [
        # vLLM prefixes "Eagle3": a registered drafter class, with q/k norms this Llama-style drafter lacks
        ("Qwen3ForCausalLM", ["vLLM builds Eagle3Qwen3ForCausalLM", "q_norm / k_norm this checkpoint lacks"], []),
        # "Eagle3MistralForCausalLM" is not registered: no engine builds a drafter from it
        ("MistralForCausalLM", ["engines would build a full MistralForCausalLM"], ["vLLM builds"]),
    ],
)
def test_a_target_class_in_a_drafter_says_what_each_engine_builds(make_drafter, arch, says, not_says):
    report = validate(make_drafter(mutate=setk("architectures", [arch])))
    (f,) = [f for f in report["findings"] if f["code"] == "E-CONFIG-ARCH" and f["subject"] == "architectures"]
    assert all(s in f["message"] for s in says) and not any(s in f["message"] for s in not_says), f["message"]
    assert f["hint"].endswith("""-fixed --set 'architectures=["LlamaForCausalLMEagle3"]'""")
