"""`eaglehub tune`: the k to serve at each batch size, from the user's prompts and the serving engine's costs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from eaglehub.cli.errors import handle_errors
from eaglehub.cli.options import (
    category_option,
    dtype_option,
    engine_log_option,
    limit_option,
    max_tokens_option,
    plot_option,
    prompts_option,
    report_option,
    target_option,
)
from eaglehub.cli.output import err_console, write_and_show
from eaglehub.cli.paths import output_path
from eaglehub.tune.options import DEFAULT_CONCURRENCY, DEFAULT_MAX_K, DEFAULT_SCHEDULE_MARGIN, MAX_K


@click.command("tune")
@target_option(required=True)
@click.option("--drafter", required=True, help="EAGLE-3 drafter directory.")
@click.option(
    "--max-k",
    type=click.IntRange(1, MAX_K),
    default=DEFAULT_MAX_K,
    show_default=True,
    help="Largest k considered; one run at this k measures the acceptance rate at every draft position.",
)
@click.option(
    "--concurrency",
    default=",".join(map(str, DEFAULT_CONCURRENCY)),
    show_default=True,
    help="Comma-separated concurrency levels (requests in flight) the step costs are measured at.",
)
@click.option(
    "--repeats", type=click.IntRange(min=1), default=3, show_default=True, help="Passes over the prompts per level."
)
@max_tokens_option()
@prompts_option()
@category_option()
@limit_option("At most N prompts per category.")
@click.option(
    "--temperature",
    type=click.FloatRange(min=0.0),
    default=0.0,
    show_default=True,
    help="Sampling temperature of the acceptance and throughput runs (0: greedy), as you serve.",
)
@click.option(
    "--top-p",
    type=click.FloatRange(0.0, 1.0, min_open=True),
    default=1.0,
    show_default=True,
    help="Nucleus sampling of those runs (1: off).",
)
@click.option("--top-k", type=click.IntRange(min=0), default=0, show_default=True, help="Top-k sampling (0: off).")
@dtype_option()
@click.option(
    "--max-batch",
    type=click.IntRange(min=1),
    default=None,
    help="Plan the schedule up to this batch size (default: the largest --concurrency level); beyond the "
    "measured levels the cost model extrapolates.",
)
@click.option(
    "--costs",
    "costs",
    type=click.Path(dir_okay=False),
    default=None,
    help="Step costs measured elsewhere (a file --save-costs wrote on the serving machine) instead of here.",
)
@click.option(
    "--acceptance",
    type=click.Path(dir_okay=False),
    default=None,
    help="Acceptance from a report instead of a run here: a tune report, or a verify report of one drafter "
    "(also verify --endpoint's: a served pair's traffic).",
)
@click.option(
    "--save-costs",
    "save_costs",
    type=click.Path(dir_okay=False),
    default=None,
    callback=output_path("file"),
    help="Write the fitted step-cost model here (schemas/tune-costs.schema.json), for --costs elsewhere.",
)
@click.option(
    "--schedule-margin",
    type=click.FloatRange(0.0, 1.0),
    default=DEFAULT_SCHEDULE_MARGIN,
    show_default=True,
    help="Serve a k schedule only when it is predicted to beat the best static k (or the target alone) by more "
    "than this share at some batch size; else print that static choice (a smaller gain is within the measurement).",
)
@click.option(
    "--check",
    is_flag=True,
    help="Also run the engine with the schedule and with every static k at every level, and report measured "
    "against predicted throughput and whether the schedule is at least as good as the best static k.",
)
@click.option(
    "--interleave/--no-interleave",
    default=None,
    help="Keep every engine loaded and hand them one pass each in turn, so a slow spell of a shared machine "
    "lands on all of them alike (default: on with vLLM's CPU build; off on a GPU, where each engine takes its "
    "own share of GPU memory).",
)
@engine_log_option()
@report_option("Write the JSON report here (schemas/tune-report.schema.json).")
@plot_option("Write a PNG of predicted throughput against batch size per static k and for the schedule.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of tables.")
@handle_errors
def tune_cmd(
    target_spec: str,
    concurrency: str,
    engine_log: str | None,
    save_costs: str | None,
    report_path: str | None,
    plot_path: str | None,
    as_json: bool,
    **options: Any,
) -> None:
    """Pick the k to serve at each batch size: acceptance per draft position on your prompts, engine step
    costs by batch size and k, and the schedule with the highest predicted throughput, printed as vLLM's
    num_speculative_tokens_per_batch_size (the ready vllm serve line) and TensorRT-LLM's draft_len_schedule.

    Costs measured on a CPU say nothing about a GPU server: measure them there with --save-costs and plan
    with --costs (docs/tune.md). Exit 0 when tuned (and, with --check, the schedule held); 1 when the drafter
    fails validation, the engine fails or the check fails; 2 for usage errors or a missing engine.
    """
    from eaglehub.speedup.run import parse_concurrency
    from eaglehub.tune.options import TuneOptions
    from eaglehub.tune.report import write_costs, write_report
    from eaglehub.tune.run import run_tune
    from eaglehub.views.tune import plot_tune, render_report

    opts = TuneOptions(
        target=target_spec,
        concurrency=parse_concurrency(concurrency),
        log_dir=Path(engine_log) if engine_log else None,
        **options,
    )
    report = run_tune(opts, progress=lambda msg: err_console.print(msg, highlight=False))
    write_and_show(
        report,
        as_json,
        render_report,
        (write_costs, save_costs, "costs"),
        (write_report, report_path, "report"),
        (plot_tune, plot_path, "plot"),
    )
    if not report["ok"]:
        sys.exit(1)
