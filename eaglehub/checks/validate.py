"""``eaglehub validate``: check a drafter directory (and optionally its pairing with a target).

Exit codes (CLI): 0 no error finding, 1 at least one (or a warning with ``--strict``), 2 usage errors
(a source that names nothing, a hub that cannot be reached, contradictory options). Input whose
*content* is broken — a truncated or corrupt safetensors header, invalid JSON, a missing config or
shard — is a finding (``E-INPUT-*``), never a traceback. Rules: :mod:`eaglehub.findings`; checks:
:mod:`eaglehub.checks`. Report layout: ``schemas/validate-report.schema.json``.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from eaglehub.checks import CHECKS, STATISTICS_CHECKS, Context, Options, TargetInfo, read_target

__all__ = ["Options", "make_report", "preflight", "preflight_report", "run_checks", "validate"]
from eaglehub.checks.engine import parse_version
from eaglehub.drafter.canonical import Drafter
from eaglehub.errors import EaglehubError
from eaglehub.findings import Finding, count_by_severity, finding
from eaglehub.formats.registry import FORMATS, architecture, read_drafter
from eaglehub.io.source import resolve_source

REPORT_SCHEMA = "eaglehub.validate-report/1"
UNREADABLE = "unreadable"


def _layout_findings(d: Drafter) -> list[Finding]:
    """Layouts the checks cannot run on: a full LM (F3), EAGLE-1/2, unsupported layouts."""
    if d.layout == "not-a-drafter":
        layers = d.config.get("num_hidden_layers")
        return [
            finding(
                "E-NOT-A-DRAFTER",
                "config.json",
                f"not an EAGLE-3 drafter: {architecture(d.config)} with {layers} layers, no fc.weight, no draft_vocab_size "
                "(a target model given as drafter?)",
            )
        ]
    if d.layout == "eagle1":
        return [
            finding(
                "E-LAYOUT-EAGLE1",
                "fc.weight",
                "EAGLE-1/2 checkpoint (fc reads 2H, no hidden_norm): not usable as an EAGLE-3 drafter",
            )
        ]
    if d.format not in FORMATS:
        return [
            finding(
                "E-LAYOUT-UNSUPPORTED",
                "config.json",
                f"{'; '.join(d.evidence)}: recognised but not checked by this version",
            )
        ]
    return []


def input_finding(exc: EaglehubError) -> Finding:
    """The finding for an input error: its ``code`` and ``subject``, else E-INPUT-WEIGHTS about the
    weight files (checks fail only on reading tensor data)."""
    return finding(exc.code or "E-INPUT-WEIGHTS", exc.subject or "weight files", exc.message, exc.hint)


def run_checks(
    drafter: Drafter, target: TargetInfo | None = None, deep: bool = False, options: Options | None = None
) -> list[Finding]:
    """All findings for an already-read drafter (layout rejections short-circuit the tensor checks).

    Without ``deep`` nothing but ``d2t``/``t2d`` and 1-D norms is read from the tensor data; ``deep``
    adds the value checks (:data:`eaglehub.checks.STATISTICS_CHECKS`: NaN/Inf, untrained-looking
    weights), which stream every float tensor. A check that cannot read the data it needs (a file
    truncated after its header) yields an ``E-INPUT-*`` finding; the other checks still run.
    """
    rejected = _layout_findings(drafter)
    if rejected:
        return rejected
    ctx = Context(drafter, target, options or Options())
    out: list[Finding] = []
    for check in CHECKS:
        if deep or check not in STATISTICS_CHECKS:
            try:
                out += check(ctx)
            except EaglehubError as exc:
                out.append(input_finding(exc))
    return stored_names(out, drafter)


_MIDLAYER = re.compile(r"(?<![\w.])midlayer\.")


def stored_names(findings: list[Finding], drafter: Drafter) -> list[Finding]:
    """The findings with tensors named as the files store them: the checks work on canonical names
    (``midlayer.*`` for layer 0, no ``model.`` prefix, ``fc_norm.{i}``), which a user of a ``layers.0.*``
    checkpoint (ModelOpt, speculators, TorchSpec ``--vllm``) cannot find in the file. Tensors the file holds
    take their stored name; a layer-0 name it lacks takes the file's layer-0 spelling."""
    stored = {c: s for c, s in drafter.names.items() if c != s and s in drafter.index.tensors}
    if not stored:
        return findings
    layer0 = next(
        (s[: len(s) - len(c) + len("midlayer.")] for c, s in stored.items() if c.startswith("midlayer.")), None
    )
    names = re.compile(
        r"(?<![\w.])(" + "|".join(re.escape(c) for c in sorted(stored, key=len, reverse=True)) + r")(?![\w])"
    )

    def spell(text: str) -> str:
        text = names.sub(lambda m: stored[m.group(1)], text)
        return _MIDLAYER.sub(layer0, text) if layer0 else text

    return [replace(f, subject=spell(f.subject), message=spell(f.message), hint=spell(f.hint)) for f in findings]


