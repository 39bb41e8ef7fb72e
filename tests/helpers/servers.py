"""Real ``vllm serve`` processes (vLLM's OpenAI API server, :data:`SERVER_MODULE`) for the endpoint tests (``verify --endpoint``, ``watch``).

API::

    server = VllmServer(target, drafter=None, k=3)   # nothing runs yet
    server.start()            # picks a free 127.0.0.1 port, starts `vllm serve`, waits for /health
    server.base_url           # "http://127.0.0.1:PORT"   (the OpenAI base is base_url + "/v1")
    server.model              # the served model name (the target path, vLLM's default)
    server.restart()          # stop, then start again on the same port (counters start from 0)
    server.restart(drafter=d) # the same, serving drafter d from then on (a redeploy)
    server.stop()             # SIGTERM to its process group, SIGKILL after STOP_TIMEOUT_S
    server.log_tail()         # the last lines of its log (stdout + stderr), for assertion messages
    with VllmServer(...) as server: ...                # start / stop

Session fixtures (registered in tests/conftest.py; a test using one is marked ``vllm`` and ``real``),
each started on first use and stopped after the last test that uses it (tests/conftest.py runs those tests
last, one after another: an idle vLLM engine core polls, about half a core each):

* ``fixture_server``: SmolLM2-135M-Instruct + the committed fixture drafter (fixtures/smollm2-eagle3), k 3,
  with per-request spec-decode metrics (``--per-request-spec-decode-metrics summary``); a test may redeploy
  another drafter on it (``restart(drafter=...)``), and the next test that asks for it gets the fixture back;
* ``target_server``: SmolLM2-135M-Instruct alone.

Settings match the offline engine's (eaglehub/engines/vllm_engine.py), so the AL a server reports is the
AL of ``verify --engine vllm``: float32, eager, ``--max-model-len 2048``, a 1 GiB KV cache, seed 0,
``VLLM_CPU_OMP_THREADS_BIND=nobind``, and the ``uni`` executor (the model worker inside the engine-core
process: one process fewer to start on 2 cores; vllm-cpu keeps it only with ``VLLM_ENABLE_V1_MULTIPROCESSING=0``).

Every server holds an exclusive ``flock`` on ``/tmp/vllm.lock`` (the machine's "one vLLM at a time"
lock) while it runs; servers of one test process share one hold, and a lock already held by an ancestor
(``flock /tmp/vllm.lock pytest ...``, whose descriptor this process inherits) is reused, not waited for.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from eaglehub.engines.vllm_engine import DEFAULT_KV_CACHE_BYTES, speculative_config

SERVER_MODULE = "vllm.entrypoints.launchers.api_server.entry"
"""The OpenAI-compatible API server that ``vllm serve`` runs. The ``vllm`` command itself stops at once
on vllm-cpu 0.32.0 (it asks the package metadata for the version of ``vllm``, but the installed
distribution is ``vllm-cpu``: PackageNotFoundError), so the server module is started directly, with
``--model`` for ``vllm serve``'s positional model."""
LOCK_PATH = Path("/tmp/vllm.lock")
LOCK_TIMEOUT_S = float(os.environ.get("EAGLEHUB_TEST_LOCK_TIMEOUT", "1800"))
"""Seconds to wait for another session's vLLM to finish (its runs take minutes, not hours)."""
START_TIMEOUT_S = 300.0
"""A start takes 20–40 s on 2 idle cores; several times that when the cores are shared."""
STOP_TIMEOUT_S = 20.0
LOG_TAIL_LINES = 40


