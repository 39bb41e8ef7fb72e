"""Parent side of the step-timing runs: build a worker request (:mod:`eaglehub.tune.worker`), run it as a
subprocess with verify's process handling (killed on Ctrl-C), and read the timed steps back."""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from eaglehub.engines.base import ProgressFn, SpecCounters
from eaglehub.engines.vllm_engine import K_SCHEDULE_KEY
from eaglehub.errors import EaglehubError

EXTEND_PREFIX_TOKENS = 128
"""Cached context behind the timed target forwards: about the context of the decode steps they stand for."""
MIN_PASS_FACTOR = 3
"""A pass at concurrency c serves at least this many times c requests (prompts cycled), so most of its
steps run at batch size c rather than in the start-up and drain."""


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
    schedule: tuple[tuple[int, int, int], ...] | None
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
    schedule: tuple[tuple[int, int, int], ...] | None
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


def pass_prompts(num_prompts: int, concurrency: int) -> list[int]:
    """The prompt order of one pass: every prompt once, cycled to at least ``MIN_PASS_FACTOR`` × concurrency."""
    n = max(num_prompts, MIN_PASS_FACTOR * concurrency)
    return [i % num_prompts for i in range(n)]


def build_request(
    settings: RunSettings,
    k: int,
    schedule: Sequence[Sequence[int]] | None,
    levels: Sequence[int],
    repeats: int,
    ids: list[list[int]],
    max_k: int = 0,
) -> dict:
    """The worker request: one cell per (repeat, level), repeats outermost so a slow spell of the machine
    spreads over every level instead of landing on one; the target-alone engine (``k`` 0) also times its
    forward over n = 1 … ``max_k`` + 1 new tokens at every level."""
    cells = [
        {
            "label": f"k{k if schedule is None else 'S'}-c{c}-r{r}",
            "concurrency": c,
            "rep": r,
            "prompts": pass_prompts(len(ids), c),
        }
        for r in range(repeats)
        for c in levels
    ]
    options: dict = {"max_num_seqs": max(levels)}
    if schedule:
        options[K_SCHEDULE_KEY] = [list(r) for r in schedule]
    if k == 0 and max_k > 0:
        options["enable_prefix_caching"] = True  # the timed target forwards need the cached prefix
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
        "cells": cells,
        "extend": {
            "prefix_tokens": EXTEND_PREFIX_TOKENS,
            "ns": list(range(1, max_k + 2)),
            "levels": list(levels),
            "repeats": repeats,
        }
        if k == 0 and max_k > 0
        else None,
    }


def read_result(result: dict, k: int, schedule) -> EngineRun:
    passes = tuple(
        Pass(
            k,
            schedule,
            int(c["concurrency"]),
            int(c["rep"]),
            tuple(Step(int(b), bool(d), int(t), float(s)) for b, d, t, s in c["steps"]),
            SpecCounters.from_dict(c["counters"]),
            tuple(c["prompts"]),
            tuple(tuple(o) for o in c["outputs"]),
        )
        for c in result["cells"]
    )
    extends = tuple((int(b), int(n), int(r), float(sec)) for b, n, r, sec in result.get("extends") or ())
    return EngineRun(k, schedule, float(result["load_seconds"]), passes, extends)


def run_engine(
    settings: RunSettings,
    k: int,
    levels: Sequence[int],
    repeats: int,
    ids: list[list[int]],
    schedule: Sequence[Sequence[int]] | None = None,
    progress: ProgressFn | None = None,
    max_k: int = 0,
) -> EngineRun:
    """Start one vLLM engine (target alone at ``k`` 0, else target + drafter at ``k`` or ``schedule``), serve
    the prompts ``repeats`` times at each concurrency level, timing every step; at ``k`` 0 also time the
    target's forward over 1 … ``max_k`` + 1 new tokens per request.

    Raises:
        EaglehubError: the worker failed (exit 1; the message carries the tail of vLLM's log).
    """
    from eaglehub.engines.vllm_engine import DEFAULT_KV_CACHE_BYTES, VllmEngine, log_tail

    frozen = tuple(tuple(int(x) for x in r) for r in schedule) if schedule else None
    request = build_request(settings, k, schedule, levels, repeats, ids, max_k)
    request["kv_cache_bytes"] = request["kv_cache_bytes"] or DEFAULT_KV_CACHE_BYTES
    with tempfile.TemporaryDirectory(prefix="eaglehub-tune-") as tmp_name:
        tmp = Path(tmp_name)
        log_dir = settings.log_dir or tmp
        log_dir.mkdir(parents=True, exist_ok=True)
        log = log_dir / f"vllm-tune-{'S' if frozen else k}-{os.getpid()}-{time.time_ns()}.log"
        (tmp / "request.json").write_text(json.dumps(request))
        rc = VllmEngine._spawn(
            tmp / "request.json", tmp / "result.json", log, progress, True, module="eaglehub.tune.worker"
        )
        if rc != 0 or not (tmp / "result.json").is_file():
            raise EaglehubError(
                f"the vLLM step-timing worker failed (exit code {rc}); last lines of its log:\n{log_tail(log)}",
                hint="see the log above; rerun with --engine-log DIR to keep it",
                exit_code=1,
            )
        return read_result(json.loads((tmp / "result.json").read_text()), k, frozen)
