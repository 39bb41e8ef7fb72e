"""``eaglehub verify``: prove a target + EAGLE-3 drafter pair lossless in an engine and measure acceptance.

One target-alone run is the baseline; each drafter then runs with the same target, the same prompt
token ids (chat template applied once, :mod:`eaglehub.engines.chat`), greedy decoding, the same
seed and the same batches (one batch per prompt category, so the counters are read per category).
Per prompt the output token ids are compared with the baseline (exact ids: on CPU float32 no
numerical-tie divergence is expected, benchmarks.md §4 pitfall 1). Acceptance metrics follow
:mod:`eaglehub.acceptance` (vllm.md §9). Multi-turn prompts (MT-Bench, Spec-Bench) are one request
per (prompt, turn), ids ``<id>``, ``<id>#2``, …: the baseline runs turn by turn so that its
decoded outputs become the replies in the next turn's input, and every other run receives those
same ids (:func:`run_by_turn`, :data:`MULTI_TURN_DEFINITION`).

Each drafter gets findings with the registered ``stage="verify"`` codes of :mod:`eaglehub.findings`:

* ``E-VERIFY-LOSSLESS``: a prompt's output differs from the baseline (failure-kinds.md F23) and
  divergence forensics (:mod:`eaglehub.forensics`) does not show a numerical near-tie there;
* ``W-VERIFY-NEAR-TIE``: every divergence is a near-tie of the target's top-2 logits;
* ``E-VERIFY-NOT-WIRED``: position-0 acceptance ≈ 0 (Cross-cutting: F2, F5, F6, F8, F12, F17);
* ``E-VERIFY-COUNTERS``: a category's counters break their invariants (an engine bug);
* ``W-VERIFY-LOW-AL``: AL below :data:`~eaglehub.acceptance.LOW_AL_THRESHOLD`, overall or per
  category (F13);
* ``E-VERIFY-AL-REGRESSION``: with ``--reference-report``, AL below the reference drafter's by more
  than the tolerance (F26; see :func:`compare_with_reference`);
* ``E-VERIFY-ENGINES-DISAGREE`` and the other engine's errors: with two engines
  (:mod:`eaglehub.cross_engine`);
* ``E-SAMPLING-BIASED``: with ``--sampling-trials``, the T > 0 test of :mod:`eaglehub.sampling_check`.

Engines: ``vllm`` (:mod:`eaglehub.engines.vllm_engine`), ``reference`` (the embedded PyTorch engine,
:mod:`eaglehub.engines.reference`), ``auto`` = vLLM when installed, else the reference engine.

A drafter passes when it has no error finding; warnings never change the exit code. The report (a
dict valid against ``schemas/verify-report.schema.json``) records all of it; :func:`exit_code` is 1
when any drafter fails, else 0.
"""

from __future__ import annotations

import hashlib
import json
import math
import shlex
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import __version__, acceptance, cross_engine, forensics
from .engines.base import Engine, RunResult, RunSpec, SpecCounters
from .errors import EaglehubError
from .findings import Finding, finding
from .prompts import Prompt, default_prompts_path, describe_prompts, load_prompts
from .schemas import check_output, schema_errors, write_output

REPORT_SCHEMA = "verify-report"
REPORT_VERSION = 2
"""2: per-drafter ``findings`` with registered codes (was ``failures`` with ad-hoc codes), the
prompt file's sha256, and the ``reference`` comparison."""


@dataclass
class VerifyOptions:
    """Inputs of one verify run (see ``eaglehub verify --help`` for units and defaults)."""

    target: str
    drafters: list[str]
    k: int = 3
    max_tokens: int = 64
    prompts_file: str | None = None
    categories: list[str] = field(default_factory=list)
    limit: int | None = None
    dtype: str = "float32"
    seed: int = 0
    max_model_len: int = 2048
    reference_report: str | None = None
    al_tolerance: float = acceptance.DEFAULT_AL_TOLERANCE
    engine_options: dict = field(default_factory=dict)
    """vLLM pass-through (:attr:`RunSpec.engine_options`): ``tensor_parallel_size``,
    ``pipeline_parallel_size``, ``distributed_executor_backend``, ``max_num_seqs``; unset keys are absent."""
    engines: list[str] = field(default_factory=lambda: ["auto"])
    """Engine names (:func:`make_engines`); the first is primary, the others are compared with it."""
    engine_tolerance: float = acceptance.DEFAULT_AL_TOLERANCE
    tie_epsilon: float | None = None
    """Near-tie threshold in logit units (default per dtype, :data:`eaglehub.forensics.TIE_EPSILON`)."""
    sampling_trials: int = 0
    """Trials per prefix of the T > 0 sampling test (0: no test)."""
    sampling_temperature: float = 1.0
    sampling_prefixes: int = 4
    engine_samples: int = 2000
    """With the sampling test: samples per prefix of each non-reference engine's own output test
    (:func:`eaglehub.sampling_check.run_engine_sampling_test`); 0: none."""
    device: str = "cpu"
    baseline_drafter: str | None = None
    """A drafter to compare every other one with (:mod:`eaglehub.baseline_compare`); it runs as the last drafter."""


