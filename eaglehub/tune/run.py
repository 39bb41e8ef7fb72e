"""``eaglehub tune``: the k to serve at each batch size, from the user's prompts and the serving engine's costs.

1. Acceptance: one engine run at K = ``--max-k`` gives the unconditional acceptance rate per draft position
   and from it AL(k) for every k ≤ K (:data:`eaglehub.measure.curve.MODEL`); runs at two other k check that
   prediction (the error is reported, W-TUNE-AL-MODEL past :data:`AL_TOLERANCE`).
2. Cost: every engine step of those runs (and of a target-alone run) is timed on its own
   (:mod:`eaglehub.tune.worker`), so acceptance does not enter the cost; the mean step time of each
   (batch size, k) cell is fitted to :mod:`eaglehub.tune.costs`'s model, printed with its residuals. Costs
   measured elsewhere (``--costs FILE``, written by ``--save-costs``) replace the measurement.
3. The schedule (:mod:`eaglehub.tune.schedule`): at each batch size, the k with the highest predicted
   throughput; vLLM's ``num_speculative_tokens_per_batch_size``, TensorRT-LLM's ``draft_len_schedule`` and the
   break-even batch size.
4. ``--check``: the engine run with the schedule and with every static k at every concurrency level,
   repeated; measured against predicted throughput per cell, and whether the schedule is at least as good
   as the best static k at every level (within that k's measured spread).

Throughput here is decode throughput: the output tokens of the engine steps that run exactly c requests, all
past their prefill, over those steps' wall time (:meth:`eaglehub.tune.engine.Pass.throughput`). Prefill is
left out: it costs the same for every k.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from eaglehub import __version__
from eaglehub.engines.base import SpecCounters
from eaglehub.errors import EaglehubError, UsageError
from eaglehub.io.schemas import check_output, write_output
from eaglehub.measure.curve import MODEL, AcceptanceCurve, curve_from_counters
from eaglehub.tune.costs import FORMULA, CostModel, cells_from_steps, fit, target_cells_from
from eaglehub.tune.engine import EngineRun, RunSettings, run_engine
from eaglehub.tune.schedule import Schedule, best_schedule, serve_line, speculative_config, throughput

REPORT_SCHEMA = "tune-report"
COSTS_SCHEMA = "tune-costs"
REPORT_VERSION = 1
DEFAULT_CONCURRENCY = (1, 2, 4, 8)
DEFAULT_MAX_K = 4
MAX_K = 16
AL_TOLERANCE = 0.03
"""Relative error of AL(k) predicted from the run at K against a direct run at k, past which the model is
said not to hold for this drafter (W-TUNE-AL-MODEL)."""
CPU_NOTE = (
    "costs measured on a CPU: the schedule is this machine's; a GPU server's step costs differ in every "
    "coefficient (memory bandwidth, kernels, CUDA graphs, the batch size where compute starts to bind), so "
    "measure them there (eaglehub tune ... --save-costs costs.json) and plan with --costs costs.json"
)
DEFINITIONS = {
    "throughput": "decode tokens per second at batch size c: output tokens of the engine steps with exactly c "
    "requests in flight, all past their prefill, over those steps' wall time",
    "predicted_throughput": "1000 * c * AL(k) / step_ms(c, k), AL(0) = 1",
    "step_ms": FORMULA,
    "acceptance_model": MODEL,
    "residual": "(measured - predicted) / predicted",
}


@dataclass
class TuneOptions:
    """Inputs of one tune run (``eaglehub tune --help`` for units and defaults)."""

    target: str
    drafter: str
    max_k: int = DEFAULT_MAX_K
    concurrency: list[int] = field(default_factory=lambda: list(DEFAULT_CONCURRENCY))
    repeats: int = 3
    max_tokens: int = 64
    prompts_file: str | None = None
    categories: tuple[str, ...] = ()
    limit: int | None = None
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    dtype: str = "float32"
    seed: int = 0
    max_model_len: int = 2048
    max_batch: int | None = None
    costs: str | None = None
    acceptance: str | None = None
    check: bool = False
    log_dir: Path | None = None


def check_options(opts: TuneOptions) -> None:
    """Refuse bad options before any model work.

    Raises:
        UsageError: (exit 2) a --max-k outside 1..16, a --max-batch below the largest level, repeats below 1,
            fewer than 3 repeats with --check (no spread), or --check with --costs (the check measures here).
    """
    if not 1 <= opts.max_k <= MAX_K:
        raise UsageError(f"--max-k {opts.max_k} is outside 1..{MAX_K}", hint="e.g. --max-k 4")
    if opts.repeats < 1:
        raise UsageError(f"--repeats {opts.repeats} must be at least 1", hint="e.g. --repeats 3")
    if opts.max_batch is not None and opts.max_batch < max(opts.concurrency):
        raise UsageError(
            f"--max-batch {opts.max_batch} is below the largest --concurrency level {max(opts.concurrency)}",
            hint=f"--max-batch {max(opts.concurrency)} or more",
        )
    if opts.check and opts.repeats < 3:
        raise UsageError(
            f"--check with --repeats {opts.repeats}: a spread needs at least 3 repeats", hint="--repeats 3"
        )
    if opts.check and (opts.costs or opts.acceptance):
        raise UsageError(
            "--check measures the schedule on this machine's engine; it cannot check costs or acceptance "
            "measured elsewhere (--costs, --acceptance)",
            hint="drop --check, or drop --costs / --acceptance to measure both here",
        )


def check_ks(max_k: int) -> list[int]:
    """The two k below K whose direct runs check AL(k) predicted from the run at K: 1 and K/2 (at least 2);
    only 1 when K is 2, none when K is 1."""
    return sorted({1, max(2, max_k // 2)} - {max_k}) if max_k > 1 else []


# --- reading saved inputs --------------------------------------------------------------------------------------


def _read_json(path: str, option: str):
    from eaglehub.io import jsonio

    try:
        return jsonio.read(path)
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot read it: {exc.strerror or exc}", hint="check the path") from exc
    except ValueError as exc:
        raise UsageError(f"{option} {path}: not JSON: {exc}", hint="give the file eaglehub wrote") from exc


def load_costs(path: str) -> CostModel:
    """A cost model ``--save-costs`` wrote.

    Raises:
        UsageError: (exit 2) unreadable, not JSON or breaking ``schemas/tune-costs.schema.json``.
    """
    from eaglehub.io.schemas import schema_errors

    doc = _read_json(path, "--costs")
    errors = schema_errors(doc, COSTS_SCHEMA)
    if errors:
        where, message = errors[0]
        raise UsageError(
            f"--costs {path}: not a tune cost file ({where}: {' '.join(message.split())[:160]})",
            hint="write one with eaglehub tune --target T --drafter D --save-costs FILE on the serving machine",
        )
    return CostModel.from_dict(doc)


def load_acceptance(path: str) -> AcceptanceCurve:
    """The acceptance curve of a tune report, or of the one drafter of a verify report (local or ``--endpoint``).

    Raises:
        UsageError: (exit 2) unreadable, neither report, or a verify report without exactly one curve.
    """
    from eaglehub.measure.curve import entry_curve

    doc = _read_json(path, "--acceptance")
    hint = "give a tune report or a verify report of one drafter (eaglehub verify ... --report FILE)"
    if isinstance(doc, dict) and isinstance(doc.get("acceptance"), dict) and "curve" in doc["acceptance"]:
        try:
            return AcceptanceCurve.from_dict(doc["acceptance"]["curve"])
        except ValueError as exc:
            raise UsageError(f"--acceptance {path}: {exc}", hint=hint) from exc
    entries = doc.get("drafters") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or len(entries) != 1 or "settings" not in doc:
        raise UsageError(f"--acceptance {path}: not a tune report or a one-drafter verify report", hint=hint)
    curve = entry_curve(doc, entries[0])
    if curve is None:
        raise UsageError(f"--acceptance {path}: its drafter has no measured acceptance curve", hint=hint)
    return curve


# --- assembling --------------------------------------------------------------------------------------------------


def _counters(run: EngineRun, concurrency: int) -> SpecCounters:
    """The counters of the first pass at ``concurrency``: each prompt served once (more passes repeat the
    same greedy outputs and would only inflate the sample size)."""
    first = next(p for p in run.passes if p.concurrency == concurrency and p.rep == 0)
    return first.counters


def _spread(values: list[float]) -> dict:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "repeats": len(values),
        "values": values,
    }


def grid(runs: list[EngineRun], curve: AcceptanceCurve, costs: CostModel) -> list[dict]:
    """Measured (median and spread of the repeats) against predicted throughput, per (k, concurrency) cell."""
    out = []
    for run in runs:
        if run.schedule is not None:
            continue
        for c in sorted({p.concurrency for p in run.passes}):
            values = [t for p in run.passes if p.concurrency == c and (t := p.throughput()) is not None]
            if not values or run.k > curve.k:
                continue
            spread = _spread(values)
            predicted = throughput(c, run.k, curve, costs)
            out.append(
                {
                    "k": run.k,
                    "concurrency": c,
                    "measured": spread,
                    "predicted": predicted,
                    "error": predicted / spread["median"] - 1.0,
                }
            )
    return out


def al_check(runs: list[EngineRun], curve: AcceptanceCurve, concurrency: int) -> list[dict]:
    """AL(k) predicted from the run at K against the direct run at each other k > 0."""
    from eaglehub.measure.acceptance import acceptance_length

    out = []
    for run in runs:
        if run.schedule is not None or run.k in (0, curve.k):
            continue
        counters = _counters(run, concurrency)
        direct = acceptance_length(counters)
        if direct is None:
            continue
        out.append(
            {
                "k": run.k,
                "direct": direct,
                "predicted": curve.al(run.k),
                "error": curve.al(run.k) / direct - 1.0,
                "num_drafts": counters.num_drafts,
            }
        )
    return out


def check_section(runs: list[EngineRun], schedule: Schedule, curve: AcceptanceCurve, costs: CostModel) -> dict:
    """Per level: the schedule's measured throughput against each static k's, and whether it is at least the
    best static k's (its median at or above the lowest repeat of that k); the schedule's outputs against the
    target alone's (greedy: token-identical)."""
    sched = next(r for r in runs if r.schedule is not None)
    statics = {r.k: r for r in runs if r.schedule is None}
    levels = []
    for c in sorted({p.concurrency for p in sched.passes}):
        s_values = [t for p in sched.passes if p.concurrency == c and (t := p.throughput()) is not None]
        per_k = {
            k: [t for p in r.passes if p.concurrency == c and (t := p.throughput()) is not None]
            for k, r in statics.items()
        }
        per_k = {k: v for k, v in per_k.items() if v}
        if not s_values or not per_k:
            continue
        best_k = max(per_k, key=lambda k: statistics.median(per_k[k]))
        s = _spread(s_values)
        ok = s["median"] >= min(per_k[best_k])
        levels.append(
            {
                "concurrency": c,
                "schedule_k": schedule.k_at(c),
                "schedule": s,
                "predicted": throughput(c, schedule.k_at(c), curve, costs),
                "static": {str(k): _spread(v) for k, v in sorted(per_k.items())},
                "best_static_k": best_k,
                "at_least_best_static": ok,
            }
        )
    base = statics.get(0)
    compared = identical = 0
    if base is not None:
        outputs = {p.prompts[i]: o for p in base.passes for i, o in enumerate(p.outputs)}
        for p in sched.passes:
            for i, o in enumerate(p.outputs):
                ref = outputs.get(p.prompts[i])
                if ref is not None:
                    compared += 1
                    identical += ref == o
    return {
        "levels": levels,
        "schedule_at_least_best_static": bool(levels) and all(lv["at_least_best_static"] for lv in levels),
        "lossless": {"compared": compared, "identical": identical},
    }


