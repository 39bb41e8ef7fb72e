"""The acceptance curve: a drafter's unconditional acceptance rate per draft position, measured at one k, and
the mean acceptance length AL(k') it predicts for every k' up to that k (:data:`MODEL`).

It travels as an artifact (``schemas/acceptance-curve.schema.json``): in each drafter entry of a verify report
(``acceptance_curve``), in the card ``eaglehub publish`` writes (a table and the card's metadata), in what
``eaglehub drafters`` lists, and as the ``synthetic_acceptance_rates`` of vLLM's synthetic rejection method
(:meth:`AcceptanceCurve.synthetic_config`), with which serving benchmarks replay a drafter's acceptance without it.
The rates are :mod:`eaglehub.measure.acceptance`'s; nothing here counts differently.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from itertools import pairwise

from eaglehub.engines.base import SpecCounters
from eaglehub.measure import acceptance

SCHEMA = "acceptance-curve"
FORMULA = "AL(k') = 1 + p_1 + ... + p_k' for k' <= k, p_i the unconditional acceptance rate at draft position i"
MODEL = (
    "AL(k') = 1 + p_1 + ... + p_k' for every k' <= k, where p_i = accepted_per_pos[i] / num_drafts is the "
    "unconditional acceptance rate at draft position i measured in a run at k draft tokens. It holds when the "
    "drafter is a chain (EAGLE-3 drafts one token after another) whose i-th draft does not depend on how many "
    "drafts follow it, so a run at k' < k drafts the same first k' tokens and the target accepts the same ones; "
    "the bonus token the target adds after the last accepted draft counts once, as the 1. Past k nothing is "
    "measured and nothing is predicted."
)
GREEDY_FILTERS = {"top_p": 1.0, "top_k": 0}
"""A greedy run's filters: off (the argmax is kept by any of them)."""