def serve_command(target: Path | str, drafter: Path | str, k: int) -> str:
    """The ready-to-paste ``vllm serve`` line for the pair (vllm.md §8: method + absolute path).

    A ``str`` target or drafter is a Hub repo id and is written as given (a published drafter's card)."""
    from .engines.vllm_engine import speculative_config

    config = speculative_config(Path(drafter), k)
    if isinstance(drafter, str):
        config["model"] = drafter
    return f"vllm serve {shlex.quote(str(target))} --speculative-config {shlex.quote(json.dumps(config))}"


ENGINE_NAMES = ("auto", "vllm", "reference")
MIN_SAMPLING_TRIALS = 1000
MAX_K = 64


def make_engines(names: list[str], log_dir: Path | None = None, device: str = "cpu") -> list[Engine]:
    """Engines by name: ``vllm``, ``reference``, or ``auto`` (vLLM when installed, else the reference
    engine). Repeated names collapse to one engine.

    Raises:
        EaglehubError: an unknown name (exit 2).
    """
    import importlib.util

    from .engines.reference import ReferenceEngine
    from .engines.vllm_engine import VllmEngine

    out: list[Engine] = []
    seen: set[str] = set()
    for name in names or ["auto"]:
        if name not in ENGINE_NAMES:
            raise EaglehubError(f"unknown engine {name!r}", hint=f"choose from {', '.join(ENGINE_NAMES)}")
        if name == "auto":
            name = "vllm" if importlib.util.find_spec("vllm") is not None else "reference"
        if name not in seen:
            seen.add(name)
            out.append(VllmEngine(log_dir=log_dir) if name == "vllm" else ReferenceEngine(device=device))
    return out


def _resolve_drafter(spec: str) -> Path:
    path = Path(spec).expanduser()
    if not (path / "config.json").is_file():
        raise EaglehubError(
            f"drafter {spec} is not a directory with config.json",
            hint="pass a local EAGLE-3 drafter checkpoint directory",
        )
    return path.resolve()


def preflight(drafter: Path, target: Path) -> None:
    """Refuse, before minutes of engine work, a drafter that ``eaglehub validate`` finds broken.

    vLLM would load most such drafters without a word (missing weights, wrong aux ids) and the run
    would only show a collapsed acceptance rate (vllm.md §4, §11).

    Raises:
        EaglehubError: error findings against ``target`` (exit 1; the message lists their codes).
    """
    from .validate import validate

    report = validate(drafter, target, deep=True)  # NaN weights would waste an engine run too
    errors = sorted({f["code"] for f in report["findings"] if f["severity"] == "error"})
    if errors:
        raise EaglehubError(
            f"drafter {drafter} fails validation against the target: {', '.join(errors)}",
            hint=f"run `eaglehub validate {drafter} --target {target}` for details and fixes",
            exit_code=1,
        )


def _timing(run: RunResult) -> dict:
    return {
        "load_seconds": round(run.load_seconds, 3),
        "generate_seconds": round(run.generate_seconds, 3),
        "output_tokens": run.num_output_tokens,
        "output_tokens_per_second": round(run.output_tokens_per_second, 3),
    }


def compare_outputs(requests: list[Request], baseline: RunResult, run: RunResult) -> list[dict]:
    """Per request (:class:`Request`, the runs' output order): id, turn, category, match, first
    divergent output position, output token counts."""
    rows = []
    for r, ref, out in zip(requests, baseline.outputs, run.outputs):
        div = acceptance.first_divergence(ref, out)
        rows.append(
            {
                "id": r.id,
                "turn": r.turn,
                "category": r.category,
                "match": div is None,
                "first_divergence": div,
                "num_output_tokens": len(out),
                "num_output_tokens_target": len(ref),
            }
        )
    return rows


def _overall(run: RunResult) -> SpecCounters:
    return acceptance.total(run.group_counters.values())


def _where(rows: list[dict]) -> str:
    return ", ".join(f"{r['id']}@{r['first_divergence']}" for r in rows[:8]) + (" …" if len(rows) > 8 else "")


