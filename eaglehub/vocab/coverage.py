"""Coverage of a draft vocabulary on the target's output tokens (docs/vocab.md).

A pruned drafter (``draft_vocab_size`` Vd < ``vocab_size`` V) can only draft the Vd target ids its ``d2t`` maps
to (``arange(Vd) + d2t``, docs/formats.md §2): every token the target emits outside them is a draft that cannot
be accepted. Coverage is token-weighted: the share of the target's output tokens (its greedy continuations of
the prompts) that the draft vocabulary holds. It is set against the best any Vd-token vocabulary could do on
the same text (the Vd most frequent tokens of it), so a low figure is the map's fault, not the text's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np

from eaglehub.checks.context import drafter_array
from eaglehub.drafter.canonical import Drafter

LOW_COVERAGE_RATIO = 0.8
"""A draft vocabulary whose coverage is below this share of the best Vd-token vocabulary's is W-VOCAB-COVERAGE."""


def draft_token_ids(drafter: Drafter) -> np.ndarray | None:
    """The target ids the draft vocabulary holds (sorted), or ``None`` when it is not pruned (it holds every id)."""
    V, Vd = drafter.dims.V, drafter.dims.Vd
    if V is None or Vd is None or Vd >= V:
        return None
    if "d2t" not in drafter.names:  # E-D2T-MISSING; vLLM then maps draft id i to target id i
        return np.arange(Vd, dtype=np.int64)
    d2t = np.asarray(drafter_array(drafter, "d2t")).astype(np.int64).reshape(-1)
    return np.arange(len(d2t), dtype=np.int64) + d2t


def is_identity_map(drafter: Drafter) -> bool:
    """``d2t`` all zeros (or absent) with a pruned vocabulary: the first Vd target ids, an untrained map."""
    ids = draft_token_ids(drafter)
    return ids is not None and bool((ids == np.arange(len(ids))).all())


def _share(counts: Counter, covered: set[int] | None, vd: int) -> dict:
    total = sum(counts.values())
    held = total if covered is None else sum(n for t, n in counts.items() if t in covered)
    best = sum(n for _, n in counts.most_common(vd))
    return {
        "output_tokens": total,
        "distinct_tokens": len(counts),
        "covered_tokens": held,
        "coverage": held / total if total else None,
        "best_coverage": best / total if total else None,
    }


def coverage(
    outputs: Iterable[tuple[str, list[int]]], draft_ids: np.ndarray | None, vd: int, top_missing: int = 10
) -> dict:
    """Coverage of ``draft_ids`` (``None``: every id) on ``outputs`` (category, output token ids), overall and per
    category, with the most frequent output tokens it misses (``top_missing``)."""
    per: dict[str, Counter] = {}
    for category, tokens in outputs:
        per.setdefault(category, Counter()).update(tokens)
    total: Counter = Counter()
    for c in per.values():
        total.update(c)
    covered = None if draft_ids is None else {int(i) for i in draft_ids}
    missing = [] if covered is None else [(t, n) for t, n in total.most_common() if t not in covered][:top_missing]
    return {
        "overall": _share(total, covered, vd),
        "per_category": {name: _share(c, covered, vd) for name, c in per.items()},
        "missing": [{"token_id": int(t), "count": int(n)} for t, n in missing],
    }