def make_report(
    drafter: Drafter | Path,
    findings: list[Finding],
    target: TargetInfo | None,
    deep: bool = False,
    options: Options | None = None,
) -> dict:
    """The JSON report (``schemas/validate-report.schema.json``); ``drafter`` is a path when it could not be read."""
    counts = count_by_severity(findings)
    return {
        "schema": REPORT_SCHEMA,
        "drafter": str(drafter.path if isinstance(drafter, Drafter) else drafter),
        "target": str(target.path) if target else None,
        "layout": drafter.format if isinstance(drafter, Drafter) else UNREADABLE,
        "format_evidence": drafter.evidence if isinstance(drafter, Drafter) else [],
        "ok": counts["error"] == 0,
        "deep": deep,
        # said apart from "deep" so no reader takes "ok" for a judgement of the weights' values: without --deep
        # only headers, shapes, the config and the small tensors the checks need (norms, d2t/t2d) are read
        "values_read": deep,
        "counts": counts,
        "findings": [f.as_dict() for f in findings],
        "profiles": profiles_section(options or Options()),
    }


def profiles_section(options: Options) -> list[dict]:
    """The engine profiles the report judges for, and whether that is the default (stated in every report)."""
    from eaglehub.profiles.registry import DEFAULT_PROFILE

    chosen = options.engine_profiles()
    return [{"id": p.id, "title": p.title, "default": not options.profiles and p.id == DEFAULT_PROFILE} for p in chosen]


