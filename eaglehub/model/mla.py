"""MLA (multi-head latent attention) for Kimi-K2 / DeepSeek-V3-style EAGLE-3 drafters, in plain PyTorch.

Numerically mirrors vLLM 0.32.0 ``model_executor/models/deepseek_eagle3.py``, whose layers use
``deepseek_v2.DeepseekV2MLAAttention`` → ``layers/mla.MultiHeadLatentAttentionWrapper`` with the rotary
embedding of ``layers/rotary_embedding/deepseek_scaling_rope.py`` (docs/formats.md §5, docs/vllm.md §5). The
naive formulation is used (latents decompressed into per-head keys and values), which is what vLLM's
MLA prefill computes; its decode path absorbs ``kv_b_proj`` into q and the output and is the same
function of the inputs.

Notation: ``T`` new tokens, ``nh`` heads, ``qk = qk_nope + qk_rope``, ``in`` the layer's input width
(``2H`` for layer 0, ``H`` after). For ``x [T, in]`` at ``positions [T]``::

    q      = q_b_proj(q_a_layernorm(q_a_proj(x)))            [T, nh·qk]   (q_proj(x) when q_lora_rank is null)
    kv_c, k_pe = split(kv_a_proj_with_mqa(x), [kv_lora, qk_rope])
    k_nope, v  = split(kv_b_proj(kv_a_layernorm(kv_c)), [qk_nope, v_head]) per head
    q_pe, k_pe = rope(q[..., qk_nope:]), rope(k_pe)          k_pe is one head shared by all heads
    k = [k_nope, k_pe]  [T, nh, qk];   out = o_proj(softmax(q·kᵀ · scale + causal) · v)   [T, H]

RoPE is DeepSeek's *interleaved* (GPT-J) convention: vLLM builds it with ``is_neox_style=False``, so
dims ``(2i, 2i+1)`` of the rope part rotate together by frequency ``i``. Any non-``default``
``rope_type`` becomes ``deepseek_yarn`` in vLLM (``deepseek_llama_scaling`` when
``attention_factor == 1.0``); both take the YaRN frequencies and scale cos/sin by
``m(factor, mscale) / m(factor, mscale_all_dim)``, ``m(s, a) = 0.1·a·ln s + 1`` (1 for ``s ≤ 1``).
The softmax scale is ``qk^-0.5``, times ``m(factor, mscale_all_dim)²`` for ``deepseek_yarn``.

Where transformers 5.19 ``DeepseekV3Attention`` differs from vLLM (vLLM is followed here):

* ``q_a_layernorm`` / ``kv_a_layernorm`` use eps 1e-6 in transformers, ``rms_norm_eps`` in vLLM;
* transformers' ``rope_interleave`` (default true) rotates the same pairs but writes the rotated
  dims de-interleaved (evens then odds); q·k, and so the attention output, is identical, only the
  stored key layout differs; with ``rope_interleave`` false it is neox-style, which equals this
  module only after the rope rows of ``q_b_proj``/``kv_a_proj_with_mqa`` are de-interleaved;
* the cos/sin magnitude: transformers takes ``attention_factor`` when given and, unless both
  ``mscale`` and ``mscale_all_dim`` are set, ``m(factor, 1)``; vLLM always uses the ratio above
  (``mscale`` defaults to 1, ``mscale_all_dim`` to 0). Both agree when both keys are set, as in
  Kimi-K2 (1.0 / 1.0) and DeepSeek-V3 configs;
* transformers applies ``attention_bias`` to ``q_a_proj``/``kv_a_proj_with_mqa``/``o_proj``; vLLM's
  MLA layers have no biases (nor do eaglehub's expected tensors).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from eaglehub.checks.target import rope_settings
from eaglehub.drafter.shapes import mla_dims
from eaglehub.errors import EaglehubError
from eaglehub.model.eagle3 import LayerCache, cached_attention

#: vLLM's ``DeepseekScalingRotaryEmbedding`` keyword defaults
YARN_DEFAULTS = {"beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 0.0}


def yarn_get_mscale(scale: float, mscale: float = 1.0) -> float:
    """YaRN magnitude ``0.1·mscale·ln(scale) + 1`` (1 for ``scale ≤ 1``); vLLM ``yarn_get_mscale``."""
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


@dataclass(frozen=True)
class MLARope:
    """The rotary embedding of vLLM's MLA layer for ``dim = qk_rope_head_dim``.

    ``factor`` is ``None`` for plain RoPE; otherwise YaRN with ``original_max`` positions, the
    ramp bounds ``beta_fast``/``beta_slow``, cos/sin magnitude ``cos_sin_mscale`` and softmax-scale
    multiplier ``softmax_mscale`` (see the module docstring for the rules).
    """

    dim: int
    theta: float = 10000.0
    factor: float | None = None
    original_max: int | None = None
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    cos_sin_mscale: float = 1.0
    softmax_mscale: float = 1.0

    @classmethod
    def from_config(cls, cfg: dict, dim: int) -> MLARope:
        """Read ``rope_theta`` and ``rope_scaling`` (or transformers-5 ``rope_parameters``) the way
        vLLM's ``DeepseekV2MLAAttention`` does (``deepseek_v2.py``, ``get_rope``).

        A ``yarn`` schedule without ``original_max_position_embeddings`` takes
        ``max_position_embeddings`` (transformers' rope standardisation does so before vLLM reads it).
        Raises: EaglehubError (exit 2) when a scaled schedule lacks a numeric ``factor`` or
        ``original_max_position_embeddings`` (vLLM fails to build the layer then).
        """
        theta, scaling = rope_settings(cfg)
        if not scaling:
            return cls(dim=dim, theta=float(theta))
        rtype = scaling.get("rope_type", "default")
        factor = scaling.get("factor")
        original = scaling.get("original_max_position_embeddings")
        if original is None and rtype == "yarn":
            original = cfg.get("max_position_embeddings")
        if not isinstance(factor, (int, float)) or isinstance(factor, bool) or not isinstance(original, int):
            raise EaglehubError(
                f"MLA drafter rope_scaling {rtype!r} needs a numeric factor and original_max_position_embeddings",
                hint="vLLM builds every scaled MLA RoPE as deepseek_yarn; copy rope_scaling from the target's config",
            )
        p = {k: float(scaling.get(k, v)) for k, v in YARN_DEFAULTS.items()}
        llama_scaling = scaling.get("attention_factor") == 1.0  # vLLM: deepseek_llama_scaling, no softmax mscale
        return cls(
            dim=dim,
            theta=float(theta),
            factor=float(factor),
            original_max=original,
            beta_fast=p["beta_fast"],
            beta_slow=p["beta_slow"],
            cos_sin_mscale=yarn_get_mscale(factor, p["mscale"]) / yarn_get_mscale(factor, p["mscale_all_dim"]),
            softmax_mscale=1.0 if llama_scaling else yarn_get_mscale(factor, p["mscale_all_dim"]) ** 2,
        )

    def inv_freq(self) -> torch.Tensor:
        """Inverse frequencies ``[dim/2]`` (float32): ``theta^(-2i/dim)``, or with YaRN the blend of
        extrapolated and ``1/factor``-interpolated ones over the ramp between the correction dims
        (vLLM ``DeepseekScalingRotaryEmbedding._compute_inv_freq``, ``yarn_find_correction_range``)."""
        pos_freqs = self.theta ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim)
        if self.factor is None:
            return 1.0 / pos_freqs
        original_max = self.original_max
        assert original_max is not None  # from_config sets it together with factor

        def correction_dim(rotations: float) -> float:
            return self.dim * math.log(original_max / (rotations * 2 * math.pi)) / (2 * math.log(self.theta))

        low = max(math.floor(correction_dim(self.beta_fast)), 0)
        high: float = min(math.ceil(correction_dim(self.beta_slow)), self.dim - 1)
        if low == high:
            high += 0.001  # as vLLM: avoids a zero-width ramp
        ramp = torch.clamp((torch.arange(self.dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
        extrapolate = 1 - ramp
        return (1.0 / (self.factor * pos_freqs)) * (1 - extrapolate) + (1.0 / pos_freqs) * extrapolate

    def cos_sin(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin ``[T, dim/2]`` (float32, magnitude ``cos_sin_mscale``) for integer ``positions [T]``."""
        freqs = positions.to(torch.float32)[:, None] * self.inv_freq().to(positions.device)[None, :]
        return freqs.cos() * self.cos_sin_mscale, freqs.sin() * self.cos_sin_mscale

    def apply(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Rotate ``x [T, heads, dim]`` interleaved (GPT-J): pair ``(x[2i], x[2i+1])`` by angle
        ``positions·inv_freq[i]`` (vLLM ``forward_static`` with ``is_neox_style=False``)."""
        cos, sin = (t[:, None, :] for t in self.cos_sin(positions))
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack((even * cos - odd * sin, odd * cos + even * sin), dim=-1).flatten(-2)


def _required(value: int | None, key: str) -> int:
    if value is None:
        raise EaglehubError(
            f"MLA drafter config lacks a positive integer {key!r}",
            hint="copy the MLA dimensions from the target's config.json",
        )
    return value


def _linear(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return F.linear(x, layer.weight.float())


def _rms(norm: nn.RMSNorm, x: torch.Tensor) -> torch.Tensor:
    return F.rms_norm(x, norm.normalized_shape, norm.weight.float(), norm.eps)


class MLAAttention(nn.Module):
    """One MLA attention block of a ``DeepseekV2Eagle3DecoderLayer``; see the module docstring.

    Submodule names are the canonical checkpoint names under ``<layer>.self_attn.`` (``q_a_proj``,
    ``q_a_layernorm``, ``q_b_proj`` or ``q_proj`` when ``q_lora_rank`` is null, ``kv_a_proj_with_mqa``,
    ``kv_a_layernorm``, ``kv_b_proj``, ``o_proj``), with the shapes of ``eaglehub.drafter.shapes._mla_layer``,
    so ``state_dict()`` loads from and saves to a checkpoint. No biases (vLLM has none).
    """

    def __init__(self, cfg: dict, in_features: int):
        """``cfg``: the drafter's flat config dict; ``in_features``: ``2H`` for layer 0, ``H`` after.
        Raises: EaglehubError (exit 2) when ``hidden_size``, ``num_attention_heads`` or an MLA
        dimension other than ``q_lora_rank`` is missing or not a positive integer."""
        super().__init__()
        m = mla_dims(cfg)
        H = _required(cfg.get("hidden_size") if isinstance(cfg.get("hidden_size"), int) else None, "hidden_size")
        nh = _required(
            cfg.get("num_attention_heads") if isinstance(cfg.get("num_attention_heads"), int) else None,
            "num_attention_heads",
        )
        self.num_heads = nh
        self.q_lora = m.q_lora
        self.kv_lora = _required(m.kv_lora, "kv_lora_rank")
        self.qk_nope = _required(m.qk_nope, "qk_nope_head_dim")
        self.qk_rope = _required(m.qk_rope, "qk_rope_head_dim")
        self.v_head = _required(m.v_head, "v_head_dim")
        self.qk_head = self.qk_nope + self.qk_rope
        eps = float(cfg.get("rms_norm_eps", 1e-6))  # DeepseekV2Config's default
        if self.q_lora is None:
            self.q_proj = nn.Linear(in_features, nh * self.qk_head, bias=False)
        else:
            self.q_a_proj = nn.Linear(in_features, self.q_lora, bias=False)
            self.q_a_layernorm = nn.RMSNorm(self.q_lora, eps=eps)
            self.q_b_proj = nn.Linear(self.q_lora, nh * self.qk_head, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(in_features, self.kv_lora + self.qk_rope, bias=False)
        self.kv_a_layernorm = nn.RMSNorm(self.kv_lora, eps=eps)
        self.kv_b_proj = nn.Linear(self.kv_lora, nh * (self.qk_nope + self.v_head), bias=False)
        self.o_proj = nn.Linear(nh * self.v_head, H, bias=False)
        self.rope = MLARope.from_config(cfg, self.qk_rope)
        self.scaling = self.qk_head**-0.5 * self.rope.softmax_mscale

    def qkv(self, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q ``[T, nh, qk]``, k ``[T, nh, qk]`` (RoPE on the last ``qk_rope`` dims), v ``[T, nh, v_head]``,
        float32, for ``x [T, in]`` at ``positions [T]``."""
        x = x.float()
        T, nh = x.shape[0], self.num_heads
        if self.q_lora is None:
            q = _linear(self.q_proj, x)
        else:
            q = _linear(self.q_b_proj, _rms(self.q_a_layernorm, _linear(self.q_a_proj, x)))
        q = q.view(T, nh, self.qk_head)
        kv_c, k_pe = _linear(self.kv_a_proj_with_mqa, x).split([self.kv_lora, self.qk_rope], dim=-1)
        kv = _linear(self.kv_b_proj, _rms(self.kv_a_layernorm, kv_c)).view(T, nh, self.qk_nope + self.v_head)
        k_nope, v = kv.split([self.qk_nope, self.v_head], dim=-1)
        q = torch.cat([q[..., : self.qk_nope], self.rope.apply(q[..., self.qk_nope :], positions)], dim=-1)
        k_pe = self.rope.apply(k_pe[:, None, :], positions).expand(T, nh, self.qk_rope)
        return q, torch.cat([k_nope, k_pe], dim=-1), v

    def forward(
        self, x: torch.Tensor, positions: torch.Tensor, cache: LayerCache, return_probs: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``x [T, in]``: new tokens at absolute ``positions [T]`` (int64), coming right after the
        ``cache.length`` cached ones; their keys ``[T, nh, qk]`` and values ``[T, nh, v_head]`` (float32)
        are appended to ``cache`` (:class:`eaglehub.model.eagle3.LayerCache`). Token ``i`` attends to
        every cached token and to new tokens ``≤ i`` (:func:`eaglehub.model.eagle3.cached_attention`,
        one key/value head per query head).

        Returns ``o_proj`` output ``[T, H]`` in ``x``'s dtype (the residual stream's, so a bfloat16
        drafter stays bfloat16) and, with ``return_probs``, the attention probabilities ``[nh, T, L+T]``
        (float32; rows sum to 1, zero above the causal diagonal).
        """
        q, k, v = self.qkv(x, positions)
        keys, values = cache.append(k, v)
        out, probs = cached_attention(q, keys, values, self.scaling, return_probs)
        return _linear(self.o_proj, out).to(x.dtype), probs
