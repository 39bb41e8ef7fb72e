"""The consoles commands print through: rich consoles that write plain lines for logs when not on a terminal.

Piped to a file, rich pads table cells and wrapped lines with spaces up to the width, and a status spinner
draws nothing at all until it stops (minutes of silence under ``probe`` or ``convert --calibrate``). A
:class:`TextConsole` writes the same output without the trailing spaces there, and its :meth:`status` prints
one plain line on stderr per step instead of a spinner.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterable

from rich.console import Console
from rich.segment import Segment

_TRAILING_BLANKS = re.compile(r"[ \t]+(?=\n|\Z)")


class TextConsole(Console):
    """A rich console whose output off a terminal has no trailing blanks and whose status is a plain line per step."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if kwargs.get("width") is None:
            # rich fixes COLUMNS when the console is made; read it at each use instead, as the size is read when
            # COLUMNS is unset: the module-level consoles are made once per process, before a caller (a test
            # runner invoking several commands) may set COLUMNS for a command
            self._width = None
        if kwargs.get("height") is None:
            self._height = None

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        rendered = super()._render_buffer(buffer)
        # on a terminal a live display repaints lines with blanks, which must stay
        return rendered if self.is_terminal else _TRAILING_BLANKS.sub("", rendered)

    def status(self, status, **kwargs):
        if self.is_terminal:
            return super().status(status, **kwargs)
        return PlainStatus(status)


_START = time.monotonic()
"""When this process began printing (the module is imported as a command starts): the clock of progress lines."""


class PlainStatus:
    """What :meth:`TextConsole.status` gives off a terminal: each new status text as one line on stderr (progress
    goes to stderr whichever console asked, so stdout stays the report), with the seconds since the command
    started (a command's phases are often a status each: their own clocks would all read 0 s)."""

    def __init__(self, status) -> None:
        self._last: str | None = None
        self.update(status)

    def update(self, status=None, **_spinner) -> None:
        if status is None:
            return
        text = status.plain if hasattr(status, "plain") else str(status)
        if text != self._last:
            self._last = text
            print_progress(f"{text} ({time.monotonic() - _START:.0f} s)")

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def __enter__(self) -> PlainStatus:
        return self

    def __exit__(self, *exc) -> None:
        pass


def print_progress(line: str) -> None:
    """One progress line on stderr, flushed at once (a log shows it while the work goes on)."""
    sys.stderr.write(line.rstrip() + "\n")
    sys.stderr.flush()
