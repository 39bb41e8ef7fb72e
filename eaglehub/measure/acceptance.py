"""Speculative-decoding acceptance metrics from engine counters, and per-prompt token comparison.

Formulas (docs/vllm.md §9; docs/verification.md §2–§4), token-weighted as vLLM reports them:

* mean acceptance length  AL = 1 + num_accepted_tokens / num_drafts
  (tokens produced per target verify pass, **including the bonus token**; no speculation ⇒ 1);
* acceptance rate per draft position, unconditional: accepted_per_pos[i] / num_drafts
  (so AL = 1 + Σ_i unconditional[i]; never 1 + Σ conditional);
* conditional: accepted_per_pos[i] / accepted_per_pos[i−1] (position 0: same as unconditional);
* draft acceptance rate = num_accepted_tokens / num_draft_tokens.

Rates with a zero denominator are ``None`` (undefined), never 0.

Thresholds used by ``eaglehub verify``: :data:`NOT_WIRED_THRESHOLD` (position-0 rate),
:data:`LOW_AL_THRESHOLD` (AL, docs/failure-kinds.md F13) and :data:`DEFAULT_AL_TOLERANCE` (relative AL
drop against a reference report, F26).
"""

from __future__ import annotations

from collections.abc import Iterable

from eaglehub.engines.base import SpecCounters

AL_DEFINITION = (
    "mean acceptance length AL = 1 + num_accepted_tokens / num_drafts: tokens produced per target "
    "verify pass, including the bonus token (token-weighted over all prompts, as vLLM's "
    "get_metrics counters; no speculation gives 1)"
)
PER_POSITION_DEFINITION = (
    "acceptance rate per draft position i, unconditional = accepted_per_pos[i] / num_drafts "
    "(AL = 1 + sum); conditional = accepted_per_pos[i] / accepted_per_pos[i-1]"
)
DRAFT_RATE_DEFINITION = "draft acceptance rate = num_accepted_tokens / num_draft_tokens"
PER_REQUEST_DEFINITION = (
    "per-request mean acceptance length = mean over prompts of each prompt's 1 + accepted / drafts "
    "(request-weighted; null where the engine counts per batch only, as a vLLM older than its per-request "
    "spec-decode metrics)"
)
NOT_WIRED_THRESHOLD = 0.02
"""Position-0 unconditional acceptance below this (or no drafts at all) ⇒ "drafter not wired"
(docs/failure-kinds.md, Cross-cutting). A trained drafter, even a weak one (AL 1.2), sits near 0.2."""
LOW_AL_THRESHOLD = 1.3
"""AL (tokens per verify pass) below which speculation is likely slower than plain decoding
(docs/failure-kinds.md F13, "warn below 1.3"): each verify pass also pays for k drafter passes and a
(k+1)-token target forward, which fewer than 0.3 extra tokens per pass rarely repay."""
DEFAULT_AL_TOLERANCE = 0.05
"""Relative AL drop tolerated against a reference run (docs/failure-kinds.md F26): 5 %, the rtol of
vLLM's tests/v1/spec_decode/test_acceptance_length.py (docs/verification.md §2)."""


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def acceptance_stats(c: SpecCounters) -> dict:
    """Counters plus the derived metrics (module doc) as a JSON-ready dict.

    Keys: the four counters, ``acceptance_length``, ``acceptance_rate_per_position``
    (unconditional), ``conditional_acceptance_rate_per_position``, ``draft_acceptance_rate``.
    """
    pos = list(c.accepted_per_pos)
    conditional = [_ratio(pos[0], c.num_drafts)] if pos else []
    conditional += [_ratio(pos[i], pos[i - 1]) for i in range(1, len(pos))]
    return {
        **c.to_dict(),
        "acceptance_length": acceptance_length(c),
        "acceptance_rate_per_position": [_ratio(p, c.num_drafts) for p in pos],
        "conditional_acceptance_rate_per_position": conditional,
        "draft_acceptance_rate": _ratio(c.num_accepted_tokens, c.num_draft_tokens),
    }


