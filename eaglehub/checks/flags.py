"""EAGLE-3.1 switches and other flags: where they are written and what they imply."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass

from eaglehub.checks.config import stored_config
from eaglehub.checks.context import Context
from eaglehub.checks.holds import Said, holding, per_profile
from eaglehub.drafter.canonical import nested_config
from eaglehub.findings import Finding
from eaglehub.profiles.reading import Reading

#: switches the drafter classes read only at the top level of a flat config (docs/vllm.md §3): vLLM 0.33.0
#: llama_eagle3.py / qwen3_eagle3.py ``getattr(config, ...)``; SGLang 0.5.23 srt/models/llama_eagle3.py L151,
#: L157, L185, L207 (it takes the aux count from the nested id list's length, L159-161, and has no
#: norm_before_residual switch at all). ``norm_before_fc`` is read nested first by both, so it is
#: W-INPUTNORM-NESTED there. -> the value used when absent (``None``: derived from other fields)
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
    """``[(where, key, value)]``: switches stored only in a sub-config the drafter classes do not read them
    from, holding a value other than the one used when absent (F16, F17). ``where`` is the sub-config's key.

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
    ``value`` may have been written under the old meaning (``before``), which the engines read as ``reads``;
    ``trained`` is what such a checkpoint was trained with, ``fix`` the setting that serves it as trained."""

    layout: str
    key: str
    value: object
    before: str
    trained: str
    reads: str
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


def _built(r: Reading) -> bool:
    """The profile builds an EAGLE-3 drafter class with an ``fc`` (not stopped at its config, not a target
    class): only then do its switches mean anything."""
    return r.model_class is not None and r.num_aux_hidden_states is not None


def _held(ctx: Context, said: list[Said], holds: Callable[[Reading], bool], alone: str) -> list[Finding]:
    """:func:`holding` where only a judged profile that builds no drafter class leaves the statement to the
    files (``alone``): a profile that builds one and does not do what ``said`` states gets nothing."""
    built = any(_built(r) for r in ctx.readings.values())
    return holding(ctx, said, lambda r: _built(r) and holds(r), None if built else alone)


def _reads_as(change: ProducerChange, r: Reading) -> bool:
    return bool(getattr(r, change.key) == change.value)


def _producer_changes(ctx: Context) -> list[Finding]:
    """W-PRODUCER-FLAG: a switch whose producer once wrote it with another meaning; the weights know which, so
    the hint is the probe that asks them and the config edit for the old meaning. Per judged profile that
    reads the switch as stored (norm_output at the top level: vLLM 0.33.0 llama_eagle3.py L252, L286;
    SGLang 0.5.23 srt/models/llama_eagle3.py L207, L267-268, both post-norm feedback when true)."""
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
        head = (
            f"{change.key} is {json.dumps(change.value)} in a {where} checkpoint: {change.before} wrote "
            f"that for drafters trained with {change.trained}"
        )
        hint = (
            f"ask the weights: eaglehub probe {shlex.quote(str(d.path))} --target {target} --field {change.key}; "
            f"if the other reading wins: {set_command(ctx, change.key, change.fix)}"
        )
        said = [Said("W-PRODUCER-FLAG", change.key, f"{head}; the engine reads it as {change.reads}", hint)]
        out += _held(
            ctx,
            said,
            functools.partial(_reads_as, change),
            alone=f"{head}; vLLM and SGLang read it as {change.reads}",
        )
    return out


def _misplaced(ctx: Context) -> list[Finding]:
    """E-FLAG-MISPLACED per judged profile whose drafter class then runs with another value than the one
    stored in the sub-config (the reading's own value for the key); a profile stopped at its config (SGLang
    on a speculators checkpoint) says nothing past that point."""
    found = misplaced_flags(ctx.drafter)
    if not found:
        return []

    def say(r: Reading) -> list[Said]:
        out = []
        for where, key, value in found:
            used = getattr(r, key)
            if _built(r) and used != value:
                out.append(
                    Said(
                        "E-FLAG-MISPLACED",
                        f"{where}.{key}",
                        f"{key} = {value!r} is stored only in {where}, which the engine does not read it from: "
                        f"it runs the drafter with {key} = {used!r}",
                    )
                )
        return out

    return per_profile(ctx, say)


def check_flags(ctx: Context) -> list[Finding]:
    """Where the switches live (E-FLAG-MISPLACED, W-INPUTNORM-NESTED), which combinations training code
    disagrees on (W-NORMS-BOTH); docs/formats.md §4, docs/vllm.md §2–§3."""
    d = ctx.drafter
    out = _misplaced(ctx)
    raw = stored_config(ctx)
    nested = nested_config(raw)
    if d.format != "speculators" and nested.get("norm_before_fc") is True and "norm_before_fc" not in raw:
        # both engines read the nested value first: vLLM 0.33.0 llama_eagle3.py L184-188 (qwen3_eagle3.py
        # L175-178, and 0.32.0 alike), SGLang 0.5.23 srt/models/llama_eagle3.py L173-175
        tail = "converters and training code that read only the top level skip input_norm (vLLM PR #38111, #42143)"
        out += _held(
            ctx,
            [
                Said(
                    "W-INPUTNORM-NESTED",
                    "eagle_config.norm_before_fc",
                    f"norm_before_fc is set only inside eagle_config: the engine reads it there and applies "
                    f"input_norm; {tail}",
                )
            ],
            lambda r: r.norm_before_fc,
            alone=f"norm_before_fc is set only inside eagle_config: vLLM and SGLang read it there; {tail}",
        )
    if (d.flags.norm_before_fc and d.flags.fc_norm) or any(
        _built(r) and r.norm_before_fc and r.fc_norm for r in ctx.readings.values()
    ):
        # the same order in every engine: vLLM 0.33.0 llama_eagle3.py L405-416, SGLang 0.5.23
        # srt/models/llama_eagle3.py L238-246
        tail = "speculators refuses the pair, so training code may have applied only one"
        out += _held(
            ctx,
            [
                Said(
                    "W-NORMS-BOTH",
                    "norm_before_fc",
                    f"norm_before_fc and fc_norm are both on: the engine applies input_norm, then fc_norm; {tail}",
                )
            ],
            lambda r: r.norm_before_fc and r.fc_norm,
            alone=f"norm_before_fc and fc_norm are both true: vLLM and SGLang apply input_norm, then fc_norm; {tail}",
        )
    return out + _producer_changes(ctx)
