"""``eaglehub tune``: the k to serve at each batch size, from the user's prompts and the serving engine's costs.

1. Acceptance: one engine run at K = ``--max-k`` gives the unconditional acceptance rate per draft position
   and from it AL(k) for every k ≤ K (:data:`eaglehub.measure.curve.MODEL`); runs at two other k check that
   prediction (the error is reported, W-TUNE-AL-MODEL past :data:`eaglehub.tune.report.AL_TOLERANCE`).
2. Cost: every engine step of those runs (and of a target-alone run) is timed on its own
   (:mod:`eaglehub.tune.worker`), so acceptance does not enter the cost; the mean step time of each
   (batch size, k) cell is fitted to :mod:`eaglehub.tune.costs`'s model, printed with its residuals. Costs
   measured elsewhere (``--costs FILE``, written by ``--save-costs``) replace the measurement.
3. The schedule (:mod:`eaglehub.tune.schedule`): at each batch size, the k with the highest predicted
   throughput; vLLM's ``num_speculative_tokens_per_batch_size``, TensorRT-LLM's ``draft_len_schedule`` and the
   break-even batch size.
4. ``--check``: the engine run with the schedule and with every static k at every concurrency level,
   repeated; measured against predicted throughput per cell, and whether the schedule is at least as good
   as the best static k at every level (within that k's measured spread).

Throughput here is decode throughput: the output tokens of the engine steps that run exactly c requests, all
past their prefill, over those steps' wall time (:meth:`eaglehub.tune.engine.Pass.throughput`). Prefill is
left out: it costs the same for every k.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from pathlib import Path

from eaglehub.io.schemas import check_output
from eaglehub.measure.curve import curve_from_counters
from eaglehub.tune.costs import cells_from_steps, fit, target_cells_from
from eaglehub.tune.engine import (
    EnginePool,
    EngineRun,
    RunSettings,
    choose_interleave,
    config_name,
    freeze,
    kv_cache_bytes,
)
from eaglehub.tune.inputs import check_prompt_lengths, load_acceptance, load_costs
from eaglehub.tune.options import TuneOptions, check_ks, check_options
from eaglehub.tune.report import REPORT_SCHEMA, build_report, check_section, first_pass_counters
from eaglehub.tune.schedule import Recommendation, best_schedule, recommend


def machine() -> dict:
    import os
    import platform

    out = {"platform": platform.platform(), "cpus": os.cpu_count() or 0, "device": "cpu"}
    try:
        import torch

        if torch.cuda.is_available():
            out["device"] = "cuda"
            out["gpu"] = torch.cuda.get_device_name(0)
            out["gpus"] = torch.cuda.device_count()
    except ImportError:
        pass
    return out


# --- the verb ----------------------------------------------------------------------------------------------------


def run_tune(opts: TuneOptions, progress: Callable[[str], None] | None = None) -> dict:
    """Measure (or read) acceptance and costs, pick the schedule, optionally check it; return the validated report.

    Raises:
        EaglehubError: bad options or inputs (exit 2), a drafter that fails validation or an engine failure
            (exit 1), vLLM missing (exit 2).
    """
    from eaglehub.checks.validate import preflight
    from eaglehub.engines.chat import encode_chat
    from eaglehub.engines.vllm_engine import VllmEngine
    from eaglehub.measure.prompts import default_prompts_path, load_prompts
    from eaglehub.measure.runner import resolve_drafter
    from eaglehub.target import resolve_target
    from eaglehub.verify.preflight import engine_profile

    check_options(opts)
    say = progress or (lambda _msg: None)
    costs = load_costs(opts.costs) if opts.costs else None
    given = load_acceptance(opts.acceptance, opts.drafter) if opts.acceptance else None
    curve = given.curve if given else None
    max_k = opts.max_k if curve is None else min(curve.k, opts.max_k)
    if curve is not None and curve.k != opts.max_k:
        say(f"the acceptance curve reaches k={curve.k}: the schedule considers k up to {max_k} (--max-k {opts.max_k})")
    drafter = resolve_drafter(opts.drafter)
    target = resolve_target(opts.target)
    engine = VllmEngine(log_dir=opts.log_dir)
    needs_engine = costs is None or curve is None
    engine_info = {"name": "vllm", "version": engine.version(), "profile": engine.profile()} if needs_engine else {}
    prompts_file = Path(opts.prompts_file) if opts.prompts_file else default_prompts_path()
    prompts = load_prompts(prompts_file, list(opts.categories) or None, opts.limit)
    sha = hashlib.sha256(prompts_file.read_bytes()).hexdigest()
    runs: list[EngineRun] = []
    ids = encode_chat(target, [p.text for p in prompts]) if needs_engine else []
    # the check measures at every level; otherwise costs from elsewhere leave only acceptance to measure here
    levels = list(opts.concurrency) if costs is None else [min(opts.concurrency)]
    settings = RunSettings(
        target,
        drafter,
        opts.max_tokens,
        opts.dtype,
        opts.seed,
        opts.temperature,
        opts.top_p,
        opts.top_k,
        opts.max_model_len,
        kv_cache_bytes(target, opts.dtype, opts.max_model_len, ids, levels, opts.max_tokens, max_k),
        opts.log_dir,
    )
    ks = sorted(({0} if costs is None else set()) | ({max_k} if curve is None else set()) | set(check_ks(max_k)))
    if opts.check:
        ks = list(range(max_k + 1))
    if needs_engine:
        check_prompt_lengths(prompts, ids, opts.max_tokens, max_k, opts.max_model_len)
        interleave = choose_interleave(opts.interleave, settings, ks + ([max_k] if opts.check else []), say)
    else:
        if opts.interleave is not None:
            say("--interleave / --no-interleave has no effect: no engine runs (--costs and --acceptance given)")
        interleave = False
    opts = dataclasses.replace(opts, interleave=interleave if needs_engine else None)
    with EnginePool(settings, ids, levels, interleave, _step_progress(say)) as pool:
        if needs_engine:
            preflight(drafter, target, (engine_profile(engine).id,))
            repeats = opts.repeats if costs is None else 1
            say(
                f"engines {', '.join(config_name(k, None) for k in ks)}: {len(levels)} level(s) x {repeats} "
                f"repeat(s), {'interleaved' if interleave else 'one after another'}"
            )
            runs = pool.measure([(k, None) for k in ks], repeats, max_k=max_k, say=say)
            if curve is None:
                at_k = next(r for r in runs if r.k == max_k)
                curve = curve_from_counters(
                    first_pass_counters(at_k, min(levels)),
                    max_k,
                    len(prompts),
                    sha,
                    {
                        "temperature": opts.temperature,
                        "top_p": opts.top_p,
                        "top_k": opts.top_k,
                        "max_tokens": opts.max_tokens,
                        "dtype": opts.dtype,
                        "engine": {"name": "vllm", "version": engine_info["version"]},
                    },
                )
            if costs is None:
                steps = [(s.batch, r.k, p.rep, s.seconds) for r in runs for p in r.passes for s in p.steps if s.decode]
                costs = fit(
                    cells_from_steps(steps),
                    engine_info,
                    machine(),
                    {
                        "target": target.name,
                        "drafter": drafter.name,
                        "max_tokens": opts.max_tokens,
                        "dtype": opts.dtype,
                        "prompts_sha256": sha,
                    },
                    target_cells_from([x for r in runs for x in r.extends]),
                )
        assert curve is not None and costs is not None
        # offline, the plan reaches as far as the costs were measured unless --max-batch says more
        max_batch = opts.max_batch or (max(costs.batches) if opts.costs else max(opts.concurrency))
        schedule = best_schedule(curve, costs, max_batch, max_k)
        rec = recommend(schedule, curve, costs, opts.schedule_margin)
        served = rec.served
        check = None
        if opts.check:
            check_runs = _check_runs(pool, runs, rec, opts.repeats, say)
            check = check_section(check_runs, served, curve, costs)
            runs = runs + [r for r in check_runs if r.schedule is not None]
    report = build_report(
        opts, target, drafter, prompts_file, sha, len(prompts), runs, curve, costs, schedule, check, given, rec
    )
    check_output(report, REPORT_SCHEMA, "tune report")
    return report


def _check_runs(pool: EnginePool, runs: list[EngineRun], rec: Recommendation, repeats: int, say) -> list[EngineRun]:
    """The runs ``--check`` compares: every static k and the served configuration, measured side by side.

    A served static k (or the target alone) is that engine's own passes, already measured with the others. A
    served schedule is a new engine; interleaved, it is measured in fresh rounds with every static engine, so
    all of them share the same spells of the machine; one after another, against the static runs already made.
    """
    served = rec.served
    frozen = freeze(served.ranges)
    if rec.kind != "schedule":
        same = next(r for r in runs if r.k == served.largest_k and r.schedule is None)
        return runs + [EngineRun(same.k, frozen, same.load_seconds, same.passes)]
    say(f"engine with the schedule {served.ranges}")
    if pool.interleave:
        return pool.measure([(r.k, None) for r in runs] + [(served.largest_k, frozen)], repeats, say=say)
    return runs + pool.measure([(served.largest_k, frozen)], repeats, say=say)


def _step_progress(say: Callable[[str], None]):
    return lambda group, n: say(f"  {group}: {n} requests served")
