"""AL regression against an earlier verify report (--reference-report)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from eaglehub.errors import EaglehubError
from eaglehub.findings import Finding, finding
from eaglehub.io.schemas import schema_errors
from eaglehub.measure import acceptance
from eaglehub.verify.options import REPORT_SCHEMA, REPORT_VERSION


@dataclass(frozen=True)
class Reference:
    """An earlier verify report (``--reference-report``), schema-checked by :func:`load_reference_report`."""

    path: Path
    report: dict


@dataclass(frozen=True)
class ReferenceContext:
    """What every drafter's comparison needs: the reference, the tolerance (a fraction, 0.05 = 5 %),
    this run's engine (``{name, version}``) and k, and the settings that differ from the reference's
    (:func:`settings_differences`; non-empty ⇒ no comparison)."""

    reference: Reference
    tolerance: float
    engine: dict
    k: int
    differences: list[dict]


def load_reference_report(path: str | Path) -> Reference:
    """Read and schema-check an earlier verify report.

    Raises:
        EaglehubError: (exit 2, one line) the file is missing or unreadable, not JSON (NaN and
            Infinity included), written by another report version, or breaks the schema.
    """
    path = Path(path).expanduser()
    hint = "pass a report written by `eaglehub verify --report` with this eaglehub version"

    def bad(why: str, fix: str = hint) -> EaglehubError:
        return EaglehubError(f"reference report {path}: {why}", hint=fix)

    def no_constants(name: str):  # AL must be a finite number; json would otherwise accept NaN
        raise ValueError(f"{name} is not a JSON number")

    try:
        report = json.loads(path.read_text(encoding="utf-8"), parse_constant=no_constants)
    except OSError as exc:
        # a path that names no file: the path is what to fix, not the report's version
        raise bad(
            f"cannot read it ({exc.strerror or exc})",
            "check the path: no verify report (the JSON eaglehub verify --report writes) is there",
        ) from exc
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise bad(f"not valid JSON ({str(exc).splitlines()[0]})") from exc
    version = report.get("report_version") if isinstance(report, dict) else None
    if isinstance(report, dict) and version != REPORT_VERSION:
        raise bad(
            f"report_version {version}, this eaglehub reads version {REPORT_VERSION}"
            if version is not None
            else "not a verify report (no report_version)"
        )
    errors = schema_errors(report, REPORT_SCHEMA)
    if errors:
        where, message = errors[0]
        message = " ".join(message.split())  # one line, and short: jsonschema quotes whole sub-objects
        raise bad(f"not a verify report: {where}: {message[:160] + ' …' if len(message) > 160 else message}")
    return Reference(path.resolve(), report)


def settings_differences(settings: dict, prompts: dict, reference: dict) -> list[dict]:
    """The settings AL depends on that differ between this run and ``reference`` (a report dict).

    Compared: k, max_tokens (longer outputs reach other text), dtype, the prompt file's content
    (sha256), the prompt selection (prompts per category, i.e. ``--category``/``--limit``) and the
    chat template's variables (``--chat-template-kwargs``) and the padded prompt length (``--context``).
    Returns ``[{setting, reference, run}]``, empty when comparable.
    """
    ref_settings, ref_prompts = reference["settings"], reference["prompts"]
    pairs = [(name, ref_settings[name], settings[name]) for name in ("num_speculative_tokens", "max_tokens", "dtype")]
    pairs += [(f"prompts.{name}", ref_prompts[name], prompts[name]) for name in ("sha256", "categories")]
    # template variables change the input token ids; a report without them rendered with none
    template = (ref_settings.get("chat_template_kwargs", {}), settings.get("chat_template_kwargs", {}))
    pairs.append(("chat_template_kwargs", *template))
    # padded prompts (--context) are other inputs; a report without the key ran unpadded
    ref_len, run_len = ((s.get("context") or {}).get("context_tokens") for s in (ref_settings, settings))
    pairs.append(("context.context_tokens", ref_len, run_len))
    return [{"setting": name, "reference": ref, "run": ours} for name, ref, ours in pairs if ref != ours]


def match_reference_drafter(drafter: Path, entries: list[dict]) -> tuple[dict | None, str | None, str]:
    """The reference entry for ``drafter`` (a resolved path): same path, else the one entry with the
    same directory name. Returns ``(entry or None, "path" | "name" | None, note)``."""
    for e in entries:
        if Path(e["drafter"]) == drafter:
            return e, "path", "matched by path"
    same_name = [e for e in entries if Path(e["drafter"]).name == drafter.name]
    if len(same_name) == 1:
        return same_name[0], "name", f"matched by directory name ({same_name[0]['drafter']})"
    if same_name:
        return (
            None,
            None,
            f"{len(same_name)} reference drafters are named {drafter.name} and none has this path: not compared",
        )
    return (
        None,
        None,
        f"no drafter with this path or directory name {drafter.name} in the reference: not compared",
    )


def compare_with_reference(drafter: Path, al: float | None, ctx: ReferenceContext) -> tuple[dict, list[Finding]]:
    """Compare this run's overall AL of ``drafter`` with its entry in the reference report (F26).

    ``status`` of the returned section: ``no_match`` (no entry, :func:`match_reference_drafter`),
    ``settings_differ`` (k, max_tokens, dtype or prompts differ: AL depends on them, so a comparison
    would mislead), ``undefined`` (either AL is null: nothing drafted), else ``compared``. Only a
    compared AL below reference · (1 − tolerance) gives an E-VERIFY-AL-REGRESSION finding; the
    other outcomes are notes in the section, never findings.
    """
    ref = ctx.reference.report
    entry, matched_by, note = match_reference_drafter(drafter, ref["drafters"])
    ref_al = entry["acceptance"]["overall"]["acceptance_length"] if entry else None
    section = {
        "report": str(ctx.reference.path),
        "tolerance": ctx.tolerance,
        "engine": ref["engine"],
        "num_speculative_tokens": ref["settings"]["num_speculative_tokens"],
        "drafter": entry["drafter"] if entry else None,
        "matched_by": matched_by,
        "acceptance_length": ref_al,
        "relative_change": None,
        "differences": ctx.differences,
    }
    if entry is None:
        return {**section, "status": "no_match", "note": note}, []
    if ctx.differences:
        what = "; ".join(f"{d['setting']} {d['reference']} (reference) vs {d['run']}" for d in ctx.differences)
        return {
            **section,
            "status": "settings_differ",
            "note": f"{note}; not compared, AL depends on the settings that differ: {what}",
        }, []
    if al is None or ref_al is None:
        return {
            **section,
            "status": "undefined",
            "note": f"{note}; not compared: no drafts in "
            f"{'this run' if al is None else 'the reference'}, so AL is undefined",
        }, []
    change = acceptance.relative_change(al, ref_al)
    section = {
        **section,
        "status": "compared",
        "relative_change": change,
        "note": f"{note}; AL {al:.3f} vs reference {ref_al:.3f} ({change:+.1%}, tolerance {ctx.tolerance:.1%})",
    }
    if not acceptance.regressed(al, ref_al, ctx.tolerance):
        return section, []
    ours, theirs = ctx.engine, ref["engine"]
    message = (
        f"acceptance length {al:.3f} is {-change:.1%} below the reference {ref_al:.3f} (tolerance {ctx.tolerance:.1%}); "
        f"this run: {ours['name']} {ours['version']}, k={ctx.k}; reference {ctx.reference.path}: "
        f"{theirs['name']} {theirs['version']}, k={section['num_speculative_tokens']}"
    )
    hint = None  # the rule's: compare the engine versions
    if ours == theirs:  # same engine: the cause is elsewhere
        hint = (
            f"both runs used {ours['name']} {ours['version']}: check whether the drafter's weights, the target "
            "or its chat template changed since the reference"
        )
    return section, [finding("E-VERIFY-AL-REGRESSION", "acceptance.overall", message, hint)]
