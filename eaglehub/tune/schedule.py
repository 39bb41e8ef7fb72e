"""From an acceptance curve and a step-cost model to the k to serve at each batch size.

Predicted decode throughput at batch size b with k draft tokens (tokens per second)::

    throughput(b, k) = 1000 · b · AL(k) / step_ms(b, k)

AL(k) from :class:`eaglehub.measure.curve.AcceptanceCurve` (AL(0) = 1: plain decoding), step_ms from
:class:`eaglehub.tune.costs.CostModel`. The schedule takes, at every batch size, the k in 0…K with the highest
predicted throughput (a tie goes to the smaller k: the same tokens for less work), and merges equal
neighbours into ranges, which are the three forms printed:

* vLLM's ``num_speculative_tokens_per_batch_size`` (0.32 and 0.33): ``[[first, last, k], ...]``, inclusive
  batch-size ranges, the first starting at 1, k ≥ 0 (vllm 0.32.0 ``v1/spec_decode/dynamic/utils.py`` L7-74);
  the engine looks k up by the number of requests it schedules in a step (``v1/core/sched/scheduler.py``
  L1486-1490), takes min(k, num_speculative_tokens) and carries the last range's k past its end
  (``dynamic/utils.py`` L128-135). ``num_speculative_tokens`` is set to the schedule's largest k.
* TensorRT-LLM's ``draft_len_schedule``: ``{batch size threshold: draft length}``, each k used from its
  threshold on, which must hold ``1: max_draft_len`` (TensorRT-LLM ``llmapi/llm_args.py``,
  ``DecodingBaseConfig.draft_len_schedule``); so it exists only when the k at batch size 1 is the largest.
* the break-even batch size: the smallest batch size from which the best k is 0 (speculation off).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from eaglehub.measure.curve import AcceptanceCurve
from eaglehub.tune.costs import CostModel


def throughput(b: int, k: int, curve: AcceptanceCurve, costs: CostModel, in_schedule: bool = False) -> float:
    """Predicted decode tokens per second at batch size ``b`` with ``k`` draft tokens (module doc); ``in_schedule``:
    a step of a k schedule, whose k 0 still runs the drafter (:meth:`CostModel.scheduled_step_ms`)."""
    step = costs.scheduled_step_ms(b, k) if in_schedule else costs.step_ms(b, k)
    return 1000.0 * b * curve.al(k) / step


@dataclass(frozen=True)
class Schedule:
    """``best[b - 1]``: the predicted best k at batch size b, for b = 1..len(best); ``max_k`` the largest k
    considered; ``measured_up_to``: the largest batch size the costs were measured at."""

    best: tuple[int, ...]
    max_k: int
    measured_up_to: int

    @property
    def ranges(self) -> list[list[int]]:
        """vLLM's ``num_speculative_tokens_per_batch_size``: equal neighbours merged."""
        out: list[list[int]] = []
        for b, k in enumerate(self.best, start=1):
            if out and out[-1][2] == k:
                out[-1][1] = b
            else:
                out.append([b, b, k])
        return out

    @property
    def largest_k(self) -> int:
        return max(self.best)

    @property
    def break_even(self) -> int | None:
        """The smallest batch size from which every larger one (up to the last planned) has best k 0."""
        last = None
        for b in range(len(self.best), 0, -1):
            if self.best[b - 1] != 0:
                break
            last = b
        return last

    @property
    def static(self) -> bool:
        """One k at every batch size: a plain ``num_speculative_tokens`` says it."""
        return len(self.ranges) == 1

    def k_at(self, b: int) -> int:
        """The k vLLM uses at batch size ``b`` (the last range's k past its end, as vLLM carries it)."""
        return self.best[min(b, len(self.best)) - 1]

    def trtllm(self) -> dict[int, int] | None:
        """TensorRT-LLM's ``draft_len_schedule`` (module doc), ``None`` when the k at batch size 1 is not the largest
        or speculation never pays."""
        if self.largest_k == 0 or self.best[0] != self.largest_k:
            return None
        return {first: k for first, _, k in self.ranges}


