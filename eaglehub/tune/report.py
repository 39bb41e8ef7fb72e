"""The tune report: measured against predicted throughput per cell, the AL check, the check of the schedule
against every static k, findings with exact commands, notes, and the report itself
(``schemas/tune-report.schema.json``)."""

from __future__ import annotations

import statistics
from pathlib import Path

from eaglehub import __version__
from eaglehub.engines.base import SpecCounters
from eaglehub.io.schemas import write_output
from eaglehub.measure.curve import MODEL, AcceptanceCurve
from eaglehub.tune.costs import FORMULA, CostModel
from eaglehub.tune.costs import SCHEMA as COSTS_SCHEMA
from eaglehub.tune.engine import EngineRun
from eaglehub.tune.inputs import Acceptance
from eaglehub.tune.options import TuneOptions
from eaglehub.tune.schedule import Recommendation, Schedule, recommend, serve_line, speculative_config, throughput

REPORT_SCHEMA = "tune-report"

REPORT_VERSION = 1
AL_TOLERANCE = 0.03
FIT_TOLERANCE = 0.15
"""Relative error of the cost model (a step cell) or of its throughput prediction (a grid cell) past which the
schedule is said to be no surer than that (W-TUNE-MODEL-FIT): the issue's bar for the model on this machine."""
"""Relative error of AL(k) predicted from the run at K against a direct run at k, past which the model is
said not to hold for this drafter (W-TUNE-AL-MODEL)."""
CPU_NOTE = (
    "costs measured on a CPU: the schedule is this machine's; a GPU server's step costs differ in every "
    "coefficient (memory bandwidth, kernels, CUDA graphs, the batch size where compute starts to bind), so "
    "measure them there with --save-costs and plan with --costs (docs/tune.md, section 6)"
)
DEFINITIONS = {
    "throughput": "decode tokens per second at batch size c: output tokens of the engine steps with exactly c "
    "requests in flight, all past their prefill, over those steps' wall time",
    "predicted_throughput": "1000 * c * AL(k) / step_ms(c, k), AL(0) = 1",
    "step_ms": FORMULA,
    "acceptance_model": MODEL,
    "residual": "(measured - predicted) / predicted",
}


def first_pass_counters(run: EngineRun, concurrency: int) -> SpecCounters:
    """The counters of the first pass at ``concurrency``: each prompt served once (more passes repeat the
    same greedy outputs and would only inflate the sample size)."""
    first = next(p for p in run.passes if p.concurrency == concurrency and p.rep == 0)
    return first.counters


