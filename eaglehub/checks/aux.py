"""Aux hidden-state layer ids: distinct, sorted, in range, count == A == fc width / Ht; convention
(docs/formats.md §3, docs/vllm.md §7, §11; F10, F11). vLLM's defaults are checked when the drafter has no list;
with a target, an explicit list is compared with those defaults (F12)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TypeGuard

from eaglehub.checks.context import Context, set_command
from eaglehub.checks.holds import Said, captures, holding, per_profile
from eaglehub.drafter.canonical import AUX_KEY, C_IN, C_OUT, UNKNOWN, default_aux_ids, infer_convention
from eaglehub.findings import Finding, finding
from eaglehub.profiles.reading import Reading
from eaglehub.profiles.registry import VLLM

NESTED = f"eagle_config.{AUX_KEY}"


def _hidden_undeclared(ctx: Context) -> list[Finding]:
    d = ctx.drafter.dims
    fc = ctx.drafter.tensors.get("fc.weight")
    if d.Ht_declared or fc is None or len(fc.shape) != 2 or not d.H or fc.shape[1] == d.A * d.H or fc.shape[1] % d.A:
        return []
    ht = fc.shape[1] // d.A
    return [
        finding(
            "E-HIDDEN-UNDECLARED",
            "target_hidden_size",
            f"fc.weight is {list(fc.shape)}: Ht = {fc.shape[1]}/{d.A} = {ht}, but config has no target_hidden_size (engines then use hidden_size {d.H})",
            f"the fc width gives it: {set_command(ctx, 'target_hidden_size', ht)}",
        )
    ]


#: How every judged engine captures aux states, the same in each: the target keeps the set of listed layers and
#: appends a state when its layer loop reaches one, so a repeated id is captured once and the states arrive in
#: ascending layer order whatever the list's order. vLLM 0.33.0 model_executor/models/interfaces.py L1616-1617
#: (``sorted(set(layers))``), L1640-1649 and llama.py L427-441 (0.32.0: interfaces.py L1577-1578, L1601-1610);
#: SGLang 0.5.23 srt/models/llama.py L485-494 (``i in self.layers_to_capture`` in the layer loop), L929-941.
CAPTURE = "the target captures each listed layer once, in ascending layer order"


def _capture_said(ids: list[int], subject: str, ordered: bool) -> list[Said]:
    """What the capture rule (:data:`CAPTURE`) does with a repeated or unsorted id list."""
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        return [
            Said(
                "E-AUX-DUPLICATE",
                subject,
                f"aux-layer ids {ids} repeat {dup}: {CAPTURE}, so it captures fewer states than fc expects and the first "
                "draft step fails on fc's width",
                "write distinct, sorted C-in ids at the top level (eagle_aux_hidden_state_layer_ids)",
            )
        ]
    if ordered and ids != sorted(ids):
        return [
            Said(
                "E-AUX-ORDER",
                subject,
                f"aux-layer ids {ids} are not ascending: {CAPTURE} ({sorted(ids)}), and fc reads the states in that order",
                f"write {sorted(ids)} (and make sure fc blocks follow that order)",
            )
        ]
    return []


def _capture(ctx: Context, said: list[Said], reads: Callable[[Reading], bool], alone: bool = True) -> list[Finding]:
    """``said`` (one statement) for the judged profiles whose runner captures the list (``reads``). Without one
    (those that do not read it are E-/W-AUX-IGNORED's), ``alone``: a finding about the list itself, in words that
    hold for every engine."""
    if not said:
        return []
    engine = "an engine that reads this list captures"
    message = said[0].message.replace("the target captures", engine, 1).replace("this runner captures", engine, 1)
    return holding(ctx, said, reads, message if alone else None)


def check_ids(ids: list[int], subject: str, n_layers: int | None, expected_count: int | None) -> list[Finding]:
    """Range ``[0, N]`` and count of one id list (repeats and order: :func:`_capture_said`)."""
    out = []
    hi = n_layers
    bad = [i for i in ids if i < 0 or (hi is not None and i > hi)]
    if bad:
        where = f"[0, {hi}] of the {hi}-layer target" if hi is not None else "[0, N]"
        out.append(
            finding(
                "E-AUX-RANGE",
                subject,
                f"aux-layer id(s) {bad} outside {where}",
                "pick ids inside the target's layers, or pair the drafter with the target it was trained on",
            )
        )
    if expected_count is not None and len(ids) != expected_count:
        out.append(
            finding(
                "E-AUX-COUNT",
                subject,
                f"{len(ids)} aux-layer ids but the drafter reads A = {expected_count} aux states",
                "make num_aux_hidden_states, the id list and fc width agree",
            )
        )
    return out


def _convention(ctx: Context, n_layers: int | None) -> list[Finding]:
    aux = ctx.drafter.aux
    assert aux.raw is not None and aux.key is not None  # check() calls this for a stored id list only
    top = aux.key == AUX_KEY
    conv, reason = infer_convention(aux.raw, top, n_layers)
    if top and aux.raw and aux.raw[0] == 1:
        # the top-level list is captured as written, as the input of each layer, by every vLLM runner (0.33.0
        # v1/worker/gpu_model_runner.py L5180-5188 and L5200, v1/worker/gpu/spec_decode/eagle/eagle3_utils.py
        # L118-119, llama.py L439-441); SGLang never reads it (srt/model_executor/model_runner_components/
        # spec_aux_hidden_state.py L185-196 takes the nested list only)
        said = [
            Said(
                "W-AUX-CONVENTION",
                aux.key,
                f"top-level ids {aux.raw} start at 1 like a C-out list, but this runner captures them as C-in (input to layer)",
                "if the trainer used C-out ids (SpecForge, TorchSpec, ModelOpt): "
                + set_command(ctx, AUX_KEY, [i + 1 for i in aux.raw]),
            )
        ]
        return _capture(ctx, said, lambda r: captures(r, AUX_KEY))
    if conv == C_OUT:
        # only a runner that captures the nested list as written shifts it: vLLM's V1 runner does
        # (gpu_model_runner.py L5207-5223, 0.33.0), MRV2 never reads it (W-AUX-IGNORED says so), SGLang adds 1
        said = [
            Said(
                "W-AUX-CONVENTION",
                aux.key,
                f"nested ids {aux.raw} look C-out ({reason}); this runner captures them as C-in, one layer early",
                "write the C-in list vLLM captures as written at the top level (the nested list SGLang reads stays "
                f"as it is): {set_command(ctx, AUX_KEY, [i + 1 for i in aux.raw])}",
            )
        ]
        return per_profile(ctx, lambda r: said if r.engine == VLLM and captures(r, NESTED) else [])
    if conv == UNKNOWN:
        return [
            finding(
                "W-AUX-CONVENTION",
                aux.key,
                f"cannot tell whether nested ids {aux.raw} are C-in or C-out ({reason})",
                "write the C-in list at the top level; if the trainer wrote C-out ids (SpecForge, TorchSpec and "
                f"ModelOpt do): {set_command(ctx, AUX_KEY, [i + 1 for i in aux.raw])}",
            )
        ]
    assert conv == C_IN
    return []


def _int_list(x) -> TypeGuard[list[int]]:
    return isinstance(x, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in x)


def _conflict(ctx: Context, n_layers: int | None) -> list[Finding]:
    """Both lists stored: vLLM captures the top-level one (C-in), SGLang the nested one (as C-out,
    +1); they must name the same layers in one of the two readings of the nested list."""
    raw = ctx.drafter.raw_config
    top = raw.get(AUX_KEY)
    nested = raw.get("eagle_config", {}).get(AUX_KEY) if isinstance(raw.get("eagle_config"), dict) else None
    if not (_int_list(top) and _int_list(nested)):
        return []  # malformed lists are reported by the schema check
    conv, _ = infer_convention(nested, False, n_layers)
    readings = {C_IN: [list(nested)], C_OUT: [[i + 1 for i in nested]]}.get(
        conv, [list(nested), [i + 1 for i in nested]]
    )
    if top in readings:
        return []
    # every vLLM runner captures the top-level list when there is one (0.33.0 gpu_model_runner.py L5200-5201,
    # eagle3_utils.py L118-119), SGLang only the nested one (spec_aux_hidden_state.py L185-196): the message names
    # both, and the finding every judged profile that captures one of them
    said = [
        Said(
            "W-AUX-CONFLICT",
            f"eagle_config.{AUX_KEY}",
            f"top-level ids {top} (read by vLLM) and nested ids {nested} (read by SGLang) name different layers",
            "keep one list, the one the drafter was trained with (`eaglehub convert` writes each format's list from one)",
        )
    ]
    return _capture(ctx, said, lambda r: captures(r, AUX_KEY) or captures(r, NESTED))


def _nondefault(ctx: Context, n_layers: int) -> list[Finding]:
    """F12: explicit C-in ids other than the default ``(2, N//2, N-3)``. A judged profile whose runner captures the
    stored list feeds the drafter its trained layers, but engines that hard-code the default capture layers
    (TokenSpeed before PR #526, SGLang before PR #32334: a gpt-oss-120b drafter trained on [24, 30, 36] ran at
    AL 1.00) feed it other states. Compared as layer sets: the target captures in ascending order either way
    (:data:`CAPTURE`). A judged profile that does not read the stored list is E-/W-AUX-IGNORED's
    (checks/profiles.py): there the runner is such an engine, and says so with the layers it captures."""
    aux = ctx.drafter.aux
    assert aux.c_in is not None and aux.key is not None  # check() calls this for a stored id list only
    defaults = default_aux_ids(n_layers)
    if sorted(aux.c_in) == sorted(defaults):
        return []
    shown = f"C-in {aux.c_in}" + (f" (stored {aux.convention} as {aux.raw})" if aux.c_in != aux.raw else "")
    said = [
        Said(
            "W-AUX-NONDEFAULT",
            aux.key,
            f"aux-layer ids {shown} differ from the default {defaults} of this {n_layers}-layer target: this runner "
            "captures the drafter's ids, engines that capture only the default layers feed it other hidden states (AL ≈ 1)",
        )
    ]
    return per_profile(ctx, lambda r: said if captures(r, aux.key or "") else [])


def _count_hint(ctx: Context, f: Finding, ids: list[int]) -> Finding:
    """E-AUX-COUNT with the exact edit: where fc is as wide as the id list, the count is what is missing; where it is
    as wide as the count, the list is: the target's default layers when they are that many, else the first ids."""
    fc, ht, listed = ctx.drafter.tensors.get("fc.weight"), ctx.drafter.dims.Ht, len(ids)
    if f.code != "E-AUX-COUNT" or fc is None or len(fc.shape) != 2 or not ht or fc.shape[1] % ht:
        return f
    shape, a = list(fc.shape), fc.shape[1] // ht
    if a == listed:
        return replace(
            f, hint=f"fc.weight {shape} is sized for the {listed} ids: {set_command(ctx, 'num_aux_hidden_states', a)}"
        )
    n = ctx.target.layers if ctx.target else None
    if n is not None and len(default_aux_ids(n)) == a:
        why = f"fc.weight {shape} reads {a} states; the {n}-layer target's default layers (list the trained ones if other)"
        return replace(f, hint=f"{why}: {set_command(ctx, AUX_KEY, default_aux_ids(n))}")
    if listed > a and "(default" not in f.subject:
        why = f"fc.weight {shape} reads {a} states; if the drafter was trained on the first {a} of the ids"
        return replace(f, hint=f"{why}: {set_command(ctx, f.subject, ids[:a])}")
    return f


def check(ctx: Context) -> list[Finding]:
    d, aux = ctx.drafter.dims, ctx.drafter.aux
    n = ctx.target.layers if ctx.target else None
    undeclared = _hidden_undeclared(ctx)
    # fc's width against each engine's own aux count is checks/profiles.py's (E-AUX-COUNT per profile)
    out = undeclared + _conflict(ctx, n)
    first = next(iter(ctx.readings.values()), None)
    count = first.num_aux_hidden_states if first is not None else d.A
    if aux.raw is not None:
        assert aux.key is not None  # set with raw
        key = aux.key
        found = _capture(ctx, _capture_said(aux.raw, key, True), lambda r: captures(r, key))
        found += [_count_hint(ctx, f, aux.raw) for f in check_ids(aux.raw, key, n, count)]
        # broken ids (duplicate, out of range, miscounted) are errors already; the default comparison
        # is about a list that works in vLLM but not in default-only engines
        usable = n is not None and not any(f.severity == "error" for f in found)
        return out + found + _convention(ctx, n) + (_nondefault(ctx, n) if usable and n is not None else [])
    raw = ctx.drafter.raw_config
    if AUX_KEY in raw or AUX_KEY in (raw["eagle_config"] if isinstance(raw.get("eagle_config"), dict) else {}):
        return out  # a list is stored but is not a list of integers: E-CONFIG-SCHEMA says so; no default applies
    # no id list: every runner asks the target for its default, (2, N//2, N-3) in input-of-layer terms for the
    # Llama-family targets in vLLM and SGLang alike (vLLM 0.33.0 interfaces.py L1751-1772, called by
    # gpu_model_runner.py L5186 and eagle3_utils.py L38; 0.32.0 gpu_model_runner.py L5247, eagle3_utils.py L29;
    # SGLang 0.5.23 srt/models/llama.py L933-936). A profile that takes ids from another key (MRV2's
    # target_layer_ids) does not capture the default.
    if n is None:
        said = [
            Said(
                "I-AUX-DEFAULT",
                AUX_KEY,
                "no explicit aux-layer ids: the target captures its default (2, N//2, N-3)",
                "pass --target to check the defaults, or write explicit ids",
            )
        ]
        return out + _capture(ctx, said, _default, alone=False)
    defaults = default_aux_ids(n)
    subject = f"{AUX_KEY} (default for N={n})"
    found = _capture(ctx, _capture_said(defaults, subject, False), _default)
    found += [_count_hint(ctx, f, defaults) for f in check_ids(defaults, subject, n, count)]
    if not found:
        said = [
            Said(
                "I-AUX-DEFAULT",
                AUX_KEY,
                f"no explicit aux-layer ids: the target captures its default {defaults} for this {n}-layer target",
                f'write "{AUX_KEY}": {defaults} explicitly',
            )
        ]
        found = _capture(ctx, said, _default, alone=False)
    return out + found


def _default(r: Reading) -> bool:
    """The profile's runner leaves the target at its default layers (and the class it builds takes aux states)."""
    return r.aux_layer_ids is None and r.num_aux_hidden_states is not None