def tune_command(opts: TuneOptions, **changes) -> str:
    """The ``eaglehub tune`` command line of ``opts`` with ``changes`` (option name → value; ``True``: a flag)."""
    import shlex

    parts = ["eaglehub tune", "--target", shlex.quote(opts.target), "--drafter", shlex.quote(opts.drafter)]
    values = {
        "--max-k": opts.max_k,
        "--concurrency": ",".join(map(str, opts.concurrency)),
        "--repeats": opts.repeats,
        "--max-tokens": opts.max_tokens,
        "--limit": opts.limit,
        "--prompts": opts.prompts_file,
        "--temperature": opts.temperature or None,
        **changes,
    }
    for flag, value in values.items():
        if value is True:
            parts.append(flag)
        elif value is not None and value is not False:
            parts += [flag, shlex.quote(str(value))]
    for category in opts.categories:
        parts += ["--category", shlex.quote(category)]
    return " ".join(parts)


def findings(report: dict, opts: TuneOptions) -> list[dict]:
    import json
    import shlex

    """W-TUNE-AL-MODEL per direct run off the prediction by more than :data:`AL_TOLERANCE`; with ``--check``,
    E-TUNE-SCHEDULE-WORSE per level the schedule lost and E-TUNE-SCHEDULE-LOSSY for greedy outputs that differ."""
    from eaglehub.findings import finding

    out = []
    at = report["acceptance"]["curve"]["k"]
    for row in report["acceptance"]["check"]:
        if abs(row["error"]) > AL_TOLERANCE:
            more = (opts.limit or 1) * 2 if opts.limit else None
            out.append(
                finding(
                    "W-TUNE-AL-MODEL",
                    f"AL({row['k']})",
                    f"predicted from the run at k={at}: {row['predicted']:.3f}; a direct run at k={row['k']} measured "
                    f"{row['direct']:.3f} ({row['error']:+.1%}, {row['num_drafts']} drafts), so the schedule's "
                    f"throughput at k={row['k']} is off by about as much",
                    hint="measure on more tokens: "
                    + tune_command(opts, **{"--limit": more, "--max-tokens": opts.max_tokens * 2}),
                ).as_dict()
            )
    chk = report.get("check")
    if chk:
        for lv in chk["levels"]:
            if not lv["at_least_best_static"]:
                best = lv["static"][str(lv["best_static_k"])]
                out.append(
                    finding(
                        "E-TUNE-SCHEDULE-WORSE",
                        f"concurrency {lv['concurrency']}",
                        f"the schedule (k={lv['schedule_k']} there) measured {lv['schedule']['median']:.1f} "
                        f"tokens/s (median of {lv['schedule']['repeats']}), below static k={lv['best_static_k']}'s "
                        f"lowest repeat {best['min']:.1f} ({best['repeats']} repeats)",
                        hint="repeat the check with more repeats on a quiet machine: "
                        + tune_command(opts, **{"--repeats": max(5, opts.repeats + 2), "--check": True}),
                    ).as_dict()
                )
        loss = chk["lossless"]
        if report["settings"]["temperature"] == 0 and loss["identical"] < loss["compared"]:
            out.append(
                finding(
                    "E-TUNE-SCHEDULE-LOSSY",
                    "num_speculative_tokens_per_batch_size",
                    f"with the schedule {loss['compared'] - loss['identical']} of {loss['compared']} greedy outputs "
                    "differ from the target alone's",
                    hint="see each divergence classified: eaglehub verify --target "
                    f"{shlex.quote(opts.target)} --drafter {shlex.quote(opts.drafter)} --max-tokens "
                    f"{opts.max_tokens} --k-schedule {shlex.quote(json.dumps(report['schedule']['ranges']))}",
                ).as_dict()
            )
    return out


