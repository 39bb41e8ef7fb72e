"""``verify`` under production features: prefix caching, chunked prefill, several requests in flight and a
k schedule, each run (the target alone and every drafter) under the same features.

The options map onto vLLM's own engine arguments (vllm 0.32.0): ``--prefix-caching`` is
``enable_prefix_caching`` (``config/cache.py`` L141, on by default), ``--chunked-prefill`` is
``enable_chunked_prefill`` and ``--max-num-batched-tokens`` the scheduler's token budget per step
(``config/scheduler.py`` L48 and L134, chunked prefill on by default), ``--concurrency N`` is ``max_num_seqs``
(``config/scheduler.py`` L62) with every prompt in one ``generate`` call, so the scheduler really holds up to N
requests at once, and ``--k-schedule`` is the drafter's ``num_speculative_tokens_per_batch_size``
(``config/speculative.py`` L490-496), looked up per step by the number of scheduled requests
(``v1/core/sched/scheduler.py`` L1486-1490). The target-alone run gets the same features except the schedule,
which needs a drafter.

What the runs really used is read back from each engine's own config (:func:`eaglehub.engines.vllm_engine.
engine_config`), with the prefix-cache hit tokens each request reports and how many prompts the token budget
split, into the report's ``settings.production_features`` (:func:`features_section`).

A divergence under these features is classified by verify's forensics (:mod:`eaglehub.verify.forensics`); a
near-tie at which the target alone also changes its output when run without the features (one request at a
time, one batch per category: :func:`numerics_explainer`) is the engine's batch-dependent numerics,
W-VERIFY-BATCH-NUMERICS, not the drafter's; a fault stays E-VERIFY-LOSSLESS.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

from eaglehub.engines.base import RunResult, RunSpec, SpecCounters
from eaglehub.engines.vllm_engine import K_SCHEDULE_KEY
from eaglehub.errors import UsageError
from eaglehub.findings import Finding, finding
from eaglehub.measure import curve
from eaglehub.verify.options import VerifyOptions

FEATURE_OPTIONS = {
    "enable_prefix_caching": "--prefix-caching",
    "enable_chunked_prefill": "--chunked-prefill",
    "max_num_batched_tokens": "--max-num-batched-tokens",
    "max_num_seqs": "--concurrency",
    K_SCHEDULE_KEY: "--k-schedule",
}
"""vLLM engine argument → the verify option that sets it."""

DEFINITION = (
    "production_features: what each local vLLM run ran with, read from the engine's own config after start-up "
    "(cache_config.enable_prefix_caching and block_size, scheduler_config.enable_chunked_prefill, "
    "max_num_batched_tokens and max_num_seqs, the speculative config's k schedule and the scheduler's k per batch "
    "size); prefix_cache_hit_tokens: prompt tokens served from the prefix cache (each request's "
    "num_cached_tokens), only whole cache blocks hit; prompts_split: prompts longer than the token budget, which "
    "chunked prefill computes in several steps"
)


def parse_k_schedule(text: str | None) -> list[list[int]] | None:
    """``--k-schedule``: vLLM's ``num_speculative_tokens_per_batch_size`` as JSON (``[[1, 4, 3], [5, 16, 2]]``),
    checked as vLLM checks it (vllm 0.32.0 ``v1/spec_decode/dynamic/utils.py`` L7-74, the same check as
    ``--served-config``'s); sorted by first batch size. A k above ``-k`` is not refused: vLLM caps it at
    ``num_speculative_tokens`` (utils.py L119-126).

    Raises:
        UsageError: not JSON, or a schedule vLLM would refuse (exit 2).
    """
    from eaglehub.endpoint.served_config import check_schedule

    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UsageError(
            f"--k-schedule is not JSON ({str(exc).splitlines()[0]})",
            hint="give vLLM's num_speculative_tokens_per_batch_size, e.g. --k-schedule '[[1, 4, 3], [5, 256, 1]]'",
        ) from exc
    return check_schedule(value, "--k-schedule")


def requested(opts: VerifyOptions) -> dict:
    """The features the options ask for, by vLLM argument; ``None``: vLLM's default."""
    return {
        "enable_prefix_caching": opts.prefix_caching,
        "enable_chunked_prefill": opts.chunked_prefill,
        "max_num_batched_tokens": opts.max_num_batched_tokens,
        "max_num_seqs": opts.in_flight,
        K_SCHEDULE_KEY: opts.k_schedule,
    }


def any_requested(opts: VerifyOptions) -> bool:
    return any(v is not None for v in requested(opts).values())


def engine_options(opts: VerifyOptions) -> dict:
    """``opts.engine_options`` plus the features asked for (:attr:`RunSpec.engine_options`; the vLLM worker puts
    the schedule into the drafter's speculative config)."""
    return {**opts.engine_options, **{k: v for k, v in requested(opts).items() if v is not None}}


def check_features(opts: VerifyOptions, engine_names: list[str]) -> None:
    """Refuse, before any run, feature options vLLM would refuse or that would be silently ignored.

    Raises:
        UsageError: a feature with an engine other than vLLM; ``--concurrency`` and ``--max-num-seqs`` that
            disagree; a token budget below ``max_model_len`` without chunked prefill (vllm 0.32.0
            ``config/scheduler.py`` L315-326) or below ``max_num_seqs`` (L328-333).
    """
    if not any_requested(opts):
        return
    given = [FEATURE_OPTIONS[k] for k, v in requested(opts).items() if v is not None]
    others = [n for n in engine_names if n != "vllm"]
    if others:
        raise UsageError(
            f"{', '.join(given)} {'sets a vLLM engine feature' if len(given) == 1 else 'set vLLM engine features'}; "
            f"the {others[0]} engine has {'no such feature' if len(given) == 1 else 'none of them'}",
            hint="add --engine vllm (once), or drop " + ", ".join(given),
        )
    seqs = opts.engine_options.get("max_num_seqs")
    if opts.in_flight is not None and seqs is not None and seqs != opts.in_flight:
        raise UsageError(
            f"--concurrency {opts.in_flight} is vLLM's max_num_seqs in a local run; --max-num-seqs says {seqs}",
            hint=f"give one of them (--concurrency {opts.in_flight} also puts every prompt in one batch)",
        )
    budget = opts.max_num_batched_tokens
    if budget is None:
        return
    if opts.chunked_prefill is False and budget < opts.max_model_len:
        raise UsageError(
            f"--max-num-batched-tokens {budget} is below max_model_len {opts.max_model_len} with "
            "--no-chunked-prefill: vLLM refuses it (a prompt longer than the budget could never be scheduled)",
            hint=f"raise --max-num-batched-tokens to {opts.max_model_len}, or leave chunked prefill on",
        )
    most = opts.in_flight or seqs
    if most is not None and budget < most:
        raise UsageError(
            f"--max-num-batched-tokens {budget} is below max_num_seqs {most}: vLLM refuses it (every running "
            "request needs a token of the budget per step)",
            hint=f"give --max-num-batched-tokens {most} or more",
        )


def _run_entry(name: str, run: RunResult, prompt_lengths: list[int]) -> dict | None:
    cfg = run.engine_config
    if cfg is None:
        return None
    hits = [int(h) for h in cfg.get("prefix_cache_hit_tokens") or []]
    budget = cfg["max_num_batched_tokens"]
    return {
        "run": name,
        **{key: cfg[key] for key in ("enable_prefix_caching", "block_size", "enable_chunked_prefill")},
        "max_num_batched_tokens": budget,
        "max_num_seqs": cfg["max_num_seqs"],
        "num_speculative_tokens": cfg["num_speculative_tokens"],
        K_SCHEDULE_KEY: cfg[K_SCHEDULE_KEY],
        "k_by_batch_size": cfg.get("k_by_batch_size"),
        "prefix_cache_hit_tokens": sum(hits),
        "prompts_hitting_cache": sum(h > 0 for h in hits),
        "prompts_split": sum(n > budget for n in prompt_lengths) if cfg["enable_chunked_prefill"] else 0,
    }


def features_section(
    opts: VerifyOptions, baseline: RunResult, runs: list[tuple[str, RunResult]], prompt_lengths: list[int]
) -> dict | None:
    """``settings.production_features``: the features asked for and, per run, what the engine read back
    (:data:`DEFINITION`); ``None`` when the engine says nothing of its config (the reference engine)."""
    entries = [_run_entry("target alone", baseline, prompt_lengths)]
    entries += [_run_entry(name, run, prompt_lengths) for name, run in runs]
    if any(e is None for e in entries):
        return None
    return {
        "requested": requested(opts),
        "one_batch": opts.in_flight is not None,
        "runs": entries,
        "numerics_check": None,
    }


def aggregate_findings(run: RunResult) -> list[Finding]:
    """E-VERIFY-COUNTERS where a one-batch run's per-category counters (sums of the requests' own) do not add
    up to the engine's aggregate counters over the batch: both count the same verify steps."""
    agg = (run.engine_config or {}).get("aggregate_counters")
    if not agg or run.prompt_counters is None:
        return []
    engine = SpecCounters.from_dict(agg)
    summed = sum(run.group_counters.values(), SpecCounters())
    k = max(len(engine.accepted_per_pos), len(summed.accepted_per_pos))

    def counts(c: SpecCounters) -> tuple:
        return (
            c.num_drafts,
            c.num_draft_tokens,
            c.num_accepted_tokens,
            c.accepted_per_pos + (0,) * (k - len(c.accepted_per_pos)),
        )

    if counts(engine) == counts(summed):
        return []
    return [
        finding(
            "E-VERIFY-COUNTERS",
            "acceptance.overall",
            f"one batch of every prompt: the per-request counters sum to (drafts, draft tokens, accepted, accepted "
            f"per position) {counts(summed)}, the engine's aggregate counters say {counts(engine)}",
        )
    ]


def numerics_explainer(
    explain: Callable, baseline: RunResult, plain: Callable[[], list[RunResult]], order: dict[str, int]
) -> tuple[Callable, dict]:
    """Wrap verify's ``explain`` (:func:`eaglehub.verify.run.forensics_for`): a near-tie divergence gets
    ``batch_variant`` True where the target alone without the features (``plain()``, run once, on the first
    near-tie; it returns that one run in a list) leaves the featured target alone's output at or before that position, i.e. the engine's batching
    itself flips that token. Returns the wrapped callable and the ``numerics_check`` record it fills."""
    record: dict = {"ran": False, "prompts_changed": []}
    cache: list[RunResult] = []

    def wrapped(rows: list[dict], run: RunResult):
        found, note = explain(rows, run)
        ties = [f for f in found.values() if f["classification"] == "near_tie"]
        if not ties:
            return found, note
        if not cache:
            cache.append(plain()[0])
            record["ran"] = True
            changed = []
            for pid, i in order.items():
                a, b = cache[0].outputs[i], baseline.outputs[i]
                if a != b:
                    changed.append({"id": pid, "first_divergence": _first_difference(a, b)})
            record["prompts_changed"] = changed
        where = {c["id"]: c["first_divergence"] for c in record["prompts_changed"]}
        for f in ties:
            at = where.get(f["id"])
            f["batch_variant"] = at is not None and at <= f["position"]
        return found, note

    return wrapped, record


def _first_difference(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def plain_spec(spec: RunSpec, opts: VerifyOptions) -> RunSpec:
    """The target alone without the features: one request at a time (``max_num_seqs`` 1), one batch per
    category, vLLM's defaults for everything else the options set."""
    options = {k: v for k, v in opts.engine_options.items() if k != "max_num_seqs"}
    return dataclasses.replace(spec, engine_options={**options, "max_num_seqs": 1}, one_batch=False)


def attach(
    report: dict,
    opts: VerifyOptions,
    results: list[RunResult],
    drafters: list,
    prompt_lengths: list[int],
    numerics: dict,
) -> None:
    """Add what the features did to a local run's ``report`` (:func:`eaglehub.verify.run.run_verify`):
    ``settings.production_features`` (:func:`features_section`, with ``numerics`` when that rerun happened),
    each drafter's speculative config and serve line with the k schedule, and :func:`aggregate_findings`."""
    from eaglehub.engines.vllm_engine import serve_command, speculative_config

    section = features_section(opts, results[0], [(str(d), r) for d, r in zip(drafters, results[1:])], prompt_lengths)
    if section is not None:
        section["numerics_check"] = numerics if numerics["ran"] else None
        report["definitions"]["production_features"] = DEFINITION
    report["settings"]["production_features"] = section
    for d, path, run in zip(report["drafters"], drafters, results[1:]):
        if opts.k_schedule:
            d["speculative_config"] = speculative_config(path, opts.k, opts.k_schedule)
            d["serve_command"] = serve_command(report["target"]["path"], path, opts.k, k_schedule=opts.k_schedule)
        found = aggregate_findings(run)
        if found:
            d["findings"] = sorted(d["findings"] + [f.as_dict() for f in found], key=lambda f: f["severity"] != "error")
            d["passed"] = False
    report["passed"] = all(d["passed"] for d in report["drafters"])
    curve.attach(report)  # the curves again: a k schedule of several ks leaves none (curve.entry_curve)