@dataclass(frozen=True)
class AcceptanceCurve:
    """Unconditional acceptance rate per draft position 1..k of a run at ``k`` draft tokens (:data:`MODEL`).

    ``prompts``: how many prompts the run had; ``prompts_sha256``: the hash of the prompt set (the prompt file's
    bytes, or :func:`token_ids_sha256` of the token ids where there is no file); ``settings``: what changes
    acceptance: ``temperature``, ``top_p``, ``top_k``, ``max_tokens``, ``dtype``, ``engine`` (``{name, version}``),
    and where set ``context`` (padded prompt tokens) and ``chat_template_kwargs``."""

    k: int
    rates: tuple[float, ...]
    num_drafts: int
    prompts: int
    prompts_sha256: str
    settings: dict = field(hash=False)

    def __post_init__(self) -> None:
        if self.k < 1 or len(self.rates) != self.k:
            raise ValueError(f"an acceptance curve at k={self.k} needs k >= 1 and k rates, got {list(self.rates)}")
        if not all(0.0 <= r <= 1.0 and math.isfinite(r) for r in self.rates):
            raise ValueError(f"acceptance rates {list(self.rates)} are not all in [0, 1]")
        # a token at position i is accepted only if the one before it was: unconditional rates never rise
        if any(b > a for a, b in pairwise(self.rates)):
            raise ValueError(f"acceptance rates {list(self.rates)} rise with position")
        if self.num_drafts < 1:
            raise ValueError("an acceptance curve needs at least one draft")

    def al(self, k: int) -> float:
        """Predicted mean acceptance length at ``k`` draft tokens (:data:`MODEL`): 1 at k = 0 (no speculation).

        Raises:
            ValueError: ``k`` is negative or beyond the measured k.
        """
        if not 0 <= k <= self.k:
            raise ValueError(f"AL({k}) is not predicted: the curve was measured at k={self.k} (0 <= k <= {self.k})")
        return math.fsum((1.0, *self.rates[:k]))  # correctly rounded: AL(k) of 0.7, 0.3, 0.1 is 2.1, not 2.0999…

    def al_by_k(self) -> list[float]:
        """AL(0), AL(1), …, AL(k)."""
        return [self.al(i) for i in range(self.k + 1)]

    def to_dict(self) -> dict:
        """JSON-ready (``schemas/acceptance-curve.schema.json``); ``al_by_k`` is derived from the rates."""
        return {
            "k": self.k,
            "rates": list(self.rates),
            "al_by_k": self.al_by_k(),
            "num_drafts": self.num_drafts,
            "prompts": self.prompts,
            "prompts_sha256": self.prompts_sha256,
            "settings": dict(self.settings),
            "model": FORMULA,
        }

    @classmethod
    def from_dict(cls, d: dict) -> AcceptanceCurve:
        """The curve :meth:`to_dict` wrote.

        Raises:
            ValueError: ``d`` breaks the schema, its rates do not make a curve, or its ``al_by_k`` is not theirs.
        """
        from eaglehub.io.schemas import schema_errors

        errors = schema_errors(d, SCHEMA)
        if errors:
            where, message = errors[0]
            raise ValueError(f"not an acceptance curve: {where}: {' '.join(message.split())[:200]}")
        curve = cls(
            k=d["k"],
            rates=tuple(float(r) for r in d["rates"]),
            num_drafts=d["num_drafts"],
            prompts=d["prompts"],
            prompts_sha256=d["prompts_sha256"],
            settings=dict(d["settings"]),
        )
        if not all(math.isclose(a, b, abs_tol=1e-9) for a, b in zip(d["al_by_k"], curve.al_by_k())):
            raise ValueError(f"al_by_k {d['al_by_k']} is not 1 + the running sum of the rates {d['rates']}")
        return curve

    def synthetic_config(self) -> dict:
        """The rates as vLLM's synthetic rejection method takes them (``--speculative-config`` keys; vllm 0.32.0
        ``config/speculative.py`` L539-545: position i's entry is the probability that the first i + 1 drafts are
        all accepted, the unconditional rate). Checked as vLLM checks it (k rates in [0, 1], non-increasing:
        L566-601, :func:`eaglehub.endpoint.served_config.parse_served_config`)."""
        from eaglehub.endpoint.served_config import parse_served_config

        # 6 decimals keep the file readable; rounding is monotone, so the rates stay in [0, 1] and non-increasing
        fragment = {
            "rejection_sample_method": "synthetic",
            "synthetic_acceptance_rates": [round(r, 6) for r in self.rates],
        }
        parse_served_config(json.dumps({"num_speculative_tokens": self.k, **fragment}))
        return fragment

    def line(self) -> str:
        """``AL(k) 1.71 / 2.12 / 2.35 at k=1..3, T=0`` (AL(0) = 1 left out)."""
        temperature = self.settings.get("temperature")
        at = f", T={temperature:g}" if isinstance(temperature, int | float) else ""
        span = "k=1" if self.k == 1 else f"k=1..{self.k}"
        return f"AL(k) {' / '.join(f'{a:.2f}' for a in self.al_by_k()[1:])} at {span}{at}"


def curve_from_counters(
    counters: SpecCounters, k: int, prompts: int, prompts_sha256: str, settings: dict
) -> AcceptanceCurve:
    """The curve of a run at ``k`` draft tokens from its (overall) counters: rate i = accepted_per_pos[i] /
    num_drafts (:func:`eaglehub.measure.acceptance.acceptance_stats`), positions the engine did not count
    (nothing accepted there) at 0.

    Raises:
        ValueError: nothing was drafted, the counters hold more than ``k`` positions, or the rates rise.
    """
    rates = acceptance.acceptance_stats(counters)["acceptance_rate_per_position"]
    if not counters.num_drafts or any(r is None for r in rates):
        raise ValueError("nothing was drafted: no acceptance curve")
    while len(rates) > k and rates[-1] == 0:  # positions counted past k (a server sizes them by its largest k)
        rates = rates[:-1]
    if len(rates) > k:
        raise ValueError(f"the counters hold {len(rates)} draft positions, more than k={k}")
    return AcceptanceCurve(
        k=k,
        rates=tuple(float(r) for r in rates) + (0.0,) * (k - len(rates)),
        num_drafts=counters.num_drafts,
        prompts=prompts,
        prompts_sha256=prompts_sha256,
        settings=settings,
    )


