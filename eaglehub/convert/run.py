"""``eaglehub convert SRC DST [--to 3.1] [--format NAME]``: change a drafter's format and/or upgrade
it to EAGLE-3.1, through the canonical description only (read → canonical → write).

Byte level: tensors are never decoded. Their bytes are copied from the source files into the new
safetensors files (:mod:`eaglehub.io.streaming`); only the few new tensors are generated (3.1
``fc_norm.{i}.weight`` = ones ``[Ht]``, docs/formats.md §7; vocabulary maps a format requires and the
source left implicit, docs/formats.md §2). Conversions a format cannot express are refused unless
``force`` (then the drops are recorded). The write is atomic and the source is never modified; the
result is re-read and must validate without errors. Provenance: ``eaglehub.json`` and
safetensors metadata (:mod:`eaglehub.io.provenance`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from eaglehub.convert.plan import (
    aux_warnings,
    calibration_provenance,
    plan_conversion,
)
from eaglehub.convert.readings import check_readings, intended, profiles_to_check, unread_warnings
from eaglehub.convert.source import refuse_source_errors, repair_config
from eaglehub.convert.write import destination, shard_size, write_drafter
from eaglehub.drafter.canonical import (
    C_IN,
    C_OUT,
    Drafter,
    read_config,
)
from eaglehub.drafter.settings import apply_settings
from eaglehub.errors import EaglehubError
from eaglehub.formats.registry import FORMATS, place_settings, read_drafter
from eaglehub.io.source import resolve_source
from eaglehub.profiles import Stored, stored_of

REPORT_SCHEMA = "eaglehub.convert-report/2"
VERSIONS = ("3.1", "3")
NOT_FOLDABLE = (
    "an EAGLE-3.1 drafter cannot become EAGLE-3 exactly: fc_norm rescales each aux state per token by its own RMS, "
    "which no fixed fc weight can fold away, and norm_output changes the state fed to every later draft step"
)
NOT_EQUIVALENT = (
    "the 3.1 drafter is not numerically equivalent to the source: unit-weight fc_norm still rescales each aux "
    "chunk per token{extra}; re-measure acceptance (eaglehub verify) and expect to fine-tune"
)
#: the switches ``--to 3.1`` writes itself (``--norm-output`` / ``--no-norm-output`` choose the second)
UPGRADE_SWITCHES = frozenset({"fc_norm", "norm_output", "use_aux_norm"})
ALIASES = {"c-in": C_IN, "c-out": C_OUT, C_IN: C_IN, C_OUT: C_OUT}


def verifier_warnings(cfg: dict) -> list[str]:
    """A speculators output whose verifier classes are not known says what is missing (the field is required,
    so it holds ``[]``)."""
    block = cfg.get("speculators_config")
    verifier = block.get("verifier") if isinstance(block, dict) else None
    if not isinstance(verifier, dict) or verifier.get("architectures"):
        return []
    name = verifier.get("name_or_path")
    return [
        f"speculators_config.verifier.architectures is []: the classes of the verifier {name} are not known here "
        "(the source records none, and it is neither a local model directory nor in the local Hugging Face cache); "
        f"speculators checks a verifier against them. Fetch its config and convert again: hf download {name} "
        "config.json"
    ]


def _intended(
    d: Drafter, repaired: Drafter, plan, set_changes: list[dict], repairs: list[dict], to: str | None, rebuilt=None
):
    """The source with every stated change applied, for :func:`eaglehub.convert.readings.check_readings`: the
    ``--set`` edits and the lifted switches are in ``repaired``'s stored config already; the other repairs,
    the upgrade's (or fold's) switches and ``--force``'s drops are applied to it, fc_norm tensors added."""
    version = {"3.1": "--to 3.1", "3": "--to 3 (fold)"}.get(to or "", "")
    changes = [{**c, "why": c.get("why") or "--set"} for c in set_changes]
    changes += repairs + [{**c, "why": c.get("why") or version} for c in plan.changes]
    removed: dict[str, str] = {}
    for drop in plan.dropped:
        why = f"--force: {drop['what']}" if not drop["what"].startswith("EAGLE-3.1 fc_norm") else version
        for k in drop["keys"]:
            off = FORMATS[plan.format].max_layers if k == "num_hidden_layers" else False
            changes.append({"key": k, "new": off, "why": why})
        removed.update({d.names[t]: why for t in drop["tensors"] if t in d.names})
    added = {n: (tuple(t.shape), version) for n, t in plan.added.items()}
    if rebuilt is not None:  # a map the source lacked, written from the one it holds, is a stated change too
        shapes = {t.name: tuple(t.shape) for t in plan.tensors}
        for n in plan.synthesized:
            stored_name = plan.stored.get(n, n)
            if n not in d.names and stored_name in shapes:
                added[stored_name] = (shapes[stored_name], "--rebuild-vocab-maps")
    index = {i.source_name: tuple(i.shape) for i in d.index.tensors.values()}
    return intended(repaired.raw_config or {}, index, changes, added, removed)


