"""A vLLM server's per-verify-step counts: ``(drafted, accepted)`` for each step of a request, as vLLM's detailed
per-request metrics give them, and what they show: the ks a schedule drafted at and the AL at each k."""

from __future__ import annotations


def vllm_steps(spec: dict | None) -> tuple[tuple[int, int], ...] | None:
    """``(drafted, accepted)`` per verify step from vLLM's ``metrics.speculative_decoding``
    (``per_step_drafted`` / ``per_step_accepted``: only at ``--per-request-spec-decode-metrics detailed``,
    vllm 0.32.0 ``v1/metrics/stats.py`` L389-423); ``None`` without them or when they are malformed."""
    if not isinstance(spec, dict):
        return None
    drafted, accepted = spec.get("per_step_drafted"), spec.get("per_step_accepted")
    if not isinstance(drafted, list) or not isinstance(accepted, list) or len(drafted) != len(accepted):
        return None
    try:
        return tuple((int(d), int(a)) for d, a in zip(drafted, accepted))
    except (TypeError, ValueError):
        return None


def observed_ks(steps: list[tuple[int, int]]) -> dict[int, int]:
    """Verify steps per drafted length, from ``(drafted, accepted)`` pairs (vLLM's ``per_step_drafted`` /
    ``per_step_accepted``, ``--per-request-spec-decode-metrics detailed``)."""
    out: dict[int, int] = {}
    for drafted, _ in steps:
        out[drafted] = out.get(drafted, 0) + 1
    return out


def al_by_k(steps: list[tuple[int, int]]) -> list[dict]:
    """AL per drafted length k (tokens per verify step, bonus included) with its steps, and the acceptance
    rate per position over the steps that drafted that position."""
    rows = []
    for k in sorted({d for d, _ in steps}):
        mine = [a for d, a in steps if d == k]
        rows.append(
            {
                "k": k,
                "num_drafts": len(mine),
                "num_accepted_tokens": sum(mine),
                "acceptance_length": round(1.0 + sum(mine) / len(mine), 6),
                "acceptance_rate_per_position": [round(sum(1 for a in mine if a > i) / len(mine), 6) for i in range(k)],
            }
        )
    return rows
