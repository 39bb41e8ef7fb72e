"""`eaglehub` as a process of its own, for the tests that send it signals or close its pipes.

A process inherits an ignored SIGINT (a script's background job, a test suite started with `&` from a
non-interactive shell) and Python then never turns Ctrl-C into KeyboardInterrupt: :func:`start` runs the CLI
with SIGINT handled as a terminal's Ctrl-C is, whatever the suite's own process has, so a test of the
interrupt path tests eaglehub and not how pytest was started.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from helpers.paths import ROOT

AS_TERMINAL = (
    "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "runpy.run_module('eaglehub', run_name='__main__', alter_sys=True)"
)
"""``python -c`` code that runs ``python -m eaglehub ARGS`` with SIGINT raising KeyboardInterrupt."""


def start(*args: str, sigint: str = "terminal", **popen) -> subprocess.Popen:
    """Start ``eaglehub ARGS`` (stdout and stderr piped, text). ``sigint``: ``"terminal"`` (Ctrl-C raises
    KeyboardInterrupt, as from a shell prompt) or ``"ignored"`` (as a script's background job inherits it)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **popen.pop("env", {})}
    code = AS_TERMINAL
    if sigint == "ignored":
        code = code.replace("signal.default_int_handler", "signal.SIG_IGN")
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], text=True, env=env, **popen)


class Lines:
    """The JSON lines a process prints, read in a thread so that every wait on them is bounded."""

    def __init__(self, proc: subprocess.Popen):
        assert proc.stdout is not None
        self.proc, self.lines, self._queue = proc, [], queue.Queue()  # type: ignore[var-annotated]
        threading.Thread(target=self._read, args=(proc.stdout,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, done: Callable[[list[dict]], bool], seconds: float) -> list[dict]:
        """Read lines until ``done(lines)``; fails when the output ends first or ``seconds`` pass."""
        deadline = time.monotonic() + seconds
        while not done(self.lines):
            try:
                line = self._queue.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise AssertionError(f"no such output within {seconds} s: {self.lines}") from None
            if line is None:
                raise AssertionError(f"the output ended early: {self.lines}")
            self.lines.append(json.loads(line))
        return self.lines

    def rest(self, seconds: float) -> list[dict]:
        """Every line left once the process has closed its stdout (at most ``seconds`` from now)."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                line = self._queue.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise AssertionError(f"the output did not end within {seconds} s: {self.lines}") from None
            if line is None:
                return self.lines
            self.lines.append(json.loads(line))


def stop(proc: subprocess.Popen, sig: int = signal.SIGINT, within: float = 3.0) -> tuple[int | None, float]:
    """Send ``sig`` to ``proc`` (the process the test started, by its id) and wait ``within`` seconds: its exit
    code (``None`` when still running, then it is killed) and the seconds it took."""
    t0 = time.monotonic()
    proc.send_signal(sig)
    try:
        proc.wait(timeout=within)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None, time.monotonic() - t0
    return proc.returncode, time.monotonic() - t0