def validate(
    drafter_dir: str | Path,
    target: str | Path | None = None,
    source_format: str | None = None,
    revision: str | None = None,
    deep: bool = False,
    options: Options | None = None,
    prompts: str | None = None,
) -> dict:
    """Validate ``drafter_dir`` (a directory or hub repo id) and return the report dict.

    Reads headers plus the small tensors the checks need (norms, ``d2t``, ``t2d``); ``deep``: every
    float tensor's values too. ``target``: anything :func:`eaglehub.target.resolve_target` accepts;
    only its config and tokenizer files are read (its embedding too, when the weights are already on
    disk). ``options``: tensor-parallel size and vLLM version to check against (:class:`Options`).

    ``prompts`` (a prompt file, or ``"default"`` for the project's set): also measure the draft vocabulary's
    coverage of the target's output on them (:func:`eaglehub.vocab.run.measure_coverage`; runs the target, so
    its weights are needed), reported under ``vocab_coverage`` with its findings; not measured when the drafter
    has an error finding (its vocabulary may be misread).

    Raises: EaglehubError (exit 2) for usage errors only: a source or target that names nothing,
    an unreachable hub, ``--from`` contradicting the evidence, ``prompts`` without ``target``. Unreadable
    content is a finding.
    """
    if prompts is not None and target is None:
        raise EaglehubError(
            "--prompts measures coverage of the target's output and needs --target", hint="add --target T"
        )
    path, _ = resolve_source(str(drafter_dir), revision)
    opts = (options or Options()).resolved()
    if opts.vllm_version:
        parse_version(opts.vllm_version)  # a bad --vllm-version is a usage error, before any work
    opts.engine_profiles()  # so is an unknown --profile
    pre: list[Finding] = []
    tinfo = None
    if target is not None:
        try:
            tinfo = read_target(target)
        except EaglehubError as exc:
            if exc.code is None:
                raise
            pre.append(finding("E-TARGET-CONFIG", "target config.json", exc.message))
    try:
        drafter = read_drafter(path, fmt=source_format, strict_provenance=False)
    except EaglehubError as exc:
        if exc.code is None:
            raise
        return make_report(path, pre + [input_finding(exc)], tinfo, deep, opts)
    if drafter.provenance_error is not None:  # optional record: report it, check the drafter all the same
        pre.append(input_finding(drafter.provenance_error))
    found = pre + run_checks(drafter, tinfo, deep=deep, options=opts)
    # with an error (a wrong draft_vocab_size, say) the coverage would be measured on a misread vocabulary
    if prompts is None or tinfo is None or any(f.severity == "error" for f in found):
        return make_report(drafter, found, tinfo, deep, opts)
    from eaglehub.vocab.coverage import VocabOptions, coverage_findings, measure_coverage

    section = measure_coverage(
        drafter, tinfo.path, VocabOptions(str(tinfo.path), None if prompts == "default" else prompts)
    )
    extra = coverage_findings(drafter, section)
    if any(f.code == "W-VOCAB-IDENTITY" for f in extra):  # the same map, now with its coverage
        found = [f for f in found if f.code != "W-D2T-ZERO"]
    report = make_report(drafter, found + extra, tinfo, deep, opts)
    report["vocab_coverage"] = section
    return report


def preflight_report(drafter: Path | str, target: Path | str, profiles: tuple[str, ...] | None = None) -> dict:
    """The validate report the preflight judges by: ``drafter`` against ``target`` for ``profiles`` (``None``:
    the default profile), with every weight's values read (``--deep``): NaN or all-zero weights would waste an
    engine run as surely as a wrong dimension. ``verify`` refuses on its errors before a run
    (:func:`preflight`), and ``verify --dry-run`` before it prints a plan as ready."""
    return validate(drafter, target, deep=True, options=Options(profiles=tuple(profiles) if profiles else None))


def preflight(drafter: Path, target: Path, profiles: tuple[str, ...] | None = None) -> None:
    """Refuse, before minutes of engine work, a drafter that ``eaglehub validate`` finds broken for
    ``profiles`` (engine profile ids; ``None``: the default profile). ``verify`` passes the profile of the
    engine it runs plus the ones asked for (:func:`eaglehub.verify.preflight.preflight_profiles`).

    vLLM would load most such drafters without a word (missing weights, wrong aux ids) and the run
    would only show a collapsed acceptance rate (docs/vllm.md §4, §11).

    Raises:
        EaglehubError: error findings against ``target`` (exit 1; the message lists their codes and the
            profiles they hold for).
    """
    import shlex

    report = preflight_report(drafter, target, profiles)
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    if errors:
        codes = sorted({f["code"] for f in errors})
        on = {p for f in errors for p in f.get("profiles") or ()}
        titles = [p["title"] for p in report["profiles"] if p["id"] in on]
        where = f" (on {'; '.join(titles)})" if titles else ""
        flags = "".join(f" --profile {p['id']}" for p in report["profiles"]) if profiles else ""
        raise EaglehubError(
            f"drafter {drafter} fails validation against the target{where}: {', '.join(codes)}",
            hint=f"run `eaglehub validate {shlex.quote(str(drafter))} --target {shlex.quote(str(target))}{flags}` "
            "for details and fixes",
            exit_code=1,
        )