def best_schedule(curve: AcceptanceCurve, costs: CostModel, max_batch: int, max_k: int) -> Schedule:
    """The k in 0..``max_k`` with the highest predicted throughput under a schedule at each batch size
    1..``max_batch`` (k 0 priced with the drafter's forward it still runs)."""
    best = []
    for b in range(1, max_batch + 1):
        rates = [throughput(b, k, curve, costs, in_schedule=True) for k in range(max_k + 1)]
        best.append(max(range(max_k + 1), key=lambda k: (rates[k], -k)))
    return Schedule(tuple(best), max_k, max(costs.batches, default=0))


@dataclass(frozen=True)
class Recommendation:
    """What to serve: ``kind`` "schedule" (vLLM's k schedule), "static" (one ``k`` with no schedule) or
    "target_alone" (no drafter); ``served``: the k vLLM runs at each batch size; ``worst_ratio``: the best static
    choice's lowest predicted throughput over the best at any batch size (the share of the schedule's gain it
    keeps); ``margin``: the gain a schedule must be predicted to add before it is preferred."""

    kind: Literal["schedule", "static", "target_alone"]
    served: Schedule
    static_k: int
    worst_ratio: float
    margin: float


def recommend(schedule: Schedule, curve: AcceptanceCurve, costs: CostModel, margin: float) -> Recommendation:
    """The schedule, unless one static choice (k 1..K with no schedule, or the target alone) is predicted within
    ``margin`` of the best at every batch size: a gain smaller than the measurement resolves is not worth the
    schedule's extra moving part (vLLM's dynamic mode, whose k 0 still drafts: docs/tune.md §4)."""
    batches = range(1, len(schedule.best) + 1)
    best = [
        max(max(throughput(b, k, curve, costs) for k in range(schedule.max_k + 1)), throughput(b, schedule.k_at(b), curve, costs, True))
        for b in batches
    ]  # fmt: skip

    def worst(k: int) -> float:
        return min(throughput(b, k, curve, costs) / best[b - 1] for b in batches)

    static_k = max(range(schedule.max_k + 1), key=lambda k: (worst(k), -k))
    ratio = worst(static_k)
    if schedule.static or ratio >= 1.0 - margin:
        served = Schedule((static_k,) * len(schedule.best), schedule.max_k, schedule.measured_up_to)
        return Recommendation("target_alone" if static_k == 0 else "static", served, static_k, ratio, margin)
    return Recommendation("schedule", schedule, static_k, ratio, margin)


def speculative_config(drafter: Path | str, schedule: Schedule) -> dict | None:
    """vLLM's ``--speculative-config`` for the schedule; ``None`` when speculation never pays (serve the
    target alone). A one-k schedule is a plain ``num_speculative_tokens``."""
    from eaglehub.engines.vllm_engine import speculative_config as base

    if schedule.largest_k == 0:
        return None
    config = base(Path(drafter), schedule.largest_k)
    if isinstance(drafter, str) and not Path(drafter).exists():
        config["model"] = drafter  # a Hub id stays as given
    if not schedule.static:
        config["num_speculative_tokens_per_batch_size"] = schedule.ranges
    return config


def serve_line(
    target: Path | str,
    drafter: Path | str,
    schedule: Schedule,
    max_num_seqs: int | None = None,
    dtype: str | None = None,
) -> str:
    """The ready ``vllm serve`` line (a line without a drafter when speculation never pays): ``--dtype`` as measured
    (vLLM would otherwise pick its own, e.g. bfloat16 for a float32 checkpoint) and ``--max-num-seqs`` the largest
    planned batch size, so no batch size the plan did not weigh is served."""
    import shlex

    config = speculative_config(drafter, schedule)
    parts = ["vllm serve", shlex.quote(str(target))]
    if dtype:
        parts += ["--dtype", dtype]
    if max_num_seqs:
        parts += ["--max-num-seqs", str(max_num_seqs)]
    if config is not None:
        parts += ["--speculative-config", shlex.quote(json.dumps(config, separators=(", ", ": ")))]
    return " ".join(parts)
