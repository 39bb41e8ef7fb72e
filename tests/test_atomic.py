"""Atomic writes: a killed run's temporary directory is removed by the next run to the same DST,
and two runs never write one DST at the same time."""

from __future__ import annotations

import fcntl
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from eaglehub.cli import main
from eaglehub.io.atomic import atomic_dir, stale_siblings

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "smollm2-eagle3"


def killed_convert(dst: Path) -> Path:
    """Start `eaglehub convert` of the fixture into ``dst``, SIGKILL it once its temporary
    directory exists, and return that directory (left behind)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "eaglehub", "convert", str(FIXTURE), str(dst), "--to", "3.1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and not stale_siblings(dst):
            time.sleep(0.01)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    left = [p for p in stale_siblings(dst) if ".tmp-" in p.name]
    assert left, "the convert finished before it could be killed"
    return left[0]


def test_killed_run_leaves_a_temp_dir_the_next_run_removes(tmp_path):
    dst = tmp_path / "out"
    stale = killed_convert(dst)
    assert stale.is_dir() and not dst.exists()
    result = CliRunner().invoke(main, ["convert", str(FIXTURE), str(dst), "--to", "3.1"])
    assert result.exit_code == 0, result.output
    assert not stale.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert (dst / "model.safetensors").is_file()


def test_a_destination_being_written_is_refused(tmp_path):
    dst = tmp_path / "out"
    lock = tmp_path / ".out.lock"
    with open(lock, "a") as handle:  # what a live writer holds
        fcntl.flock(handle, fcntl.LOCK_EX)
        result = CliRunner().invoke(main, ["convert", str(FIXTURE), str(dst), "--to", "3.1"])
    assert result.exit_code == 2
    assert "being written by another eaglehub run" in result.output
    assert not dst.exists()


def test_failed_write_leaves_nothing(tmp_path):
    dst = tmp_path / "out"
    try:
        with atomic_dir(dst) as tmp:
            (tmp / "x").write_text("partial")
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert list(tmp_path.iterdir()) == []
