"""The config readings a drafter's tensors cannot tell apart (docs/probe.md §1).

Each *field* is a switch that changes what the drafter computes without changing its tensors; each
*reading* of a field is one value of it, written as the config edits that give it
(:mod:`eaglehub.drafter.settings`). The configured reading is always among them.

* ``aux_layer_ids`` (``eagle_aux_hidden_state_layer_ids``): the ids as vLLM reads them (C-in), the
  list read in the other convention, one layer up and down, and the target's defaults; only lists of
  the fc's width, of distinct ids, inside the target's ``0 … N`` hidden states.
* ``norm_output``: off and on.
* ``pre_fc_norm``: the pre-FC norm the tensors allow: ``fc_norm`` where ``fc_norm.{i}.weight`` are
  stored, ``norm_before_fc`` where ``input_norm.weight`` is, both where both are, and none.
* ``norm_before_residual``: off and on.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from eaglehub.drafter.canonical import AUX_KEY, C_OUT, default_aux_ids, nested_config

AUX = "aux_layer_ids"
NORM_OUTPUT = "norm_output"
PRE_FC_NORM = "pre_fc_norm"
NORM_BEFORE_RESIDUAL = "norm_before_residual"
FIELDS = (AUX, NORM_OUTPUT, PRE_FC_NORM, NORM_BEFORE_RESIDUAL)
"""Every field a probe can measure, in the order it measures them."""

FIELD_KEYS = {
    AUX: AUX_KEY,
    NORM_OUTPUT: "norm_output",
    PRE_FC_NORM: "fc_norm / norm_before_fc",
    NORM_BEFORE_RESIDUAL: "norm_before_residual",
}
"""The config field(s) each probe field stands for, as findings name them."""

PRE_FC_READINGS = ("fc_norm", "norm_before_fc", "both", "none")


@dataclass(frozen=True)
class Reading:
    """One value of one field: ``value`` (JSON), how it relates to the config (``label``) and the
    config edits that give it (``settings``; empty for the configured reading)."""

    field: str
    value: Any
    label: str
    settings: dict[str, Any] = dataclass_field(default_factory=dict)
    configured: bool = False


def configured_values(d, num_layers: int) -> dict[str, Any]:
    """The value of every field as the drafter's config gives it, the way vLLM reads it."""
    f = d.flags
    pre = (
        "both"
        if f.fc_norm and f.norm_before_fc
        else "fc_norm"
        if f.fc_norm
        else "norm_before_fc"
        if f.norm_before_fc
        else "none"
    )
    return {
        AUX: list(d.aux.c_in) if d.aux.c_in else default_aux_ids(num_layers),
        NORM_OUTPUT: f.norm_output,
        PRE_FC_NORM: pre,
        NORM_BEFORE_RESIDUAL: f.norm_before_residual,
    }


def field_readings(d, num_layers: int, fields: tuple[str, ...] = FIELDS) -> dict[str, list[Reading]]:
    """Every reading of every field in ``fields`` that the tensors allow; a field with one reading is
    left out (nothing to tell apart). ``d``: a canonical drafter; ``num_layers``: the target's."""
    values = configured_values(d, num_layers)
    out: dict[str, list[Reading]] = {}
    makers: dict[str, Any] = {AUX: _aux, NORM_OUTPUT: _flag, PRE_FC_NORM: _pre_fc, NORM_BEFORE_RESIDUAL: _flag}
    for name in fields:
        readings = makers[name](d, name, values[name], num_layers)
        if len(readings) > 1:
            out[name] = readings
    return out


def _flag(d, name: str, value: bool, _num_layers: int) -> list[Reading]:
    return [
        Reading(name, value, "as configured", configured=True),
        Reading(name, not value, "flipped", {name: not value}),
    ]


def _aux(d, name: str, ids: list[int], num_layers: int) -> list[Reading]:
    """The configured list, then the other convention, ±1 and the target's defaults (one of ±1 is the
    other convention: a C-in list read as C-out is one layer up)."""
    width = len(ids)
    stored_c_out = d.aux.convention == C_OUT
    other = [i - 1 for i in ids] if stored_c_out else [i + 1 for i in ids]
    candidates = [
        (ids, "as configured"),
        (other, "other convention (C-in ↔ C-out)"),
        ([i + 1 for i in ids], "one layer up"),
        ([i - 1 for i in ids], "one layer down"),
        (default_aux_ids(num_layers), "target default"),
    ]
    readings: list[Reading] = []
    seen: list[list[int]] = []
    for cand, label in candidates:
        distinct = cand == sorted(set(cand))  # a small target's defaults repeat ids: not a reading
        if len(cand) != width or not distinct or not all(0 <= i <= num_layers for i in cand) or cand in seen:
            continue
        seen.append(cand)
        configured = cand == ids
        # the top-level list: vLLM reads it before a nested one, and as C-in
        readings.append(Reading(name, cand, label, {} if configured else {AUX_KEY: cand}, configured))
    return readings


def _pre_fc(d, name: str, value: str, _num_layers: int) -> list[Reading]:
    """The pre-FC norms the stored weights can be read as (never a norm without its weights)."""
    has_fc_norm = any(n.startswith("fc_norm.") for n in d.tensors)
    has_input_norm = "input_norm.weight" in d.tensors
    allowed = {"none"}
    if has_fc_norm:
        allowed.add("fc_norm")
    if has_input_norm:
        allowed.add("norm_before_fc")
    if has_fc_norm and has_input_norm:
        allowed.add("both")
    allowed.add(value)  # the configured one, even where its weights are missing (validate says so)
    nested_nbf = "norm_before_fc" in nested_config(d.config)
    nbf_key = "eagle_config.norm_before_fc" if nested_nbf else "norm_before_fc"
    readings = []
    for reading in PRE_FC_READINGS:
        if reading not in allowed:
            continue
        settings = {
            "fc_norm": reading in ("fc_norm", "both"),
            nbf_key: reading in ("norm_before_fc", "both"),
        }
        configured = reading == value
        label = "as configured" if configured else f"read as {reading}"
        readings.append(Reading(name, reading, label, {} if configured else settings, configured))
    return readings


def settings_of(readings: dict[str, Reading]) -> dict[str, Any]:
    """The config edits of one reading per field, merged."""
    merged: dict[str, Any] = {}
    for r in readings.values():
        merged.update(r.settings)
    return merged