def token_ids_sha256(prompt_token_ids: list[list[int]]) -> str:
    """The hash of a prompt set that has no file (an endpoint's traffic): sha256 of the token ids as compact JSON."""
    return hashlib.sha256(json.dumps(prompt_token_ids, separators=(",", ":")).encode()).hexdigest()


# --- from a verify report ----------------------------------------------------------------------------------------


def report_settings(report: dict, sampled: dict | None = None) -> dict:
    """The curve's ``settings`` from a verify report: its greedy settings, or those of its ``sampled_acceptance``
    section ``sampled`` (temperature, filters, that run's engine)."""
    s = report["settings"]
    engine = dict((sampled or {}).get("engine") or report["engine"])
    served = ((report.get("endpoint") or {}).get("served") or {}).get("settings") or {}
    if isinstance((served.get("engine") or {}).get("value"), str):  # a server: the engine behind it, as it says
        engine["name"] = served["engine"]["value"]
    out = {
        "temperature": float(sampled["temperature"]) if sampled else float(s.get("temperature", 0.0)),
        "top_p": float(sampled["top_p"]) if sampled else GREEDY_FILTERS["top_p"],
        "top_k": int(sampled["top_k"]) if sampled else GREEDY_FILTERS["top_k"],
        "max_tokens": s["max_tokens"],
        "dtype": s["dtype"],
        "engine": {"name": engine["name"], "version": engine["version"]},
    }
    context = s.get("context")
    if isinstance(context, dict) and context.get("context_tokens"):
        out["context"] = context["context_tokens"]
    if s.get("chat_template_kwargs"):
        out["chat_template_kwargs"] = dict(s["chat_template_kwargs"])
    return out


def entry_curve(report: dict, entry: dict, sampled: bool = False) -> AcceptanceCurve | None:
    """The curve of one drafter ``entry`` of a verify ``report`` (any report version: it is recomputed from the
    overall counters), greedy or (``sampled``) from its ``sampled_acceptance`` section; ``None`` where there is
    none: nothing drafted, no sampled run, a served drafter whose AL is configured (synthetic) or mixes ks, or a
    local run under a k schedule of more than one k."""
    section = entry.get("sampled_acceptance") if sampled else entry
    if not isinstance(section, dict):
        return None
    claims = (((report.get("endpoint") or {}).get("served") or {}).get("claims") or {}).get("acceptance_length")
    if claims in ("configured", "mixed_k"):
        return None
    k = report["settings"]["num_speculative_tokens"]
    requested = (report["settings"].get("production_features") or {}).get("requested") or {}
    schedule = requested.get("num_speculative_tokens_per_batch_size")
    if schedule:
        # a local run under verify --k-schedule: vLLM drafts min(k_range, k) per step (vllm 0.32.0
        # v1/spec_decode/dynamic/utils.py L77-148), so the rates mix ks unless the schedule holds one; steps at
        # k 0 draft nothing and count no drafts
        ks = {min(int(row[2]), k) for row in schedule} - {0}
        if len(ks) != 1:
            return None
        k = ks.pop()
    try:
        counters = SpecCounters.from_dict(section["acceptance"]["overall"])
        if claims == "one_k_this_load" and counters.num_drafts:
            # a server with a k schedule that drafted one k at this load: the curve is at that k, not the largest
            if counters.num_draft_tokens % counters.num_drafts:
                return None
            k = counters.num_draft_tokens // counters.num_drafts
        return curve_from_counters(
            counters,
            k,
            report["prompts"]["count"],
            report["prompts"]["sha256"],
            report_settings(report, section if sampled else None),
        )
    except (KeyError, TypeError, ValueError):
        return None


def attach(report: dict) -> dict:
    """Set ``acceptance_curve`` on every drafter entry of a verify report (greedy) and on its
    ``sampled_acceptance`` section when there is one (``None`` where :func:`entry_curve` has none); returns it."""
    for entry in report["drafters"]:
        curve = entry_curve(report, entry)
        entry["acceptance_curve"] = None if curve is None else curve.to_dict()
        if isinstance(entry.get("sampled_acceptance"), dict):
            sampled = entry_curve(report, entry, sampled=True)
            entry["sampled_acceptance"]["acceptance_curve"] = None if sampled is None else sampled.to_dict()
    return report
