"""Per-request acceptance distributions and the confidence interval of a sampled AL.

Pure functions over per-request :class:`~eaglehub.engines.base.SpecCounters`, so that every source of
per-request counters gives the same report section: the reference engine (it counts every verify
step), vLLM's per-request spec-decode metrics (offline ``RequestOutput.outputs[0].spec_decode_metrics``
or a server's response ``metrics.speculative_decoding``: an ``acceptance_histogram`` and the number of
draft tokens, :func:`counters_from_histogram`).

* Per-request AL = 1 + accepted / drafts of one request (bonus token included), over the requests
  that had at least one verify step; its percentiles are numpy's default (``method="linear"``:
  the (n − 1)·q-th order statistic, interpolated), :data:`PERCENTILE_DEFINITION`.
* Accepted tokens per verify step: the summed ``accepted_histogram`` (index j = verify steps that
  accepted exactly j draft tokens, j = 0..k), as counts and shares of all verify steps.
* Sampled AL's confidence interval (:func:`acceptance_length_ci`, :data:`CI_DEFINITION`): AL is the
  ratio R = 1 + Σaccepted / Σdrafts over clusters (a prompt with all its samples and turns), and the
  interval is the delta-method (linearised ratio-estimator) one, R ± t(n − 1) · SE with
  SE² = n / (n − 1) · Σ (a_i − (R − 1)·d_i)² / (Σ d_i)². Why this and not a bootstrap: verify steps of
  one request are not independent (one hard prompt rejects many drafts in a row), so the unit of
  resampling must be the prompt; with the prompt as unit both methods estimate the same variance,
  but the delta method is deterministic (no resampling seed: two reports of the same counters agree),
  is defined from two prompts on (scipy's BCa bootstrap returns NaN for small or degenerate samples),
  and always contains the point estimate; tests/test_distribution.py checks its coverage by simulation
  and that it agrees with scipy's bootstrap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from eaglehub.engines.base import SpecCounters
from eaglehub.measure.acceptance import acceptance_length, total

PERCENTILES = (10, 50, 90)
CONFIDENCE_LEVEL = 0.95
PERCENTILE_DEFINITION = (
    "per-request acceptance length = 1 + accepted / drafts of one request (bonus token included), over the "
    "requests with at least one verify step; p10 / p50 / p90 are numpy.percentile's default linear "
    "interpolation between order statistics; accepted_histogram[j] = verify steps that accepted exactly j "
    "draft tokens (j = 0..k, bonus not counted), shares = counts / all verify steps"
)
CI_METHOD = "delta-method ratio CI over prompts, t(n-1) quantile"
CI_DEFINITION = (
    "sampled AL = 1 + sum accepted / sum drafts over all samples; its confidence interval is the delta-method "
    "(linearised ratio estimator) one with each prompt (its samples and turns together) as one cluster: "
    "R +- t(n-1, (1+level)/2) * SE, "
    "SE^2 = n/(n-1) * sum_i (a_i - (R-1) d_i)^2 / (sum_i d_i)^2 with a_i, d_i the accepted tokens and drafts "
    "of prompt i; clipped to [1, 1 + k]"
)


def accepted_per_position(histogram: Sequence[int], k: int) -> tuple[int, ...]:
    """accepted_per_pos[i] = Σ_{j>i} histogram[j] for i = 0..k−1: a verify step that accepted j draft
    tokens accepted positions 0..j−1."""
    return tuple(sum(histogram[i + 1 :]) for i in range(k))


def counters_from_histogram(histogram: Sequence[int], num_draft_tokens: int) -> SpecCounters:
    """Counters of one request from its acceptance histogram (vLLM's ``RequestSpecDecodeMetrics``:
    ``histogram[j]`` = verify steps that accepted exactly j draft tokens, length k + 1) and its
    proposed draft tokens: num_drafts = Σ h, num_accepted = Σ j·h[j], accepted_per_pos[i] = Σ_{j>i} h[j].

    Raises:
        ValueError: an empty histogram or a negative count (not a histogram).
    """
    h = [int(x) for x in histogram]
    if not h or min(h) < 0:
        raise ValueError(f"not an acceptance histogram: {list(histogram)}")
    per_pos = accepted_per_position(h, len(h) - 1)
    return SpecCounters(sum(h), int(num_draft_tokens), sum(j * n for j, n in enumerate(h)), per_pos, tuple(h))


def request_acceptance_lengths(counters: Sequence[SpecCounters]) -> list[float]:
    """Each request's AL, for the requests that had at least one verify step, in order."""
    return [a for c in counters if (a := acceptance_length(c)) is not None]


def accepted_histogram(counters: Sequence[SpecCounters]) -> dict | None:
    """The summed accepted-tokens-per-verify-step histogram as ``{counts, shares}``; ``None`` when a
    request that drafted has no histogram (its engine does not count one), so a sum would be partial."""
    drafted = [c for c in counters if c.num_drafts]
    if not drafted or any(not c.accepted_histogram for c in drafted):
        return None
    counts = list(total(drafted).accepted_histogram)
    steps = sum(counts)
    return {"counts": counts, "shares": [n / steps for n in counts]}


