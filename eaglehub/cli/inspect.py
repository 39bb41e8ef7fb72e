"""`eaglehub inspect`: describe a drafter from its tensor headers."""

from __future__ import annotations

import click

from eaglehub.cli.errors import handle_errors
from eaglehub.cli.options import json_option, revision_option, source_format_option
from eaglehub.cli.output import console, print_json


@click.command("inspect")
@click.argument("src")
@source_format_option()
@revision_option()
@json_option("the report", "inspect-report.schema.json")
@handle_errors
def inspect_cmd(src: str, source_format: str | None, revision: str | None, as_json: bool) -> None:
    """Describe drafter SRC (directory or hub repo id) from tensor headers: format with evidence, dims,
    flags, aux ids, vocabulary, tensors."""
    from eaglehub.checks.inspection import inspect_drafter
    from eaglehub.views.common import print_inspect

    report = inspect_drafter(src, source_format=source_format, revision=revision)
    print_json(report) if as_json else print_inspect(report, console)