def _lossless_findings(rows: list[dict]) -> list[Finding]:
    """E-VERIFY-LOSSLESS for divergences forensics did not explain as near-ties (all of them when no
    forensics ran), else one W-VERIFY-NEAR-TIE."""
    bad = [r for r in rows if not r["match"]]
    if not bad:
        return []
    faults = [r for r in bad if (r.get("forensics") or {}).get("classification") != "near_tie"]
    if not faults:
        return [
            finding(
                "W-VERIFY-NEAR-TIE",
                "outputs",
                f"{len(bad)} of {len(rows)} prompts diverge, each at a near-tie of the target's top-2 logits "
                f"(id@first divergent token: {_where(bad)})",
            )
        ]
    explained = sum(r.get("forensics") is not None for r in faults)
    return [
        finding(
            "E-VERIFY-LOSSLESS",
            "outputs",
            f"{len(faults)} of {len(rows)} prompts differ from the target alone (id@first divergent token: "
            f"{_where(faults)}){'; forensics: not near-ties' if explained else ''}",
            hint="greedy float32 on CPU must be token-identical; check the target/drafter pairing and the engine "
            "version; the prompts' forensics give the target's top-2 logits at the divergence",
        )
    ]


def _low_al_findings(overall: SpecCounters, per_category: dict[str, SpecCounters]) -> list[Finding]:
    """One W-VERIFY-LOW-AL for the overall AL and one per category below the bar (F13)."""
    scopes = [("acceptance.overall", "overall", overall)]
    scopes += [(f"acceptance.per_category.{g}", f"category {g}", c) for g, c in per_category.items()]
    out = []
    for subject, label, c in scopes:
        al = acceptance.acceptance_length(c)
        if acceptance.low_acceptance_length(al):
            out.append(
                finding(
                    "W-VERIFY-LOW-AL",
                    subject,
                    f"{label}: acceptance length {al:.3f} < {acceptance.LOW_AL_THRESHOLD} over {c.num_drafts} drafts "
                    f"(tokens per verify pass, bonus included)",
                )
            )
    return out


def drafter_findings(rows: list[dict], run: RunResult, k: int) -> list[Finding]:
    """Findings of one drafter run, from its compared outputs ``rows`` and its counters.

    E-VERIFY-LOSSLESS (any prompt differs), E-VERIFY-NOT-WIRED (position-0 acceptance below
    :data:`~eaglehub.acceptance.NOT_WIRED_THRESHOLD`, or nothing drafted), E-VERIFY-COUNTERS (one
    per category whose counters break :func:`~eaglehub.acceptance.check_consistency`; the overall sum
    is consistent whenever every category is) and W-VERIFY-LOW-AL (:func:`_low_al_findings`).
    A drafter that is not wired gets no low-AL warnings: its AL is at most 1 + k · 0.02, and the
    error already says why.
    """
    findings = _lossless_findings(rows)
    overall = _overall(run)
    not_wired = acceptance.drafter_not_wired(overall)
    if not_wired:
        findings.append(
            finding(
                "E-VERIFY-NOT-WIRED",
                "acceptance.overall",
                f"position-0 acceptance is ≈ 0 (< {acceptance.NOT_WIRED_THRESHOLD}) over {overall.num_drafts} drafts",
                hint="the drafter's predictions do not reach the target: check d2t, aux layer ids, weight names "
                "(a missing tensor loads silently in vLLM) and that the drafter was trained for this target",
            )
        )
    for g, c in run.group_counters.items():
        problems = acceptance.check_consistency(c, k)
        if problems:
            findings.append(
                finding(
                    "E-VERIFY-COUNTERS",
                    f"acceptance.per_category.{g}",
                    f"category {g}: " + "; ".join(problems),
                )
            )
    if not not_wired:
        findings += _low_al_findings(overall, run.group_counters)
    return findings


def drafter_report(
    drafter: Path,
    target: Path,
    k: int,
    requests: list[Request],
    baseline: RunResult,
    run: RunResult,
    reference: ReferenceContext | None = None,
    explain=None,
) -> dict:
    """The report section of one drafter: outputs compared per request (``requests``: the runs'
    output order, :func:`requests_of`), acceptance per category and overall, findings, and (with
    ``reference``) the comparison with the reference report.

    ``explain(rows, run) -> ({request id: forensics dict}, note or None)``: divergence forensics for
    the divergent rows (:func:`forensics_for`); ``None``: none (each row's ``forensics`` stays ``None``)."""
    from .engines.vllm_engine import speculative_config

    rows = compare_outputs(requests, baseline, run)
    explained, note = explain([r for r in rows if not r["match"]], run) if explain else ({}, None)
    for r in rows:
        r["forensics"] = explained.get(r["id"])
    findings = drafter_findings(rows, run, k)
    overall = _overall(run)
    comparison = None
    if reference is not None:
        comparison, regression = compare_with_reference(drafter, acceptance.acceptance_length(overall), reference)
        findings += regression
    findings.sort(key=lambda f: f.severity != "error")  # errors first, each group in check order (stable sort)
    from .digest import files_sha256

    return {
        "drafter": str(drafter),
        "files_sha256": files_sha256(drafter),  # what `eaglehub publish` matches a checkpoint against
        "speculative_config": speculative_config(drafter, k),
        "serve_command": serve_command(target, drafter, k),
        "lossless": all(r["match"] for r in rows),
        "num_prompts": len(rows),
        "num_prompts_matched": sum(r["match"] for r in rows),
        "acceptance": {
            "overall": acceptance.acceptance_stats(overall),
            "per_category": {g: acceptance.acceptance_stats(c) for g, c in run.group_counters.items()},
            "per_request_mean_acceptance_length": acceptance.per_request_mean(run.prompt_counters),
        },
        "timing": _timing(run),
        "speed_ratio": round(run.output_tokens_per_second / baseline.output_tokens_per_second, 3)
        if baseline.output_tokens_per_second
        else None,
        "prompts": rows,
        "findings": [f.as_dict() for f in findings],
        "passed": not any(f.severity == "error" for f in findings),
        "reference": comparison,
        "forensics_note": note,
    }