def acceptance_length(c: SpecCounters) -> float | None:
    """AL = 1 + num_accepted_tokens / num_drafts (tokens per verify pass, bonus included); ``None``
    when nothing was drafted."""
    return None if not c.num_drafts else 1.0 + c.num_accepted_tokens / c.num_drafts


def per_request_mean(counters: Iterable[SpecCounters] | None) -> float | None:
    """Request-weighted AL: the mean over requests of each request's own AL (NVIDIA specdec_bench's
    figure, docs/verification.md §3), over the requests that drafted; ``None`` when not counted per request."""
    if counters is None:
        return None
    als = [a for c in counters if (a := acceptance_length(c)) is not None]
    return sum(als) / len(als) if als else None


def low_acceptance_length(al: float | None, threshold: float = LOW_AL_THRESHOLD) -> bool:
    """True when ``al`` (tokens per verify pass) is defined and below ``threshold``."""
    return al is not None and al < threshold


def relative_change(value: float, reference: float) -> float:
    """(value − reference) / reference: −0.1 is a 10 % drop. ``reference`` must be positive (an AL ≥ 1)."""
    return (value - reference) / reference


def regressed(value: float, reference: float, tolerance: float = DEFAULT_AL_TOLERANCE) -> bool:
    """True when ``value`` < ``reference`` · (1 − ``tolerance``); ``tolerance`` is a fraction (0.05 = 5 %)."""
    return value < reference * (1.0 - tolerance)


def total(counters: Iterable[SpecCounters]) -> SpecCounters:
    """Sum of counters (token-weighted aggregation of groups)."""
    out = SpecCounters()
    for c in counters:
        out = out + c
    return out


MIN_DRAFTS_TO_JUDGE = 25
"""Fewer drafts than this are no evidence of a drafter that is not wired: a working drafter whose
first draft is accepted 40 % of the time is rejected 6 times in a row with probability 0.6⁶ ≈ 5 %,
25 times with 0.6²⁵ ≈ 3·10⁻⁶."""


def drafter_not_wired(c: SpecCounters, threshold: float = NOT_WIRED_THRESHOLD) -> bool:
    """True when nothing was drafted, or over at least :data:`MIN_DRAFTS_TO_JUDGE` drafts position-0
    acceptance is below ``threshold`` (a rate, 0–1)."""
    if not c.num_drafts:
        return True
    if c.num_drafts < MIN_DRAFTS_TO_JUDGE:
        return False
    first = c.accepted_per_pos[0] if c.accepted_per_pos else 0
    return first / c.num_drafts < threshold


def first_divergence(reference: list[int], candidate: list[int]) -> int | None:
    """Index (0-based, in output tokens) of the first differing token; ``None`` when identical.

    When one sequence is a strict prefix of the other, the divergence is at the shorter length.
    """
    for i, (a, b) in enumerate(zip(reference, candidate)):
        if a != b:
            return i
    return None if len(reference) == len(candidate) else min(len(reference), len(candidate))


def check_consistency(c: SpecCounters, k: int) -> list[str]:
    """Invariants the counters must satisfy; returns human-readable violations (empty if fine).

    accepted ≤ draft tokens ≤ k · drafts; at most k positions; Σ accepted_per_pos = accepted;
    per-position counts non-increasing (a token at position i is accepted only if position i−1 was).
    """
    problems = []
    if len(c.accepted_per_pos) > k:
        problems.append(f"accepted_per_pos has {len(c.accepted_per_pos)} positions > k {k}")
    if c.num_accepted_tokens > c.num_draft_tokens:
        problems.append(f"accepted {c.num_accepted_tokens} > drafted {c.num_draft_tokens}")
    if c.num_draft_tokens > k * c.num_drafts:
        problems.append(f"draft tokens {c.num_draft_tokens} > k·drafts {k * c.num_drafts}")
    if c.accepted_per_pos and sum(c.accepted_per_pos) != c.num_accepted_tokens:
        problems.append(f"sum of accepted_per_pos {sum(c.accepted_per_pos)} != accepted {c.num_accepted_tokens}")
    if any(b > a for a, b in zip(c.accepted_per_pos, c.accepted_per_pos[1:])):
        problems.append(f"accepted_per_pos {list(c.accepted_per_pos)} increases with position")
    return problems
