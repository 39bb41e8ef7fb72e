"""MLA attention of the reference drafter against transformers' DeepseekV3Attention, drafter_model's cache, and
the tensor names eaglehub validates (eaglehub/drafter_mla.py; vLLM deepseek_eagle3.py / deepseek_v2.py)."""

from __future__ import annotations

import math

import pytest
import torch
from helpers.formats_factory import Dims, Spec, canonical_tensors, format_config, write_dir, write_format
from torch import nn
from transformers import DeepseekV3Config
from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
    DeepseekV3Attention,
    DeepseekV3RotaryEmbedding,
)

from eaglehub.drafter.shapes import expected_tensors
from eaglehub.errors import EaglehubError
from eaglehub.formats.registry import read_drafter
from eaglehub.model.eagle3 import LayerCache
from eaglehub.model.mla import MLAAttention, MLARope

H, NH, Q_LORA, KV_LORA, NOPE, ROPE, V_HEAD, EPS = 64, 4, 32, 32, 16, 8, 16, 1e-5
MLA_CFG = {
    "architectures": ["Eagle3DeepseekV2ForCausalLM"],
    "model_type": "kimi_k2",
    "hidden_size": H,
    "num_attention_heads": NH,
    "num_key_value_heads": NH,
    "q_lora_rank": Q_LORA,
    "kv_lora_rank": KV_LORA,
    "qk_nope_head_dim": NOPE,
    "qk_rope_head_dim": ROPE,
    "v_head_dim": V_HEAD,
    "rms_norm_eps": EPS,
    "rope_theta": 10000.0,
    "max_position_embeddings": 4096,
}
#: Kimi-K2's schedule (real-configs/torchspec_kimi_k25_eagle3_mla.json): unit cos/sin, softmax × mscale²
KIMI_YARN = {
    "beta_fast": 1.0,
    "beta_slow": 1.0,
    "factor": 64.0,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
    "original_max_position_embeddings": 4096,
    "type": "yarn",
}
#: a schedule whose ramp and cos/sin magnitude (m(4,1)/m(4,0.5) ≈ 1.065) both matter at rope dim 8
RAMP_YARN = {
    "beta_fast": 32.0,
    "beta_slow": 1.0,
    "factor": 4.0,
    "mscale": 1.0,
    "mscale_all_dim": 0.5,
    "original_max_position_embeddings": 64,
    "type": "yarn",
}
ROPES = {"plain": None, "kimi_yarn": KIMI_YARN, "ramp_yarn": RAMP_YARN}


def _cfg(rope: str = "plain", **over) -> dict:
    cfg = dict(MLA_CFG)
    if ROPES[rope] is not None:
        cfg["rope_scaling"] = dict(ROPES[rope])
        cfg["max_position_embeddings"] = int(ROPES[rope]["original_max_position_embeddings"] * ROPES[rope]["factor"])
    return dict(cfg, **over)


def _mla(cfg: dict, in_features: int = 2 * H, seed: int = 0) -> MLAAttention:
    torch.manual_seed(seed)
    m = MLAAttention(cfg, in_features).eval()
    with torch.no_grad():
        for name, p in m.named_parameters():
            p.copy_(1 + 0.1 * torch.randn_like(p) if "layernorm" in name else 0.2 * torch.randn_like(p))
    return m


def _transformers_twin(mine: MLAAttention, cfg: dict, in_features: int, interleave: bool = True) -> DeepseekV3Attention:
    """transformers' naive MLA with ``mine``'s weights. Adapted where it differs from vLLM (see the
    drafter_mla module docstring): its input width is ``hidden_size``, so o_proj is re-made ``[H, nh·v]``;
    its latent norms get ``rms_norm_eps`` instead of the hard-coded 1e-6."""
    keys = (
        "num_attention_heads",
        "num_key_value_heads",
        "q_lora_rank",
        "kv_lora_rank",
        "qk_nope_head_dim",
        "qk_rope_head_dim",
        "v_head_dim",
        "rms_norm_eps",
        "rope_theta",
        "max_position_embeddings",
    )
    hf_cfg = DeepseekV3Config(
        hidden_size=in_features,
        attention_bias=False,
        rope_interleave=interleave,
        rope_scaling=cfg.get("rope_scaling"),
        **{k: cfg[k] for k in keys},
    )
    hf_cfg._attn_implementation = "eager"
    hf = DeepseekV3Attention(hf_cfg, layer_idx=0).eval()
    hf.o_proj = nn.Linear(NH * V_HEAD, cfg["hidden_size"], bias=False)
    for norm in (hf.q_a_layernorm, hf.kv_a_layernorm):
        if norm is not None:
            norm.variance_epsilon = cfg["rms_norm_eps"]
    hf.load_state_dict(mine.state_dict())  # strict: the module names are transformers' too
    hf.rotary = DeepseekV3RotaryEmbedding(hf_cfg)
    return hf


