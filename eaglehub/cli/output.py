"""Where commands print: tables to stdout, progress and warnings to stderr, JSON on request."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from eaglehub.cli.exits import exit_broken_pipe
from eaglehub.errors import EaglehubError
from eaglehub.views.console import TextConsole


class _CliConsole(TextConsole):
    def on_broken_pipe(self) -> None:
        # rich's own exits 1, the code of a failed check
        self.quiet = True
        exit_broken_pipe()


console = _CliConsole()
err_console = _CliConsole(stderr=True)

#: (writer(report, path), path or None, label printed before the path); the writer is given the path as passed
Output = tuple[Callable[[dict, "str | Path"], Any], "str | None", str]


class OutputNotWritten(EaglehubError):
    """A report or plot computed in full could not be written where asked; where it went instead is in the
    message. ``shown``: the report itself is already on stdout (``--json``), so no JSON error follows it."""

    def __init__(self, message: str, hint: str, shown: bool):
        super().__init__(message, hint, exit_code=2)
        self.shown = shown


def print_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=False))


def _write_failure(exc: BaseException) -> str | None:
    """The reason a writer failed when it is the file system's (``None``: not an output failure, e.g. a report
    that breaks its schema)."""
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    cause = exc.__cause__
    if isinstance(exc, EaglehubError) and isinstance(cause, OSError):
        return cause.strerror or str(cause)
    return None


def _fallback_path(path: str | Path) -> Path:
    name = Path(path).name or "output"
    return Path(tempfile.gettempdir()) / f"eaglehub-{os.getpid()}-{name}"


Unwritten = tuple[str, "str | Path", "Path | None", str]
"""An output not written where asked: (label, the path asked, where it went instead or None, the reason)."""


def write_outputs(report: dict, outputs: tuple[Output, ...]) -> list[Unwritten]:
    """Write each ``(writer, path, label)`` whose path is set. A write the file system refuses at the end of a run
    (a full disk, a directory removed meanwhile) is written to the temporary directory instead, so nothing
    computed is lost; returns those as ``(label, asked, written or None, reason)``."""
    failed: list[Unwritten] = []
    for writer, path, label in outputs:
        if not path:
            continue
        try:
            writer(report, path)
        except (OSError, EaglehubError) as exc:
            reason = _write_failure(exc)
            if reason is None:
                raise
            fallback: Path | None = _fallback_path(path)
            try:
                writer(report, fallback)  # type: ignore[arg-type]  # a Path, as every writer takes
            except (OSError, EaglehubError):
                fallback = None
            failed.append((label, path, fallback, reason))
    return failed


def report_unwritten(report: dict, failed: list[Unwritten], as_json: bool) -> None:
    """Say on stderr where each output that could not be written went; a report written nowhere goes to stdout
    (unless it is there already). Then raise :class:`OutputNotWritten` (exit 2) when any failed."""
    if not failed:
        return
    lost = False
    for label, asked, fallback, reason in failed:
        where = f"written to {fallback} instead" if fallback else "written nowhere else either"
        err_console.print(
            f"warning: cannot write the {escape(label)} to {escape(str(asked))}: {escape(reason)}; {escape(where)}",
            highlight=False,
            soft_wrap=True,  # a path cut over two lines cannot be copied
        )
        lost = lost or (fallback is None and label == "report")
    if lost and not as_json:
        err_console.print("warning: the report follows on stdout", highlight=False)
        print_json(report)
    label, asked, fallback, reason = failed[0]
    raise OutputNotWritten(
        f"the {label} could not be written to {asked} ({reason})"
        + (f"; it is in {fallback}" if fallback else "; it is on stdout above" if label == "report" else ""),
        "free space or fix the directory, then copy the file into place (the run need not be repeated)",
        shown=as_json,
    )


def write_and_show(report: dict, as_json: bool, render: Callable[[dict, Console], Any], *outputs: Output) -> None:
    """Write each ``(writer, path, label)`` whose path is set (:func:`write_outputs`), then print the report as
    JSON or through ``render(report, console)`` followed by the written paths; an output that could not be
    written where asked is said last (:func:`report_unwritten`)."""
    failed = write_outputs(report, outputs)
    missing = {label for label, *_ in failed}
    if as_json:
        print_json(report)
    else:
        render(report, console)
        for _, path, label in outputs:
            if path and label not in missing:
                console.print(f"{label}: {path}", highlight=False)
    report_unwritten(report, failed, as_json)
