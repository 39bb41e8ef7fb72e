"""``eaglehub verify``: prove a target + EAGLE-3 drafter pair lossless in an engine and measure acceptance.

One target-alone run is the baseline; each drafter then runs with the same target, the same prompt
token ids (chat template applied once, :mod:`eaglehub.engines.chat`), greedy decoding, the same
seed and the same batches (one batch per prompt category, so the counters are read per category).
Per prompt the output token ids are compared with the baseline (exact ids: on CPU float32 no
numerical-tie divergence is expected, benchmarks.md §4 pitfall 1). Acceptance metrics follow
:mod:`eaglehub.acceptance` (vllm.md §9).

A drafter fails when any prompt's output differs from the baseline (``lossless_mismatch``), when
position-0 acceptance is ≈ 0 (``drafter_not_wired``, failure-kinds.md Cross-cutting), or when the
engine's counters break their invariants (``counters_inconsistent``). The report (a dict valid
against ``schemas/verify-report.schema.json``) records all of it; :func:`exit_code` is 1 when any
drafter fails, else 0.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__, acceptance
from .atomic import atomic_file
from .engines.base import Engine, RunResult, RunSpec
from .errors import EaglehubError
from .prompts import Prompt, default_prompts_path, load_prompts
from .schemas import schema_errors

REPORT_SCHEMA = "verify-report"
REPORT_VERSION = 1


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


def serve_command(target: Path, drafter: Path, k: int) -> str:
    """The ready-to-paste ``vllm serve`` line for the pair (vllm.md §8: method + absolute path)."""
    from .engines.vllm_engine import speculative_config

    return f"vllm serve {shlex.quote(str(target))} --speculative-config {shlex.quote(json.dumps(speculative_config(drafter, k)))}"


def _resolve_drafter(spec: str) -> Path:
    path = Path(spec).expanduser()
    if not (path / "config.json").is_file():
        raise EaglehubError(f"drafter {spec} is not a directory with config.json",
                            hint="pass a local EAGLE-3 drafter checkpoint directory")
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
        raise EaglehubError(f"drafter {drafter} fails validation against the target: {', '.join(errors)}",
                            hint=f"run `eaglehub validate {drafter} --target {target}` for details and fixes",
                            exit_code=1)


def _timing(run: RunResult) -> dict:
    return {"load_seconds": round(run.load_seconds, 3), "generate_seconds": round(run.generate_seconds, 3),
            "output_tokens": run.num_output_tokens,
            "output_tokens_per_second": round(run.output_tokens_per_second, 3)}


def compare_outputs(prompts: list[Prompt], baseline: RunResult, run: RunResult) -> list[dict]:
    """Per prompt: id, category, match, first divergent output position, output token counts."""
    rows = []
    for p, ref, out in zip(prompts, baseline.outputs, run.outputs):
        div = acceptance.first_divergence(ref, out)
        rows.append({"id": p.id, "category": p.category, "match": div is None, "first_divergence": div,
                     "num_output_tokens": len(out), "num_output_tokens_target": len(ref)})
    return rows


def drafter_failures(rows: list[dict], run: RunResult, k: int) -> list[dict]:
    """Named failures of one drafter run (codes: lossless_mismatch, drafter_not_wired, counters_inconsistent)."""
    failures = []
    bad = [r for r in rows if not r["match"]]
    if bad:
        where = ", ".join(f"{r['id']}@{r['first_divergence']}" for r in bad[:8]) + (" …" if len(bad) > 8 else "")
        failures.append({
            "code": "lossless_mismatch", "severity": "error",
            "message": f"{len(bad)} of {len(rows)} prompts differ from the target alone (id@first divergent token: {where})",
            "hint": "greedy float32 on CPU must be token-identical; check the target/drafter "
                    "pairing and the engine version, then look at the target's top-1/top-2 margin at the divergence"})
    overall = acceptance.total(run.group_counters.values())
    if acceptance.drafter_not_wired(overall):
        failures.append({
            "code": "drafter_not_wired", "severity": "error",
            "message": f"position-0 acceptance is ≈ 0 (< {acceptance.NOT_WIRED_THRESHOLD}) over {overall.num_drafts} drafts",
            "hint": "the drafter's predictions do not reach the target: check d2t, aux layer ids, weight names "
                    "(a missing tensor loads silently in vLLM) and that the drafter was trained for this target"})
    problems = acceptance.check_consistency(overall, k)
    if problems:
        failures.append({"code": "counters_inconsistent", "severity": "error", "message": "; ".join(problems),
                         "hint": "the engine's spec-decode counters break their invariants; report an engine bug"})
    return failures


def drafter_report(drafter: Path, target: Path, k: int, prompts: list[Prompt], baseline: RunResult, run: RunResult) -> dict:
    """The report section of one drafter: outputs compared, acceptance per category and overall, failures."""
    from .engines.vllm_engine import speculative_config

    rows = compare_outputs(prompts, baseline, run)
    failures = drafter_failures(rows, run, k)
    overall = acceptance.total(run.group_counters.values())
    return {
        "drafter": str(drafter),
        "speculative_config": speculative_config(drafter, k),
        "serve_command": serve_command(target, drafter, k),
        "lossless": all(r["match"] for r in rows),
        "num_prompts": len(rows),
        "num_prompts_matched": sum(r["match"] for r in rows),
        "acceptance": {
            "overall": acceptance.acceptance_stats(overall),
            "per_category": {g: acceptance.acceptance_stats(c) for g, c in run.group_counters.items()},
        },
        "timing": _timing(run),
        "speed_ratio": round(run.output_tokens_per_second / baseline.output_tokens_per_second, 3)
        if baseline.output_tokens_per_second else None,
        "prompts": rows,
        "failures": failures,
        "passed": not failures,
    }


def build_report(opts: VerifyOptions, target: Path, prompts: list[Prompt], prompts_file: Path,
                 baseline: RunResult, runs: list[tuple[Path, RunResult]]) -> dict:
    """Assemble the full report (schema: ``schemas/verify-report.schema.json``)."""
    drafters = [drafter_report(d, target, opts.k, prompts, baseline, r) for d, r in runs]
    categories: dict[str, int] = {}
    for p in prompts:
        categories[p.category] = categories.get(p.category, 0) + 1
    return {
        "report_version": REPORT_VERSION,
        "tool": {"name": "eaglehub", "version": __version__},
        "engine": {"name": baseline.engine, "version": baseline.engine_version},
        "target": {"spec": opts.target, "path": str(target)},
        "settings": {"num_speculative_tokens": opts.k, "max_tokens": opts.max_tokens, "dtype": opts.dtype,
                     "temperature": 0.0, "seed": opts.seed, "max_model_len": opts.max_model_len,
                     "batching": "one batch per prompt category, identical for every run; counters read between batches"},
        "prompts": {"file": str(prompts_file), "count": len(prompts), "categories": categories},
        "definitions": {"acceptance_length": acceptance.AL_DEFINITION,
                        "acceptance_rate_per_position": acceptance.PER_POSITION_DEFINITION,
                        "draft_acceptance_rate": acceptance.DRAFT_RATE_DEFINITION,
                        "first_divergence": "0-based index of the first output token that differs from the target alone"},
        "baseline": _timing(baseline),
        "drafters": drafters,
        "passed": all(d["passed"] for d in drafters),
    }


def validate_report(report: dict) -> None:
    """Check ``report`` against ``schemas/verify-report.schema.json``.

    Raises:
        EaglehubError: the report breaks the schema (a bug in eaglehub; exit code 1).
    """
    errors = schema_errors(report, REPORT_SCHEMA)
    if errors:
        where, message = errors[0]
        raise EaglehubError(f"internal error: verify report breaks its schema at {where}: {message}", exit_code=1)


def write_report(report: dict, path: Path) -> None:
    """Validate, then write ``report`` as JSON to ``path`` atomically (temporary file + rename).

    Raises:
        EaglehubError: schema violation (see :func:`validate_report`) or the file cannot be written.
    """
    validate_report(report)
    path = Path(path)
    try:
        with atomic_file(path) as tmp:
            tmp.write_text(json.dumps(report, indent=2) + "\n")
    except OSError as exc:
        raise EaglehubError(f"cannot write report {path}: {exc}") from exc


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
    """1 when any drafter failed (not lossless, not wired, inconsistent counters), else 0."""
    return 0 if report["passed"] else 1


def run_verify(opts: VerifyOptions, engine: Engine | None = None, console=None) -> dict:
    """Run the baseline and every drafter, return the validated report.

    ``console``: a rich Console for the progress bar (``None``: no progress display).

    Raises:
        EaglehubError: bad target/drafter/prompts/options (exit 2), engine missing (exit 2), a
            drafter with error findings (exit 1, :func:`preflight`) or engine failure (exit 1).
    """
    from .engines.chat import encode_chat
    from .target import resolve_target

    if opts.k < 1 or opts.max_tokens < 1:
        raise EaglehubError("-k and --max-tokens must be at least 1")
    if not opts.drafters:
        raise EaglehubError("give at least one --drafter")
    if engine is None:
        from .engines.vllm_engine import VllmEngine

        engine = VllmEngine()
    engine.version()  # fail fast, before any model work, when the engine is missing
    drafters = [_resolve_drafter(d) for d in opts.drafters]
    target = resolve_target(opts.target)
    for d in drafters:
        preflight(d, target)
    prompts_file = Path(opts.prompts_file) if opts.prompts_file else None
    prompts = load_prompts(prompts_file, opts.categories, opts.limit)
    ids = encode_chat(target, [p.text for p in prompts])
    groups = [p.category for p in prompts]
    specs = [RunSpec(target, None, opts.k, opts.max_tokens, opts.dtype, opts.seed, opts.max_model_len)]
    specs += [RunSpec(target, d, opts.k, opts.max_tokens, opts.dtype, opts.seed, opts.max_model_len) for d in drafters]
    results = _run_all(engine, specs, ids, groups, console)
    report = build_report(opts, target, prompts, (prompts_file or default_prompts_path()).resolve(), results[0],
                          list(zip(drafters, results[1:])))
    validate_report(report)
    return report


def _run_all(engine: Engine, specs: list[RunSpec], ids: list[list[int]], groups: list[str], console) -> list[RunResult]:
    """Run every spec in order, with a rich progress bar (one task per run, in prompts)."""
    if console is None:
        return [engine.run(s, ids, groups) for s in specs]
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    results = []
    with Progress(*columns, console=console, transient=False) as bar:
        for s in specs:
            label = f"target + drafter {s.drafter.name} (k={s.k})" if s.drafter else "target alone"
            task = bar.add_task(label, total=len(ids))
            results.append(engine.run(s, ids, groups, progress=lambda _g, n, t=task: bar.advance(t, n)))
    return results