def _moot_maps(d: Drafter, fmt: str, rebuilt) -> frozenset[str]:
    """The stored maps whose faults the output does not carry: both when they are rebuilt; ``t2d`` when the output
    layout writes none for this vocabulary (no engine reads it: the d2t findings still count)."""
    if rebuilt is not None:
        return frozenset({"d2t", "t2d"})
    V, Vd = d.dims.V, d.dims.Vd
    if "t2d" not in d.names or V is None or Vd is None or fmt not in FORMATS:
        return frozenset()
    had = set(((d.provenance or {}).get("original") or {}).get("tensors") or d.names)
    return frozenset() if FORMATS[fmt].wants_maps(V, Vd, had)[1] else frozenset({"t2d"})


def engine_errors(out: Drafter, profiles, messages: bool = False) -> dict[str, list[dict]]:
    """Per profile id, validate's error findings on ``out`` that hold for that profile (``messages``: with their
    message too)."""
    from eaglehub.checks.context import Options
    from eaglehub.checks.validate import run_checks

    found: dict[str, list[dict]] = {}
    for f in run_checks(out, options=Options(profiles=tuple(p.id for p in profiles))):
        if f.severity == "error":
            for pid in f.profiles:
                said = {"code": f.code, "subject": f.subject} | ({"message": f.message} if messages else {})
                found.setdefault(pid, []).append(said)
    return found


def refuse_edit_engine_errors(
    failing: dict[str, list[dict]], settings: dict, reread: Callable[[dict | None], Drafter], profiles
) -> None:
    """Refuse (exit 2, naming the edit) an output an engine fails on where the source as stored does not and a
    ``--set`` edit alone makes the source fail the same way (fc sized for 3 aux states, ``--set`` of a 2-id
    list): the edit is at fault, and writing a checkpoint that ``validate`` fails helps nobody. An error no
    single edit makes is the conversion's and is reported, as before, with the output."""
    from eaglehub.drafter.settings import setting_arg

    def codes(edits: dict | None) -> dict[str, set[str]]:
        found = engine_errors(repair_config(reread(edits))[0], profiles)
        return {pid: {e["code"] for e in errs} for pid, errs in found.items()}

    stored = codes(None)
    new = {pid: [e for e in errs if e["code"] not in stored.get(pid, set())] for pid, errs in failing.items()}
    new = {pid: errs for pid, errs in new.items() if errs}
    if not new:
        return
    culprits = [
        k
        for k, v in settings.items()
        if any({e["code"] for e in errs} & codes({k: v}).get(pid, set()) for pid, errs in new.items())
    ]
    if not culprits:
        return
    edits = " ".join(f"--set {setting_arg(k, settings[k])}" for k in culprits)
    first = next(iter(new.values()))[0]
    raise EaglehubError(
        f"{edits} {'make' if len(culprits) > 1 else 'makes'} the output fail validation: {first['code']} "
        f"{first['subject']}: {first.get('message', '')}",
        hint=f"drop {edits} or give {'them values' if len(culprits) > 1 else 'it a value'} the tensors agree with; "
        f"the source as stored has no such error (nothing was written)",
        exit_code=2,  # the option is at fault, not the source
    )


