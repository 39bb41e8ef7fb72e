"""`eaglehub target`: targets (verifier models) available offline."""

from __future__ import annotations

from contextlib import nullcontext

import click

from eaglehub.cli.errors import handle_errors
from eaglehub.cli.options import json_option
from eaglehub.cli.output import console, print_json


@click.group("target")
def target() -> None:
    """Targets (verifier models) available offline."""


@target.command("build")
@click.argument("spec", default="smollm2")
@click.option("--overwrite", is_flag=True, help="Rebuild even if the cache exists.")
@json_option("the result", "target.schema.json")
@handle_errors
def target_build(spec: str, overwrite: bool, as_json: bool) -> None:
    """Build (or find) the local copy of target SPEC; `smollm2` converts the packaged GGUF."""
    from eaglehub.target import build_target, describe_target, needs_build

    building = needs_build(spec, overwrite)
    with console.status("converting SmolLM2-135M-Instruct GGUF → safetensors (≈30 s)") if building else nullcontext():
        path = build_target(spec, overwrite=overwrite)
    if as_json:
        print_json(describe_target(spec, path))
    else:
        console.print(f"target {spec}: {path}")