# --- reference report (F26) ----------------------------------------------------------------------


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

    def bad(why: str) -> EaglehubError:
        return EaglehubError(f"reference report {path}: {why}", hint=hint)

    def no_constants(name: str):  # AL must be a finite number; json would otherwise accept NaN
        raise ValueError(f"{name} is not a JSON number")

    try:
        report = json.loads(path.read_text(encoding="utf-8"), parse_constant=no_constants)
    except OSError as exc:
        raise bad(f"cannot read it ({exc.strerror or exc})") from exc
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise bad(f"not valid JSON ({str(exc).splitlines()[0]})") from exc
    version = report.get("report_version") if isinstance(report, dict) else None
    if isinstance(report, dict) and version != REPORT_VERSION:
        raise bad(f"report_version {version!r}, this eaglehub reads version {REPORT_VERSION}")
    errors = schema_errors(report, REPORT_SCHEMA)
    if errors:
        where, message = errors[0]
        message = " ".join(message.split())  # one line, and short: jsonschema quotes whole sub-objects
        raise bad(f"not a verify report: {where}: {message[:160] + ' …' if len(message) > 160 else message}")
    return Reference(path.resolve(), report)


def settings_differences(settings: dict, prompts: dict, reference: dict) -> list[dict]:
    """The settings AL depends on that differ between this run and ``reference`` (a report dict).

    Compared: k, max_tokens (longer outputs reach other text), dtype, the prompt file's content
    (sha256) and the prompt selection (prompts per category, i.e. ``--category``/``--limit``).
    Returns ``[{setting, reference, run}]``, empty when comparable.
    """
    ref_settings, ref_prompts = reference["settings"], reference["prompts"]
    pairs = [(name, ref_settings[name], settings[name]) for name in ("num_speculative_tokens", "max_tokens", "dtype")]
    pairs += [(f"prompts.{name}", ref_prompts[name], prompts[name]) for name in ("sha256", "categories")]
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


def build_report(
    opts: VerifyOptions,
    target: Path,
    prompts: list[Prompt],
    prompts_file: Path,
    baseline: RunResult,
    runs: list[tuple[Path, RunResult]],
    reference: Reference | None = None,
    explain=None,
    requests: list[Request] | None = None,
) -> dict:
    """Assemble the full report (schema: ``schemas/verify-report.schema.json``); with ``reference``,
    every drafter is compared with it at ``opts.al_tolerance`` (:func:`compare_with_reference`);
    ``explain``: divergence forensics (:func:`drafter_report`); ``requests``: the order of the runs'
    outputs (default :func:`requests_of` ``prompts``)."""
    requests = requests_of(prompts) if requests is None else requests
    described = describe_prompts(prompts)
    engine = {"name": baseline.engine, "version": baseline.engine_version}
    batching = "one batch per prompt category, identical for every run; counters read between batches"
    if described["multi_turn"]:  # turn n + 1's input needs the baseline's turn-n output, so it cannot run in one go
        batching = (
            "one batch per prompt category, all its turns together; the primary engine's target-alone run "
            "goes turn by turn (one batch per category and turn); counters read between batches"
        )
    settings = {
        "num_speculative_tokens": opts.k,
        "max_tokens": opts.max_tokens,
        "dtype": opts.dtype,
        "temperature": 0.0,
        "seed": opts.seed,
        "max_model_len": opts.max_model_len,
        "engine_options": dict(opts.engine_options),
        "batching": batching,
    }
    prompts_section = {
        "file": str(prompts_file),
        "sha256": hashlib.sha256(prompts_file.read_bytes()).hexdigest(),
        "count": len(prompts),
        "categories": described["categories"],
        **{key: described[key] for key in ("format", "max_turns", "multi_turn")},
        "requests": len(requests),
    }
    ctx = (
        None
        if reference is None
        else ReferenceContext(
            reference,
            opts.al_tolerance,
            engine,
            opts.k,
            settings_differences(settings, prompts_section, reference.report),
        )
    )
    drafters = [drafter_report(d, target, opts.k, requests, baseline, r, ctx, explain) for d, r in runs]
    return {
        "report_version": REPORT_VERSION,
        "tool": {"name": "eaglehub", "version": __version__},
        "engine": engine,
        "target": {"spec": opts.target, "path": str(target)},
        "settings": settings,
        "prompts": prompts_section,
        "definitions": {
            "acceptance_length": acceptance.AL_DEFINITION,
            "acceptance_rate_per_position": acceptance.PER_POSITION_DEFINITION,
            "draft_acceptance_rate": acceptance.DRAFT_RATE_DEFINITION,
            "per_request_mean_acceptance_length": acceptance.PER_REQUEST_DEFINITION,
            "first_divergence": "0-based index of the first output token that differs from the target alone",
            "forensics": forensics.DEFINITION,
            "cross_engine": cross_engine.DEFINITION,
            "multi_turn": MULTI_TURN_DEFINITION,
        },
        "baseline": _timing(baseline),
        "drafters": drafters,
        "passed": all(d["passed"] for d in drafters),
    }


