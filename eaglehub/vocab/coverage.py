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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from eaglehub.checks.context import drafter_array
from eaglehub.drafter.canonical import Drafter
from eaglehub.errors import EaglehubError
from eaglehub.findings import Finding, finding

if TYPE_CHECKING:  # numpy loads when coverage is measured, not with `eaglehub vocab --help`
    import numpy as np

LOW_COVERAGE_RATIO = 0.8
"""A draft vocabulary whose coverage is below this share of the best Vd-token vocabulary's is W-VOCAB-COVERAGE."""


def draft_token_ids(drafter: Drafter) -> np.ndarray | None:
    """The target ids the draft vocabulary holds, in draft-row order (``arange(Vd) + d2t``: ascending for most producers,
    frequency order for ModelOpt), or ``None`` when it is not pruned (it holds every id)."""
    import numpy as np

    V, Vd = drafter.dims.V, drafter.dims.Vd
    if V is None or Vd is None or Vd >= V:
        return None
    if "d2t" not in drafter.names:  # E-D2T-MISSING; vLLM then maps draft id i to target id i
        return np.arange(Vd, dtype=np.int64)
    d2t = np.asarray(drafter_array(drafter, "d2t")).astype(np.int64).reshape(-1)
    return np.arange(len(d2t), dtype=np.int64) + d2t


def is_identity_map(drafter: Drafter) -> bool:
    """``d2t`` all zeros (or absent) with a pruned vocabulary: the first Vd target ids, an untrained map."""
    import numpy as np

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


DEFAULT_LIMIT = 4
"""Prompts per category: 24 of the project's 48 (the target's continuations are the cost)."""
DEFAULT_MAX_TOKENS = 64


@dataclass
class VocabOptions:
    """Inputs of a coverage measurement (``eaglehub vocab --help`` gives units and defaults)."""

    target: str
    prompts_file: str | None = None
    limit: int | None = DEFAULT_LIMIT
    max_tokens: int = DEFAULT_MAX_TOKENS
    device: str = "cpu"

    def check(self) -> None:
        """Raises: EaglehubError (exit 2) for values out of range."""
        if self.max_tokens < 1 or (self.limit is not None and self.limit < 1):
            raise EaglehubError("--limit and --max-tokens must be >= 1", hint="e.g. --limit 4 --max-tokens 64")


def percent(x: float | None) -> str:
    """A share as a percentage with one decimal (``-`` when there is none), as findings and tables print it."""
    return "-" if x is None else f"{x:.1%}"


def coverage_findings(drafter, section: dict) -> list[Finding]:
    """W-VOCAB-IDENTITY (an untrained identity map) or W-VOCAB-COVERAGE (a map far from the best), with the figures."""
    o = section["overall"]
    if o["coverage"] is None:
        return []
    vd = drafter.dims.Vd
    figures = (
        f"it holds {percent(o['coverage'])} of the target's {o['output_tokens']} output tokens on these prompts, "
        f"the best {vd}-token vocabulary for the same text {percent(o['best_coverage'])}"
    )
    if section["identity_map"]:
        return [
            finding(
                "W-VOCAB-IDENTITY",
                "d2t",
                f"d2t is all zeros: the draft vocabulary is the target's first {vd} ids, an untrained map; {figures}",
            )
        ]
    if o["best_coverage"] and o["coverage"] < LOW_COVERAGE_RATIO * o["best_coverage"]:
        return [
            finding(
                "W-VOCAB-COVERAGE",
                "d2t",
                f"the draft vocabulary covers the target's output poorly: {figures}; every token outside it is a "
                "draft that cannot be accepted",
            )
        ]
    return []


def measure_coverage(drafter, target_path: Path, opts: VocabOptions, progress=None) -> dict:
    """The report's ``coverage`` part for a read drafter (also ``validate --prompts``): the target's greedy
    continuations of the prompts (reference engine), the share of their tokens the draft vocabulary holds,
    overall and per category, against the best Vd-token vocabulary, and the tokens it misses most."""
    from eaglehub.convert.gains import greedy_continuations
    from eaglehub.engines.chat import ChatTokenizer, encode_chat
    from eaglehub.engines.reference import ReferenceEngine
    from eaglehub.measure.prompts import default_prompts_path, load_prompts

    opts.check()
    if drafter.dims.V is None or drafter.dims.Vd is None:
        raise EaglehubError(
            "the drafter's config gives no vocab_size / draft_vocab_size", hint="eaglehub validate DRAFTER says why"
        )
    say = progress or (lambda _text: None)
    prompts = load_prompts(opts.prompts_file, None, opts.limit)
    say("loading the target")
    live = ReferenceEngine(device=opts.device).target(target_path, "float32")
    say(f"the target's greedy continuations of {len(prompts)} prompts")
    answers = greedy_continuations(live, encode_chat(target_path, [p.text for p in prompts]), opts.max_tokens)
    section = coverage([(p.category, a) for p, a in zip(prompts, answers)], draft_token_ids(drafter), drafter.dims.Vd)
    tokenizer = ChatTokenizer(target_path).tokenizer
    for m in section["missing"]:
        m["text"] = tokenizer.decode([m["token_id"]])  # special tokens too: an end-of-turn token may be missed
    return {
        "vocab_size": drafter.dims.V,
        "draft_vocab_size": drafter.dims.Vd,
        "pruned": drafter.dims.Vd < drafter.dims.V,
        "identity_map": is_identity_map(drafter),
        "prompts": {
            "file": str(Path(opts.prompts_file) if opts.prompts_file else default_prompts_path()),
            "count": len(prompts),
            "limit_per_category": opts.limit,
            "max_tokens": opts.max_tokens,
        },
        **section,
    }