def _run_transformers(hf: DeepseekV3Attention, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    T = x.shape[0]
    causal = torch.full((T, T), torch.finfo(torch.float32).min).triu(1)[None, None]
    cos_sin = hf.rotary(x[None], positions[None])
    return hf(x[None], cos_sin, causal)[0][0]


def _x(T: int, width: int = 2 * H, seed: int = 1) -> torch.Tensor:
    return torch.randn(T, width, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("rope", list(ROPES))
@pytest.mark.parametrize("q_lora", [Q_LORA, None])
def test_matches_transformers_deepseek_v3_attention(rope, q_lora):
    cfg = _cfg(rope, q_lora_rank=q_lora)
    mine = _mla(cfg)
    hf = _transformers_twin(mine, cfg, 2 * H)
    x, positions = _x(12), torch.arange(3, 15)
    with torch.no_grad():
        out, _ = mine(x, positions, LayerCache())
        ref = _run_transformers(hf, x, positions)
    assert out.shape == (12, H)
    assert mine.scaling == pytest.approx(hf.scaling, rel=1e-12)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


def test_matches_transformers_for_later_layers_reading_h():
    cfg = _cfg("kimi_yarn")
    mine = _mla(cfg, in_features=H)
    x, positions = _x(7, width=H), torch.arange(7)
    with torch.no_grad():
        torch.testing.assert_close(
            mine(x, positions, LayerCache())[0],
            _run_transformers(_transformers_twin(mine, cfg, H), x, positions),
            rtol=1e-5,
            atol=1e-5,
        )


def test_rope_is_interleaved_like_vllm_not_neox():
    """vLLM's MLA RoPE is GPT-J style; transformers' neox variant matches only once the rope rows of the
    weights are de-interleaved (evens, then odds)."""
    cfg = _cfg("ramp_yarn")
    mine = _mla(cfg)
    x, positions = _x(10), torch.arange(10)
    hf = _transformers_twin(mine, cfg, 2 * H, interleave=False)
    de_interleave = torch.cat([torch.arange(0, ROPE, 2), torch.arange(1, ROPE, 2)])
    with torch.no_grad():
        out, _ = mine(x, positions, LayerCache())
        assert (out - _run_transformers(hf, x, positions)).abs().max() > 1e-2
        q_rows = torch.cat(
            [torch.cat([torch.arange(NOPE), NOPE + de_interleave]) + h * (NOPE + ROPE) for h in range(NH)]
        )
        hf.q_b_proj.weight.copy_(hf.q_b_proj.weight[q_rows])
        kv_rows = torch.cat([torch.arange(KV_LORA), KV_LORA + de_interleave])
        hf.kv_a_proj_with_mqa.weight.copy_(hf.kv_a_proj_with_mqa.weight[kv_rows])
        torch.testing.assert_close(out, _run_transformers(hf, x, positions), rtol=1e-5, atol=1e-5)


def test_yarn_rules_follow_vllm():
    kimi = MLARope.from_config(_cfg("kimi_yarn"), ROPE)
    m64 = 0.1 * math.log(64) + 1
    assert (kimi.cos_sin_mscale, kimi.softmax_mscale) == (pytest.approx(1.0), pytest.approx(m64**2))
    ramp = MLARope.from_config(_cfg("ramp_yarn"), ROPE)
    assert ramp.cos_sin_mscale == pytest.approx((0.1 * math.log(4) + 1) / (0.05 * math.log(4) + 1))
    plain_freq = 10000.0 ** (-torch.arange(0, ROPE, 2) / ROPE)
    # correction dims floor(-0.50) → 0 and ceil(1.008) → 2: pair 0 extrapolates, pair 1 blends, pairs 2-3 interpolate
    torch.testing.assert_close(ramp.inv_freq(), plain_freq * torch.tensor([1.0, 0.625, 0.25, 0.25]))
    # vLLM rewrites any scaled type to deepseek_yarn, and to deepseek_llama_scaling (no softmax mscale) for attention_factor 1
    llama = MLARope.from_config(_cfg("kimi_yarn", rope_scaling=dict(KIMI_YARN, attention_factor=1.0)), ROPE)
    assert (llama.softmax_mscale, llama.inv_freq().tolist()) == (1.0, kimi.inv_freq().tolist())
    unset = MLARope.from_config(_cfg("plain", rope_scaling={"type": "yarn", "factor": 4.0}), ROPE)
    assert (unset.original_max, unset.cos_sin_mscale, unset.softmax_mscale) == (
        4096,
        pytest.approx(0.1 * math.log(4) + 1),
        1.0,
    )


@pytest.mark.parametrize("rope", ["plain", "ramp_yarn"])
def test_incremental_decoding_through_the_cache_equals_one_pass(rope):
    mine = _mla(_cfg(rope))
    x, positions = _x(8), torch.arange(8)
    with torch.no_grad():
        full_cache = LayerCache()
        full, full_probs = mine(x, positions, full_cache, return_probs=True)
        cache = LayerCache()
        parts, probs = [mine(x[:5], positions[:5], cache)[0]], None
        for t in range(5, 8):
            out, probs = mine(x[t : t + 1], positions[t : t + 1], cache, return_probs=True)
            parts.append(out)
    torch.testing.assert_close(torch.cat(parts), full, rtol=1e-5, atol=1e-6)
    assert cache.length == 8 and probs.shape == (NH, 1, 8)
    torch.testing.assert_close(probs, full_probs[:, 7:8], rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(cache.keys, full_cache.keys)
    assert full_cache.keys.shape == (8, NH, NOPE + ROPE) and full_cache.values.shape == (8, NH, V_HEAD)
    torch.testing.assert_close(full_probs.sum(-1), torch.ones(NH, 8))
    causal = torch.ones(8, 8, dtype=torch.bool).tril()
    assert torch.all(full_probs[:, ~causal] == 0) and torch.all(full_probs[:, causal] > 0)


def _self_attn_specs(drafter, prefix: str) -> dict[str, tuple]:
    return {s.name[len(prefix) :]: s.shape for s in expected_tensors(drafter) if s.name.startswith(prefix)}


def _shapes(m: nn.Module) -> dict[str, tuple]:
    return {k: tuple(v.shape) for k, v in m.state_dict().items()}


def test_state_dict_names_and_shapes_are_what_validate_expects(tmp_path):
    w = write_format(tmp_path / "d", "vllm", layer_kind="mla", layers=2, dtype="float32")
    drafter = read_drafter(w.path)
    h = drafter.config["hidden_size"]
    for prefix, width in (("midlayer.self_attn.", 2 * h), ("layers.1.self_attn.", h)):
        m = MLAAttention(drafter.config, width)
        assert _shapes(m) == _self_attn_specs(drafter, prefix)
        m.load_state_dict({k[len(prefix) :]: v for k, v in w.canonical.items() if k.startswith(prefix)})
        assert torch.equal(m.kv_b_proj.weight, w.canonical[prefix + "kv_b_proj.weight"])


def test_q_lora_null_uses_q_proj_as_validate_expects(tmp_path):
    spec = Spec(layer_kind="mla", dtype="float32")
    d = Dims(nkv=4)
    cfg = dict(format_config("vllm", spec), q_lora_rank=None)
    tensors = canonical_tensors(d, layer_kind="mla", dtype="float32")
    a = "midlayer.self_attn."
    for k in ("q_a_proj.weight", "q_a_layernorm.weight", "q_b_proj.weight"):
        del tensors[a + k]
    tensors[a + "q_proj.weight"] = torch.randn(d.nh * (d.qk_nope + d.qk_rope), 2 * d.H) * 0.05
    drafter = read_drafter(write_dir(tmp_path / "d", cfg, tensors))
    m = MLAAttention(drafter.config, 2 * d.H)
    assert "q_proj.weight" in _shapes(m) and _shapes(m) == _self_attn_specs(drafter, a)


@pytest.mark.parametrize(
    "bad",
    [
        {"kv_lora_rank": None},
        {"qk_rope_head_dim": 0},
        {"rope_scaling": {"type": "linear", "factor": 2.0}},
        {"rope_scaling": {"type": "yarn", "factor": "4"}},
    ],
)
def test_unusable_config_is_a_one_line_error(bad):
    with pytest.raises(EaglehubError) as exc:
        MLAAttention(dict(MLA_CFG, **bad), 2 * H)
    assert exc.value.exit_code == 2 and "\n" not in str(exc.value)
