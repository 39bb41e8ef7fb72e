"""Config dimensions the tensors contradict (E-CONFIG-DIM): the field at fault, not one shape error per tensor.

A wrong ``hidden_size`` shows up as a wrong shape on nearly every tensor, a wrong ``head_dim`` on q/k/v/o.
Each shape the tensors store that a config field sets is evidence of what the field should be: the
rows of ``norm.weight`` are ``hidden_size``, the rows of ``k_proj`` are ``num_key_value_heads · head_dim``
(docs/formats.md §1, §5). A candidate value is accepted only when the drafter, re-read with it, has
strictly fewer tensors that disagree with the config and none that newly do: a field that merely looks
wrong next to another wrong field is never blamed. Accepted candidates are applied one after another
(the one that settles the most tensors first), so two wrong fields are two findings, and the tensors a
fix settles are no longer reported one by one (:func:`eaglehub.checks.tensors.check_expected`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from eaglehub.drafter.canonical import LAYER0, MLA, Drafter, derive_dims, layer_kind, read_flags
from eaglehub.drafter.shapes import expected_tensors, mla_dims

_A = f"{LAYER0}self_attn."
_M = f"{LAYER0}mlp."

Shape = tuple[int, ...]
#: (field, tensor, value from the tensor's shape and the drafter as configured); a value of None: no evidence
Evidence = tuple[str, str, Callable[[Shape, Drafter], int | None]]


def _div(a: int, b: int | None) -> int | None:
    return a // b if b and a % b == 0 and a >= b else None


def _sub(a: int, b: int | None) -> int | None:
    return a - b if b is not None and a > b else None


_LLAMA: list[Evidence] = [
    ("hidden_size", "norm.weight", lambda s, d: s[0]),
    ("hidden_size", f"{LAYER0}input_layernorm.weight", lambda s, d: s[0]),
    ("hidden_size", "lm_head.weight", lambda s, d: s[1]),
    ("target_hidden_size", "fc_norm.0.weight", lambda s, d: s[0]),
    ("target_hidden_size", "fc.weight", lambda s, d: _div(s[1], d.dims.A)),
    ("intermediate_size", f"{_M}gate_proj.weight", lambda s, d: s[0]),
    ("intermediate_size", f"{_M}down_proj.weight", lambda s, d: s[1]),
    ("head_dim", f"{_A}k_proj.weight", lambda s, d: _div(s[0], d.dims.nkv)),
    ("head_dim", f"{_A}q_proj.weight", lambda s, d: _div(s[0], d.dims.nh)),
    ("num_attention_heads", f"{_A}q_proj.weight", lambda s, d: _div(s[0], d.dims.head_dim)),
    ("num_attention_heads", f"{_A}o_proj.weight", lambda s, d: _div(s[1], d.dims.head_dim)),
    ("num_key_value_heads", f"{_A}k_proj.weight", lambda s, d: _div(s[0], d.dims.head_dim)),
    ("draft_vocab_size", "lm_head.weight", lambda s, d: s[0]),
    ("draft_vocab_size", "d2t", lambda s, d: s[0]),
    ("vocab_size", "t2d", lambda s, d: s[0]),
    ("vocab_size", "embed_tokens.weight", lambda s, d: s[0]),
]


def _mla(field: str, d: Drafter) -> int | None:
    return getattr(mla_dims(d.config), field)


_MLA: list[Evidence] = [
    *[e for e in _LLAMA if e[0] not in ("head_dim", "num_attention_heads", "num_key_value_heads")],
    ("q_lora_rank", f"{_A}q_a_proj.weight", lambda s, d: s[0]),
    ("q_lora_rank", f"{_A}q_a_layernorm.weight", lambda s, d: s[0]),
    ("kv_lora_rank", f"{_A}kv_a_layernorm.weight", lambda s, d: s[0]),
    ("kv_lora_rank", f"{_A}kv_b_proj.weight", lambda s, d: s[1]),
    ("qk_rope_head_dim", f"{_A}kv_a_proj_with_mqa.weight", lambda s, d: _sub(s[0], _mla("kv_lora", d))),
    ("v_head_dim", f"{_A}o_proj.weight", lambda s, d: _div(s[1], d.dims.nh)),
    (
        "qk_nope_head_dim",
        f"{_A}kv_b_proj.weight",
        lambda s, d: _sub(_div(s[0], d.dims.nh) or 0, _mla("v_head", d)),
    ),
    ("num_attention_heads", f"{_A}o_proj.weight", lambda s, d: _div(s[1], _mla("v_head", d))),
    (
        "num_attention_heads",
        f"{_A}kv_b_proj.weight",
        lambda s, d: _div(s[0], (_mla("qk_nope", d) or 0) + (_mla("v_head", d) or 0)),
    ),
]


@dataclass(frozen=True)
class DimFix:
    """One config field the tensors contradict: ``key`` (as written in config.json, dotted when nested),
    its configured ``value`` (``None`` when absent: then a default or a derived value was used, ``used``),
    the ``implied`` value, the ``evidence`` (tensor name → stored shape) and the tensors whose shapes it
    settles (``settles``)."""

    field: str
    key: str
    value: object
    used: int | None
    implied: int
    evidence: dict[str, list[int]]
    settles: tuple[str, ...]


def disagreeing(drafter: Drafter) -> set[str]:
    """The tensors whose stored shape differs from the shape ``drafter``'s config implies, and the required ones
    missing."""
    tensors, out = drafter.tensors, set()
    for spec in expected_tensors(drafter):
        info = tensors.get(spec.name)
        if info is None:
            if spec.required:
                out.add(spec.name)
        elif len(info.shape) != len(spec.shape) or any(
            e is not None and e != a for e, a in zip(spec.shape, info.shape)
        ):
            out.add(spec.name)
    return out


def with_value(drafter: Drafter, field: str, value: int) -> Drafter:
    """``drafter`` as its config would read with ``field`` set to ``value`` (its tensors unchanged)."""
    cfg = {**drafter.config, field: value}
    return dataclasses.replace(drafter, config=cfg, dims=derive_dims(cfg), flags=read_flags(cfg))


def _used(drafter: Drafter, field: str) -> int | None:
    d = drafter.dims
    by_dims = {
        "hidden_size": d.H,
        "target_hidden_size": d.Ht,
        "intermediate_size": d.I,
        "head_dim": d.head_dim,
        "num_attention_heads": d.nh,
        "num_key_value_heads": d.nkv,
        "draft_vocab_size": d.Vd,
        "vocab_size": d.V,
    }
    if field in by_dims:
        return by_dims[field]
    return getattr(mla_dims(drafter.config), _MLA_ATTR[field])


_MLA_ATTR = {
    "q_lora_rank": "q_lora",
    "kv_lora_rank": "kv_lora",
    "qk_nope_head_dim": "qk_nope",
    "qk_rope_head_dim": "qk_rope",
    "v_head_dim": "v_head",
}


def _candidates(drafter: Drafter) -> Iterator[tuple[str, int, dict[str, list[int]]]]:
    """(field, value, evidence) for every value a stored shape implies that differs from the one in use."""
    table = _MLA if layer_kind(drafter.config) == MLA else _LLAMA
    found: dict[tuple[str, int], dict[str, list[int]]] = {}
    for field, name, value_of in table:
        info = drafter.tensors.get(name)
        if info is None:
            continue
        shape = tuple(int(x) for x in info.shape)
        try:
            value = value_of(shape, drafter)
        except IndexError:  # a tensor of the wrong rank is no evidence
            continue
        if value is None or value <= 0 or value == _used(drafter, field):
            continue
        found.setdefault((field, value), {})[name] = list(shape)
    for (field, value), evidence in found.items():
        yield field, value, evidence


_LLAMA_ATTENTION = tuple(f"{_A}{p}_proj.weight" for p in ("q", "k", "v"))
_MLA_ATTENTION = tuple(f"{_A}{p}.weight" for p in ("kv_a_proj_with_mqa", "kv_b_proj"))


def llama_attention_under_mla(drafter: Drafter) -> tuple[str, ...]:
    """The Llama attention tensors (q/k/v_proj) of a drafter whose config names an MLA layer and which stores none
    of MLA's (:mod:`eaglehub.checks.attention`); empty otherwise."""
    if layer_kind(drafter.config) != MLA:
        return ()
    held = set(drafter.names)
    if any(n in held for n in _MLA_ATTENTION):
        return ()
    return tuple(n for n in _LLAMA_ATTENTION if n in held)


