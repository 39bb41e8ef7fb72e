"""The tensors a Llama-style EAGLE-3 drafter config implies, with their shapes (formats.md §1, vllm.md §14).

Shapes are ``[out, in]``. ``None`` inside a shape means the config lacks the field (then only
presence is checked; the config schema reports the missing field).
"""

from __future__ import annotations

from dataclasses import dataclass

from .drafter import LAYER0, Drafter


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


def _layer(prefix: str, d, width_in: int | None, hidden_norm: bool) -> list[TensorSpec]:
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
    if d.attention_bias:
        specs += [TensorSpec(f"{prefix}self_attn.{p}_proj.bias", (n,)) for p, n in (("q", q), ("k", kv), ("v", kv))]
    if d.mlp_bias:
        specs += [TensorSpec(f"{prefix}mlp.{p}_proj.bias", (n,)) for p, n in (("gate", d.I), ("up", d.I), ("down", d.H))]
    return specs


def expected_tensors(drafter: Drafter) -> list[TensorSpec]:
    """Every tensor the drafter's config implies or allows, by canonical name.

    Rules: ``fc [H, A·Ht]``; layer 0 (``midlayer.``) reads ``2H`` and has ``hidden_norm``; layers
    ``1..L-1`` are plain Llama layers; ``lm_head [Vd, H]``; ``d2t [Vd]`` required iff ``Vd < V``;
    ``t2d [V]`` optional; ``embed_tokens [V, H]`` required iff ``H != Ht``; ``fc_norm.{i} [Ht]``
    iff ``fc_norm``; ``input_norm [A·Ht]`` iff ``norm_before_fc`` (formats.md §1, §2, §4).
    """
    d, f = drafter.dims, drafter.flags
    pruned = d.Vd is not None and d.V is not None and d.Vd < d.V
    specs = [TensorSpec("fc.weight", (d.H, _mul(d.A, d.Ht)))]
    specs += _layer(LAYER0, d, _mul(2, d.H), hidden_norm=True)
    for i in range(1, d.layers):
        specs += _layer(f"layers.{i}.", d, d.H, hidden_norm=False)
    specs += [
        TensorSpec("norm.weight", (d.H,)),
        TensorSpec("lm_head.weight", (d.Vd, d.H), missing_code="E-LMHEAD-MISSING"),
        TensorSpec("d2t", (d.Vd,), required=pruned, missing_code="E-D2T-MISSING"),
        TensorSpec("t2d", (d.V,), required=False),
        TensorSpec("embed_tokens.weight", (d.V, d.H), required=d.H != d.Ht, missing_code="E-EMBED-MISSING"),
        TensorSpec("input_norm.weight", (_mul(d.A, d.Ht),), required=f.norm_before_fc,
                   missing_code="E-INPUTNORM-MISSING", unused_code=None if f.norm_before_fc else "E-INPUTNORM-UNUSED"),
    ]
    specs += [
        TensorSpec(f"fc_norm.{i}.weight", (d.Ht,), required=f.fc_norm, missing_code="E-FCNORM-MISSING",
                   unused_code=None if f.fc_norm else "W-FCNORM-UNUSED")
        for i in range(d.A)
    ]
    return specs