def validate_report(report: dict) -> None:
    """Check ``report`` against ``schemas/verify-report.schema.json``.

    Raises:
        EaglehubError: the report breaks the schema (a bug in eaglehub; exit code 1).
    """
    check_output(report, REPORT_SCHEMA, "verify report")


def write_report(report: dict, path: Path) -> None:
    """Validate, then write ``report`` as JSON to ``path`` atomically (temporary file + rename).

    Raises:
        EaglehubError: schema violation (see :func:`validate_report`) or the file cannot be written.
    """
    write_output(report, path, REPORT_SCHEMA, "verify report")


def write_plot(report: dict, path: Path) -> None:
    """PNG of acceptance length per category and acceptance rate per position (:mod:`eaglehub.plots`).

    Raises:
        EaglehubError: the file cannot be written.
    """
    from .plots import plot_acceptance

    try:
        plot_acceptance(report, path)
    except OSError as exc:
        raise EaglehubError(f"cannot write plot {path}: {exc}") from exc


def exit_code(report: dict) -> int:
    """1 when any drafter has an error finding (E-VERIFY-*), else 0; warnings never fail."""
    return 0 if report["passed"] else 1


def forensics_for(
    prompt_ids: dict[str, list[int]],
    baseline: RunResult,
    load_target,
    dtype: str,
    epsilon: float | None,
    decode=None,
):
    """The ``explain`` callable of :func:`drafter_report`: loads the target (``load_target()`` →
    :class:`~eaglehub.engines.reference.ReferenceTarget`) only when a prompt diverges, then
    :func:`eaglehub.forensics.explain` on each divergence."""
    order = {pid: i for i, pid in enumerate(prompt_ids)}

    def explain(rows: list[dict], run: RunResult) -> tuple[dict[str, dict], str | None]:
        if not rows:
            return {}, None
        divs = [
            forensics.Divergence(
                r["id"],
                prompt_ids[r["id"]],
                baseline.outputs[order[r["id"]]],
                run.outputs[order[r["id"]]],
                r["first_divergence"],
            )
            for r in rows
        ]
        try:
            target = load_target()
        except EaglehubError as exc:  # forensics explains; it must not hide the divergence it cannot explain
            return {}, f"no divergence forensics: {exc.message}"
        found = forensics.explain(target, divs, forensics.tie_epsilon(dtype, epsilon), decode)
        return {f["id"]: f for f in found}, None

    return explain


def _check_options(opts: VerifyOptions) -> None:
    if opts.k < 1 or opts.max_tokens < 1:
        raise EaglehubError("-k and --max-tokens must be at least 1", hint="e.g. -k 3 --max-tokens 64")
    if not opts.drafters:
        raise EaglehubError("give at least one --drafter")
    for name, value in (("--al-tolerance", opts.al_tolerance), ("--engine-tolerance", opts.engine_tolerance)):
        if not 0.0 <= value < 1.0:  # also refuses NaN
            raise EaglehubError(f"{name} must be a fraction in [0, 1), got {value}", hint="5 % is 0.05")
    if opts.sampling_trials and not MIN_SAMPLING_TRIALS <= opts.sampling_trials:
        raise EaglehubError(
            f"--sampling-trials {opts.sampling_trials} is too few for a chi-square test",
            hint=f"give at least {MIN_SAMPLING_TRIALS} (2000000 finds a 1 % bias), or 0 for no test",
        )
    if opts.sampling_trials and not 0.05 <= opts.sampling_temperature <= 10:  # also refuses NaN and inf
        raise EaglehubError(
            f"--sampling-temperature must be in [0.05, 10], got {opts.sampling_temperature}",
            hint="the sampling test needs T > 0; 1.0 is the target's own distribution",
        )
    if opts.tie_epsilon is not None and not (math.isfinite(opts.tie_epsilon) and opts.tie_epsilon >= 0):
        raise EaglehubError(
            f"--tie-epsilon must be a finite logit gap >= 0, got {opts.tie_epsilon}",
            hint="leave it out for the dtype's default (float32: 0.01)",
        )
    if opts.k > MAX_K:
        raise EaglehubError(
            f"-k {opts.k} is more draft tokens than any EAGLE drafter proposes usefully",
            hint=f"use at most {MAX_K} (the manifest schema's bound too)",
        )


