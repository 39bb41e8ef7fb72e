"""Stored tensors as each judged profile's loader takes them (the ``weights`` fates of its reading): a name
stored with a leading ``model.``, a tensor the config gives no use. One finding per statement, naming the
profiles it holds for (:mod:`.holds`); with no judged profile reaching its loader, a finding about the files."""

from __future__ import annotations

from eaglehub.checks.context import Context
from eaglehub.checks.holds import Said, per_profile
from eaglehub.findings import Finding, finding
from eaglehub.profiles.reading import FATAL, IGNORED, SKIPPED, Reading


def check_prefix(ctx: Context) -> list[Finding]:
    """Names stored with a leading ``model.`` (docs/vllm.md §4.2), per judged profile as its loader takes them:
    vLLM prefixes every name but ``lm_head`` with ``model.`` itself (0.33.0 model_executor/models/llama_eagle3.py
    L443-444, as 0.32.0) and its AutoWeightsLoader raises on the doubled name; SGLang tries the name as stored
    before adding ``model.`` (0.5.23 srt/models/llama_eagle3.py L362, L372), so ``model.fc.weight`` loads and
    only a name with no parameter under either spelling (``model.lm_head.weight``) is skipped without a word,
    leaving that parameter as initialised. A profile whose loader takes every such name gets nothing."""
    idx = ctx.drafter.index
    if not idx.stripped_prefix:
        return []
    bad = [i.source_name for i in idx.tensors.values() if i.source_name != i.name]
    head = f"{len(bad)} tensor name(s) start with 'model.' (e.g. {bad[0]})"
    hint = "store un-prefixed names (fc.weight, midlayer.*, ...)"

    def say(r: Reading) -> list[Said]:
        fates = {w.stored: w.fate for w in r.weights}
        if any(fates.get(n) == FATAL for n in bad):
            return [
                Said(
                    "E-TENSOR-PREFIX",
                    bad[0],
                    f"{head}: the loader adds its own 'model.' and raises on the doubled name",
                    hint,
                )
            ]
        lost = [n for n in bad if fates.get(n) == IGNORED]
        if lost:
            message = (
                f"{head}: the loader takes the prefixed names it has a parameter for, but skips "
                f"{', '.join(lost)} without a word (no parameter under that name), which stays as initialised"
            )
            return [Said("E-TENSOR-PREFIX", bad[0], message, hint)]
        return []

    found = per_profile(ctx, say)
    if found or any(r.weights for r in ctx.readings.values()):
        return found
    # no judged profile reaches its loader: the names are the layouts' fault, whatever an engine then does
    return [finding("E-TENSOR-PREFIX", bad[0], f"{head}: every layout stores names without it", hint)]


#: unused codes whose statement is what a loader does with the tensor, judged per profile from its fate
PER_FATE = frozenset({"E-QKNORM-UNUSED", "E-INPUTNORM-UNUSED", "W-FCNORM-UNUSED"})


def unused(ctx: Context, code: str, name: str, message: str, hint: str) -> list[Finding]:
    """A tensor the drafter's config gives no use: per judged profile, what its loader does with the stored
    tensor (vLLM's AutoWeightsLoader raises on a name with no parameter unless the class maps it away, e.g.
    ``input_norm.`` without norm_before_fc, llama_eagle3.py L457-470; SGLang skips any name with no parameter,
    srt/models/llama_eagle3.py L358-378), where its reading of the switches leaves it unused; a profile that
    loads it (SGLang reads ``use_aux_norm`` as fc_norm) gets nothing. With no profile reaching its loader the
    statement stays about the files."""
    if code not in PER_FATE:
        return [finding(code, name, message, hint)]
    stored = ctx.drafter.index.tensors[name].source_name if name in ctx.drafter.index.tensors else name
    effect = {
        FATAL: "the loader has no parameter for it and raises",
        IGNORED: "the engine builds no parameter for it and skips it without a word",
        SKIPPED: "the engine builds no parameter for it and skips it",
    }

    def say(r: Reading) -> list[Said]:
        fate = next((w.fate for w in r.weights if w.stored == stored), None)
        if fate not in effect:
            return []
        # a loader that raises on it fails the load: an error on that profile whatever the file-level severity
        said = "E-ENGINE-WEIGHT" if fate == FATAL and code.startswith("W-") else code
        return [Said(said, name, f"{message}: {effect[fate]}", hint)]

    found = per_profile(ctx, say)
    return found if found or any(r.weights for r in ctx.readings.values()) else [finding(code, name, message, hint)]