def spread(values: list[float]) -> dict:
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
            measured = spread(values)
            predicted = throughput(c, run.k, curve, costs)
            out.append(
                {
                    "k": run.k,
                    "concurrency": c,
                    "measured": measured,
                    "predicted": predicted,
                    "error": predicted / measured["median"] - 1.0,
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
        counters = first_pass_counters(run, concurrency)
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
        s = spread(s_values)
        ok = s["median"] >= min(per_k[best_k])
        levels.append(
            {
                "concurrency": c,
                "schedule_k": schedule.k_at(c),
                "schedule": s,
                "predicted": throughput(c, schedule.k_at(c), curve, costs),
                "static": {str(k): spread(v) for k, v in sorted(per_k.items())},
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


def _worst_fit(report: dict) -> tuple[float, str, str] | None:
    """The measured cell the model misses most: (relative error, subject, what it is), over the cost cells'
    residuals and the throughput grid's errors; ``None`` when nothing was measured here."""
    rows: list[tuple[float, str, str]] = []
    model = report["costs"]["model"]
    if report["costs"]["source"] == "measured":
        rows += [
            (c["residual"], f"step cost at batch {c['batch']}, k={c['k']}", f"the modelled step time {c['predicted_ms']:.2f} ms "
             f"against {c['mean_ms']:.2f} ms measured over {c['steps']} steps")
            for c in model["cells"] if c["residual"] is not None
        ]  # fmt: skip
    rows += [
        (g["error"], f"throughput at k={g['k']}, concurrency {g['concurrency']}", f"the predicted {g['predicted']:.1f} "
         f"tokens/s against {g['measured']['median']:.1f} measured (median of {g['measured']['repeats']})")
        for g in report["grid"]
    ]  # fmt: skip
    return max(rows, key=lambda r: abs(r[0]), default=None)


def findings(report: dict, opts: TuneOptions) -> list[dict]:
    import json
    import shlex

    """W-TUNE-AL-MODEL per direct run off the prediction by more than :data:`AL_TOLERANCE`; W-TUNE-MODEL-FIT when
    the cost model misses a measured cell by more than :data:`FIT_TOLERANCE`; with ``--check``,
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
    fit = _worst_fit(report)
    if fit is not None and abs(fit[0]) > FIT_TOLERANCE:
        out.append(
            finding(
                "W-TUNE-MODEL-FIT",
                fit[1],
                f"{fit[2]} is {fit[0]:+.1%} off (tolerance {FIT_TOLERANCE:.0%}): the schedule's choice between ks "
                "whose predicted throughputs are closer than that is not decided by the measurement",
                hint="measure longer: "
                + tune_command(opts, **{"--repeats": max(5, opts.repeats + 2), "--max-tokens": opts.max_tokens * 2}),
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


def acceptance_notes(given: Acceptance | None, sha: str, opts: TuneOptions, drafter: Path) -> list[str]:
    """What an acceptance read from a report does not match: its drafter, its prompts, its sampling settings, and a
    pair that was not lossless there."""
    if given is None:
        return []
    curve, out = given.curve, []
    if given.drafter and given.drafter != drafter.name:
        out.append(f"the acceptance was measured for drafter {given.drafter}, this plan is for {drafter.name}")
    if curve.prompts_sha256 != sha:
        out.append(
            f"the acceptance was measured on other prompts (sha256 {curve.prompts_sha256[:12]}…) than --prompts "
            f"(sha256 {sha[:12]}…): the plan is for the traffic it was measured on"
        )
    asked = {"temperature": opts.temperature, "max_tokens": opts.max_tokens}
    differ = [f"{k} {curve.settings.get(k)} (asked {v})" for k, v in asked.items() if curve.settings.get(k) != v]
    if differ:
        out.append("the acceptance was measured at " + ", ".join(differ) + ": the report states the measured ones")
    if given.lossless is False:
        out.append("the report the acceptance came from found the pair not lossless: fix that before tuning it")
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
    given: Acceptance | None = None,
    rec: Recommendation | None = None,
) -> dict:
    """The report (``schemas/tune-report.schema.json``); ``given``: the acceptance read with ``--acceptance``, whose
    settings (sampling, max tokens) and checks the report carries instead of the options'."""
    rec = rec or recommend(schedule, curve, costs, opts.schedule_margin)
    served = rec.served
    config = speculative_config(drafter, served)
    sampling = {key: getattr(opts, key) for key in ("temperature", "top_p", "top_k", "max_tokens")}
    if given is not None:
        sampling |= {key: curve.settings[key] for key in sampling if key in curve.settings}
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
            # offline the levels are the ones the cost file was measured at
            "concurrency": costs.levels if opts.costs else list(opts.concurrency),
            "repeats": opts.repeats,
            **sampling,
            "dtype": opts.dtype,
            "seed": opts.seed,
            "max_model_len": opts.max_model_len,
            "max_batch": len(schedule.best),
            "interleaved": opts.interleave,
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
            "check": list(given.check) if given is not None else al_check(runs, curve, min(opts.concurrency)),
        },
        "costs": {"source": opts.costs or "measured", "model": costs.to_dict()},
        "grid": grid(runs, curve, costs),
        "schedule": {
            "best_k": list(schedule.best),
            "ranges": schedule.ranges,
            "measured_up_to": schedule.measured_up_to,
            "break_even_batch_size": schedule.break_even,
            "recommendation": {
                "kind": rec.kind,
                "served_ranges": served.ranges,
                "static_k": rec.static_k,
                "static_worst_ratio": rec.worst_ratio,
                "margin": rec.margin,
            },
            "speculative_config": config,
            "serve_command": serve_line(target, drafter, served, len(served.best), opts.dtype),
            "trtllm_draft_len_schedule": {str(b): k for b, k in (served.trtllm() or {}).items()} or None,
            "predicted_throughput": {
                "static": static_lines,
                "schedule": [
                    throughput(b, schedule.k_at(b), curve, costs, in_schedule=True)
                    for b in range(1, len(schedule.best) + 1)
                ],
            },
        },
        "check": check,
        "definitions": DEFINITIONS,
        "notes": notes(costs, target, drafter) + acceptance_notes(given, sha, opts, drafter),
    }
    report["findings"] = findings(report, opts)
    report["ok"] = not any(f["severity"] == "error" for f in report["findings"])
    return report


def write_report(report: dict, path: str | Path) -> None:
    write_output(report, path, REPORT_SCHEMA, "tune report")


def write_costs(report: dict, path: str | Path) -> None:
    write_output(report["costs"]["model"], path, COSTS_SCHEMA, "tune cost file")