class _Lock:
    """The process's hold on LOCK_PATH, shared by its servers (reference-counted)."""

    fd: int | None = None
    holders = 0

    @classmethod
    def acquire(cls) -> None:
        if cls.holders == 0:
            cls.fd = _inherited_lock_fd() or os.open(LOCK_PATH, os.O_RDWR | os.O_CREAT, 0o666)
            deadline = time.monotonic() + LOCK_TIMEOUT_S
            while True:
                try:
                    fcntl.flock(cls.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise TimeoutError(
                            f"{LOCK_PATH} still held by another vLLM after {LOCK_TIMEOUT_S:.0f} s"
                        ) from None
                    time.sleep(1.0)
        cls.holders += 1

    @classmethod
    def release(cls) -> None:
        cls.holders -= 1
        if cls.holders == 0 and cls.fd is not None:
            if not _is_inherited(cls.fd):  # an ancestor's hold is the ancestor's to release
                fcntl.flock(cls.fd, fcntl.LOCK_UN)
                os.close(cls.fd)
            cls.fd = None


def _inherited_lock_fd() -> int | None:
    """A descriptor of LOCK_PATH this process inherited (``flock FILE cmd`` passes its own): flock on it
    succeeds at once when the ancestor holds the lock, where a fresh open would wait for ever."""
    fd_dir = Path("/proc/self/fd")
    if not fd_dir.is_dir():
        return None
    for entry in fd_dir.iterdir():
        try:
            if os.readlink(entry) == str(LOCK_PATH):
                return int(entry.name)
        except OSError:
            continue
    return None


_INHERITED = _inherited_lock_fd()


def _is_inherited(fd: int) -> bool:
    return _INHERITED is not None and fd == _INHERITED


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (bound to port 0, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class VllmServer:
    """One ``vllm serve`` of ``target`` (with the EAGLE-3 ``drafter`` at ``k`` when given); module doc."""

    def __init__(
        self,
        target: Path,
        drafter: Path | None = None,
        k: int = 3,
        extra_args: tuple[str, ...] = (),
        spec_extra: dict | None = None,
        spec_metrics: str = "summary",
        env: dict[str, str] | None = None,
    ):
        self.target = Path(target).resolve()
        self.drafter = None if drafter is None else Path(drafter).resolve()
        self.k = k
        self.extra_args = tuple(extra_args)
        self.spec_extra = dict(spec_extra or {})
        """More --speculative-config keys (a k schedule, a rejection method); ``spec_metrics``: the
        --per-request-spec-decode-metrics level; ``env``: more environment for the server process."""
        self.spec_metrics = spec_metrics
        self.env = dict(env or {})
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None
        self.log_path = Path(tempfile.mkstemp(prefix="eaglehub-vllm-serve-", suffix=".log")[1])
        self._locked = False
        self.lock_wait_s = 0.0
        """Seconds the last start waited for the vLLM lock; ``start_s``: seconds it then took to be healthy."""
        self.start_s = 0.0

    @property
    def base_url(self) -> str:
        assert self.port is not None, "start() the server first"
        return f"http://127.0.0.1:{self.port}"

    @property
    def model(self) -> str:
        return str(self.target)

    def command(self) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            SERVER_MODULE,
            "--model",
            str(self.target),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dtype",
            "float32",
            "--enforce-eager",
            "--max-model-len",
            "2048",
            "--kv-cache-memory-bytes",
            str(DEFAULT_KV_CACHE_BYTES),
            "--seed",
            "0",
            "--distributed-executor-backend",
            "uni",
            "--uvicorn-log-level",
            "warning",
            "--disable-uvicorn-access-log",
        ]
        if self.drafter is not None:
            cmd += ["--speculative-config", json.dumps({**speculative_config(self.drafter, self.k), **self.spec_extra})]
            cmd += ["--per-request-spec-decode-metrics", self.spec_metrics]
        return cmd + list(self.extra_args)

    def start(self, timeout_s: float = START_TIMEOUT_S) -> VllmServer:
        """Start the server (on a new free port the first time, the same port after) and wait until
        ``/health`` answers 200; raises ``RuntimeError`` with the log's tail when it does not."""
        t0 = time.monotonic()
        if not self._locked:
            _Lock.acquire()
            self._locked = True
        self.lock_wait_s = time.monotonic() - t0
        if self.port is None:
            self.port = free_port()
        env = {"VLLM_CPU_OMP_THREADS_BIND": "nobind", "TOKENIZERS_PARALLELISM": "false", **os.environ, **self.env}
        # vllm-cpu turns the uni executor back into the multiprocess one unless this is 0; the API server still
        # runs its engine core in a process of its own, with the worker inside it (measured: 35-39 s to healthy
        # instead of 44-50 s, the same outputs and counters)
        env.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== start {time.strftime('%H:%M:%S')} port {self.port}\n".encode())
            log.flush()
            # its own session (process group), so stop() reaches the engine-core child as well
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        with httpx.Client(timeout=5.0) as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    code = self.proc.returncode
                    self.stop()
                    raise RuntimeError(f"vllm serve exited with {code} while starting:\n{self.log_tail()}")
                try:
                    if client.get(self.base_url + "/health").status_code == 200:
                        self.start_s = time.monotonic() - t0 - self.lock_wait_s
                        return self
                except httpx.TransportError:
                    pass
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"vllm serve not healthy after {timeout_s:.0f} s:\n{self.log_tail()}")

    def stop(self, release: bool = True) -> None:
        """Terminate the server's process group, kill it after STOP_TIMEOUT_S; ``release``: also give
        up the lock (``restart`` keeps it)."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait(timeout=STOP_TIMEOUT_S)
        if proc is not None:
            # the engine core may outlive the API server by a moment; its group is ours alone
            _signal_group(proc.pid, signal.SIGKILL)
        if release and self._locked:
            _Lock.release()
            self._locked = False

    def restart(self, timeout_s: float = START_TIMEOUT_S, drafter: Path | None = None) -> VllmServer:
        """Stop and start again on the same port, keeping the lock (the counters start from 0); with
        ``drafter``, the new process serves that drafter instead (a redeploy, as a user upgrades one)."""
        self.stop(release=False)
        if drafter is not None:
            self.drafter = Path(drafter).resolve()
        return self.start(timeout_s)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> VllmServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)  # the group the server leads (start_new_session): only processes we started
    except (ProcessLookupError, PermissionError):
        pass


def session_server(request, target: Path, drafter: Path | None, k: int = 3, **kw):
    """A started server, stopped when the pytest ``request``'s scope ends (for the fixtures); ``kw``: more
    :class:`VllmServer` options."""
    server = VllmServer(target, drafter, k, **kw)
    request.addfinalizer(server.stop)
    try:
        server.start()
    except (RuntimeError, TimeoutError) as exc:
        import pytest

        pytest.fail(str(exc), pytrace=False)
    return server