def per_request_distribution(counters: Sequence[SpecCounters] | None) -> dict | None:
    """The report's ``acceptance.per_request`` section (module doc); ``None`` without per-request counters.

    Keys: ``num_requests``, ``num_requests_drafted``, ``mean_acceptance_length`` (request-weighted),
    ``p10`` / ``p50`` / ``p90``, ``min``, ``max`` (null when no request drafted) and ``accepted_histogram``.
    """
    if counters is None:
        return None
    als = request_acceptance_lengths(counters)
    quantiles: list[float | None] = [None] * len(PERCENTILES)
    if als:
        quantiles = [float(q) for q in np.percentile(als, PERCENTILES)]
    return {
        "num_requests": len(counters),
        "num_requests_drafted": len(als),
        "mean_acceptance_length": float(np.mean(als)) if als else None,
        **{f"p{p}": q for p, q in zip(PERCENTILES, quantiles)},
        "min": min(als) if als else None,
        "max": max(als) if als else None,
        "accepted_histogram": accepted_histogram(counters),
    }


def cluster_totals(counters: Sequence[SpecCounters], clusters: Sequence[str]) -> list[SpecCounters]:
    """Counters summed per cluster label (first-appearance order); ``clusters[i]`` labels ``counters[i]``.

    Raises:
        ValueError: the two sequences differ in length (a caller's bug).
    """
    if len(counters) != len(clusters):
        raise ValueError(f"{len(counters)} counters but {len(clusters)} cluster labels")
    out: dict[str, SpecCounters] = {}
    for c, label in zip(counters, clusters):
        out[label] = out[label] + c if label in out else c
    return list(out.values())


def acceptance_length_ci(per_cluster: Sequence[SpecCounters], level: float = CONFIDENCE_LEVEL) -> dict:
    """AL over ``per_cluster`` counters (one entry per prompt, :func:`cluster_totals`) with its
    delta-method confidence interval at ``level`` (module doc, :data:`CI_DEFINITION`).

    Returns ``{acceptance_length, low, high, standard_error, confidence_level, num_clusters, method}``;
    ``low`` / ``high`` / ``standard_error`` are null with fewer than two clusters or no drafts, and
    ``acceptance_length`` is null without drafts.
    """
    from scipy import stats

    a = np.array([c.num_accepted_tokens for c in per_cluster], dtype=np.float64)
    d = np.array([c.num_drafts for c in per_cluster], dtype=np.float64)
    n = len(per_cluster)
    out: dict = {
        "acceptance_length": None,
        "low": None,
        "high": None,
        "standard_error": None,
        "confidence_level": level,
        "num_clusters": n,
        "method": CI_METHOD,
    }
    if not d.sum():
        return out
    ratio = a.sum() / d.sum()
    out["acceptance_length"] = 1.0 + float(ratio)
    if n < 2:
        return out
    se = math.sqrt(n / (n - 1) * float(np.sum((a - ratio * d) ** 2))) / float(d.sum())
    half = float(stats.t.ppf((1 + level) / 2, n - 1)) * se
    k = max((len(c.accepted_per_pos) for c in per_cluster), default=0)
    top = 1.0 + k if k else math.inf
    out.update(
        low=max(1.0, 1.0 + float(ratio) - half),
        high=min(top, 1.0 + float(ratio) + half),
        standard_error=se,
    )
    return out


def paired_difference_low(
    better: Sequence[SpecCounters], current: Sequence[SpecCounters], level: float = CONFIDENCE_LEVEL
) -> float | None:
    """The lower end of the one-sided ``level`` confidence interval of AL(better) − AL(current), two
    sets of counters measured on the same clusters (entry i of each is prompt i): the delta method of
    :func:`acceptance_length_ci` applied to the difference of the two ratios, whose per-cluster terms
    are paired, so the prompt-to-prompt spread they share cancels. ``None`` with fewer than two clusters
    or no drafts in either."""
    from scipy import stats

    if len(better) != len(current):
        raise ValueError(f"{len(better)} against {len(current)} clusters: the counters must be paired")
    n = len(better)
    ab, db = (
        np.array([getattr(c, f) for c in better], dtype=np.float64) for f in ("num_accepted_tokens", "num_drafts")
    )
    ac, dc = (
        np.array([getattr(c, f) for c in current], dtype=np.float64) for f in ("num_accepted_tokens", "num_drafts")
    )
    if n < 2 or not db.sum() or not dc.sum():
        return None
    rb, rc = ab.sum() / db.sum(), ac.sum() / dc.sum()
    z = (ab - rb * db) / db.sum() - (ac - rc * dc) / dc.sum()
    se = math.sqrt(n / (n - 1) * float(np.sum(z**2)))
    return float(rb - rc) - float(stats.t.ppf(level, n - 1)) * se
