"""`eaglehub diagnose`: acceptance per draft position and at growing context lengths (drift)."""

from __future__ import annotations

from typing import Any

import click

from eaglehub.cli.errors import handle_errors
from eaglehub.cli.options import (
    category_option,
    device_option,
    dtype_option,
    limit_option,
    max_tokens_option,
    output_path,
    padding_option,
    prompts_option,
    report_option,
    target_option,
)
from eaglehub.cli.output import console, err_console, print_json, report_unwritten, write_outputs


@click.command("diagnose")
@target_option(required=True)
@click.option(
    "--drafter",
    "drafters",
    multiple=True,
    required=True,
    help="EAGLE-3 / EAGLE-3.1 drafter directory; repeat to compare (labelled by EAGLE version).",
)
@click.option(
    "--engine",
    "engine",
    type=click.Choice(["reference", "vllm"]),
    default="reference",
    show_default=True,
    help="reference: PyTorch, also hidden-state norm and sink attention per depth; vllm: counters only.",
)
@device_option("Device of the reference engine (cpu, cuda).")
@click.option(
    "--depth",
    type=click.IntRange(1, 8),
    default=8,
    show_default=True,
    help="Draft tokens per step (k), i.e. the deepest draft position measured.",
)
@click.option(
    "--contexts",
    default="0,1024,2048,4096",
    show_default=True,
    help="Prompt lengths in target tokens (chat template included) to pad to; 0 = unpadded. "
    "Lengths the target's context cannot hold with --max-tokens are skipped. Or a preset: short "
    "(0,1024,2048,4096), long (0,2048,4096,8192), xl (0,4096,8192,16384,32768); a preset length past "
    "the target's limit is measured at the longest prompt that fits.",
)
@padding_option()
@prompts_option()
@category_option()
@limit_option()
@max_tokens_option()
@dtype_option()
@report_option("Write the JSON report here (schemas/diagnose-report.schema.json).")
@click.option(
    "--plot-dir",
    type=click.Path(file_okay=False),
    default=None,
    callback=output_path("dir"),
    help="Write PNG plots here: conditional acceptance per position, AL vs context, and with the "
    "reference engine hidden-state norm and sink attention mass per depth.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of tables.")
@handle_errors
def diagnose_cmd(
    target_spec: str,
    drafters: tuple[str, ...],
    categories: tuple[str, ...],
    contexts: str,
    report_path: str | None,
    plot_dir: str | None,
    as_json: bool,
    **options: Any,
) -> None:
    """Show the drift EAGLE 3.1 targets: acceptance per draft position (conditional) and acceptance
    length at growing context lengths, prompts padded with real text to exact token counts.

    Exit 0 when measured (the numbers never fail); 2 for usage errors, a context list the target
    cannot hold or a missing engine; 1 when a drafter fails validation or the engine fails.
    """
    from eaglehub.diagnose.run import CONTEXT_PRESETS, DiagnoseOptions, parse_contexts, run_diagnose, write_report
    from eaglehub.views.diagnose import render_report, write_plots

    opts = DiagnoseOptions(
        target=target_spec,
        drafters=list(drafters),
        contexts=parse_contexts(contexts),
        fit_contexts=contexts.strip() in CONTEXT_PRESETS,
        categories=list(categories),
        **options,
    )
    report = run_diagnose(opts, console=err_console)
    failed = write_outputs(report, ((write_report, report_path, "report"),))
    plots = write_plots(report, plot_dir) if plot_dir else []
    if as_json:
        print_json(report)
    else:
        render_report(report, console)
        if report_path and not failed:
            console.print(f"report: {report_path}", highlight=False)
        for path in plots:
            console.print(f"plot: {path}", highlight=False)
    report_unwritten(report, failed, as_json)
