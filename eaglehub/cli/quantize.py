"""`eaglehub quantize`: FP8 in the compressed-tensors layout vLLM loads."""

from __future__ import annotations

import click

from eaglehub.cli.errors import handle_errors
from eaglehub.cli.options import json_option, output_path, overwrite_option, profile_option, revision_option
from eaglehub.cli.output import console, print_json


@click.command("quantize")
@click.argument("src")
@click.argument("dst", required=False, callback=output_path("dst"))
@click.option(
    "--scheme",
    type=click.Choice(["fp8-dynamic", "fp8-block"]),
    default="fp8-dynamic",
    show_default=True,
    help="fp8-dynamic: float8 weights with per-channel scales, activations per token at run time; fp8-block: "
    "128x128 weight blocks (layers vLLM would refuse stay unquantized).",
)
@click.option(
    "--ignore",
    "ignore",
    multiple=True,
    help="Keep this module unquantized too (repeatable): re:<regex> matched against vLLM's module names "
    "(model.layers.N.mlp.down_proj) or a module name (down_proj).",
)
@click.option(
    "--keep-fc/--quantize-fc",
    "keep_fc",
    default=True,
    show_default=True,
    help="Keep fc (the aux-state fusion) unquantized.",
)
@click.option("--dry-run", is_flag=True, help="Print what would be quantized and kept, with sizes; write nothing.")
@profile_option(
    "Engine profile the output is judged for before it is written, repeatable: {names} (default {default}); "
    "an error finding for any of them refuses it."
)
@revision_option()
@overwrite_option()
@json_option("the report", "quantize-report.schema.json")
@handle_errors
def quantize_cmd(
    src: str,
    dst: str | None,
    scheme: str,
    ignore: tuple[str, ...],
    keep_fc: bool,
    dry_run: bool,
    profiles: tuple[str, ...],
    revision: str | None,
    overwrite: bool,
    as_json: bool,
) -> None:
    """Quantize drafter SRC into DST in the compressed-tensors FP8 layout vLLM loads; lm_head, embed_tokens,
    norms, d2t and t2d keep their dtype. DST is written atomically; SRC is never modified."""
    from eaglehub.quant.quantize import quantize
    from eaglehub.views.quantize import render_report

    report = quantize(
        src,
        dst,
        scheme=scheme,
        ignore=ignore,
        keep_fc=keep_fc,
        overwrite=overwrite,
        dry_run=dry_run,
        revision=revision,
        profiles=profiles,
    )
    print_json(report) if as_json else render_report(report, console)