def implied_values(drafter: Drafter, field: str) -> set[int]:
    """Every value the stored shapes imply for ``field`` that differs from the one in use (none used: all of them)."""
    return {value for f, value, _ in _candidates(drafter) if f == field}


def config_key(drafter: Drafter, field: str) -> str:
    """Where ``field`` is written in the stored config.json: top level, or dotted inside the one nested
    object that holds it (a speculators ``transformer_layer_config``); top level when it is absent."""
    raw = drafter.raw_config
    if field in raw:
        return field
    nested = [k for k, v in raw.items() if isinstance(v, dict) and field in v]
    return f"{nested[0]}.{field}" if len(nested) == 1 else field


def dimension_fixes(drafter: Drafter) -> list[DimFix]:
    """The config fields the tensors contradict, in the order they were settled (module doc). None where the
    config names another attention than the tensors are (:mod:`eaglehub.checks.attention`): the class is at
    fault, and no dimension of the wrong kind is a fix."""
    if llama_attention_under_mla(drafter):
        return []
    bad = disagreeing(drafter)
    fixes: list[DimFix] = []
    current = drafter
    while bad:
        best: tuple[int, str, int, dict, Drafter, set[str]] | None = None
        for field, value, evidence in _candidates(current):
            trial = with_value(current, field, value)
            left = disagreeing(trial)
            if left < bad and (best is None or len(bad - left) > best[0]):
                best = (len(bad - left), field, value, evidence, trial, left)
        if best is None:
            break
        _, field, value, evidence, trial, left = best
        key = config_key(drafter, field)
        fixes.append(
            DimFix(
                field,
                key,
                _stored(drafter, key),
                _used(current, field),
                value,
                evidence,
                tuple(sorted(bad - left)),
            )
        )
        current, bad = trial, left
    return fixes


def _stored(drafter: Drafter, key: str) -> object:
    node: object = drafter.raw_config
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node
