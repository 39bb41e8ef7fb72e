"""`eaglehub speedup`: measured tokens/s with and without the drafter, against the expected speedup."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from eaglehub.cli.errors import handle_errors
from eaglehub.cli.options import (
    dtype_option,
    engine_log_option,
    k_option,
    limit_option,
    max_tokens_option,
    plot_option,
    prompts_option,
    report_option,
    target_option,
)
from eaglehub.cli.output import err_console, write_and_show


@click.command("speedup")
@target_option(required=True)
@click.option("--drafter", required=True, help="EAGLE-3 drafter directory.")
@k_option()
@click.option(
    "--concurrency",
    default="1,4,16",
    show_default=True,
    help="Comma-separated concurrency levels: prompts decoded together in one batch.",
)
@max_tokens_option()
@limit_option("At most N prompts per category (cycled to fill each batch).")
@prompts_option()
@dtype_option("Engine and cost-timing compute dtype.")
@click.option(
    "--prefix-tokens",
    type=int,
    default=256,
    show_default=True,
    help="KV-cache length (tokens) behind the timed target and drafter forwards.",
)
@click.option("--repeats", type=int, default=10, show_default=True, help="Timed repeats per forward (median).")
@engine_log_option()
@report_option("Write the JSON report here (schemas/speedup-report.schema.json).")
@plot_option("Write a PNG of tokens/s and measured vs expected speedup per concurrency.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of tables.")
@handle_errors
def speedup_cmd(
    target_spec: str,
    concurrency: str,
    engine_log: str | None,
    report_path: str | None,
    plot_path: str | None,
    as_json: bool,
    **options: Any,
) -> None:
    """Output tokens/s of TARGET alone and with DRAFTER per concurrency level (vLLM, greedy), and the
    speedup expected from the measured acceptance length and forward costs (Leviathan et al. 2023).

    CPU speedups are not GPU speedups: on a CPU a (k+1)-token verify costs about 1.7 single-token
    forwards. Exit 0 when measured; 2 for usage errors or a missing engine; 1 when the drafter fails
    validation or the engine fails.
    """
    from eaglehub.engines.registry import make_engines
    from eaglehub.speedup.run import SpeedupOptions, parse_concurrency, run_speedup, write_report
    from eaglehub.views.speedup import plot_speedup, render_report

    opts = SpeedupOptions(target=target_spec, concurrency=parse_concurrency(concurrency), **options)
    log_dir = Path(engine_log) if engine_log else None
    report = run_speedup(opts, engine=make_engines(["vllm"], log_dir=log_dir)[0], console=err_console)
    write_and_show(
        report,
        as_json,
        render_report,
        (write_report, report_path, "report"),
        (plot_speedup, plot_path, "plot"),
    )
