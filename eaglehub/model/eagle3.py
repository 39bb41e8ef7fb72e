"""A plain-PyTorch EAGLE-3 / EAGLE-3.1 drafter, numerically mirroring vLLM.

Source of every rule: vLLM ``model_executor/models/llama_eagle3.py`` (0.32.0),
docs/formats.md §1 and docs/vllm.md §3. Parameter names are the research / vLLM-native layout
(``fc``, ``fc_norm.{i}``, ``input_norm``, ``midlayer.*``, ``norm``, ``lm_head``; buffers ``d2t``,
``t2d``), so ``state_dict()`` is a checkpoint vLLM loads.

Shapes (``H`` drafter hidden, ``Ht`` target hidden, ``A`` aux hidden states, ``nh``/``nkv`` heads,
``hd`` head dim, ``I`` MLP width, ``Vd`` draft vocabulary, ``V`` target vocabulary):

* ``combine(aux [..., A·Ht]) -> [..., H]``: optional ``input_norm`` (``norm_before_fc``), optional
  per-chunk ``fc_norm`` (EAGLE 3.1), then ``fc``.
* ``layer_qkv(hidden [T, H], embeds [T, H], positions [T])`` → q ``[T, nh, hd]``, k/v ``[T, nkv, hd]``
  (RoPE applied) and the residual ``[T, H]``: ``cat(input_layernorm(embeds), hidden_norm(hidden))``
  feeds q/k/v; the residual is the un-normed hidden (``norm_before_residual`` false).
* ``layer_out(attn [T, nh·hd], residual [T, H])`` → (``normed`` ``[T, H]``, ``fed_back`` ``[T, H]``):
  ``h = residual + o_proj(attn)``; ``h = h + mlp(post_attention_layernorm(h))``;
  ``normed = norm(h)`` feeds ``lm_head``; the state fed to the next draft step is ``normed`` when
  ``norm_output`` (EAGLE 3.1) else the pre-norm ``h``.
* ``logits(normed) -> [T, Vd]`` (times ``logit_scale``); ``to_target_ids(draft_ids) = draft_ids + d2t[draft_ids]``.

:meth:`Eagle3Drafter.forward_step` is the inference forward the reference engine uses: any number of
decoder layers (layer 0 reads ``2H``, layers ``1..L−1`` under ``layers.{i}.`` are plain Llama decoder
layers reading ``H``, vLLM ``llama_eagle3.LlamaDecoderLayer``), ``norm_before_residual`` (the residual is
``hidden_norm(hidden)`` instead of ``hidden``), attention bias, and a per-layer key/value cache
(:class:`KVCache`). MLA attention (Kimi / DeepSeek-style drafters) comes from :mod:`eaglehub.model.mla`.

Qwen3-style drafters (vLLM ``qwen3_eagle3.py``, ``layer_style`` ``"qwen3"``): the same layer with an
RMSNorm over ``head_dim`` on every query and key head (``q_norm`` / ``k_norm``, before RoPE) and no
``o_proj`` bias. Per-layer sliding windows (``windows``, as vLLM applies ``layer_types`` /
``sliding_window``): a query at position ``p`` attends to keys at positions ``> p − W``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class DrafterDims:
    """The dimensions a drafter forward needs, read from a drafter config (docs/formats.md notation)."""

    hidden_size: int
    target_hidden_size: int
    num_aux: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    draft_vocab_size: int
    rms_norm_eps: float = 1e-6  # DEFAULT_RMS_NORM_EPS (transformers' LlamaConfig / Qwen3Config)
    rope_theta: float = 10000.0
    fc_norm: bool = False
    norm_output: bool = False
    norm_before_fc: bool = False
    norm_before_residual: bool = False
    num_layers: int = 1
    attention_bias: bool = False
    mlp_bias: bool = False
    logit_scale: float = 1.0
    layer_style: str = "llama"  # "llama" or "qwen3" (q/k-norm attention)
    windows: tuple[int | None, ...] = ()  # per decoder layer; missing entries: full attention

    @property
    def qk_norm(self) -> bool:
        return self.layer_style == "qwen3"

    def window(self, layer: int) -> int | None:
        return self.windows[layer] if layer < len(self.windows) else None

    @classmethod
    def from_config(cls, cfg: dict) -> DrafterDims:
        """Read dims from a vLLM-native drafter ``config.json`` dict, with vLLM's defaults
        (``eaglehub.drafter.canonical.derive_dims`` / ``read_flags``, docs/vllm.md §3)."""
        from eaglehub.drafter.canonical import (
            QWEN3,
            attention_windows,
            derive_dims,
            layer_kind,
            read_flags,
            rms_norm_eps,
        )

        d, f = derive_dims(cfg), read_flags(cfg)
        qwen3 = layer_kind(cfg) == QWEN3
        rope = cfg.get("rope_parameters") or {}
        # vLLM's Qwen3 layer sets a missing rope theta to 1e6
        default_theta = 1_000_000.0 if qwen3 else 10000.0
        fields = {
            "hidden_size": d.H,
            "target_hidden_size": d.Ht,
            "num_attention_heads": d.nh,
            "num_key_value_heads": d.nkv,
            "head_dim": d.head_dim,
            "intermediate_size": d.I,
            "vocab_size": d.V,
            "draft_vocab_size": d.Vd,
        }
        missing = [k for k, v in fields.items() if v is None]
        if missing:  # a module cannot be built without them (nn.Linear would fail with a TypeError)
            from ..errors import EaglehubError

            raise EaglehubError(
                f"drafter config has no usable {', '.join(missing)}",
                hint="run `eaglehub validate` on the drafter for the findings",
                exit_code=1,
            )
        assert d.H is not None and d.Ht is not None and d.nh is not None and d.nkv is not None
        assert d.head_dim is not None and d.I is not None and d.V is not None and d.Vd is not None
        return cls(
            hidden_size=d.H,
            target_hidden_size=d.Ht,
            num_aux=d.A,
            num_heads=d.nh,
            num_kv_heads=d.nkv,
            head_dim=d.head_dim,
            intermediate_size=d.I,
            vocab_size=d.V,
            draft_vocab_size=d.Vd,
            rms_norm_eps=rms_norm_eps(cfg),
            rope_theta=rope.get("rope_theta", cfg.get("rope_theta", default_theta)),
            fc_norm=f.fc_norm,
            norm_output=f.norm_output,
            norm_before_fc=f.norm_before_fc,
            norm_before_residual=f.norm_before_residual,
            num_layers=d.layers,
            attention_bias=d.attention_bias,
            mlp_bias=d.mlp_bias,
            logit_scale=float(cfg.get("logit_scale", 1.0) or 1.0),
            layer_style="qwen3" if qwen3 else "llama",
            windows=tuple(attention_windows(cfg)),
        )


class RMSNorm(nn.Module):
    """Llama RMSNorm: ``x · rsqrt(mean(x²) + eps) · weight``, computed in float32."""

    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return (self.weight.float() * x).to(dtype)


class LayerCache:
    """Keys and values of one attention layer for the positions processed so far (consecutive from 0).

    ``keys [L, heads, d_k]``, ``values [L, heads, d_v]``; :meth:`crop` drops rejected positions."""

    def __init__(self):
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    @property
    def length(self) -> int:
        return 0 if self.keys is None else self.keys.shape[0]

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add the new positions' ``k``/``v``; return all keys and values (cached first)."""
        self.keys = k if self.keys is None else torch.cat([self.keys, k])
        self.values = v if self.values is None else torch.cat([self.values, v])
        return self.keys, self.values

    def crop(self, n: int) -> None:
        if self.keys is not None and self.values is not None:
            self.keys, self.values = self.keys[:n], self.values[:n]


