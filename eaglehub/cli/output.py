"""Where commands print: tables to stdout, progress and warnings to stderr, JSON on request."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from eaglehub.views.console import TextConsole

console = TextConsole()
err_console = TextConsole(stderr=True)

#: (writer(report, path), path or None, label printed before the path); the writer is given the path as passed
Output = tuple[Callable[[dict, "str | Path"], Any], "str | None", str]


def print_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=False))


def write_and_show(report: dict, as_json: bool, render: Callable[[dict, Console], Any], *outputs: Output) -> None:
    """Write each ``(writer, path, label)`` whose path is set, then print the report as JSON or through
    ``render(report, console)`` followed by the written paths."""
    for writer, path, _ in outputs:
        if path:
            writer(report, path)
    if as_json:
        print_json(report)
        return
    render(report, console)
    for _, path, label in outputs:
        if path:
            console.print(f"{label}: {path}", highlight=False)
