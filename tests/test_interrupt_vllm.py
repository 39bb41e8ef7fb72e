"""Ctrl-C while vLLM is running: ``verify`` on the real SmolLM2 pair ends within 3 s of SIGINT with 130, and the
engine's worker process does not outlive it (issue 37: a verb a user stops stops, whatever it is waiting on).

The signal is sent while the worker is loading or decoding (the run's first progress line has been printed and
the worker process exists), the moment a user most often gives up on a run.
"""

from __future__ import annotations

import os
import queue
import signal
import threading
import time
from pathlib import Path

import pytest
from helpers.cli_process import start, stop
from helpers.paths import FIXTURE

pytestmark = [pytest.mark.vllm, pytest.mark.real]

WORKER = b"eaglehub.engines.vllm_worker"


def _workers_of(pid: int, marker: bytes = WORKER) -> list[int]:
    """The worker processes ``pid`` started whose command line holds ``marker`` (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and marker in cmdline:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_verify_stops_within_3_s_of_sigint_while_vllm_runs(tmp_path):
    proc = start(
        "verify", "--target", "smollm2", "--drafter", FIXTURE, "--engine", "vllm", "-k", "3", "--limit", "2",
        "--max-tokens", "256", "--report", tmp_path / "r.json",
    )  # fmt: skip
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 240
        workers: list[int] = []
        while not workers and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                line = ""
            if line is None:
                pytest.fail(f"verify ended before its engine ran: {''.join(seen)}")
            seen.append(line)
            if any("requests" in s for s in seen):
                workers = _workers_of(proc.pid)
        assert workers, f"no vLLM worker within 240 s: {''.join(seen)}"
        time.sleep(3)  # well into the worker's load or decode
        rc, took = stop(proc, signal.SIGINT)
    finally:
        if proc.poll() is None:
            proc.kill()
    rest = []
    while (line := lines.get(timeout=10)) is not None:
        rest.append(line)
    err = "".join(seen + rest)
    assert rc == 130 and took < 3, (rc, took, err[-2000:])
    assert "interrupted (SIGINT)" in err and "Traceback" not in err, err[-2000:]
    deadline = time.monotonic() + 3
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [w for w in workers if _alive(w)], "the vLLM worker outlived verify"
    assert not (tmp_path / "r.json").exists()  # an interrupted run writes no report that looks complete


def test_tune_stops_within_3_s_of_sigint_while_vllm_runs(tmp_path):
    proc = start(
        "tune", "--target", "smollm2", "--drafter", FIXTURE, "--max-k", "2", "--concurrency", "1", "--limit", "2",
        "--max-tokens", "256", "--report", tmp_path / "r.json",
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        workers: list[int] = []
        while not workers and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
            workers = _workers_of(proc.pid, b"eaglehub.tune.worker")
        assert workers, "no tune worker within 240 s"
        time.sleep(3)  # well into the worker's load or its first steps
        rc, took = stop(proc, signal.SIGINT)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read() if proc.stderr else ""
    assert rc == 130 and took < 3, (rc, took, err[-2000:])
    assert "interrupted (SIGINT)" in err and "Traceback" not in err, err[-2000:]
    deadline = time.monotonic() + 3
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [w for w in workers if _alive(w)], "the tune worker outlived tune"
    assert not (tmp_path / "r.json").exists()
