"""The sampling (T > 0) losslessness test of ``eaglehub verify --sampling-trials N``.

At fixed prefixes (the first prompt of each category, up to ``prefixes`` of them, plus the target's
greedy first token) the reference engine gives the real target distribution ``p`` and the drafter's
first draft distribution ``q`` at temperature T (:meth:`eaglehub.engines.reference.ReferenceEngine.
first_step_distributions`). The engine's own accept/reject rule (:class:`eaglehub.verify.sampling.
AcceptanceRule`, the object its verify step calls) then runs ``N`` independent trials per prefix and
the emitted tokens are tested against ``p`` (:func:`eaglehub.verify.sampling.binned_goodness_of_fit`; the
prefixes combined by :func:`eaglehub.verify.sampling.combine_tests`). Speculative sampling is lossless iff
the emitted token is distributed as ``p`` whatever ``q`` is (Leviathan et al. 2023, Theorem 3.5), so a
failure is ``E-SAMPLING-BIASED``.

Power: a 1 % bias in the acceptance probability moves about 1 % of ``P(q > p)`` across the ``q = p``
boundary; at 2·10⁶ trials per prefix and four prefixes the test finds it (tests/test_reference_engine.py).

vLLM has no per-step hook, so it is tested on its output instead (:func:`run_engine_sampling_test`):
``N`` independent samples of two output tokens per prefix (``n`` copies of the prompt, seed + i each).
The first token comes from the prefill, the target alone; the second is the first token that went
through draft + verify, so for every first token ``x`` seen often enough its distribution must be the
target's ``p(· | prompt, x)`` (computed with transformers). vLLM drafts greedily at T > 0 (one-hot
``q``, docs/verification.md §4 pitfall 5), which the rule keeps lossless. Its power is lower (thousands of
samples, not millions): it finds gross faults such as a residual that is ``p`` instead of
``norm(max(0, p − q))``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

import numpy as np

from eaglehub.engines.base import RunSpec
from eaglehub.findings import finding
from eaglehub.verify import sampling

TOP_BINS = 8
MIN_GROUP = 200
"""Samples of one first token needed before its second-token distribution is tested (chi-square wants
expected counts ≳ 5 in each of the ≤ 10 bins)."""
ENGINE_TEST = (
    "Pearson chi-square goodness of fit of the engine's second output token against the target's "
    "p(. | prompt, first token), per first token with at least {min_group} samples; bins: the {top} tokens "
    "of highest p each alone, the rest pooled; groups and prefixes combined by summing statistics and dof"
)


class Prefix(Protocol):
    """What a prefix's prompt must tell: a :class:`~eaglehub.measure.prompts.Prompt`, or verify's request for one."""

    @property
    def id(self) -> str: ...

    @property
    def category(self) -> str: ...


P = TypeVar("P", bound=Prefix)


def first_per_category(prompts: list[P], ids: list[list[int]], limit: int) -> list[tuple[P, list[int]]]:
    """The first prompt of each category (file order), at most ``limit``."""
    seen: set[str] = set()
    out: list[tuple[P, list[int]]] = []
    for p, i in zip(prompts, ids):
        if p.category not in seen and len(out) < limit:
            seen.add(p.category)
            out.append((p, i))
    return out


def run_sampling_test(
    engine, spec: RunSpec, chosen: Sequence[tuple[Prefix, list[int]]], trials: int, alpha: float = 1e-3
) -> tuple[dict, list]:
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
        rows.append(
            {
                "id": prompt.id,
                "category": prompt.category,
                "statistic": r["statistic"],
                "dof": r["dof"],
                "p_value": r["p_value"],
                "tv": r["tv"],
                "bins": r["bins"],
                "acceptance_probability": float(np.minimum(p, q).sum()),
            }
        )
    combined = sampling.combine_tests(rows, alpha)
    section = {
        "test": sampling.BINNED_TEST.format(top=TOP_BINS),
        "engine": engine.name,
        "rule": engine.rule.name,
        "temperature": spec.temperature,
        "trials_per_prefix": trials,
        "prefix": "the prompt (chat template applied) + the target's greedy first token; p = target softmax(logits/T) "
        "at the next position, q = the drafter's first draft distribution at T over target ids",
        "prefixes": rows,
        "combined": combined,
    }
    findings = []
    if not combined["passed"]:
        findings.append(
            finding(
                "E-SAMPLING-BIASED",
                "sampling_test",
                f"tokens emitted by the {engine.rule.name} rule over {trials} trials at {len(rows)} prefixes are not "
                f"distributed as the target's: chi-square {combined['statistic']:.1f} ({combined['dof']} dof), "
                f"p-value {combined['p_value']:.3g} < alpha {alpha:g}",
            )
        )
    return section, findings


def run_engine_sampling_test(
    engine, spec: RunSpec, chosen: Sequence[tuple[Prefix, list[int]]], samples: int, target, alpha: float = 1e-3
) -> tuple[dict, list]:
    """Test an engine's sampled output (module doc) at ``chosen`` prefixes, ``samples`` per prefix.

    ``spec``: the pair and temperature; ``target``: a :class:`~eaglehub.engines.reference.ReferenceTarget`
    for the reference distributions. Returns the report section and the findings (one
    ``E-SAMPLING-BIASED`` when the combined test fails; none when no first token was frequent enough,
    the section then says so with ``combined`` null).
    """
    import dataclasses

    import torch

    run_spec = dataclasses.replace(spec, max_tokens=2, distinct_seeds=True)
    # one engine run for every prefix (one batch each): a vLLM start-up costs more than the sampling
    result = engine.run(
        run_spec,
        [ids for _, ids in chosen for _ in range(samples)],
        [f"prefix-{i}" for i in range(len(chosen)) for _ in range(samples)],
    )
    rows = []
    for i, (prompt, ids) in enumerate(chosen):
        outs = result.outputs[i * samples : (i + 1) * samples]
        pairs = np.array([o[:2] for o in outs if len(o) >= 2], dtype=np.int64).reshape(-1, 2)
        firsts, counts = np.unique(pairs[:, 0], return_counts=True)
        for first, count in zip(firsts, counts):
            if count < MIN_GROUP:
                continue
            with torch.inference_mode():
                logits, _ = target.forward(ids + [int(first)], target.new_cache(), None)
            p = torch.softmax(logits[-1].double() / spec.temperature, dim=-1).cpu().numpy()
            p = p / p.sum()
            r = sampling.binned_goodness_of_fit(pairs[pairs[:, 0] == first, 1], p, p, TOP_BINS, alpha)
            rows.append(
                {
                    "id": prompt.id,
                    "category": prompt.category,
                    "first_token": int(first),
                    "samples": int(count),
                    "statistic": r["statistic"],
                    "dof": r["dof"],
                    "p_value": r["p_value"],
                    "tv": r["tv"],
                    "bins": r["bins"],
                }
            )
    combined = sampling.combine_tests(rows, alpha) if rows else None
    section = {
        "test": ENGINE_TEST.format(min_group=MIN_GROUP, top=TOP_BINS),
        "engine": engine.name,
        "temperature": spec.temperature,
        "samples_per_prefix": samples,
        "groups": rows,
        "combined": combined,
        "note": None if rows else f"no first token reached {MIN_GROUP} samples: not tested",
    }
    findings = []
    if combined is not None and not combined["passed"]:
        findings.append(
            finding(
                "E-SAMPLING-BIASED",
                "sampling_test.engine",
                f"{engine.name}'s second output token over {samples} samples at {len(chosen)} prefixes is not "
                f"distributed as the target's: chi-square {combined['statistic']:.1f} ({combined['dof']} dof), "
                f"p-value {combined['p_value']:.3g} < alpha {alpha:g}",
            )
        )
    return section, findings
