"""`eaglehub pipeline`: validate → convert → quantize → verify → publish, per manifest entry."""

from __future__ import annotations

import sys

import click

from eaglehub.cli.errors import handle_errors
from eaglehub.cli.options import hub_endpoint_option, output_path
from eaglehub.cli.output import err_console, write_and_show


@click.command("pipeline")
@click.argument("manifest", type=click.Path(dir_okay=False))
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False),
    default="pipeline-work",
    callback=output_path("dir"),
    show_default=True,
    help="Where converted / quantized checkpoints and verify reports go (DIR/<target>--<drafter>/).",
)
@click.option(
    "--publish",
    "do_publish",
    is_flag=True,
    help="Really publish the drafters with a `publish` section (default: a dry run that writes nothing).",
)
@click.option(
    "--drafter",
    "drafters",
    multiple=True,
    help="Only this drafter of the manifest (name or directory; repeatable).",
)
@hub_endpoint_option()
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False),
    default=None,
    callback=output_path("file"),
    help="Write the summary here (schemas/pipeline-report.schema.json).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@handle_errors
def pipeline_cmd(
    manifest: str,
    work_dir: str,
    do_publish: bool,
    drafters: tuple[str, ...],
    endpoint: str | None,
    report_path: str | None,
    as_json: bool,
) -> None:
    """For each drafter of MANIFEST: validate → convert → (quantize) → verify → publish, as its
    manifest entry says (schemas/manifest.schema.json: `convert`, `quantize`, `verify`, `publish`).

    Publishing is a dry run unless --publish. Exit 0 when every drafter passed every step, 1 when a
    step failed (that drafter's later steps are skipped), 2 for a bad manifest or options.
    """
    from eaglehub.pipeline import exit_code, run_pipeline, write_summary
    from eaglehub.views.pipeline import render_summary

    summary = run_pipeline(
        manifest, work_dir, publish=do_publish, endpoint=endpoint, drafters=drafters, console=err_console
    )
    write_and_show(summary, as_json, render_summary, (write_summary, report_path, "report"))
    sys.exit(exit_code(summary))