MULTI_TURN_DEFINITION = (
    "a request is one (prompt, user turn): id = the prompt id for turn 1, <prompt id>#<n> for turn n; the input of "
    "turn n + 1 holds the assistant reply of turn n = the primary engine's target-alone output for turn n, decoded with "
    "special tokens skipped, so every run of every engine receives the same token ids; a drafter run's own outputs are "
    "only compared with the target's, never fed back"
)
"""The reply rule of :mod:`eaglehub.engines.chat`, as the report's ``definitions.multi_turn``."""


@dataclass(frozen=True)
class Request:
    """One engine request: user turn ``turn`` (1-based) of ``prompt``, after the replies to the
    turns before it (:data:`MULTI_TURN_DEFINITION`).

    ``id``: the prompt id for turn 1, ``<prompt id>#<turn>`` after (prompt ids never hold ``#``,
    ``schemas/prompts*.schema.json``, so request ids are unique); ``category``: the prompt's (its
    batch and counter group)."""

    prompt: Prompt
    turn: int = 1

    @property
    def id(self) -> str:
        return self.prompt.id if self.turn == 1 else f"{self.prompt.id}#{self.turn}"

    @property
    def category(self) -> str:
        return self.prompt.category


def requests_of(prompts: list[Prompt]) -> list[Request]:
    """Every (prompt, turn) in conversation order: p1 turn 1, p1 turn 2, …, p2 turn 1, … (one per
    prompt for single-turn sets, so request ids are the prompt ids)."""
    return [Request(p, n) for p in prompts for n in range(1, len(p.turns) + 1)]


def merge_runs(phases: list[tuple[list[int], RunResult]], n: int) -> RunResult:
    """One run of ``n`` requests from runs over disjoint parts of them (the turns of a baseline).

    ``phases``: ``(request indices, run)`` pairs that cover 0..n−1 once. Outputs, and per-request
    counters where every phase has them, go to their indices; seconds and counters are summed (per
    group for group counters and group seconds); engine name and version are the first phase's;
    ``diagnostics`` is dropped (per-phase means). A single phase is returned as it is.

    Raises:
        ValueError: the indices do not cover 0..n−1 exactly once (a caller's bug).
    """
    if sorted(i for index, _ in phases for i in index) != list(range(n)):
        raise ValueError(f"phases must cover requests 0..{n - 1} once each")
    if len(phases) == 1:
        return phases[0][1]
    outputs: list = [None] * n
    counters: list = [None] * n
    group_counters: dict[str, SpecCounters] = {}
    group_seconds: dict[str, float] = {}
    for index, run in phases:
        for i, out in zip(index, run.outputs):
            outputs[i] = out
        for i, c in zip(index, run.prompt_counters or ()):
            counters[i] = c
        for g, c in run.group_counters.items():
            group_counters[g] = group_counters[g] + c if g in group_counters else c
        for g, sec in run.group_seconds.items():
            group_seconds[g] = group_seconds.get(g, 0.0) + sec
    first = phases[0][1]
    return RunResult(
        outputs=outputs,
        group_counters=group_counters,
        generate_seconds=sum(r.generate_seconds for _, r in phases),
        load_seconds=sum(r.load_seconds for _, r in phases),
        engine=first.engine,
        engine_version=first.engine_version,
        prompt_counters=counters if all(r.prompt_counters is not None for _, r in phases) else None,
        group_seconds=group_seconds,
    )


def run_by_turn(run, requests: list[Request], encode, decode) -> tuple[RunResult, list[list[int]]]:
    """The target-alone baseline turn by turn, and the input token ids of every request.

    ``run(ids, groups, turn) -> RunResult`` runs one phase: the requests of user turn ``turn``, in
    request order, grouped by category. ``encode([(turns, replies)]) -> [ids]`` renders and
    tokenizes (:meth:`~eaglehub.engines.chat.ChatTokenizer.encode_turn`); ``decode(output ids) ->
    str`` (:meth:`~eaglehub.engines.chat.ChatTokenizer.decode`; only called when a later turn exists).
    The reply before turn n + 1 is the same prompt's phase-n output decoded (the rule of
    :mod:`eaglehub.engines.chat`).

    Returns:
        ``(baseline, ids)``: the phases merged (:func:`merge_runs`) and one id list per request,
        both in request order.

    Raises:
        EaglehubError: as ``run`` and ``encode`` raise.
    """
    ids: list = [None] * len(requests)
    replies: dict[str, list[str]] = {r.prompt.id: [] for r in requests}
    phases = []
    for turn in range(1, max(r.turn for r in requests) + 1):
        index = [i for i, r in enumerate(requests) if r.turn == turn]
        batch = encode([(requests[i].prompt.turns[:turn], replies[requests[i].prompt.id]) for i in index])
        result = run(batch, [requests[i].category for i in index], turn)
        for i, x, out in zip(index, batch, result.outputs):
            ids[i] = x
            if turn < len(requests[i].prompt.turns):
                replies[requests[i].prompt.id].append(decode(out))
        phases.append((index, result))
    return merge_runs(phases, len(requests)), ids


