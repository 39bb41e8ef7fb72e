"""Qwen3-style EAGLE-3 drafters (``Eagle3Qwen3ForCausalLM``: q/k-norm attention) and per-layer sliding
windows: detection in the layouts that can hold them, validation, bit-exact conversion, the
PyTorch module's attention (docs/formats.md §10)."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from helpers.checkpoints import BASE_CONFIG, drafter_tensors, qwen3_layers, write_checkpoint
from safetensors.torch import load_file

from eaglehub.checks.validate import validate
from eaglehub.convert.run import convert
from eaglehub.drafter.canonical import attention_windows
from eaglehub.drafter.spec import describe
from eaglehub.errors import EaglehubError
from eaglehub.formats.registry import read_drafter
from eaglehub.model.eagle3 import DrafterDims, Eagle3Drafter, KVCache


def _qwen3(root, name="q3", window=None, mutate=None):
    cfg = copy.deepcopy(BASE_CONFIG)
    tensors = drafter_tensors(cfg)
    qwen3_layers(cfg, tensors, window)
    if mutate:
        mutate(cfg, tensors)
    return write_checkpoint(root / name, cfg, tensors)


def _codes(report, severity=None):
    return [f["code"] for f in report["findings"] if severity is None or f["severity"] == severity]


def _finding(report, code):
    return next(f for f in report["findings"] if f["code"] == code)


def test_a_qwen3_style_drafter_reads_as_vllm_native_and_validates_clean(tmp_path):
    src = _qwen3(tmp_path, window=256)
    d = read_drafter(src)
    assert (d.format, d.layer_kind, d.windows) == ("vllm", "qwen3", [256])
    report = validate(src)
    assert _codes(report, "error") == []
    assert "I-WINDOW-APPLIED" in _codes(report)
    assert "layer 0: 256" in _finding(report, "I-WINDOW-APPLIED")["message"]


def test_speculators_and_vllm_native_convert_bit_exact_both_ways(tmp_path):
    src = _qwen3(tmp_path, window=256)
    convert(src, tmp_path / "spec", fmt="speculators", verifier="HuggingFaceTB/SmolLM2-135M-Instruct")
    cfg = json.loads((tmp_path / "spec" / "config.json").read_text())
    layer = cfg["transformer_layer_config"]
    assert layer["model_type"] == "qwen3"  # what vLLM maps to Eagle3Qwen3ForCausalLM
    assert (layer["sliding_window"], layer["layer_types"], layer["use_sliding_window"]) == (
        256,
        ["sliding_attention"],
        True,
    )
    spec = read_drafter(tmp_path / "spec")
    assert (spec.format, spec.layer_kind, spec.windows) == ("speculators", "qwen3", [256])
    assert "layers.0.self_attn.q_norm.weight" in load_file(tmp_path / "spec" / "model.safetensors")
    convert(tmp_path / "spec", tmp_path / "back", fmt="vllm")
    back = json.loads((tmp_path / "back" / "config.json").read_text())
    assert back["architectures"] == ["Eagle3Qwen3ForCausalLM"]
    a, b = load_file(src / "model.safetensors"), load_file(tmp_path / "back" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    desc = [describe(read_drafter(p)) for p in (src, tmp_path / "back")]
    # the verifier's classes: eaglehub's own SmolLM2 target is a LlamaForCausalLM
    assert desc[1].pop("target") == {
        "name_or_path": "HuggingFaceTB/SmolLM2-135M-Instruct",
        "architectures": ["LlamaForCausalLM"],
    }
    assert desc[0].pop("target") is None and desc[0] == desc[1]


def test_a_window_model_type_qwen3_would_drop_refuses_the_speculators_layout(tmp_path):
    # model_type llama keeps the window as written; speculators writes model_type qwen3, whose config
    # class clears it without use_sliding_window: the drafter would lose its window in vLLM
    src = _qwen3(
        tmp_path, window=8, mutate=lambda cfg, t: (cfg.update(model_type="llama"), cfg.pop("use_sliding_window"))
    )
    assert read_drafter(src).windows == [8]
    with pytest.raises(EaglehubError) as exc:
        convert(src, tmp_path / "spec", fmt="speculators", verifier="HuggingFaceTB/SmolLM2-135M-Instruct")
    assert "reads the window differently: [None] instead of [8] per layer" in str(exc.value)
    assert not (tmp_path / "spec").exists()


@pytest.mark.parametrize("fmt", ["specforge", "torchspec", "modelopt"])
def test_layouts_without_a_qwen3_layer_refuse_it_with_the_reason(tmp_path, fmt):
    src = _qwen3(tmp_path)
    with pytest.raises(EaglehubError) as exc:
        convert(src, tmp_path / fmt, fmt=fmt)
    assert "no Qwen3-style drafter layer" in str(exc.value)
    assert not (tmp_path / fmt).exists()


def test_a_missing_q_norm_is_named(tmp_path):
    src = _qwen3(tmp_path, mutate=lambda cfg, t: t.pop("midlayer.self_attn.q_norm.weight"))
    f = _finding(validate(src), "E-QKNORM-MISSING")
    assert f["subject"] == "midlayer.self_attn.q_norm.weight" and "[16]" in f["message"]


def test_q_k_norms_under_a_llama_class_get_the_class_edit_not_a_drop(tmp_path):
    src = _qwen3(tmp_path, mutate=lambda cfg, t: cfg.update(architectures=["LlamaForCausalLMEagle3"]))
    report = validate(src)
    f = _finding(report, "E-QKNORM-UNUSED")
    assert "LlamaForCausalLMEagle3" in f["message"]
    assert "--set 'architectures=[\"Eagle3Qwen3ForCausalLM\"]'" in f["hint"] and "drop" not in f["hint"]


@pytest.mark.parametrize(
    ("edit", "code", "field"),
    [
        ({"use_sliding_window": False}, "W-SLIDING-WINDOW", "use_sliding_window"),
        ({"sliding_window": 0}, "E-WINDOW-INVALID", "sliding_window"),
        ({"sliding_window": "256"}, "E-WINDOW-INVALID", "sliding_window"),
        ({"layer_types": []}, "E-WINDOW-INVALID", "layer_types"),
        ({"layer_types": ["sliding"]}, "E-WINDOW-INVALID", "layer_types"),
        ({"layer_types": None}, "E-WINDOW-INVALID", "layer_types"),
    ],
)
def test_a_wrong_window_is_caught_with_the_field_named(tmp_path, edit, code, field):
    src = _qwen3(tmp_path, window=256, mutate=lambda cfg, t: cfg.update(edit))
    f = _finding(validate(src), code)
    assert f["subject"] == field
    assert "I-WINDOW-APPLIED" not in _codes(validate(src))


def test_max_window_layers_past_the_drafter_layers_is_a_window_not_applied(tmp_path):
    def mutate(cfg, t):
        cfg.pop("layer_types")

    src = _qwen3(tmp_path, window=256, mutate=mutate)
    assert read_drafter(src).windows == [None]  # transformers' Qwen3Config: sliding from layer 28 on
    f = _finding(validate(src), "W-SLIDING-WINDOW")
    assert f["subject"] == "max_window_layers" and "layer_types" in f["hint"]


def test_speculators_window_keys_outside_the_layer_config_are_not_applied(tmp_path):
    src = _qwen3(tmp_path, window=256)
    convert(src, tmp_path / "spec", fmt="speculators", verifier="HuggingFaceTB/SmolLM2-135M-Instruct")
    path = tmp_path / "spec" / "config.json"
    cfg = json.loads(path.read_text())
    for k in ("sliding_window", "layer_types", "use_sliding_window"):
        cfg[k] = cfg["transformer_layer_config"].pop(k)
    path.write_text(json.dumps(cfg))
    d = read_drafter(tmp_path / "spec")
    assert d.windows == [None]  # vLLM builds the layer from transformer_layer_config alone
    f = _finding(validate(tmp_path / "spec"), "W-SLIDING-WINDOW")
    assert f["subject"] == "sliding_window"


def test_window_semantics_follow_the_config_class():
    llama = {"num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"], "sliding_window": 8}
    assert attention_windows(llama) == [8, None]
    assert attention_windows({**llama, "use_sliding_window": False}) == [8, None]  # LlamaConfig keeps it
    qwen3 = {**llama, "model_type": "qwen3"}
    assert attention_windows(qwen3) == [None, None]  # Qwen3Config clears it without use_sliding_window
    assert attention_windows({**qwen3, "use_sliding_window": True}) == [8, None]
    derived = {"model_type": "qwen3", "num_hidden_layers": 3, "sliding_window": 8, "use_sliding_window": True}
    assert attention_windows({**derived, "max_window_layers": 1}) == [None, 8, 8]


def _module(**extra):
    torch.manual_seed(0)
    cfg = dict(BASE_CONFIG, architectures=["Eagle3Qwen3ForCausalLM"], model_type="qwen3", **extra)
    m = Eagle3Drafter(DrafterDims.from_config(cfg)).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return m


def test_q_k_norm_makes_attention_blind_to_the_scale_of_q_and_k():
    m = _module()
    assert m.dims.rope_theta == 10000.0 and m.midlayer.self_attn.o_proj.bias is None
    emb, hid = torch.randn(6, 64), torch.randn(6, 64)
    with torch.no_grad():
        before = m.forward_step(emb, hid, torch.arange(6), KVCache(1))[0]
        m.midlayer.self_attn.q_proj.weight.mul_(7.0)
        m.midlayer.self_attn.k_proj.weight.mul_(0.2)
        after = m.forward_step(emb, hid, torch.arange(6), KVCache(1))[0]
        m.midlayer.self_attn.q_norm.weight.mul_(3.0)  # the gains do matter
        gained = m.forward_step(emb, hid, torch.arange(6), KVCache(1))[0]
    assert (before - after).abs().max() < 1e-3  # up to rms_norm_eps
    assert (before - gained).abs().max() > 0.1


def test_a_window_of_one_attends_to_the_query_position_alone():
    m = _module(layer_types=["sliding_attention"], sliding_window=1, use_sliding_window=True)
    assert m.dims.windows == (1,)
    emb, hid = torch.randn(5, 64), torch.randn(5, 64)
    with torch.no_grad():
        _, _, probs = m.forward_step(emb, hid, torch.arange(5), KVCache(1), return_probs=True)
    assert torch.equal(probs[0], torch.eye(5).expand(4, 5, 5))


def test_qwen3_defaults_differ_from_llama_where_vllm_defaults_differ():
    cfg = {k: v for k, v in BASE_CONFIG.items() if k not in ("rope_theta", "rms_norm_eps")}
    q = DrafterDims.from_config(dict(cfg, architectures=["Eagle3Qwen3ForCausalLM"], model_type="qwen3"))
    llama = DrafterDims.from_config(cfg)
    assert (q.rope_theta, q.rms_norm_eps, q.layer_style) == (1_000_000.0, 1e-6, "qwen3")
    assert (llama.rope_theta, llama.layer_style) == (10000.0, "llama")


@pytest.mark.parametrize("fmt", ["vllm", "speculators"])
def test_fp8_quantize_keeps_the_q_k_norms_and_the_window(tmp_path, fmt):
    from eaglehub.quant.quantize import quantize

    src = _qwen3(tmp_path, window=256)
    if fmt == "speculators":
        convert(src, tmp_path / "spec", fmt="speculators", verifier="HuggingFaceTB/SmolLM2-135M-Instruct")
        src = tmp_path / "spec"
    report = quantize(src, tmp_path / "fp8")
    linears = {f"midlayer.self_attn.{p}_proj.weight" for p in "qkvo"} | {
        f"midlayer.mlp.{p}_proj.weight" for p in ("gate", "up", "down")
    }
    assert {t["name"] for t in report["tensors"] if t["action"] == "quantized"} == linears
    out, before = read_drafter(tmp_path / "fp8"), read_drafter(src)
    assert (out.format, out.layer_kind, out.windows) == ("vllm", "qwen3", [256])
    assert json.loads((tmp_path / "fp8" / "config.json").read_text())["architectures"] == ["Eagle3Qwen3ForCausalLM"]
    kept, orig = out.load_all(), before.load_all()
    for name in ("midlayer.self_attn.q_norm.weight", "midlayer.self_attn.k_norm.weight"):
        assert kept[name].dtype == orig[name].dtype and torch.equal(kept[name], orig[name])
    assert _codes(validate(tmp_path / "fp8"), "error") == []


def test_the_plain_3_1_upgrade_keeps_the_qwen3_layer(tmp_path):
    src = _qwen3(tmp_path, window=256)
    convert(src, tmp_path / "v31", to="3.1")
    out = read_drafter(tmp_path / "v31")
    assert (out.version, out.layer_kind, out.windows) == ("3.1", "qwen3", [256])
    a, b = load_file(src / "model.safetensors"), load_file(tmp_path / "v31" / "model.safetensors")
    assert set(b) - set(a) == {f"fc_norm.{i}.weight" for i in range(3)} and all(torch.equal(a[k], b[k]) for k in a)
    assert _codes(validate(tmp_path / "v31"), "error") == []
