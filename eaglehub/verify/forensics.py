"""Divergence forensics: why did a speculative run's greedy output differ from the target alone?

For each divergent prompt the target alone is re-run (transformers, :class:`eaglehub.engines.
reference.ReferenceTarget`) on the prompt plus the baseline's output up to the first divergent
position; its logits there decide the classification (docs/verification.md §4 pitfall 1):

* ``near_tie``: both tokens (the baseline's and the speculative run's) are the target's top-2 and
  their logit gap is below ε — a (k+1)-token verify pass reduces in another order than a 1-token
  decode, so a near-tie argmax may flip without any bug;
* ``fault``: anything else (a token outside the top-2, a clear gap, or one output stopping early
  while the other goes on) — a real losslessness failure.

ε is in logit units (natural-log probability ratio between the two tokens) and depends on the compute
dtype (:data:`TIE_EPSILON`): float32 reductions differ by ~1e-5 relative, so 0.01 on logits of order
10–30 is generous; bfloat16 keeps 8 mantissa bits (steps of 0.06–0.125 at those magnitudes), so ties
within 0.25 are plausible. Measured on CPU float32 with SmolLM2-135M: 236 greedy tokens, incremental vs
one parallel forward, 0 mismatches, smallest top-1/top-2 gap 0.004 (docs/verification.md §4).
"""

from __future__ import annotations

from dataclasses import dataclass

TIE_EPSILON = {"float32": 0.01, "float16": 0.1, "bfloat16": 0.25}
DEFINITION = (
    "first divergent output position of a prompt, the baseline's and the speculative run's token ids "
    "there, and the target's top-2 logits at that position from a target-only pass over the prompt + the "
    "baseline's output before it; near_tie = both tokens are the top-2 and their logit gap < epsilon "
    "(logit units), else fault"
)


def tie_epsilon(dtype: str, override: float | None = None) -> float:
    """The near-tie threshold in logit units for ``dtype`` (float32 when unknown), or ``override``."""
    return override if override is not None else TIE_EPSILON.get(dtype, TIE_EPSILON["float32"])


@dataclass(frozen=True)
class Divergence:
    """One divergent prompt: its id, prompt token ids, the baseline and speculative output ids and the
    first divergent output position (0-based)."""

    prompt_id: str
    prompt_ids: list[int]
    baseline: list[int]
    candidate: list[int]
    position: int


def explain(target, divergences: list[Divergence], epsilon: float, decode=None) -> list[dict]:
    """Classify each divergence with the target's logits (module doc).

    ``target``: a :class:`~eaglehub.engines.reference.ReferenceTarget`; ``decode(ids) -> str``
    optionally renders token ids as text for the report. Returns one JSON-ready dict per divergence:
    ``id``, ``position``, ``baseline_token`` / ``candidate_token`` (id, text, logit, rank among the
    target's logits at that position; ``None`` where that output had already ended), ``top2`` (two
    ``{id, logit}``), ``gap`` (top-1 − top-2 logit), ``epsilon``, ``classification``, ``reason``.
    """
    import torch

    rows = []
    with torch.inference_mode():
        for d in divergences:
            prefix = d.prompt_ids + d.baseline[: d.position]
            logits, _ = target.forward(prefix, target.new_cache(), None)
            last = logits[-1]
            top = torch.topk(last, 2)
            top2 = [{"id": int(i), "logit": float(v)} for v, i in zip(top.values, top.indices)]
            gap = top2[0]["logit"] - top2[1]["logit"]
            tokens = [_token(last, seq, d.position, decode) for seq in (d.baseline, d.candidate)]
            cls, reason = _classify(tokens, top2, epsilon)
            rows.append(
                {
                    "id": d.prompt_id,
                    "position": d.position,
                    "baseline_token": tokens[0],
                    "candidate_token": tokens[1],
                    "top2": top2,
                    "gap": gap,
                    "epsilon": epsilon,
                    "classification": cls,
                    "reason": reason,
                }
            )
    return rows


def _token(logits, seq: list[int], position: int, decode) -> dict | None:
    if position >= len(seq):
        return None
    tid = seq[position]
    value = float(logits[tid])
    return {
        "id": tid,
        "text": decode([tid]) if decode else None,
        "logit": value,
        "rank": int((logits > value).sum()) + 1,
    }


def _classify(tokens: list[dict | None], top2: list[dict], epsilon: float) -> tuple[str, str]:
    base, cand = tokens
    if base is None or cand is None:
        which = "baseline" if base is None else "speculative run"
        return "fault", f"the {which} output ended here while the other continued"
    if {base["id"], cand["id"]} != {t["id"] for t in top2}:
        return (
            "fault",
            f"the tokens rank {base['rank']} (baseline) and {cand['rank']} (speculative) in the target's logits, not its top-2",
        )
    gap = abs(base["logit"] - cand["logit"])
    if gap < epsilon:
        return (
            "near_tie",
            f"the target's top-2 differ by {gap:.4g} < epsilon {epsilon:g}: a numerical near-tie",
        )
    return "fault", f"the target's top-2 differ by {gap:.4g} >= epsilon {epsilon:g}: not a numerical tie"
