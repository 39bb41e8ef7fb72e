"""``eaglehub quantize`` (docs/quantization.md §2–§5; docs/failure-kinds.md F18, F20) on tiny generated drafters:
Llama-style and MLA, EAGLE-3 and 3.1, several source formats; FP8 per channel (``fp8-dynamic``) and 128×128
blocks (``fp8-block``). The written checkpoints are read back by compressed-tensors itself and validated the way
vLLM builds them; the reference engine runs them dequantized."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from helpers.checkpoints import tree_hash
from helpers.formats_factory import write_format
from helpers.paths import FIXTURE
from helpers.real_runs import PROMPTS, SETTINGS
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file
from test_findings import regenerate
from test_quant_findings import LAYER, fp8, then

from eaglehub.checks.validate import Options, validate
from eaglehub.cli import main
from eaglehub.errors import EaglehubError
from eaglehub.formats.registry import read_drafter
from eaglehub.io.schemas import validate_json
from eaglehub.quant.quantize import quantize
from eaglehub.quant.weights import dequantize_tensors, dequantize_weight, quantize_weight

LLAMA_LINEARS = {
    f"midlayer.{p}.weight"
    for p in (
        "self_attn.q_proj",
        "self_attn.k_proj",
        "self_attn.v_proj",
        "self_attn.o_proj",
        "mlp.gate_proj",
        "mlp.up_proj",
        "mlp.down_proj",
    )
}
MLA_LINEARS = {
    f"midlayer.self_attn.{p}.weight" for p in ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj")
} | {f"midlayer.mlp.{p}.weight" for p in ("gate_proj", "up_proj", "down_proj")}
#: D with every Linear 128k x 256j (hidden 256, 4 heads x 64, 2 KV heads, intermediate 256): whole 128-blocks, and at
#: least two block columns, so compressed-tensors 0.17's reader (which infers the strategy from the scale's shape
#: and takes a [rows, 1] scale for per-channel) reads them back
DIVISIBLE = regenerate(
    hidden_size=256,
    target_hidden_size=256,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=64,
    intermediate_size=256,
)


def _report(src, dst, **kw) -> dict:
    report = quantize(src, dst, **kw)
    validate_json(report, "quantize-report")
    return report


def _errors(path, **opts) -> list[tuple[str, str]]:
    report = validate(path, options=Options(**opts))
    validate_json(report, "validate-report")
    return [(f["code"], f["subject"]) for f in report["findings"] if f["severity"] == "error"]


def _fp8_bound(w: torch.Tensor, scale_full: torch.Tensor) -> torch.Tensor:
    """Largest |dequantized - w| FP8 rounding allows per element: half an e4m3 ULP (2^-4 relative, 3 mantissa
    bits) + the rounding of the scale and of the product to the weight's dtype (2^-7 relative covers bf16), and
    half the smallest subnormal (2^-10) times the scale below the normal range."""
    return (2**-4 + 2**-7) * w.abs() + 2**-10 * scale_full


def _full_scale(scale: torch.Tensor, shape, block) -> torch.Tensor:
    s = scale.float()
    if block is None:
        return s.expand(shape)
    return s.repeat_interleave(block[0], 0)[: shape[0]].repeat_interleave(block[1], 1)[:, : shape[1]]


# --- layouts --------------------------------------------------------------------------------------------------


#: (source format, layer kind, EAGLE 3.1): MLA drafters exist only in the vLLM-native layout (docs/formats.md §5)
LAYOUTS = [(f, "llama", v31) for f in ("vllm", "speculators", "specforge") for v31 in (False, True)] + [
    ("vllm", "mla", False),
    ("vllm", "mla", True),
]


@pytest.mark.parametrize("fmt, layer_kind, v31", LAYOUTS, ids=[f"{f}-{k}-{'3.1' if v else '3'}" for f, k, v in LAYOUTS])
def test_fp8_dynamic_layouts_validate_clean_and_keep_heads_norms_and_maps(tmp_path, fmt, layer_kind, v31):
    src = write_format(tmp_path / "src", fmt, layer_kind=layer_kind, fc_norm=v31, norm_output=v31).path
    before = tree_hash(src)
    report = _report(src, tmp_path / "fp8")
    assert tree_hash(src) == before  # the source is never modified
    out = read_drafter(tmp_path / "fp8")
    assert out.format == "vllm" and out.version == ("3.1" if v31 else "3") and out.layer_kind == layer_kind
    linears = MLA_LINEARS if layer_kind == "mla" else LLAMA_LINEARS
    quantized = {t["name"] for t in report["tensors"] if t["action"] == "quantized"}
    assert quantized == linears
    stored = load_file(str(tmp_path / "fp8" / "model.safetensors"))
    original = read_drafter(src).load_all()
    for name, t in out.tensors.items():
        if name in linears:
            assert t.dtype == "float8_e4m3fn"
            assert out.tensors[name.removesuffix(".weight") + ".weight_scale"].shape == (t.shape[0], 1)
        elif not name.endswith(".weight_scale"):  # kept: the source's bytes, dtype included (d2t int64, t2d bool)
            assert (
                torch.equal(stored[out.names[name]], original[name])
                and stored[out.names[name]].dtype == original[name].dtype
            )
    assert {"d2t", "lm_head.weight", "fc.weight", "norm.weight"} <= set(out.tensors) - quantized
    assert v31 == any(n.startswith("fc_norm.") for n in out.tensors)
    qc = json.loads((tmp_path / "fp8" / "config.json").read_text())["quantization_config"]
    assert qc == report["quantization_config"]
    assert qc["ignore"][:3] == ["re:.*lm_head$", "re:.*embed_tokens$", "re:.*fc$"] and all(
        e.startswith("re:") for e in qc["ignore"]
    )
    assert qc["config_groups"]["group_0"]["weights"]["strategy"] == "channel"
    assert qc["config_groups"]["group_0"]["input_activations"] == {
        **qc["config_groups"]["group_0"]["input_activations"],
        "strategy": "token",
        "dynamic": True,
    }
    assert _errors(tmp_path / "fp8") == []
    prov = json.loads((tmp_path / "fp8" / "eaglehub.json").read_text())
    validate_json(prov, "provenance")
    assert prov["conversion"]["quantization"]["scheme"] == "fp8-dynamic"
    assert prov["conversion"]["quantization"]["ignore"] == qc["ignore"]
    assert prov["source"]["format"] == fmt
    s = report["sizes"]
    assert s["tensor_bytes_after"] == sum(t["bytes_after"] for t in report["tensors"]) < s["tensor_bytes_before"]
    assert s["files_bytes_after"] == (tmp_path / "fp8" / "model.safetensors").stat().st_size


def test_compressed_tensors_reads_the_checkpoint_back(tmp_path, make_drafter):
    """The library's own model-free reader (CompressedTensorsDequantizer, which matches tensors by name the way
    ``match_quantizable_tensors`` does) takes the config and every weight/scale pair, for 3.1 drafters too (their
    ``fc_norm.{i}`` would otherwise look like Linears to it)."""
    from compressed_tensors.entrypoints.convert.converters.ct_dequantizer import CompressedTensorsDequantizer
    from compressed_tensors.quantization import QuantizationConfig

    cases = [
        ("d31-dynamic", make_drafter("d31", v31=True), "fp8-dynamic"),
        ("divisible-block", make_drafter("div", mutate=DIVISIBLE), "fp8-block"),
    ]
    for name, src, scheme in cases:
        _report(src, tmp_path / name, scheme=scheme)
        qc = QuantizationConfig.model_validate(
            json.loads((tmp_path / name / "config.json").read_text())["quantization_config"]
        )
        assert qc.quant_method == "compressed-tensors" and qc.config_groups["group_0"].weights.type == "float"
        reader = CompressedTensorsDequantizer(tmp_path / name, dtype=torch.float32)
        stored = load_file(str(tmp_path / name / "model.safetensors"))
        reader.validate(dict(stored))
        back = reader.process(dict(stored))
        original = load_file(str(src / "model.safetensors"))
        assert set(back) == set(original), (name, set(back) ^ set(original))
        for n, w in original.items():
            if n in LLAMA_LINEARS:
                err = (back[n] - w.float()).abs()
                assert stored[n].dtype == torch.float8_e4m3fn and float(err.max()) <= 2**-4 * float(
                    w.float().abs().max()
                ), n
            else:
                assert torch.equal(back[n].to(w.dtype), w), n


def test_fp8_block_keeps_the_layers_vllm_would_refuse_and_says_which(tmp_path, make_drafter):
    """D: q_proj has 64 rows, so the fused qkv_proj is refused at block_n = 128 and stays unquantized; o_proj,
    gate/up (128 rows each) and down_proj (a partial block, padded as compressed-tensors pads) are quantized."""
    report = _report(make_drafter(), tmp_path / "blk", scheme="fp8-block")
    kept = report["kept_not_block_divisible"]
    assert [k["layer"] for k in kept] == ["midlayer.self_attn.qkv_proj"]
    assert "q_proj has 64 rows, not a multiple of 128; vLLM refuses the fused qkv_proj" in kept[0]["reason"]
    assert {t["name"] for t in report["tensors"] if t["action"] == "quantized"} == {
        f"midlayer.{p}.weight" for p in ("self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
    }
    assert r"re:.*self_attn\.(qkv_proj|q_proj|k_proj|v_proj)$" in report["quantization_config"]["ignore"]
    scales = {t["name"]: t["scale"]["shape"] for t in report["tensors"] if t["action"] == "quantized"}
    assert scales["midlayer.mlp.down_proj.weight"] == [1, 1] and scales["midlayer.mlp.gate_proj.weight"] == [
        1,
        1,
    ]
    w = report["quantization_config"]["config_groups"]["group_0"]["weights"]
    assert w["strategy"] == "block" and w["block_structure"] == [128, 128]
    assert _errors(tmp_path / "blk") == []
    # fully divisible shapes: nothing kept
    div = _report(make_drafter("div", mutate=DIVISIBLE), tmp_path / "div-blk", scheme="fp8-block")
    assert div["kept_not_block_divisible"] == [] and sum(t["action"] == "quantized" for t in div["tensors"]) == 7
    assert _errors(tmp_path / "div-blk") == []
    # MLA: vLLM fuses q_a_proj (32 rows) + kv_a_proj_with_mqa into fused_qkv_a_proj: kept; the rest quantized
    mla = write_format(tmp_path / "mla", "vllm", layer_kind="mla").path
    report = _report(mla, tmp_path / "mla-blk", scheme="fp8-block")
    assert [k["layer"] for k in report["kept_not_block_divisible"]] == ["midlayer.self_attn.fused_qkv_a_proj"]
    assert {t["name"] for t in report["tensors"] if t["action"] == "quantized"} == MLA_LINEARS - {
        "midlayer.self_attn.q_a_proj.weight",
        "midlayer.self_attn.kv_a_proj_with_mqa.weight",
    }
    assert _errors(tmp_path / "mla-blk") == []


def test_quantize_fc_and_extra_ignores(tmp_path, make_drafter):
    src = make_drafter()
    report = _report(src, tmp_path / "fc", keep_fc=False, ignore=["down_proj", r"re:.*mlp\.gate_up_proj$"])
    q = {t["name"] for t in report["tensors"] if t["action"] == "quantized"}
    assert "fc.weight" in q and not q & {f"midlayer.mlp.{p}_proj.weight" for p in ("gate", "up", "down")}
    assert report["quantization_config"]["ignore"][:2] == ["re:.*lm_head$", "re:.*embed_tokens$"]
    assert (
        "re:.*fc$" not in report["quantization_config"]["ignore"]
        and r"re:.*down_proj$" in report["quantization_config"]["ignore"]
    )
    down = next(t for t in report["tensors"] if t["name"] == "midlayer.mlp.down_proj.weight")
    assert down["reason"] == "ignore entry 're:.*down_proj$'"
    # the fused name is what vLLM compares for a drafter; the shards are added for compressed-tensors' reader
    assert r"re:.*mlp\.(gate_up_proj|gate_proj|up_proj)$" in report["quantization_config"]["ignore"]
    assert _errors(tmp_path / "fc") == []


def test_dry_run_touches_nothing_and_plans_what_is_written(tmp_path, make_drafter):
    src = make_drafter()
    before = tree_hash(src)
    plan = _report(src, tmp_path / "out", dry_run=True)
    assert not (tmp_path / "out").exists() and tree_hash(src) == before
    assert plan["dry_run"] and plan["files"] == [] and plan["sizes"]["files_bytes_after"] is None
    assert _report(src, None, dry_run=True)["destination"] is None
    done = _report(src, tmp_path / "out")
    # the findings: a dry run judges nothing (null), the written output has none here
    assert (plan["findings"], done["findings"]) == (None, [])
    assert {k: v for k, v in plan.items() if k not in ("dry_run", "files", "sizes", "findings")} == {
        k: v for k, v in done.items() if k not in ("dry_run", "files", "sizes", "findings")
    }
    assert plan["sizes"]["tensor_bytes_after"] == done["sizes"]["tensor_bytes_after"]
    # the CLI prints the table (quantized and kept, with sizes) and writes nothing
    res = CliRunner().invoke(main, ["quantize", str(src), str(tmp_path / "other"), "--dry-run"])
    assert (
        res.exit_code == 0
        and "would quantize" in res.output
        and "kept" in res.output
        and not (tmp_path / "other").exists()
    )


def test_atomic_write_leaves_an_existing_destination_untouched(tmp_path, make_drafter, monkeypatch):
    src = make_drafter()
    _report(src, tmp_path / "out")
    old = tree_hash(tmp_path / "out")

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("eaglehub.quant.quantize.quantize_weight", boom)
    with pytest.raises(EaglehubError, match="cannot write"):
        quantize(src, tmp_path / "out", overwrite=True)
    assert tree_hash(tmp_path / "out") == old
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "drafter",
        "out",
    ]  # no temporary directory left behind


def _cli(*args):
    return CliRunner().invoke(main, ["quantize", *map(str, args)])


def test_errors_exit_non_zero_with_one_line(tmp_path, make_drafter):
    src = make_drafter()
    fp8_dir = tmp_path / "fp8"
    assert _cli(src, fp8_dir, "--json").exit_code == 0
    cases = [
        ((src, fp8_dir), 2, "already exists"),
        ((fp8_dir, tmp_path / "again"), 1, "already quantized"),
        ((src, src / "inside"), 2, "inside the source"),
        ((src, tmp_path / "x", "--ignore", "re:.*q_proj$"), 2, "matches q_proj but not the fused qkv_proj"),
        (
            (src, tmp_path / "x", "--ignore", "gate_proj"),
            2,
            "matches gate_proj but not the fused gate_up_proj",
        ),
        ((src, tmp_path / "x", "--ignore", "re:(unclosed"), 2, "not a valid regular expression"),
        ((src, tmp_path / "x", "--ignore", "re:.*proj$"), 1, "nothing to quantize"),
        ((src, tmp_path / "x", "--ignore", "down_prj"), 2, "matches no module vLLM builds"),
        ((src, tmp_path / "x", "--ignore", "re:.*nonexistent$"), 2, "matches no module vLLM builds"),
        ((src,), 2, "DST is missing"),
        ((tmp_path / "nowhere", tmp_path / "x"), 2, "nowhere: no such directory"),
    ]
    for args, code, text in cases:
        res = _cli(*args)
        assert res.exit_code == code, (args, res.output)
        lines = [line for line in res.output.splitlines() if line.startswith("error:")]
        assert len(lines) == 1 and text in lines[0], (args, res.output)
        assert "Traceback" not in res.output
    assert not (tmp_path / "x").exists()
    assert _cli(src, tmp_path / "y", "--scheme", "int4").exit_code == 2


def test_non_finite_weights_are_refused_and_nothing_is_written(tmp_path, make_drafter):
    def poison(cfg, t):
        t["midlayer.mlp.down_proj.weight"][0, 0] = float("nan")

    res = _cli(make_drafter("nan", mutate=poison), tmp_path / "out")
    assert res.exit_code == 1 and "midlayer.mlp.down_proj.weight holds non-finite values" in res.output
    assert "E-TENSOR-NONFINITE" in res.output and not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary directory left behind


def test_source_with_error_findings_is_refused(tmp_path, make_drafter):
    broken = make_drafter("broken", mutate=lambda cfg, t: t.pop("midlayer.mlp.up_proj.weight"))
    res = _cli(broken, tmp_path / "out")
    assert res.exit_code == 1 and "E-TENSOR-MISSING" in res.output and not (tmp_path / "out").exists()


# --- FP8 rounding -----------------------------------------------------------------------------------------------


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(1, 300),
    cols=st.integers(1, 300),
    scheme=st.sampled_from(["fp8-dynamic", "fp8-block"]),
    dtype=st.sampled_from([torch.bfloat16, torch.float16, torch.float32]),
    seed=st.integers(0, 2**16),
    spread=st.floats(1e-3, 10.0),
)
def test_dequantized_weights_are_within_fp8_rounding(rows, cols, scheme, dtype, seed, spread):
    g = torch.Generator().manual_seed(seed)
    w = (torch.randn(rows, cols, generator=g) * spread * torch.rand(rows, 1, generator=g)).to(dtype)
    q, scale = quantize_weight(w, scheme)
    block = (128, 128) if scheme == "fp8-block" else None
    assert q.dtype == torch.float8_e4m3fn and q.shape == w.shape and scale.dtype == dtype
    assert tuple(scale.shape) == ((math.ceil(rows / 128), math.ceil(cols / 128)) if block else (rows, 1))
    back = dequantize_weight(q, scale, block)
    assert back.dtype == dtype and back.shape == w.shape
    err = (back.float() - w.float()).abs()
    assert bool((err <= _fp8_bound(w.float(), _full_scale(scale, w.shape, block))).all()), float(err.max())
    # the scale is the largest |w| of its row / block over 448, so the largest weight maps to ±448 (no clipping)
    assert float(q.float().abs().max()) <= 448


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_tiny_and_zero_rows_keep_finite_scales(dtype):
    """Rows whose max|w| / 448 is below the dtype's smallest normal (fp16: 6.1e-5) and all-zero rows."""
    w = torch.stack([torch.full((64,), 1e-6), torch.zeros(64), torch.linspace(-1, 1, 64)]).to(dtype)
    q, scale = quantize_weight(w, "fp8-dynamic")
    assert bool(torch.isfinite(q.float()).all()) and bool((scale > 0).all())
    back = dequantize_weight(q, scale)
    assert bool((back[1] == 0).all()) and float((back.float() - w.float()).abs().max()) <= 2**-4