def _chat_codec(target: Path, prompts: list[Prompt]):
    """``(encode, decode)`` for :func:`run_by_turn`. Single-turn sets go through
    :func:`~eaglehub.engines.chat.encode_chat` as before multi-turn support; multi-turn sets load
    one :class:`~eaglehub.engines.chat.ChatTokenizer` and render the longest chat once with empty
    replies, so a template that refuses multi-turn chats fails before any engine work."""
    from .engines import chat

    if all(len(p.turns) == 1 for p in prompts):
        return (lambda convs: chat.encode_chat(target, [turns[0] for turns, _ in convs])), None
    tok = chat.ChatTokenizer(target)
    longest = max(prompts, key=lambda p: len(p.turns))
    tok.render(longest.turns, [""] * (len(longest.turns) - 1))
    return (lambda convs: [tok.encode_turn(turns, replies) for turns, replies in convs]), tok.decode


def run_verify(
    opts: VerifyOptions, engine: Engine | None = None, console=None, engines: list[Engine] | None = None
) -> dict:
    """Run the baseline and every drafter in each engine, return the validated report.

    ``engines`` (or one ``engine``; default :func:`make_engines` of ``opts.engines``): the first is
    primary; each further one is compared with it (:mod:`eaglehub.cross_engine`). ``console``: a rich
    Console for the progress bar (``None``: no progress display).

    Multi-turn prompts (MT-Bench, Spec-Bench): each (prompt, turn) is a :class:`Request`. The primary
    engine runs the target alone turn by turn (:func:`run_by_turn`), its outputs becoming the
    replies in the next turn's input; every other run (each drafter, each further engine's baseline
    and drafters) then takes all requests at once with those token ids. Single-turn sets run the
    baseline once, as one phase.

    Raises:
        EaglehubError: bad target/drafter/prompts/options or reference report (exit 2), engine
            missing (exit 2), a drafter with error findings (exit 1, :func:`preflight`) or engine
            failure (exit 1).
    """
    from .target import resolve_target

    _check_options(opts)
    # a bad reference is a usage error: refuse it before minutes of engine work
    reference = load_reference_report(opts.reference_report) if opts.reference_report else None
    engines = engines or ([engine] if engine is not None else make_engines(opts.engines, device=opts.device))
    for e in engines:
        e.version()  # fail fast, before any model work, when an engine is missing
    drafters = [
        _resolve_drafter(d) for d in [*opts.drafters, *([opts.baseline_drafter] if opts.baseline_drafter else [])]
    ]
    target = resolve_target(opts.target)
    for d in drafters:
        preflight(d, target)
    prompts_file = Path(opts.prompts_file) if opts.prompts_file else None
    prompts = load_prompts(prompts_file, opts.categories, opts.limit)
    requests = requests_of(prompts)
    encode, decode = _chat_codec(target, prompts)
    groups = [r.category for r in requests]
    specs = [
        RunSpec(
            target,
            None,
            opts.k,
            opts.max_tokens,
            opts.dtype,
            opts.seed,
            opts.max_model_len,
            engine_options=dict(opts.engine_options),
        )
    ]
    specs += [
        RunSpec(
            target,
            d,
            opts.k,
            opts.max_tokens,
            opts.dtype,
            opts.seed,
            opts.max_model_len,
            engine_options=dict(opts.engine_options),
        )
        for d in drafters
    ]
    load_target = _target_loader(engines, target, opts)
    file = (prompts_file or default_prompts_path()).resolve()
    multi_turn = any(r.turn > 1 for r in requests)
    reports, all_results, ids = [], [], None
    for e in engines:
        if ids is None:  # the primary engine's baseline writes the replies every later input holds
            with _progress(console) as run:
                baseline, ids = run_by_turn(
                    lambda x, g, turn: run(e, specs[0], x, g, _label(specs[0], turn if multi_turn else None)),
                    requests,
                    encode,
                    decode,
                )
                results = [baseline] + [run(e, s, ids, groups, _label(s)) for s in specs[1:]]
        else:
            results = _run_all(e, specs, ids, groups, console)
        explain = forensics_for(
            {r.id: i for r, i in zip(requests, ids)}, results[0], load_target, opts.dtype, opts.tie_epsilon
        )
        reports.append(
            build_report(
                opts,
                target,
                prompts,
                file,
                results[0],
                list(zip(drafters, results[1:])),
                reference,
                explain,
                requests,
            )
        )
        all_results.append(results)
    report = reports[0]
    if len(engines) > 1:
        _attach_cross_engine(report, reports[1:], all_results, opts.engine_tolerance)
    if opts.sampling_trials:
        assert ids is not None  # set by the first engine's baseline
        _attach_sampling_tests(report, engines, specs[1:], requests, ids, opts)
    if opts.baseline_drafter:
        from .baseline_compare import attach_baseline

        attach_baseline(report, drafters[-1])
    validate_report(report)
    return report


