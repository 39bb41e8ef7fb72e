"""`eaglehub probe`: which reading of each ambiguous config field the drafter's weights were trained for."""

from __future__ import annotations

import sys
from typing import Any

import click

from eaglehub.cli.errors import handle_errors
from eaglehub.cli.options import (
    device_option,
    json_option,
    k_option,
    limit_option,
    max_tokens_option,
    output_path,
    overwrite_option,
    plot_option,
    prompts_option,
    report_option,
    target_option,
)
from eaglehub.cli.output import err_console, write_and_show
from eaglehub.probe.readings import FIELDS
from eaglehub.probe.run import DEFAULT_LIMIT, DEFAULT_MARGIN, DEFAULT_MAX_TOKENS


@click.command("probe")
@click.argument("drafter", type=click.Path(file_okay=False))
@target_option(required=True, help="Target the drafter was trained for: directory, cached Hub id, or `smollm2`.")
@k_option()
@prompts_option()
@limit_option("Prompts per category.", default=DEFAULT_LIMIT)
@max_tokens_option(DEFAULT_MAX_TOKENS, "Target tokens recorded per prompt (its greedy continuation).", minimum=2)
@click.option(
    "--field",
    "fields",
    type=click.Choice(FIELDS),
    multiple=True,
    help="Probe only this field (repeatable; default: every field).",
)
@click.option(
    "--margin",
    type=click.FloatRange(0, 1, max_open=True),
    default=DEFAULT_MARGIN,
    show_default=True,
    help="Relative AL by which a reading must beat the configured one to be called the trained one.",
)
@click.option(
    "--write",
    "write_dst",
    type=click.Path(file_okay=False),
    default=None,
    callback=output_path("dst"),
    help="Write the drafter with the trained readings here (config edits only; recorded in eaglehub.json).",
)
@overwrite_option()
@device_option()
@report_option("Write the JSON report here (schemas/probe-report.schema.json).")
@plot_option("Write a PNG of the AL of every reading.")
@json_option("the report", "probe-report.schema.json")
@handle_errors
def probe_cmd(
    drafter: str,
    target_spec: str,
    fields: tuple[str, ...],
    write_dst: str | None,
    report_path: str | None,
    plot_path: str | None,
    as_json: bool,
    **options: Any,
) -> None:
    """Measure the drafter under every reading of each config field its tensors cannot settle (aux-layer
    ids, norm_output, the pre-FC norm, norm_before_residual), by replaying the target's greedy
    continuations through the reference engine (drafter passes only), and name the reading the weights
    were trained for.

    Exit 0 when every configured reading is the trained one at 95 % confidence (or --write wrote the
    corrected drafter); 1 when a configured reading is clearly beaten (E-PROBE-READING) or the sample cannot
    decide a field (W-PROBE-INCONCLUSIVE: too few prompts or tokens); 2 for usage errors.
    """
    from eaglehub.probe.run import ProbeOptions, probe, write_report
    from eaglehub.views.probe import plot_probe, probe_exit_code, render_report

    opts = ProbeOptions(target=target_spec, fields=fields or FIELDS, write=write_dst, **options)
    with err_console.status("probing") as status:
        report = probe(drafter, opts, progress=lambda text: status.update(text))
    write_and_show(
        report,
        as_json,
        render_report,
        (write_report, report_path, "report"),
        (plot_probe, plot_path, "plot"),
    )
    sys.exit(probe_exit_code(report))