def test_reference_engine_dequantizes_per_channel_and_block(tmp_path, make_drafter):
    """load_drafter's path: every FP8 weight back within rounding, every kept tensor as stored, scales gone."""
    src = make_drafter()
    original = read_drafter(src).load_all()
    for scheme in ("fp8-dynamic", "fp8-block"):
        _report(src, tmp_path / scheme, scheme=scheme)
        d = read_drafter(tmp_path / scheme)
        back = dequantize_tensors(d, d.load_all())
        assert set(back) == set(original)
        for n, w in original.items():
            if d.tensors[n].dtype == "float8_e4m3fn":
                assert (
                    float((back[n].float() - w.float()).abs().max()) <= 2**-4 * float(w.float().abs().max())
                    and back[n].dtype == w.dtype
                )
            else:
                assert torch.equal(back[n], w), n
    with pytest.raises(EaglehubError, match="compressed-tensors FP8 only"):
        d = read_drafter(make_drafter("no-config", mutate=fp8(config=False)))
        dequantize_tensors(d, d.load_all())


def test_reference_engine_runs_a_quantized_drafter(tmp_path, make_drafter, make_target):
    from eaglehub.engines.reference import ReferenceTarget, load_drafter

    target = ReferenceTarget(make_target(8, weights=True))
    src = make_drafter()
    _report(src, tmp_path / "blk", scheme="fp8-block")
    plain, quant = load_drafter(src, target), load_drafter(tmp_path / "blk", target)
    ps, qs = plain.model.state_dict(), quant.model.state_dict()
    assert set(ps) == set(qs)
    changed = {n for n in ps if not torch.equal(ps[n], qs[n])}
    assert changed == {
        f"midlayer.{p}.weight" for p in ("self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
    }


# --- failure kinds (validate) ------------------------------------------------------------------------------------


def _f20_repro(cfg, t):
    """docs/failure-kinds.md F20: fp8 ``fc.weight [64, 192]`` with scalar ``weight_scale``/``input_scale`` and
    ``self_attn.{k,v}_scale``, under a static per-tensor config that does not ignore fc."""
    fp8(names=["fc", *LAYER], strategy="tensor", static=True, ignore=["re:.*lm_head$", "re:.*embed_tokens$"])(cfg, t)
    t["midlayer.self_attn.k_scale"] = torch.tensor(1.0)
    t["midlayer.self_attn.v_scale"] = torch.tensor(1.0)


def test_f20_fp8_fc_with_scalar_scales_and_its_variants(make_drafter):
    assert _errors(make_drafter("repro", mutate=_f20_repro)) == []  # the layout vLLM >= PR #28435 loads
    no_scales = then(_f20_repro, lambda cfg, t: [t.pop(f"fc.{p}") for p in ("weight_scale", "input_scale")])
    assert _errors(make_drafter("no-scales", mutate=no_scales)) == [
        ("E-QUANT-SCALE", "fc.weight_scale"),
        ("E-QUANT-SCALE", "fc.input_scale"),
    ]
    bare = then(_f20_repro, lambda cfg, t: cfg["quantization_config"]["ignore"].append("fc"))
    assert _errors(make_drafter("bare-fc", mutate=bare)) == [("E-QUANT-IGNORE", "quantization_config.ignore")]
    ignored = then(_f20_repro, lambda cfg, t: cfg["quantization_config"]["ignore"].append("re:.*fc$"))
    assert _errors(make_drafter("fc-ignored", mutate=ignored)) == [("E-QUANT-MISMATCH", "fc.weight")]


def test_f18_dtypes_of_a_quantized_drafter(make_drafter):
    """F18 in a quantized drafter: scales stored as float8 (vLLM reads float scales) are E-QUANT-SCALE; float32
    tensors under a bfloat16 config are I-TENSOR-DTYPE-CAST (the engines cast them at load); quantize keeps d2t int64 and t2d bool (above)."""
    fp8_scale = then(
        fp8(),
        lambda cfg, t: t.__setitem__(
            "midlayer.mlp.up_proj.weight_scale",
            t["midlayer.mlp.up_proj.weight_scale"].to(torch.float8_e4m3fn),
        ),
    )
    errors = _errors(make_drafter("fp8-scale", mutate=fp8_scale))
    assert errors == [("E-QUANT-SCALE", "midlayer.mlp.up_proj.weight_scale")]
    fp32 = then(fp8(), lambda cfg, t: t.__setitem__("norm.weight", t["norm.weight"].float()))
    fp32_drafter = make_drafter("fp32", mutate=fp32)
    found = [(f["code"], f["subject"]) for f in validate(fp32_drafter)["findings"]]
    assert ("I-TENSOR-DTYPE-CAST", "norm.weight") in found and _errors(fp32_drafter) == []


def test_block_layout_refused_at_the_tensor_parallel_size(make_drafter):
    """vLLM validate_fp8_block_shape at TP 4: q_proj's 64 rows are 16 per rank, not a multiple of 32."""
    d = make_drafter(mutate=fp8(strategy="block", block=(32, 32)))
    assert _errors(d) == []
    subject = "quantization_config.config_groups.group_0.weights.block_structure"
    report = validate(d, options=Options(tp=4))
    hits = [f for f in report["findings"] if f["code"] == "E-QUANT-CONFIG"]
    assert [f["subject"] for f in hits] == [
        subject
    ] * 2  # qkv_proj (rows), o_proj (input columns); down_proj: 128 / 4 = 32 fits
    assert (
        "16 rows per rank at TP 4" in hits[0]["message"]
        and "per rank at TP 4, not a multiple of 32" in hits[1]["message"]
    )
    assert _errors(make_drafter("fp8-block-128", mutate=fp8(strategy="block", block=(128, 128)))) == [
        ("E-QUANT-CONFIG", subject)
    ]


# --- verify --baseline-drafter -----------------------------------------------------------------------------------


def test_verify_reports_acceptance_next_to_the_baseline_drafter(tmp_path, monkeypatch, make_drafter, make_target):
    """The quantized drafter and its source on one target-alone run and the same prompts: both ALs, their ratio,
    and the bytes on disk of both (ScriptedEngine of tests/test_verify.py: fixed outputs and counters)."""
    from helpers.scripted import BASE, GOOD, ScriptedEngine, write_prompts

    from eaglehub.engines.base import SpecCounters
    from eaglehub.verify import run as verify

    target = make_target(n_layers=8)
    src = make_drafter("base")
    _report(src, tmp_path / "fp8")
    prompts = tmp_path / "p.jsonl"
    write_prompts(prompts)
    monkeypatch.setattr("eaglehub.engines.chat.encode_chat", lambda t, msgs: [[1, 2, 3]] * len(msgs))
    slower = {
        "math": SpecCounters(6, 18, 8, (5, 2, 1)),
        "coding": SpecCounters(4, 12, 2, (2, 0, 0)),
    }  # AL 2.0 vs GOOD's 2.1
    engine = ScriptedEngine({"base": (BASE, GOOD), "fp8": (BASE, slower)})
    opts = verify.VerifyOptions(
        target=str(target),
        drafters=[str(tmp_path / "fp8")],
        k=3,
        max_tokens=4,
        prompts_file=str(prompts),
        baseline_drafter=str(src),
    )
    report = verify.run_verify(opts, engine=engine)
    validate_json(report, "verify-report")
    assert [c[0] for c in engine.calls] == [None, "fp8", "base"]  # one target-alone run, the baseline last
    section = report["baseline_drafter"]
    assert section["drafter"] == str(src.resolve()) and section["acceptance_length"] == pytest.approx(2.1)
    assert section["weight_bytes"] == (src / "model.safetensors").stat().st_size
    (row,) = section["comparisons"]
    assert row["drafter"] == str((tmp_path / "fp8").resolve()) and row["acceptance_length"] == pytest.approx(2.0)
    assert row["al_ratio"] == pytest.approx(2.0 / 2.1, abs=1e-4) and row["al_relative_change"] == pytest.approx(
        2.0 / 2.1 - 1, abs=1e-4
    )
    assert row["weight_bytes"] == (tmp_path / "fp8" / "model.safetensors").stat().st_size
    assert (
        row["size_ratio"] == pytest.approx(row["weight_bytes"] / section["weight_bytes"], abs=1e-4)
        and row["size_ratio"] < 1
    )
    assert row["lossless"] and report["passed"]
    # a manifest run has no single set of drafters to compare
    manifest = Path(__file__).resolve().parent.parent / "fixtures" / "manifests" / "smollm2.toml"
    res = CliRunner().invoke(main, ["verify", "--manifest", str(manifest), "--baseline-drafter", str(src)])
    assert res.exit_code == 2 and "--baseline-drafter" in res.output


# --- the real pair in vLLM ---------------------------------------------------------------------------------------


@pytest.mark.real
def test_fp8_dynamic_fixture_is_lossless_and_keeps_acceptance(real_drafters, shared_engine_runs, tmp_path):
    """The fixture drafter quantized FP8-dynamic runs next to its unquantized source on the same prompts (the
    shared settings, helpers/real_runs.py: one per category, k = 3, 32 tokens) in the reference engine, whose runs
    of the target and the source test_real_pair shares: both token-identical to the target alone, AL within 3 %.
    vLLM loading and running an FP8 compressed-tensors drafter is the pipeline's test (test_pipeline.py: the
    calibrated 3.1 upgrade quantized FP8-dynamic, in vLLM next to its source)."""
    dst = real_drafters.fp8  # `eaglehub quantize FIXTURE DST --json`, exit 0 (real_drafters)
    report_path = tmp_path / "verify.json"
    res = CliRunner().invoke(
        main,
        [
            "verify",
            *SETTINGS,
            "--drafter",
            str(dst),
            "--baseline-drafter",
            str(FIXTURE),
            "--engine",
            "reference",
            "--report",
            str(report_path),
        ],
    )
    report = json.loads(report_path.read_text())
    assert res.exit_code == 0, res.output
    assert [d["drafter"] for d in report["drafters"]] == [str(dst.resolve()), str(FIXTURE.resolve())]
    for d in report["drafters"]:
        assert d["lossless"] and d["passed"] and len(d["prompts"]) == PROMPTS
        assert d["acceptance"]["overall"]["acceptance_rate_per_position"][0] > 0.2  # wired and trained
    (row,) = report["baseline_drafter"]["comparisons"]
    assert abs(row["al_relative_change"]) <= 0.03, row
    assert row["size_ratio"] < 0.85  # 7 decoder-layer Linears of 15 tensors at one byte instead of two


def test_the_output_is_judged_for_the_profiles_asked_before_it_appears(tmp_path, make_drafter):
    """SGLang 0.5.23 has no Qwen3-style EAGLE-3 class: quantizing such a drafter for it is refused and nothing is
    written; for the default profile (vLLM 0.33 on GPU) it is written, and the report says what it was judged for.
    A plain drafter's output for SGLang carries SGLang's warning (it reads only the nested aux-id list)."""
    from test_qwen3_drafters import _qwen3

    src = _qwen3(tmp_path)
    with pytest.raises(EaglehubError) as exc:
        quantize(src, tmp_path / "for-sglang", profiles=("sglang-0.5.23",))
    assert exc.value.exit_code == 1 and "fails validation on SGLang 0.5.23: E-ENGINE-LOAD" in exc.value.message
    assert "was not written" in exc.value.message
    assert not (tmp_path / "for-sglang").exists() and not list(tmp_path.glob(".for-sglang*"))
    report = quantize(src, tmp_path / "fp8")
    assert report["profiles"] == [
        {"id": "vllm-0.33-gpu", "title": "vLLM 0.33.0 on GPU (Model Runner V2)", "default": True}
    ]
    assert report["findings"] == [] and (tmp_path / "fp8" / "model.safetensors").is_file()
    assert sorted(p.name for p in (tmp_path / "fp8").iterdir()) == sorted(
        report["files"] + ["config.json", "eaglehub.json"]
    )
    validate_json(report, "quantize-report")
    plain = quantize(make_drafter("plain"), tmp_path / "plain-fp8", profiles=("sglang-0.5.23", "vllm-0.32-cpu"))
    (f,) = plain["findings"]
    assert (f["code"], f["profiles"]) == ("W-AUX-IGNORED", ["sglang-0.5.23"])
    assert quantize(make_drafter("dry"), None, dry_run=True)["findings"] is None
    res = CliRunner().invoke(main, ["quantize", str(src), str(tmp_path / "cli"), "--profile", "nope-1"])
    assert res.exit_code == 2 and "unknown engine profile 'nope-1'" in res.output


def test_a_quantized_fc_is_refused_for_sglang_which_builds_fc_unquantized(tmp_path, make_drafter):
    """SGLang 0.5.23 builds fc as a plain torch.nn.Linear and skips fc.weight_scale without a word, so an FP8 fc
    would compute unscaled: --quantize-fc for SGLang is refused, nothing written; fc kept (the default) is fine,
    and so is a quantized fc for vLLM, which builds fc quantized."""
    src = make_drafter("plain")
    with pytest.raises(EaglehubError) as exc:
        quantize(src, tmp_path / "sgl", keep_fc=False, profiles=("sglang-0.5.23",))
    assert "E-ENGINE-WEIGHT" in exc.value.message and not (tmp_path / "sgl").exists()
    kept = quantize(src, tmp_path / "kept", profiles=("sglang-0.5.23",))
    assert "E-ENGINE-WEIGHT" not in [f["code"] for f in kept["findings"]]
    vllm = quantize(src, tmp_path / "vllm", keep_fc=False)
    assert [f["code"] for f in vllm["findings"] if f["severity"] == "error"] == []
    found = validate(tmp_path / "vllm", options=Options(profiles=("sglang-0.5.23", "vllm-0.33-gpu")))["findings"]
    (f,) = [f for f in found if f["code"] == "E-ENGINE-WEIGHT"]
    assert (
        f["subject"] == "fc.weight_scale" and f["profiles"] == ["sglang-0.5.23"] and "without the scale" in f["message"]
    )


def test_an_all_zero_gain_is_refused_by_the_output_judgement(tmp_path, make_drafter):
    """quantize reads every weight: its judgement of the output includes the value checks (what --deep does), so a
    zero final norm that validate --deep refuses is never written under "no error"."""

    def zero_norm(cfg, t):
        t["norm.weight"].zero_()

    res = _cli(make_drafter("zero-norm", mutate=zero_norm), tmp_path / "out")
    assert res.exit_code == 1, res.output
    assert "E-TENSOR-ZERO norm.weight" in res.output and "no error" not in res.output
    assert "the source already fails validation" in res.output  # the zeros are the source's, not quantization's
    assert not (tmp_path / "out").exists()
