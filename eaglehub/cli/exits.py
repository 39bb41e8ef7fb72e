"""Exit codes and stop signals: the contract every verb ends by (docs/cli.md, ``eaglehub --help``).

0 ok, 1 a check ran and failed, 2 a usage or input error, 130 interrupted (SIGINT, Ctrl-C) and 143 terminated
(SIGTERM), as a shell reports a command a signal stopped, and 141 when the reader of the output went away (a broken
pipe, as ``| head`` does), silently. Kept apart from :mod:`eaglehub.cli.errors` so the console
(:mod:`eaglehub.cli.output`) can end a run on a broken pipe without importing the error table.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import FrameType
from typing import Any, NoReturn

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 128 + signal.SIGINT  # 130
EXIT_TERMINATED = 128 + signal.SIGTERM  # 143
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE  # 141

EXIT_GRACE_S = 1.0
"""After a stop signal, the seconds the interpreter's own exit (atexit handlers, joins of worker threads still
blocked in a request until its timeout) may take before the process ends anyway: the clean-up of the
command itself (atomic writes, engines, the watch summary) has already run by then."""

EXIT_CODES_HELP = (
    "Exit codes: 0 ok; 1 a check ran and failed; 2 a usage or input error; 130 interrupted (Ctrl-C, SIGINT); "
    "143 terminated (SIGTERM); 141 the output's reader went away (a broken pipe, as with | head). With "
    "--json, an error is also one JSON object on stdout (schemas/error.schema.json)."
)


class Run:
    """What the running command asked for and what stopped it, for the error paths (one CLI run at a time)."""

    json_errors = False
    stop_signal: int | None = None


def interrupt_exit_code() -> int:
    """130 after SIGINT (or a KeyboardInterrupt raised any other way), 143 after SIGTERM."""
    return 128 + (Run.stop_signal or signal.SIGINT)


def exit_broken_pipe() -> NoReturn:
    """The reader of stdout went away (``| head``): stop quietly with 141, as a shell reports a command SIGPIPE
    ended (1 would say a check failed)."""
    # later writes and the interpreter's final flush go nowhere instead of raising again (Python's signal
    # module docs, "Note on SIGPIPE")
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # a captured stdout (tests) has no descriptor
        pass
    sys.exit(EXIT_BROKEN_PIPE)


def stdout_broken() -> bool:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        return True
    except (OSError, ValueError):
        return False
    return False


def _on_stop_signal(signum: int, frame: FrameType | None) -> None:
    if Run.stop_signal is not None:  # asked twice: no more clean-up
        os._exit(128 + Run.stop_signal)
    Run.stop_signal = signum
    # the one exception every loop and context manager already unwinds on, Ctrl-C's
    raise KeyboardInterrupt


def install_stop_handlers() -> dict[int, Any]:
    """SIGINT and SIGTERM raise KeyboardInterrupt (the command cleans up, the watch prints its summary) and
    set the exit code; a signal the parent process left ignored (a background job of a script ignores
    SIGINT, POSIX) stays ignored, as it would for any program. Returns the handlers to put back."""
    previous: dict[int, Any] = {}
    if threading.current_thread() is not threading.main_thread():
        return previous
    for sig in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(sig)
        if handler is signal.SIG_IGN:
            continue
        previous[sig] = handler
        signal.signal(sig, _on_stop_signal)
    return previous


def exit_watchdog(code: int) -> None:
    """End the process ``EXIT_GRACE_S`` from now whatever the interpreter's exit is waiting on (module doc)."""
    timer = threading.Timer(EXIT_GRACE_S, os._exit, args=(code,))
    timer.daemon = True
    timer.start()
