"""`eaglehub convert`: another layout, EAGLE-3.1 (plain or calibrated), or a fold back to EAGLE-3."""

from __future__ import annotations

import os
from contextlib import nullcontext
from typing import Any

import click

from eaglehub.cli.errors import handle_errors
from eaglehub.cli.options import (
    FORMAT_CHOICE,
    json_option,
    output_path,
    overwrite_option,
    profile_option,
    revision_option,
    source_format_option,
    target_option,
)


@click.command("convert")
@click.argument("src")
@click.argument("dst", callback=output_path("dst"))
@click.option(
    "--to",
    "to",
    type=click.Choice(["3.1", "3"]),
    default=None,
    help="EAGLE version: 3.1 adds fc_norm weights; 3 (from 3.1) is refused unless --force --target T, which "
    "writes the nearest approximation.",
)
@click.option("--format", "fmt", type=FORMAT_CHOICE, default=None, help="Output format (default: the source's).")
@source_format_option()
@click.option(
    "--force",
    is_flag=True,
    help="Write even if the output format cannot express everything (drops are recorded) or the source config "
    "breaks its schema (E-CONFIG-SCHEMA, kept as is and warned about).",
)
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="Edit one config field in DST (repeatable; VALUE is JSON, e.g. norm_output=false, "
    "eagle_aux_hidden_state_layer_ids=[2,15,27]; dotted keys reach nested objects); recorded in eaglehub.json.",
)
@click.option(
    "--rebuild-vocab-maps",
    is_flag=True,
    help="Write d2t and t2d afresh from what SRC holds: its d2t when valid (the map the engines serve), else the "
    "ids its t2d marks in ascending order, else (full vocabulary) the identity.",
)
@click.option("--max-shard-size", default=None, help="Shard the weights, e.g. 5GB (default: one model.safetensors).")
@revision_option()
@click.option(
    "--verifier",
    default=None,
    help="Target (verifier) id to record, required for --format speculators if unknown.",
)
@click.option(
    "--aux-convention",
    type=click.Choice(["c-in", "c-out"]),
    default=None,
    help="Convention of the source's aux-layer ids when it cannot be inferred.",
)
@click.option(
    "--norm-output/--no-norm-output",
    default=None,
    help="Set norm_output with --to 3.1 (default: on; with --calibrate: chosen by measured acceptance).",
)
@click.option(
    "--calibrate",
    is_flag=True,
    help="With --to 3.1: fit the fc_norm gains on the target's aux states (least squares per channel), "
    "choose norm_output by held-out acceptance, then fine-tune distilling the source (--steps); needs --target.",
)
@target_option(help="Calibration target: directory, cached Hub id, or `smollm2`.")
@click.option(
    "--calibration-prompts",
    type=click.Path(dir_okay=False),
    default=None,
    help="Calibration prompt file (any verify prompt format); default eaglehub/data/prompts/calibration.jsonl.",
)
@click.option(
    "--calibration-limit",
    type=click.IntRange(min=2),
    default=None,
    help="At most N calibration prompts per category (default: all); the last 2 of each category are held out "
    "for the acceptance measurements, the rest are fitted on.",
)
@click.option(
    "--calibration-tokens",
    type=click.IntRange(min=1),
    default=None,
    help="Target tokens generated per calibration prompt.  [default: 64]",
)
@click.option(
    "--steps",
    type=click.IntRange(min=0),
    default=None,
    help="Fine-tuning steps after the closed-form fit (training-time test, 3 unrolled draft steps); "
    "0: closed-form gains only.  [default: 20 where the drafter can be unrolled (one Llama layer)]",
)
@click.option(
    "--train",
    "train",
    type=click.Choice(["norms", "all"]),
    default=None,
    help="What fine-tuning trains: the fc_norm gains only (the rest stays bit-exact) or every drafter weight.  "
    "[default: all]",
)
@click.option(
    "--lr", type=float, default=None, help="Fine-tuning learning rate (default 1e-2 for norms, 1e-4 for all)."
)
@click.option(
    "--label-weight",
    type=click.FloatRange(0, 1),
    default=None,
    help="Weight of the target's greedy tokens in the fine-tuning loss; the rest is KL to the source "
    "drafter's drafts.  [default: 0.1]",
)
@click.option("--device", default="cpu", show_default=True, help="Calibration device (cpu, cuda).")
@profile_option(
    "Engine profile whose reading of the drafter the output must keep, repeatable: {names} (default: every "
    "named profile)."
)
@overwrite_option()
@json_option("the report", "convert-report.schema.json")
@handle_errors
def convert_cmd(src: str, dst: str, target_spec: str | None, as_json: bool, **options: Any) -> None:
    """Convert drafter SRC (directory or hub repo id) into DST: another format and/or EAGLE-3.1.

    Tensor bytes are copied, never decoded, except the tensors a calibrated upgrade fine-tunes or a fold
    rewrites (listed as replaced); DST is written atomically; SRC is never modified.
    """
    from eaglehub.convert.command import ConvertOptions, run_convert, start_early

    opts = ConvertOptions(target=target_spec, **options)
    opts.check()  # before the progress bar opens, so a refusal prints alone
    # a plain --to 3.1 starts copying the tensor bytes now, before rich, the formats and the checks are imported
    early = start_early(src, dst, opts)
    try:
        from rich.markup import escape

        from eaglehub.cli.output import console, err_console, print_json
        from eaglehub.views.common import byte_progress, print_convert

        if opts.mode == "plain":  # bytes are copied, never computed on: numpy's BLAS need not start its thread pool
            os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        bar = byte_progress(err_console, "converting") if opts.mode == "plain" else nullcontext()
        with bar as progress:
            report = run_convert(src, dst, opts, progress=progress, console=err_console, early=early)
    finally:
        if early is not None:
            early.abandon()  # nothing once the write used it: a failure before it removes what it had started
    if as_json:
        print_json(report)
        for w in report["warnings"]:
            err_console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False, soft_wrap=True)
    else:
        from eaglehub.views.convert_readings import print_readings

        print_convert(report, console, err_console)
        print_readings(report, console)