def _plan(
    d, repaired, repairs, source, to, fmt, force, norm_output, verifier, calibration, rebuilt, set_changes, profiles
):
    """The output planned (convert's steps between the source's repairs and the write)."""
    plan = plan_conversion(
        d,
        repaired,
        source,
        to,
        fmt or d.format,
        force,
        norm_output,
        verifier,
        calibration.gains if calibration is not None else None,
        calibration.weights if calibration is not None else None,
        rebuilt=rebuilt,
    )
    if set_changes:
        plan.provenance["conversion"]["config_set"] = [{k: c[k] for k in ("key", "old", "new")} for c in set_changes]
    config_changes = set_changes + repairs + plan.changes
    if config_changes:  # what eaglehub wrote with its own value (W-PRODUCER-FLAG leaves those alone)
        plan.provenance["conversion"]["config_changes"] = [
            {k: c[k] for k in ("key", "old", "new", "why") if k in c} for c in config_changes
        ]
    if calibration is not None and calibration.report:
        plan.provenance["conversion"]["calibration"] = calibration_provenance(calibration.report)
    checked, default_profiles = profiles_to_check(profiles)
    want = _intended(d, repaired, plan, set_changes, repairs, to, rebuilt)
    return plan, want, checked, default_profiles, config_changes


def convert(
    src: str | Path,
    dst: str | Path,
    to: str | None = None,
    fmt: str | None = None,
    force: bool = False,
    overwrite: bool = False,
    max_shard_size: int | str | None = None,
    source_format: str | None = None,
    norm_output: bool = True,
    verifier: str | None = None,
    revision: str | None = None,
    aux_convention: str | None = None,
    progress=None,
    calibration=None,
    settings: dict | None = None,
    profiles: tuple[str, ...] | list[str] | None = None,
    rebuild_vocab_maps: bool = False,
    early=None,
) -> dict:
    """Convert ``src`` (directory or hub repo id) into ``dst`` and return the report
    (``schemas/convert-report.schema.json``).

    ``to="3.1"`` adds ``fc_norm.{i}.weight`` = ones ``[Ht]`` (i < A) and sets ``fc_norm`` and
    ``norm_output``; ``fmt`` picks the output format (default: the source's). Output: ``config.json``,
    ``model.safetensors`` (or shards of at most ``max_shard_size`` + index), ``eaglehub.json``, and
    the source's side files a drafter needs (card, licence, tokenizer). ``progress(total_bytes)``
    returns an ``advance(n)`` callback for a progress bar. ``calibration`` (:class:`eaglehub.convert.calibrate.Calibration`, with
    ``to="3.1"``): its gains replace the unit ``fc_norm`` weights, its ``norm_output`` choice and
    fine-tuned weights are written, its report becomes the report's ``calibration`` section.
    ``settings`` (``--set KEY=VALUE``, :mod:`eaglehub.drafter.settings`): config edits applied to the
    source's config before it is read (the source is not touched); they are the report's first
    ``config_changes`` and the provenance's ``conversion.config_set``. ``profiles`` (``--profile``): the engine
    profiles whose readings the output must keep (:mod:`eaglehub.convert.readings`; default: every named
    profile); the report's ``profiles`` section says what each reads and what changed for it.
    ``rebuild_vocab_maps``: ``d2t`` / ``t2d`` written afresh from what the source holds
    (:mod:`eaglehub.vocab.maps`), so findings about the stored maps do not stop the conversion. ``early``
    (:func:`eaglehub.convert.early.start_early`): the write of ``dst`` opened with the source's bytes already
    copying; the caller abandons it if this raises.

    Raises:
        EaglehubError: nothing to do; unknown format; ``dst`` exists without ``overwrite`` or is the
            source (exit 2); source not a drafter, with error findings,
            aux-id convention unknown, or a conversion ``fmt`` cannot express without ``force``
            (exit 1); already 3.1 for ``to`` (exit 2); DST inside or above the source, a bad
            ``max_shard_size``, an unwritable DST (exit 2); a result that fails validation (exit 1,
            ``dst`` untouched).
    """
    if to is None and fmt is None and max_shard_size is None and not settings and not rebuild_vocab_maps:
        raise EaglehubError(
            "nothing to do",
            hint="pass --to 3.1, --format "
            + "|".join(FORMATS)
            + ", --set KEY=VALUE, --rebuild-vocab-maps and/or --max-shard-size",
        )
    max_shard_size = shard_size(max_shard_size)
    switches = sorted(k for k in settings or {} if k.rsplit(".", 1)[-1] in UPGRADE_SWITCHES)
    if to == "3.1" and switches:
        import shlex

        value = (settings or {}).get("norm_output", (settings or {}).get("eagle_config.norm_output", True))
        flag = "--norm-output" if value is not False else "--no-norm-output"
        raise EaglehubError(
            f"--set {', '.join(switches)} with --to 3.1: the upgrade sets fc_norm and norm_output itself, so the edit "
            "would be overridden (or make the source read as 3.1 already)",
            hint=f"choose norm_output with the upgrade's own flag: eaglehub convert {shlex.quote(str(src))} "
            f"{shlex.quote(str(dst))} --to 3.1 {flag}",
        )
    if to is not None and to not in VERSIONS:
        raise EaglehubError(f"unknown EAGLE version {to!r}", hint=f"use --to {' | '.join(VERSIONS)}")
    if fmt is not None and fmt not in FORMATS:
        raise EaglehubError(f"unknown format {fmt!r}", hint=f"use --format {' | '.join(FORMATS)}")
    path, source = resolve_source(str(src), revision)
    dst = destination(path, Path(dst), overwrite)
    stored = read_config(path)
    set_changes = [{**c, "why": "--set"} for c in apply_settings(stored, place_settings(stored, settings))[1]]
    d = read_drafter(
        path,
        fmt=source_format,
        aux_convention=ALIASES.get(aux_convention or "", aux_convention),
        settings=settings,
    )
    if to == "3" and not d.is_31:
        raise EaglehubError(f"{path} is already an EAGLE-3 drafter", hint="drop --to to change only the format")
    if to == "3" and calibration is None:
        raise EaglehubError(
            NOT_FOLDABLE,
            exit_code=1,
            hint="--to 3 --force --target T writes the nearest EAGLE-3 approximation: each fc column "
            "scaled by its fc_norm gain over the chunk's mean RMS measured on T",
        )
    if aux_convention and d.aux.key and not d.aux.key.startswith("eagle_config."):
        raise EaglehubError(
            f"--aux-convention applies to nested (eagle_config) ids; {d.aux.key} is C-in by definition",
            hint="drop --aux-convention",
        )
    repaired, repairs = repair_config(d)
    rebuilt = None
    if rebuild_vocab_maps:
        from eaglehub.vocab.maps import rebuild_ids

        rebuilt = rebuild_ids(repaired)
    moot = _moot_maps(repaired, fmt or d.format, rebuilt)
    accepted: list = []

    def reread(edits: dict | None) -> Drafter:
        return read_drafter(
            path, fmt=source_format, aux_convention=ALIASES.get(aux_convention or "", aux_convention), settings=edits
        )

    def check_source() -> frozenset[str]:
        accepted[:] = refuse_source_errors(repaired, force, settings, reread, moot=moot)
        return frozenset(f.code for f in accepted)

    if calibration is not None:
        norm_output = calibration.norm_output
    # the source's checks run while its bytes are copied (write_drafter); what fails before the copy starts
    # is reported after them, so a source with errors is refused by them first, as ever
    try:
        plan, want, checked, default_profiles, config_changes = _plan(
            d, repaired, repairs, source, to, fmt, force, norm_output, verifier, calibration, rebuilt, set_changes,
            profiles,
        )  # fmt: skip
    except Exception:
        check_source()
        raise
    readings: list[dict] = []

    def keeps_readings(out: Drafter) -> None:
        source_stored = Stored(stored, {i.source_name: tuple(i.shape) for i in d.index.tensors.values()})
        readings.extend(
            check_readings(source_stored, want, stored_of(out), checked, plan.view.aux.c_in, plan.format, settings)
        )
        # an engine that builds the output the way it built the source may still fail with it (aux ids its runner
        # never reads): the output is written, as the source was, and the report says where it will not serve
        failing = engine_errors(out, checked, messages=settings is not None)
        if settings:
            refuse_edit_engine_errors(failing, settings, reread, checked)
        failing = {pid: [{k: e[k] for k in ("code", "subject")} for e in errs] for pid, errs in failing.items()}
        for entry in readings:
            entry["output_errors"] = failing.get(entry["profile"], [])

    advance = progress(sum(t.nbytes for t in plan.tensors)) if progress else None
    written = write_drafter(
        path,
        dst,
        tensors=plan.tensors,
        config=plan.config,
        provenance=plan.provenance,
        source_metadata=d.index.metadata,
        source_files=d.index.files,
        fmt=plan.format,
        expected=set(plan.stored.values()),
        overwrite=overwrite,
        max_shard_size=max_shard_size,
        advance=advance,
        check=keeps_readings,
        accepted=check_source,
        early=early,
    )
    files, side, skipped = written.files, written.copied_files, written.skipped_files
    extra = "; norm_output changes the state fed back to the next draft step" if to and norm_output else ""
    warnings = [NOT_EQUIVALENT.format(extra=extra)] if to and calibration is None else []
    forced = plan.dropped[1:] if to == "3" else plan.dropped  # the fold (first) has its own warning
    warnings += [f"dropped with --force: {x['what']}" for x in forced]
    warnings += [f"converted with --force despite {f.code} {f.subject}: {f.message}" for f in accepted]
    warnings += aux_warnings(d)
    warnings += verifier_warnings(plan.config)
    warnings += unread_warnings(readings, settings)
    if rebuilt is not None:
        made = " and ".join(plan.synthesized) or "no map (the layout stores none for this vocabulary)"
        warnings.append(f"--rebuild-vocab-maps: wrote {made} from {rebuilt.source}")
    elif moot:
        warnings.append(
            f"{' and '.join(sorted(moot))} not written ({plan.format} stores none for this vocabulary): the source's "
            "findings about it do not apply to the output"
        )
    return {
        "schema": REPORT_SCHEMA,
        "source": str(src),
        "source_format": d.format,
        "source_evidence": d.evidence,
        "destination": str(dst),
        "format": plan.format,
        "to": to,
        "version": plan.provenance["conversion"]["version"],
        "added_tensors": [
            {"name": plan.stored[n], "shape": list(t.shape), "dtype": t.dtype} for n, t in plan.added.items()
        ],
        "synthesized_tensors": plan.synthesized,
        "omitted_tensors": plan.omitted,
        "replaced_tensors": plan.provenance["conversion"]["replaced_tensors"],
        "dropped": plan.dropped,
        "aux": plan.aux,
        "config_changes": config_changes,
        "copied_tensors": sum(1 for t in plan.tensors if t.data is None),
        "bytes_copied": sum(t.nbytes for t in plan.tensors if t.data is None),
        "files": files,
        "copied_files": side,
        "skipped_files": skipped,
        "warnings": warnings,
        "calibration": (calibration.report or None) if calibration is not None else None,
        "profiles": {"checked": [p.id for p in checked], "default": default_profiles, "readings": readings},
    }