def _target_loader(engines: list[Engine], target: Path, opts: VerifyOptions):
    """Forensics' target: the reference engine's loaded one when it runs, else loaded once on demand."""
    from .engines.reference import ReferenceEngine

    ref = next((e for e in engines if isinstance(e, ReferenceEngine)), None) or ReferenceEngine(device=opts.device)
    return lambda: ref.target(target, opts.dtype)


def _refresh_passed(report: dict) -> None:
    for d in report["drafters"]:
        d["findings"].sort(key=lambda f: f["severity"] != "error")
        d["passed"] = not any(f["severity"] == "error" for f in d["findings"])
    report["passed"] = all(d["passed"] for d in report["drafters"])


def _attach_cross_engine(report: dict, others: list[dict], results: list[list[RunResult]], tolerance: float) -> None:
    """``cross_engine`` section: each other engine's report parts and its comparison with the primary."""
    section: dict[str, Any] = {"tolerance": tolerance, "engines": []}
    for other, runs in zip(others, results[1:]):
        rows, extra = cross_engine.compare(report, other, results[0], runs, tolerance)
        for d, found in zip(report["drafters"], extra):
            d["findings"] += [f.as_dict() for f in found]
        section["engines"].append(
            {
                "engine": other["engine"],
                "baseline": other["baseline"],
                "comparison": rows,
                "drafters": other["drafters"],
            }
        )
    report["cross_engine"] = section
    _refresh_passed(report)


def _attach_sampling_tests(
    report: dict,
    engines: list[Engine],
    specs: list[RunSpec],
    requests: list[Request],
    ids: list[list[int]],
    opts: VerifyOptions,
) -> None:
    """Each drafter's ``sampling_test`` section (:mod:`eaglehub.sampling_check`), on the reference
    engine, at the first request of each category (its id and category stand in for a prompt's)."""
    from dataclasses import replace

    from .engines.reference import ReferenceEngine
    from .sampling_check import first_per_category, run_engine_sampling_test, run_sampling_test

    ref = next((e for e in engines if isinstance(e, ReferenceEngine)), None) or ReferenceEngine(device=opts.device)
    chosen = first_per_category(requests, ids, opts.sampling_prefixes)
    for d, spec in zip(report["drafters"], specs):
        hot = replace(spec, temperature=opts.sampling_temperature)
        section, found = run_sampling_test(ref, hot, chosen, opts.sampling_trials)
        section["engine_outputs"] = []
        for e in engines:
            if opts.engine_samples and not isinstance(e, ReferenceEngine):  # the reference rule is tested above
                part, more = run_engine_sampling_test(
                    e, hot, chosen, opts.engine_samples, ref.target(spec.target, opts.dtype)
                )
                section["engine_outputs"].append(part)
                found += more
        d["sampling_test"] = section
        d["findings"] += [f.as_dict() for f in found]
    _refresh_passed(report)


def _run_all(engine: Engine, specs: list[RunSpec], ids: list[list[int]], groups: list[str], console) -> list[RunResult]:
    """Run every spec in order, with a rich progress bar (one task per run, in requests)."""
    with _progress(console) as run:
        return [run(engine, s, ids, groups, _label(s)) for s in specs]


def _label(spec: RunSpec, turn: int | None = None) -> str:
    if spec.drafter:
        return f"target + drafter {spec.drafter.name} (k={spec.k})"
    return "target alone" if turn is None else f"target alone (turn {turn})"


@contextmanager
def _progress(console):
    """Yields ``run(engine, spec, ids, groups, label) -> RunResult``, each call one task of a rich
    progress bar on ``console`` (in requests); ``console`` None: no display."""
    if console is None:
        yield lambda engine, spec, ids, groups, label: engine.run(spec, ids, groups)
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as bar:

        def run(engine, spec, ids, groups, label):
            task = bar.add_task(label, total=len(ids))
            return engine.run(spec, ids, groups, progress=lambda _g, n: bar.advance(task, n))

        yield run
