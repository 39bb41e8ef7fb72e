"""The tensors an EAGLE-3 drafter config implies, with their shapes (docs/formats.md §1, §5; docs/vllm.md §5, §14).

Two layer kinds (:func:`layer_kind`): Llama decoder layers (``llama_eagle3.py``) and MLA decoder
layers (``deepseek_eagle3.py``, Kimi-K2 / DeepSeek-V3 targets). Shapes are ``[out, in]``. ``None``
inside a shape means the config lacks the field (then only presence is checked; the config schema
reports the missing field).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from eaglehub.drafter.canonical import (  # noqa: F401 (re-exported)
    LAYER0,
    LLAMA,
    MLA,
    MLA_ARCHITECTURES,
    QWEN3,
    Drafter,
    layer_index,
    layer_kind,
)
from eaglehub.drafter.quant_config import (
    ALL_PARAMS,
    CT,
    CT_PARAMS,
    HIGH_PRECISION,
    KV_PARAMS,
    LOOSE_METHODS,
    LOOSE_PARAMS,
    read_quant_config,
)

#: fc_norm gain vectors described at most: a config may claim any num_aux_hidden_states, and
#: E-AUX-COUNT already reports a count the fc width does not bear out
MAX_AUX_DESCRIBED = 64


def _posint(cfg: dict, key: str) -> int | None:
    v = cfg.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


@dataclass(frozen=True)
class MlaDims:
    """MLA attention dimensions from the config (``None`` where missing or not a positive int):
    ``q_lora_rank``, ``kv_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim``."""

    q_lora: int | None
    kv_lora: int | None
    qk_nope: int | None
    qk_rope: int | None
    v_head: int | None

    @property
    def qk(self) -> int | None:
        """Query/key head width ``qk_nope + qk_rope``."""
        return None if self.qk_nope is None or self.qk_rope is None else self.qk_nope + self.qk_rope


def mla_dims(cfg: dict) -> MlaDims:
    return MlaDims(
        _posint(cfg, "q_lora_rank"),
        _posint(cfg, "kv_lora_rank"),
        _posint(cfg, "qk_nope_head_dim"),
        _posint(cfg, "qk_rope_head_dim"),
        _posint(cfg, "v_head_dim"),
    )


@dataclass(frozen=True)
class TensorSpec:
    """One tensor the layout knows.

    ``required``: absence is an error with ``missing_code``. ``unused_code``: presence while the
    enabling flag is off is reported with this code instead of E-TENSOR-UNEXPECTED.
    """

    name: str
    shape: tuple[int | None, ...]
    required: bool = True
    missing_code: str = "E-TENSOR-MISSING"
    unused_code: str | None = None


def _mul(*xs: int | None) -> int | None:
    out = 1
    for x in xs:
        if x is None:
            return None
        out *= x
    return out


def _layer(prefix: str, d, width_in: int | None, hidden_norm: bool, qwen3: bool = False) -> list[TensorSpec]:
    """One Llama decoder layer (``llama_eagle3.py``), or a Qwen3 one (``qwen3_eagle3.py``): the same
    tensors plus ``q_norm`` / ``k_norm [head_dim]``; in a Llama layer those are allowed only to be
    reported (E-QKNORM-UNUSED: the class, not the tensors, is wrong)."""
    q, kv = _mul(d.nh, d.head_dim), _mul(d.nkv, d.head_dim)
    specs = [
        TensorSpec(f"{prefix}self_attn.q_proj.weight", (q, width_in)),
        TensorSpec(f"{prefix}self_attn.k_proj.weight", (kv, width_in)),
        TensorSpec(f"{prefix}self_attn.v_proj.weight", (kv, width_in)),
        TensorSpec(f"{prefix}self_attn.o_proj.weight", (d.H, q)),
        TensorSpec(f"{prefix}mlp.gate_proj.weight", (d.I, d.H)),
        TensorSpec(f"{prefix}mlp.up_proj.weight", (d.I, d.H)),
        TensorSpec(f"{prefix}mlp.down_proj.weight", (d.H, d.I)),
        TensorSpec(f"{prefix}input_layernorm.weight", (d.H,)),
        TensorSpec(f"{prefix}post_attention_layernorm.weight", (d.H,)),
    ]
    if hidden_norm:
        specs.append(TensorSpec(f"{prefix}hidden_norm.weight", (d.H,)))
    specs += [
        TensorSpec(
            f"{prefix}self_attn.{n}_norm.weight",
            (d.head_dim,),
            required=qwen3,
            missing_code="E-QKNORM-MISSING",
            unused_code=None if qwen3 else "E-QKNORM-UNUSED",
        )
        for n in ("q", "k")
    ]
    if d.attention_bias:
        specs += [TensorSpec(f"{prefix}self_attn.{p}_proj.bias", (n,)) for p, n in (("q", q), ("k", kv), ("v", kv))]
        if not qwen3:
            # vLLM's Llama layer gives o_proj a bias too (llama.py L266-274); a missing one stays uninitialised,
            # which checks/profiles.py reports per engine (E-ENGINE-UNFILLED)
            specs.append(TensorSpec(f"{prefix}self_attn.o_proj.bias", (d.H,), required=False))
    if d.mlp_bias:
        specs += [
            TensorSpec(f"{prefix}mlp.{p}_proj.bias", (n,)) for p, n in (("gate", d.I), ("up", d.I), ("down", d.H))
        ]
    return specs


def _mla_layer(prefix: str, d, m: MlaDims, width_in: int | None, hidden_norm: bool, q_proj: bool) -> list[TensorSpec]:
    """One ``DeepseekV2Eagle3DecoderLayer`` (vLLM ``deepseek_eagle3.py``; docs/formats.md §5): MLA attention
    reading ``width_in``, dense MLP, RMSNorms; no biases. ``q_proj``: the checkpoint has no query LoRA
    (``q_lora_rank`` null) and stores ``q_proj [nh·qk, width_in]`` instead of ``q_a``/``q_b`` (which
    vLLM cannot load, reported as E-MLA-QLORA)."""
    a = f"{prefix}self_attn."
    if q_proj:
        specs = [TensorSpec(f"{a}q_proj.weight", (_mul(d.nh, m.qk), width_in))]
    else:
        specs = [
            TensorSpec(f"{a}q_a_proj.weight", (m.q_lora, width_in)),
            TensorSpec(f"{a}q_a_layernorm.weight", (m.q_lora,)),
            TensorSpec(f"{a}q_b_proj.weight", (_mul(d.nh, m.qk), m.q_lora)),
        ]
    kv_b = None if m.qk_nope is None or m.v_head is None else m.qk_nope + m.v_head
    specs += [
        TensorSpec(
            f"{a}kv_a_proj_with_mqa.weight",
            (None if m.kv_lora is None or m.qk_rope is None else m.kv_lora + m.qk_rope, width_in),
        ),
        TensorSpec(f"{a}kv_a_layernorm.weight", (m.kv_lora,)),
        TensorSpec(f"{a}kv_b_proj.weight", (_mul(d.nh, kv_b), m.kv_lora)),
        TensorSpec(f"{a}o_proj.weight", (d.H, _mul(d.nh, m.v_head))),
        TensorSpec(f"{prefix}mlp.gate_proj.weight", (d.I, d.H)),
        TensorSpec(f"{prefix}mlp.up_proj.weight", (d.I, d.H)),
        TensorSpec(f"{prefix}mlp.down_proj.weight", (d.H, d.I)),
        TensorSpec(f"{prefix}input_layernorm.weight", (d.H,)),
        TensorSpec(f"{prefix}post_attention_layernorm.weight", (d.H,)),
        # every deepseek_eagle3 layer owns a hidden_norm, only layer 0 applies it
        TensorSpec(f"{prefix}hidden_norm.weight", (d.H,), required=hidden_norm),
    ]
    return specs


def stored_layers(drafter: Drafter) -> int:
    """Decoder layers the checkpoint stores tensors for: one past the highest layer index (at least 1)."""
    return max((i for n in drafter.names if (i := layer_index(n)) is not None), default=0) + 1


def described_layers(drafter: Drafter) -> int:
    """Decoder layers :func:`expected_tensors` describes: the config's ``num_hidden_layers``, but at most
    one past the highest layer the checkpoint stores tensors for. A config may claim any number of
    layers; the first missing one is described tensor by tensor, the rest are reported once
    (``check_expected``)."""
    return max(1, min(drafter.dims.layers, stored_layers(drafter) + 1))


def expected_tensors(drafter: Drafter) -> list[TensorSpec]:
    """Every tensor the drafter's config implies or allows, by canonical name.

    Rules: ``fc [H, A·Ht]``; layer 0 (``midlayer.``) reads ``2H`` and has ``hidden_norm``; layers
    ``1..L-1`` read ``H``; ``lm_head [Vd, H]``; ``d2t [Vd]`` required iff ``Vd < V``;
    ``t2d [V]`` optional; ``embed_tokens [V, H]`` required iff ``H != Ht``; ``fc_norm.{i} [Ht]``
    iff ``fc_norm`` (docs/formats.md §1, §2, §4).

    Llama layers (docs/formats.md §1): ``q/k/v_proj [nh·hd | nkv·hd, in]``, ``o_proj [H, nh·hd]`` (+ biases
    iff ``attention_bias``/``mlp_bias``); ``input_norm [A·Ht]`` iff ``norm_before_fc``. Qwen3 layers
    (``Eagle3Qwen3ForCausalLM``, docs/formats.md §10) add ``self_attn.q_norm`` / ``k_norm [hd]``.

    MLA layers (docs/formats.md §5, vLLM ``deepseek_eagle3.py``), with ``qk = qk_nope + qk_rope``:
    ``q_a_proj [q_lora, in]``, ``q_a_layernorm [q_lora]``, ``q_b_proj [nh·qk, q_lora]``,
    ``kv_a_proj_with_mqa [kv_lora + qk_rope, in]``, ``kv_a_layernorm [kv_lora]``,
    ``kv_b_proj [nh·(qk_nope + v_head), kv_lora]``, ``o_proj [H, nh·v_head]``, dense MLP, the Llama
    norms. Layers ``1..L-1`` are MLA layers too (vLLM builds every layer the same way). No
    ``input_norm`` exists: a shipped one is E-MLA-NORMBEFOREFC.

    Quantized drafters (a quantization config or low-precision weights; docs/quantization.md §2): also
    ``B.weight_packed [out, ⌈in·bits/32⌉]`` for every ``B.weight`` (``B.weight`` then optional) and the
    quantization parameters present (scales, zero points, ``weight_shape``, KV-cache scales) with their
    stored shapes, which :mod:`eaglehub.checks.quant` checks (:func:`eaglehub.drafter.shapes.quantized_specs`).
    """
    d, f = drafter.dims, drafter.flags
    layers = described_layers(drafter)
    pruned = d.Vd is not None and d.V is not None and d.Vd < d.V
    mla = layer_kind(drafter.config) == MLA
    specs = [TensorSpec("fc.weight", (d.H, _mul(d.A, d.Ht)))]
    if mla:
        m = mla_dims(drafter.config)
        q_proj = m.q_lora is None and f"{LAYER0}self_attn.q_proj.weight" in drafter.tensors
        specs += _mla_layer(LAYER0, d, m, _mul(2, d.H), hidden_norm=True, q_proj=q_proj)
        for i in range(1, layers):
            specs += _mla_layer(f"layers.{i}.", d, m, d.H, hidden_norm=False, q_proj=q_proj)
    else:
        qwen3 = layer_kind(drafter.config) == QWEN3
        specs += _layer(LAYER0, d, _mul(2, d.H), hidden_norm=True, qwen3=qwen3)
        for i in range(1, layers):
            specs += _layer(f"layers.{i}.", d, d.H, hidden_norm=False, qwen3=qwen3)
    specs += [
        TensorSpec("norm.weight", (d.H,)),
        TensorSpec("lm_head.weight", (d.Vd, d.H), missing_code="E-LMHEAD-MISSING"),
        TensorSpec("d2t", (d.Vd,), required=pruned, missing_code="E-D2T-MISSING"),
        TensorSpec("t2d", (d.V,), required=False),
        TensorSpec(
            "embed_tokens.weight",
            (d.V, d.H),
            required=None not in (d.H, d.Ht) and d.H != d.Ht,
            missing_code="E-EMBED-MISSING",
        ),
    ]
    if mla:  # deepseek_eagle3.py has no pre-FC norm (docs/vllm.md §5)
        specs.append(
            TensorSpec("input_norm.weight", (_mul(d.A, d.Ht),), required=False, unused_code="E-MLA-NORMBEFOREFC")
        )
    else:
        specs.append(
            TensorSpec(
                "input_norm.weight",
                (_mul(d.A, d.Ht),),
                required=f.norm_before_fc,
                missing_code="E-INPUTNORM-MISSING",
                unused_code=None if f.norm_before_fc else "E-INPUTNORM-UNUSED",
            )
        )
    specs += [
        TensorSpec(
            f"fc_norm.{i}.weight",
            (d.Ht,),
            required=f.fc_norm,
            missing_code="E-FCNORM-MISSING",
            unused_code=None if f.fc_norm else "W-FCNORM-UNUSED",
        )
        for i in range(min(d.A, MAX_AUX_DESCRIBED))
    ]
    return quantized_specs(drafter, specs)


def is_low_precision_weight(name: str, dtype: str) -> bool:
    return (name.endswith(".weight") and dtype not in HIGH_PRECISION) or name.endswith(".weight_packed")


def quantization_tensors(drafter: Drafter) -> set[str]:
    """Names of quantized payloads (low-precision ``*.weight``, ``*.weight_packed``) and quantization
    parameters (scales, zero points, ``weight_shape``, KV scales), whatever the config says: the dtype
    check (``W-TENSOR-DTYPE``, ``I-TENSOR-DTYPE-CAST``) leaves them to this module."""
    return {
        n
        for n, i in drafter.tensors.items()
        if is_low_precision_weight(n, i.dtype) or n.rpartition(".")[2] in ALL_PARAMS
    }


def quantized_specs(drafter: Drafter, specs: list[TensorSpec]) -> list[TensorSpec]:
    """``specs`` (:func:`eaglehub.drafter.shapes.expected_tensors`) extended by the tensors of a quantized drafter
    (one with a quantization config or any low-precision weight; others come back unchanged).

    For every ``B.weight [out, in]``: ``B.weight_packed [out, ⌈in·bits/w⌉]`` (``w`` = 32 for int32, 8 for
    uint8 storage; ``bits`` from the config's pack-quantized groups, else unknown), optional, and then
    ``B.weight`` is optional too; a uint8 ``B.weight`` (two FP4 values a byte) is ``[out, ?]``. The
    quantization parameters of the method (:data:`CT_PARAMS`, :data:`LOOSE_PARAMS`; both without a
    config) that are present, and ``<layer>.self_attn.{k,v}_scale``, are allowed with their stored
    shapes: :func:`check` owns those shapes and reports missing ones."""
    t = drafter.tensors
    qc = read_quant_config(drafter)
    if qc is None and not any(is_low_precision_weight(n, i.dtype) for n, i in t.items()):
        return specs
    params = CT_PARAMS if qc and qc.method == CT else LOOSE_PARAMS if qc and qc.method in LOOSE_METHODS else ALL_PARAMS
    bits = {s.bits for s in qc.targets.values() if s.packed} if qc else set()
    out = []
    for s in specs:
        base = s.name.removesuffix(".weight")
        if base == s.name:
            out.append(s)
            continue
        packed, stored = f"{base}.weight_packed", t.get(s.name)
        two_d = len(s.shape) == 2
        fp4_bytes = stored is not None and stored.dtype == "uint8" and two_d
        out.append(
            replace(s, required=s.required and packed not in t, shape=(s.shape[0], None) if fp4_bytes else s.shape)
        )
        if two_d:
            word = {"int32": 32, "uint8": 8}.get(t[packed].dtype if packed in t else "int32")
            cols = math.ceil(s.shape[1] * next(iter(bits)) / word) if len(bits) == 1 and word and s.shape[1] else None
            out.append(TensorSpec(packed, (s.shape[0], cols), required=False))
        names = [f"{base}.{p}" for p in params]
        if base.endswith("self_attn.o_proj"):  # KV-cache scales hang off the attention module
            names += [f"{base.removesuffix('o_proj')}{p}" for p in KV_PARAMS]
        out += [TensorSpec(n, t[n].shape, required=False) for n in names if n in t]
    return out