def notes(costs: CostModel, target: Path, drafter: Path) -> list[str]:
    """What the figures do not say: CPU costs; costs measured for another pair (read with --costs)."""
    out = [CPU_NOTE] if costs.machine.get("device") == "cpu" else []
    measured = (costs.context.get("target"), costs.context.get("drafter"))
    if all(measured) and measured != (target.name, drafter.name):
        out.append(
            f"the costs were measured for target {measured[0]} with drafter {measured[1]}, this plan is for "
            f"{target.name} with {drafter.name}: step costs carry over only between the same models and dtype"
        )
    return out


def machine() -> dict:
    import os
    import platform

    out = {"platform": platform.platform(), "cpus": os.cpu_count() or 0, "device": "cpu"}
    try:
        import torch

        if torch.cuda.is_available():
            out["device"] = "cuda"
            out["gpu"] = torch.cuda.get_device_name(0)
            out["gpus"] = torch.cuda.device_count()
    except ImportError:
        pass
    return out


# --- the verb ----------------------------------------------------------------------------------------------------


def run_tune(opts: TuneOptions, progress: Callable[[str], None] | None = None) -> dict:
    """Measure (or read) acceptance and costs, pick the schedule, optionally check it; return the validated report.

    Raises:
        EaglehubError: bad options or inputs (exit 2), a drafter that fails validation or an engine failure
            (exit 1), vLLM missing (exit 2).
    """
    from eaglehub.checks.validate import preflight
    from eaglehub.engines.chat import encode_chat
    from eaglehub.engines.vllm_engine import DEFAULT_KV_CACHE_BYTES, VllmEngine
    from eaglehub.measure.prompts import default_prompts_path, load_prompts
    from eaglehub.measure.runner import resolve_drafter
    from eaglehub.target import resolve_target
    from eaglehub.verify.preflight import engine_profile

    check_options(opts)
    say = progress or (lambda _msg: None)
    costs = load_costs(opts.costs) if opts.costs else None
    curve = load_acceptance(opts.acceptance) if opts.acceptance else None
    max_k = opts.max_k if curve is None else min(curve.k, opts.max_k)
    if curve is not None and curve.k != opts.max_k:
        say(f"the acceptance curve reaches k={curve.k}: the schedule considers k up to {max_k} (--max-k {opts.max_k})")
    drafter = resolve_drafter(opts.drafter)
    target = resolve_target(opts.target)
    engine = VllmEngine(log_dir=opts.log_dir)
    needs_engine = costs is None or curve is None
    engine_info = {"name": "vllm", "version": engine.version(), "profile": engine.profile()} if needs_engine else {}
    prompts_file = Path(opts.prompts_file) if opts.prompts_file else default_prompts_path()
    prompts = load_prompts(prompts_file, list(opts.categories) or None, opts.limit)
    sha = hashlib.sha256(prompts_file.read_bytes()).hexdigest()
    runs: list[EngineRun] = []
    if needs_engine:
        preflight(drafter, target, (engine_profile(engine).id,))
        ids = encode_chat(target, [p.text for p in prompts])
        settings = RunSettings(
            target,
            drafter,
            opts.max_tokens,
            opts.dtype,
            opts.seed,
            opts.temperature,
            opts.top_p,
            opts.top_k,
            opts.max_model_len,
            DEFAULT_KV_CACHE_BYTES,
            opts.log_dir,
        )
        levels = list(opts.concurrency) if costs is None else [min(opts.concurrency)]
        repeats = opts.repeats if costs is None else 1
        ks = sorted(({0} if costs is None else set()) | ({max_k} if curve is None else set()) | set(check_ks(max_k)))
        if opts.check:
            ks = list(range(max_k + 1))
        for k in ks:
            say(f"engine {'target alone' if k == 0 else f'k={k}'}: {len(levels)} level(s) x {repeats} repeat(s)")
            runs.append(run_engine(settings, k, levels, repeats, ids, progress=_step_progress(say), max_k=max_k))
        if curve is None:
            at_k = next(r for r in runs if r.k == max_k)
            curve = curve_from_counters(
                _counters(at_k, min(levels)),
                max_k,
                len(prompts),
                sha,
                {
                    "temperature": opts.temperature,
                    "top_p": opts.top_p,
                    "top_k": opts.top_k,
                    "max_tokens": opts.max_tokens,
                    "dtype": opts.dtype,
                    "engine": {"name": "vllm", "version": engine_info["version"]},
                },
            )
        if costs is None:
            steps = [(s.batch, r.k, p.rep, s.seconds) for r in runs for p in r.passes for s in p.steps if s.decode]
            costs = fit(
                cells_from_steps(steps),
                engine_info,
                machine(),
                {
                    "target": target.name,
                    "drafter": drafter.name,
                    "max_tokens": opts.max_tokens,
                    "dtype": opts.dtype,
                    "prompts_sha256": sha,
                },
                target_cells_from([x for r in runs for x in r.extends]),
            )
    assert curve is not None and costs is not None
    max_batch = opts.max_batch or max(opts.concurrency)
    schedule = best_schedule(curve, costs, max_batch, max_k)
    check = None
    if opts.check:
        config = speculative_config(drafter, schedule)
        if config is not None and not schedule.static:
            say(f"engine with the schedule {schedule.ranges}")
            runs.append(
                run_engine(
                    settings,
                    schedule.largest_k,
                    opts.concurrency,
                    opts.repeats,
                    ids,
                    schedule=schedule.ranges,
                    progress=_step_progress(say),
                )
            )
        else:
            # a one-k schedule is that static k, already measured
            same = next(r for r in runs if r.k == schedule.largest_k)
            frozen = tuple((a, b, k) for a, b, k in schedule.ranges)
            runs.append(EngineRun(same.k, frozen, same.load_seconds, same.passes))
        check = check_section(runs, schedule, curve, costs)
    report = build_report(opts, target, drafter, prompts_file, sha, len(prompts), runs, curve, costs, schedule, check)
    check_output(report, REPORT_SCHEMA, "tune report")
    return report