class KVCache:
    """One :class:`LayerCache` per drafter decoder layer."""

    def __init__(self, num_layers: int):
        self.layers = [LayerCache() for _ in range(num_layers)]

    @property
    def length(self) -> int:
        return self.layers[0].length

    def crop(self, n: int) -> None:
        for layer in self.layers:
            layer.crop(n)


def causal_mask(q_pos: torch.Tensor, k_pos: torch.Tensor, window: int | None = None) -> torch.Tensor:
    """``[Tq, Tk]`` true where a query at ``q_pos`` may attend a key at ``k_pos``: causal and, with a
    sliding ``window`` ``W``, only the last ``W`` positions including its own (vLLM's per-layer window)."""
    mask = k_pos[None, :] <= q_pos[:, None]
    if window is not None:
        mask = mask & (k_pos[None, :] > q_pos[:, None] - window)
    return mask


def cached_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float,
    return_probs: bool = False,
    window: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Causal attention of ``T`` new queries ``q [T, nh, d_k]`` over all keys ``k [L, nkv, d_k]`` /
    values ``v [L, nkv, d_v]`` whose last ``T`` rows are the new positions (GQA: ``nh`` a multiple of
    ``nkv``), within a sliding ``window`` when given. Returns ``([T, nh·d_v], probs [nh, T, L] or None)``."""
    T, L = q.shape[0], k.shape[0]
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    mask = causal_mask(torch.arange(L - T, L, device=q.device), torch.arange(L, device=q.device), window)
    qh, kh, vh = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)
    if not return_probs:
        out = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask, scale=scale)
        return out.transpose(0, 1).reshape(T, -1), None
    scores = (qh @ kh.transpose(1, 2)) * scale
    probs = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return (probs @ vh).transpose(0, 1).reshape(T, -1), probs


class _Attention(nn.Module):
    """Llama attention (vLLM ``LlamaAttention``) reading ``in_features`` (``2H`` in layer 0); Qwen3
    attention (``Qwen3Attention``: ``q_norm`` / ``k_norm`` per head, no ``o_proj`` bias) when the dims
    say so; within a sliding ``window`` when given."""

    def __init__(self, d: DrafterDims, in_features: int | None = None, window: int | None = None):
        super().__init__()
        self.dims = d
        self.window = window
        width = in_features or 2 * d.hidden_size
        bias = d.attention_bias
        self.q_proj = nn.Linear(width, d.num_heads * d.head_dim, bias=bias)
        self.k_proj = nn.Linear(width, d.num_kv_heads * d.head_dim, bias=bias)
        self.v_proj = nn.Linear(width, d.num_kv_heads * d.head_dim, bias=bias)
        self.o_proj = nn.Linear(d.num_heads * d.head_dim, d.hidden_size, bias=bias and not d.qk_norm)
        if d.qk_norm:
            self.q_norm = RMSNorm(d.head_dim, d.rms_norm_eps)
            self.k_norm = RMSNorm(d.head_dim, d.rms_norm_eps)

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q ``[..., nh, hd]``, k / v ``[..., nkv, hd]`` of ``x [..., in]``, q/k-normed where the layer has them."""
        d, lead = self.dims, x.shape[:-1]
        q = self.q_proj(x).view(*lead, d.num_heads, d.head_dim)
        k = self.k_proj(x).view(*lead, d.num_kv_heads, d.head_dim)
        v = self.v_proj(x).view(*lead, d.num_kv_heads, d.head_dim)
        if d.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        return q, k, v

    def forward(
        self, x: torch.Tensor, positions: torch.Tensor, cache: LayerCache, return_probs: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``x [T, in]`` at ``positions [T]`` (right after the cached ones) → (``o_proj`` output
        ``[T, H]``, attention probabilities ``[nh, T, L]`` or ``None``)."""
        d = self.dims
        q, k, v = self.project(x)
        cos, sin = rope_cos_sin(positions, d.head_dim, d.rope_theta)
        keys, values = cache.append(apply_rope(k, cos, sin), v)
        out, probs = cached_attention(
            apply_rope(q, cos, sin), keys, values, 1.0 / math.sqrt(d.head_dim), return_probs, self.window
        )
        return self.o_proj(out), probs


class _MLP(nn.Module):
    def __init__(self, d: DrafterDims):
        super().__init__()
        self.gate_proj = nn.Linear(d.hidden_size, d.intermediate_size, bias=d.mlp_bias)
        self.up_proj = nn.Linear(d.hidden_size, d.intermediate_size, bias=d.mlp_bias)
        self.down_proj = nn.Linear(d.intermediate_size, d.hidden_size, bias=d.mlp_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class _DecoderLayer(nn.Module):
    """Layer 0 (``midlayer.``: ``2H`` input, ``hidden_norm``) or a later plain Llama layer (``H`` input)."""

    def __init__(self, d: DrafterDims, first: bool, attention_factory=None, index: int = 0):
        super().__init__()
        width = 2 * d.hidden_size if first else d.hidden_size
        self.self_attn = attention_factory(width) if attention_factory else _Attention(d, width, d.window(index))
        self.mlp = _MLP(d)
        if first:
            self.hidden_norm = RMSNorm(d.hidden_size, d.rms_norm_eps)
        self.input_layernorm = RMSNorm(d.hidden_size, d.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(d.hidden_size, d.rms_norm_eps)


_MidLayer = _DecoderLayer  # the recipe's checkpoints and tests name layer 0 this way


def rope_cos_sin(positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Neox-style RoPE tables ``[T, hd]`` for integer ``positions [T]`` (vLLM ``get_rope``, Llama)."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=positions.device) / head_dim))
    freqs = positions.float()[:, None] * inv[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos(), emb.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x [..., T, heads, hd]`` with tables ``[T, hd]`` (rotate-half convention)."""
    half = x.shape[-1] // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos[:, None, :] + rot * sin[:, None, :]


class Eagle3Drafter(nn.Module):
    """The drafter as trainable PyTorch module; see the module docstring for the forward pieces.

    ``attention_factory(in_features) -> nn.Module``: builds each layer's attention (default Llama
    :class:`_Attention`; MLA drafters pass :class:`eaglehub.model.mla.MLAAttention`'s)."""

    d2t: torch.Tensor  # a buffer, registered only for a pruned draft vocabulary

    def __init__(self, dims: DrafterDims, attention_factory=None):
        super().__init__()
        d = self.dims = dims
        if d.norm_before_fc:
            self.input_norm = RMSNorm(d.num_aux * d.target_hidden_size, d.rms_norm_eps)
        if d.fc_norm:
            self.fc_norm = nn.ModuleList(RMSNorm(d.target_hidden_size, d.rms_norm_eps) for _ in range(d.num_aux))
        self.fc = nn.Linear(d.num_aux * d.target_hidden_size, d.hidden_size, bias=False)
        self.midlayer = _DecoderLayer(d, True, attention_factory)
        if d.num_layers > 1:  # canonical names layers.{i}. for i >= 1 (eaglehub.drafter.canonical)
            self.layers = nn.ModuleDict(
                {str(i): _DecoderLayer(d, False, attention_factory, i) for i in range(1, d.num_layers)}
            )
        self.norm = RMSNorm(d.hidden_size, d.rms_norm_eps)
        self.lm_head = nn.Linear(d.hidden_size, d.draft_vocab_size, bias=False)
        if d.draft_vocab_size != d.vocab_size:
            self.register_buffer("d2t", torch.zeros(d.draft_vocab_size, dtype=torch.long))
            self.register_buffer("t2d", torch.zeros(d.vocab_size, dtype=torch.bool))

    def combine(self, aux: torch.Tensor) -> torch.Tensor:
        """Fuse concatenated aux hidden states ``[..., A·Ht]`` (ascending layer order) into ``[..., H]``."""
        if self.dims.norm_before_fc:
            aux = self.input_norm(aux)
        if self.dims.fc_norm:
            aux = torch.cat([n(c) for n, c in zip(self.fc_norm, aux.chunk(self.dims.num_aux, dim=-1))], dim=-1)
        return self.fc(aux)

    def layer_qkv(self, hidden: torch.Tensor, embeds: torch.Tensor, positions: torch.Tensor):
        """q ``[..., T, nh, hd]``, k/v ``[..., T, nkv, hd]`` (RoPE on q, k), residual ``[..., T, H]``."""
        d, m = self.dims, self.midlayer
        x = torch.cat([m.input_layernorm(embeds), m.hidden_norm(hidden)], dim=-1)
        q, k, v = m.self_attn.project(x)
        cos, sin = rope_cos_sin(positions, d.head_dim, d.rope_theta)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v, hidden

    def layer_out(self, attn: torch.Tensor, residual: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(``normed`` for ``lm_head``, state fed to the next draft step), both ``[..., H]``."""
        m = self.midlayer
        h = residual + m.self_attn.o_proj(attn)
        h = h + m.mlp(m.post_attention_layernorm(h))
        normed = self.norm(h)
        return normed, (normed if self.dims.norm_output else h)

    def forward_step(
        self,
        embeds: torch.Tensor,
        hidden: torch.Tensor,
        positions: torch.Tensor,
        cache: KVCache,
        return_probs: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """One drafter pass over ``T`` new positions (vLLM ``llama_eagle3.LlamaModel.forward``).

        ``embeds [T, H]``: embeddings of the tokens *after* each position (token ``p + 1`` at position
        ``p``); ``hidden [T, H]``: the fused target state (:meth:`combine`) or the drafter's own fed-back
        state; ``positions [T]`` follow the cached ones. Returns (``normed [T, H]`` for :meth:`logits`,
        the state fed to the next draft step ``[T, H]``, per layer the attention probabilities
        ``[nh, T, L]`` when ``return_probs``). Appends the new keys/values to ``cache``.
        """
        m, d = self.midlayer, self.dims
        residual = m.hidden_norm(hidden) if d.norm_before_residual else hidden
        x = torch.cat([m.input_layernorm(embeds), m.hidden_norm(hidden)], dim=-1)
        layers: list[_DecoderLayer] = [m] + (
            [cast(_DecoderLayer, self.layers[str(i)]) for i in range(1, d.num_layers)] if d.num_layers > 1 else []
        )
        probs = []
        for i, layer in enumerate(layers):
            if i:
                x = layer.input_layernorm(residual)
            out, p = layer.self_attn(x, positions, cache.layers[i], return_probs)
            residual = residual + out
            residual = residual + layer.mlp(layer.post_attention_layernorm(residual))
            if p is not None:
                probs.append(p)
        normed = self.norm(residual)
        return normed, (normed if d.norm_output else residual), probs

    def logits(self, normed: torch.Tensor) -> torch.Tensor:
        """Draft-vocabulary logits ``[..., Vd]`` (vLLM's ``LogitsProcessor`` scales by ``logit_scale``)."""
        out = self.lm_head(normed)
        return out * self.dims.logit_scale if self.dims.logit_scale != 1.0 else out

    def to_target_ids(self, draft_ids: torch.Tensor) -> torch.Tensor:
        """Map draft-vocabulary ids to target ids: ``i + d2t[i]`` (docs/formats.md §2)."""
        if not hasattr(self, "d2t"):
            return draft_ids
        return draft_ids + self.d2t[draft_ids]


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Scaled dot-product attention with GQA: q ``[Tq, nh, hd]``, k/v ``[Tk, nkv, hd]``,
    boolean ``mask [Tq, Tk]`` (true = may attend) → ``[Tq, nh·hd]``."""
    rep = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    out = F.scaled_dot_product_attention(
        q.transpose(0, 1),
        k.transpose(0, 1),
        v.transpose(0, 1),
        attn_mask=mask,
        scale=1.0 / math.sqrt(q.shape[-1]),
    )
    return out.transpose(0, 1).reshape(q.shape[0], -1)
