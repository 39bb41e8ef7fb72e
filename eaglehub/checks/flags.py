"""EAGLE-3.1 switches and other flags: where they are written and what they imply."""

from __future__ import annotations

import json
from dataclasses import dataclass

from eaglehub.checks.config import stored_config
from eaglehub.checks.context import Context
from eaglehub.drafter.canonical import nested_config
from eaglehub.findings import Finding, finding

#: top-level switches vLLM reads only at the top level of a flat config (docs/vllm.md §3; ``norm_before_fc``
#: is read nested too, so it is W-INPUTNORM-NESTED there) -> the value vLLM uses when absent
#: (``None``: derived from other fields, so any stated value matters)
FLAT_TOP_ONLY = {
    "fc_norm": False,
    "norm_output": False,
    "norm_before_residual": False,
    "target_hidden_size": None,
    "draft_vocab_size": None,
    "num_aux_hidden_states": None,
}


#: switches vLLM's speculators adapter copies from the top level only, overwriting the layer
#: config's value with the top-level one or its default (vLLM ``configs/speculators/algos.py``)
SPECULATORS_TOP_ONLY = {
    "fc_norm": False,
    "norm_output": False,
    "norm_before_fc": False,
    "norm_before_residual": True,
    "draft_vocab_size": None,
}


def misplaced_flags(d) -> list[tuple[str, str, object]]:
    """``[(where, key, value)]``: switches stored only in a sub-config vLLM does not read them from,
    holding a value other than the one vLLM then uses (F16, F17). ``where`` is the sub-config's key.

    Flat layouts: keys of :data:`FLAT_TOP_ONLY` inside ``eagle_config``; speculators: keys of
    :data:`SPECULATORS_TOP_ONLY` inside ``transformer_layer_config``. Works on the stored config
    (``raw_config``), since format readers may already have lifted such keys.
    """
    raw = d.raw_config or d.config
    if d.format == "speculators":
        where, table = "transformer_layer_config", SPECULATORS_TOP_ONLY
    else:
        where, table = "eagle_config", FLAT_TOP_ONLY
    sub = raw.get(where) if isinstance(raw.get(where), dict) else {}
    out = []
    for key, default in table.items():
        if sub.get(key) is not None and key not in raw:  # null states nothing
            derived = {
                "target_hidden_size": d.dims.H,
                "draft_vocab_size": d.dims.V,
                "num_aux_hidden_states": 3,
            }.get(key)
            if sub[key] != (default if default is not None else derived):
                out.append((where, key, sub[key]))
    return out


@dataclass(frozen=True)
class ProducerChange:
    """A producer that changed what a config switch means: checkpoints of its ``layout`` with ``key`` =
    ``value`` may have been written under the old meaning (``before``), which vLLM reads as ``vllm_reads``;
    ``trained`` is what such a checkpoint was trained with, ``fix`` the setting that serves it as trained."""

    layout: str
    key: str
    value: object
    before: str
    trained: str
    vllm_reads: str
    fix: object


#: docs/formats.md §4 ("Producers that changed a switch's meaning")
PRODUCER_CHANGES = (
    ProducerChange(
        "specforge",
        "norm_output",
        True,
        "SpecForge before its PR #879 (merged 2026-09-15)",
        "EAGLE-3's pre-norm feedback (the state before the final norm fed to the next draft step)",
        "EAGLE-3.1's post-norm feedback",
        False,
    ),
)


def _producer_changes(ctx: Context) -> list[Finding]:
    """W-PRODUCER-FLAG: a switch whose producer once wrote it with another meaning; the weights know which, so
    the hint is the probe that asks them and the config edit for the old meaning."""
    import shlex

    from eaglehub.checks.context import set_command
    from eaglehub.io.provenance import producer, written_by_eaglehub

    d, out = ctx.drafter, []
    target = shlex.quote(str(ctx.target.path)) if ctx.target is not None else "TARGET"
    # the producer eaglehub.json records, so the rule follows a drafter converted to another layout; a value an
    # eaglehub conversion wrote (--to 3.1, --set) means what eaglehub meant
    made_by = producer(d.provenance, d.format)
    for change in PRODUCER_CHANGES:
        if made_by != change.layout or d.config.get(change.key) != change.value:
            continue
        if written_by_eaglehub(d.provenance, change.key, change.value):
            continue
        where = change.layout if d.format == made_by else f"{change.layout} (converted to {d.format})"
        out.append(
            finding(
                "W-PRODUCER-FLAG",
                change.key,
                f"{change.key} is {json.dumps(change.value)} in a {where} checkpoint: {change.before} wrote "
                f"that for drafters trained with {change.trained}; vLLM reads it as {change.vllm_reads}",
                f"ask the weights: eaglehub probe {shlex.quote(str(d.path))} --target {target} --field {change.key}; "
                f"if the other reading wins: {set_command(ctx, change.key, change.fix)}",
            )
        )
    return out


def check_flags(ctx: Context) -> list[Finding]:
    """Where the switches live (E-FLAG-MISPLACED, W-INPUTNORM-NESTED), which combinations engines
    disagree on (W-NORMS-BOTH); docs/formats.md §4, docs/vllm.md §2–§3."""
    d, out = ctx.drafter, []
    for where, key, value in misplaced_flags(d):
        out.append(
            finding(
                "E-FLAG-MISPLACED",
                f"{where}.{key}",
                f"{key} = {value!r} is stored only in {where}, which vLLM does not read for it: vLLM runs the drafter as if it were unset",
            )
        )
    raw = stored_config(ctx)
    nested = nested_config(raw)
    if d.format != "speculators" and nested.get("norm_before_fc") is True and "norm_before_fc" not in raw:
        out.append(
            finding(
                "W-INPUTNORM-NESTED",
                "eagle_config.norm_before_fc",
                "norm_before_fc is set only inside eagle_config: vLLM reads it there, engines and converters that read the top "
                "level skip input_norm (vLLM PR #38111, #42143)",
            )
        )
    if d.flags.norm_before_fc and d.flags.fc_norm:
        out.append(
            finding(
                "W-NORMS-BOTH",
                "norm_before_fc",
                "norm_before_fc and fc_norm are both true: vLLM applies input_norm, then fc_norm; "
                "speculators refuses the pair, so training code may have applied only one",
            )
        )
    return out + _producer_changes(ctx)
