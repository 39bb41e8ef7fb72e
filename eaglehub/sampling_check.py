"""The sampling (T > 0) losslessness test of ``eaglehub verify --sampling-trials N``.

At fixed prefixes (the first prompt of each category, up to ``prefixes`` of them, plus the target's
greedy first token) the reference engine gives the real target distribution ``p`` and the drafter's
first draft distribution ``q`` at temperature T (:meth:`eaglehub.engines.reference.ReferenceEngine.
first_step_distributions`). The engine's own accept/reject rule (:class:`eaglehub.sampling.
AcceptanceRule`, the object its verify step calls) then runs ``N`` independent trials per prefix and
the emitted tokens are tested against ``p`` (:func:`eaglehub.sampling.binned_goodness_of_fit`; the
prefixes combined by :func:`eaglehub.sampling.combine_tests`). Speculative sampling is lossless iff
the emitted token is distributed as ``p`` whatever ``q`` is (Leviathan et al. 2023, Theorem 3.5), so a
failure is ``E-SAMPLING-BIASED``.

Power: a 1 % bias in the acceptance probability moves about 1 % of ``P(q > p)`` across the ``q = p``
boundary; at 2·10⁶ trials per prefix and four prefixes the test finds it (tests/test_reference_engine.py).

vLLM at T > 0 drafts greedily (benchmarks.md §4 pitfall 5) and exposes no per-step hook; this test
checks the rule eaglehub's engine applies, which is the one of the paper; the vLLM rejection sampler is
covered by vLLM's own unit tests.
"""

from __future__ import annotations

import numpy as np

from . import sampling
from .engines.base import RunSpec
from .findings import finding
from .prompts import Prompt

TOP_BINS = 8


def first_per_category(prompts: list[Prompt], ids: list[list[int]], limit: int) -> list[tuple[Prompt, list[int]]]:
    """The first prompt of each category (file order), at most ``limit``."""
    seen, out = set(), []
    for p, i in zip(prompts, ids):
        if p.category not in seen and len(out) < limit:
            seen.add(p.category)
            out.append((p, i))
    return out


def run_sampling_test(engine, spec: RunSpec, chosen: list[tuple[Prompt, list[int]]], trials: int,
                      alpha: float = 1e-3) -> tuple[dict, list]:
    """Test ``engine.rule`` on the real distributions of ``spec``'s pair at ``chosen`` prefixes.

    ``spec.temperature`` > 0 is the sampling temperature; ``trials`` per prefix. Returns the report
    section (test description, per-prefix results, combined result, acceptance rate β = Σ min(p, q) per
    prefix) and the findings (one ``E-SAMPLING-BIASED`` when the combined test fails).
    """
    rng = np.random.default_rng(spec.seed)
    rows = []
    for prompt, ids in chosen:
        p, q = engine.first_step_distributions(spec, ids)
        p, q = p / p.sum(), q / q.sum()
        tokens = engine.rule.sample(p, q, trials, rng)
        r = sampling.binned_goodness_of_fit(tokens, p, q, TOP_BINS, alpha)
        rows.append({"id": prompt.id, "category": prompt.category, "statistic": r["statistic"], "dof": r["dof"],
                     "p_value": r["p_value"], "tv": r["tv"], "bins": r["bins"],
                     "acceptance_probability": float(np.minimum(p, q).sum())})
    combined = sampling.combine_tests(rows, alpha)
    section = {"test": sampling.BINNED_TEST.format(top=TOP_BINS), "engine": engine.name, "rule": engine.rule.name,
               "temperature": spec.temperature, "trials_per_prefix": trials,
               "prefix": "the prompt (chat template applied) + the target's greedy first token; p = target softmax(logits/T) "
                         "at the next position, q = the drafter's first draft distribution at T over target ids",
               "prefixes": rows, "combined": combined}
    findings = []
    if not combined["passed"]:
        findings.append(finding("E-SAMPLING-BIASED", "sampling_test",
                                f"tokens emitted by the {engine.rule.name} rule over {trials} trials at {len(rows)} prefixes are not "
                                f"distributed as the target's: chi-square {combined['statistic']:.1f} ({combined['dof']} dof), "
                                f"p-value {combined['p_value']:.3g} < alpha {alpha:g}"))
    return section, findings