def _step_progress(say: Callable[[str], None]):
    return lambda group, n: say(f"  {group}: {n} requests served")


def build_report(
    opts: TuneOptions,
    target: Path,
    drafter: Path,
    prompts_file: Path,
    sha: str,
    n_prompts: int,
    runs: list[EngineRun],
    curve: AcceptanceCurve,
    costs: CostModel,
    schedule: Schedule,
    check: dict | None,
) -> dict:
    config = speculative_config(drafter, schedule)
    static_lines = {
        str(k): [throughput(b, k, curve, costs) for b in range(1, len(schedule.best) + 1)]
        for k in range(schedule.max_k + 1)
    }
    report: dict = {
        "report_version": REPORT_VERSION,
        "tool": {"name": "eaglehub", "version": __version__},
        "target": {"spec": opts.target, "path": str(target)},
        "drafter": str(drafter),
        "settings": {
            "max_k": schedule.max_k,
            "concurrency": list(opts.concurrency),
            "repeats": opts.repeats,
            "max_tokens": opts.max_tokens,
            "temperature": opts.temperature,
            "top_p": opts.top_p,
            "top_k": opts.top_k,
            "dtype": opts.dtype,
            "seed": opts.seed,
            "max_model_len": opts.max_model_len,
            "max_batch": len(schedule.best),
        },
        "prompts": {"file": str(prompts_file.resolve()), "sha256": sha, "count": n_prompts},
        "engines": [
            {
                "k": r.k,
                "schedule": [list(x) for x in r.schedule] if r.schedule else None,
                "load_seconds": r.load_seconds,
            }
            for r in runs
        ],
        "acceptance": {
            "source": opts.acceptance or "measured",
            "curve": curve.to_dict(),
            "synthetic": curve.synthetic_config(),
            "check": al_check(runs, curve, min(opts.concurrency)),
        },
        "costs": {"source": opts.costs or "measured", "model": costs.to_dict()},
        "grid": grid(runs, curve, costs),
        "schedule": {
            "best_k": list(schedule.best),
            "ranges": schedule.ranges,
            "measured_up_to": schedule.measured_up_to,
            "break_even_batch_size": schedule.break_even,
            "speculative_config": config,
            "serve_command": serve_line(target, drafter, schedule),
            "trtllm_draft_len_schedule": {str(b): k for b, k in (schedule.trtllm() or {}).items()} or None,
            "predicted_throughput": {
                "static": static_lines,
                "schedule": [throughput(b, schedule.k_at(b), curve, costs) for b in range(1, len(schedule.best) + 1)],
            },
        },
        "check": check,
        "definitions": DEFINITIONS,
        "notes": notes(costs, target, drafter),
    }
    report["findings"] = findings(report, opts)
    report["ok"] = not any(f["severity"] == "error" for f in report["findings"])
    return report


def write_report(report: dict, path: str | Path) -> None:
    write_output(report, path, REPORT_SCHEMA, "tune report")


def write_costs(report: dict, path: str | Path) -> None:
    write_output(report["costs"]["model"], path, COSTS_SCHEMA, "tune cost file")


def finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


__all__ = ["EaglehubError", "TuneOptions", "run_tune", "write_costs", "write_report"]
