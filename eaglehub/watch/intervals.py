"""From successive ``/metrics`` readings to interval readings, and the AL-drop judgement over them.

A *poll* is one ``GET /metrics`` at a time: the server's cumulative counters
(:class:`~eaglehub.endpoint.metrics.ServerSpecMetrics`), or why there are none. Each poll after the first
gives one *reading* (a dict valid against ``schemas/watch-interval.schema.json``), with ``status``:

* ``ok``: the counters since the *base* (the last poll that read counters) — the delta counters, AL and
  the acceptance rate per position of the interval (AL ``null`` when nothing was drafted);
* ``restart``: a cumulative counter went down (:func:`~eaglehub.endpoint.metrics.is_reset`) or the
  process start time changed: the server restarted. No rate is given for it (the counters before and
  after belong to two processes); the new counters become the base, so the next reading starts from
  them and no rate is ever negative;
* ``unreachable`` / ``no_spec_metrics``: the poll failed (the error, one line) or the page had no
  speculative-decoding metrics; the base is kept, so the next good reading covers the gap;
* ``gauge``: an SGLang server older than 0.5.23, whose ``/metrics`` has no counters (only the AL gauge of
  its last log interval, eaglehub/endpoint/metrics.py): the gauge is shown, never judged. SGLang 0.5.23's
  counters (verify calls, generated tokens, finished requests) give ``ok`` readings like vLLM's, without
  per-position rates (it has no per-position counter).

:class:`Judge` flags an AL drop: an ``ok`` reading with at least ``min_drafts`` drafts is *judged*; it is
*below* when its AL < reference · (1 − tolerance). ``patience`` judged readings below in a row confirm a
drop (an E-WATCH-AL-DROP finding, once per episode). A judged reading not below ends the run of
readings below; unjudged readings (too few drafts, a failed poll, a gauge) neither extend nor end it, and
a restart ends it (a new process may serve other weights).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone

from eaglehub.endpoint.metrics import ServerSpecMetrics, is_reset
from eaglehub.engines.base import SpecCounters
from eaglehub.measure import acceptance

MIN_DRAFTS_TO_JUDGE = 200
"""An interval with fewer drafts is not judged. Drafts of one request are not independent (prompts accept
differently), so an interval's AL varies more than independent drafts would: on the fixture's served
traffic (docs/watch.md §3) 3-second intervals of 46–107 drafts gave AL 1.57–2.06 around 1.91, a spread of
about 1.3/√n for n drafts. At 200 drafts that is ±0.09 (5 % of AL 1.9, the default tolerance): one
interval dips below the tolerance by chance about one time in six, three in a row (the default patience)
about one time in 200."""
DEFAULT_PATIENCE = 3


@dataclass(frozen=True)
class Poll:
    """One ``GET /metrics``: at ``time`` (Unix seconds), its ``metrics`` (``None``: no spec-decode
    metrics on the page) or the ``error`` that stopped it (one line, no credentials)."""

    time: float
    metrics: ServerSpecMetrics | None = None
    error: str | None = None


@dataclass
class Judge:
    """The AL-drop rule (module doc): ``reference_al`` (tokens per verify step), ``tolerance`` (a
    fraction, 0.05 = 5 %), ``patience`` (judged readings below in a row), ``min_drafts``."""

    reference_al: float
    tolerance: float = acceptance.DEFAULT_AL_TOLERANCE
    patience: int = DEFAULT_PATIENCE
    min_drafts: int = MIN_DRAFTS_TO_JUDGE
    streak: int = 0
    episodes: int = 0

    @property
    def threshold(self) -> float:
        """The AL below which a judged interval counts as a drop."""
        return self.reference_al * (1.0 - self.tolerance)

    def judge(self, reading: dict) -> None:
        """Add ``judged``, ``below_reference``, ``streak`` and ``drop_confirmed`` to ``reading``."""
        al = reading["acceptance_length"]
        judged = reading["status"] == "ok" and al is not None and reading["num_drafts"] >= self.min_drafts
        below = None
        confirmed = False
        if reading["status"] == "restart":
            self.streak = 0
        elif judged:
            below = acceptance.regressed(al, self.reference_al, self.tolerance)
            self.streak = self.streak + 1 if below else 0
            confirmed = self.streak == self.patience
            self.episodes += confirmed
        reading.update(judged=judged, below_reference=below, streak=self.streak, drop_confirmed=confirmed)


def iso_time(t: float) -> str:
    """Unix seconds as ISO 8601 UTC with milliseconds (``2026-12-02T15:04:05.123Z``)."""
    stamp = datetime.fromtimestamp(t, tz=timezone.utc)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


class Intervals:
    """Turns polls into readings (module doc). Feed every poll to :meth:`add` in time order; the first
    good poll only sets the base. ``judge``: flag AL drops (``None``: readings only)."""

    def __init__(self, judge: Judge | None = None):
        self.judge = judge
        self.base: Poll | None = None
        self.last_time: float | None = None
        self.index = 0
        self.total = SpecCounters()
        """Sum of the ``ok`` deltas: the counters over the watch, across restarts."""

    def start(self, poll: Poll) -> None:
        """The first poll: it must have counters (the caller reports a first poll without them)."""
        self.base = poll
        self.last_time = poll.time

    def add(self, poll: Poll) -> dict:
        """The reading for ``poll`` (the base must be set by :meth:`start`)."""
        assert self.base is not None and self.last_time is not None, "start() with the first poll"
        self.index += 1
        reading = {
            "kind": "interval",
            "index": self.index,
            "time": iso_time(poll.time),
            "interval_seconds": round(max(0.0, poll.time - self.last_time), 3),
            "status": "ok",
            "num_drafts": 0,
            "delta": None,
            "cumulative": None,
            "acceptance_length": None,
            "acceptance_rate_per_position": [],
            "draft_acceptance_rate": None,
            "error": None,
        }
        self.last_time = poll.time
        m = poll.metrics
        if poll.error is not None or m is None:
            reading["status"] = "unreachable" if poll.error is not None else "no_spec_metrics"
            reading["error"] = poll.error or "the page has no speculative-decoding metrics"
        elif not m.cumulative:
            reading["status"] = "gauge"
            reading["acceptance_length"] = _finite(m.acceptance_length_gauge)
            reading["draft_acceptance_rate"] = _finite(m.acceptance_rate_gauge)
            self.base = poll
        else:
            before = self.base.metrics
            assert before is not None  # the base always read counters
            reading["cumulative"] = m.counters.to_dict()
            restarted = (
                before.server != m.server
                or is_reset(before.counters, m.counters)
                or (
                    before.process_start_time is not None
                    and m.process_start_time is not None
                    and m.process_start_time != before.process_start_time
                )
            )
            if restarted:
                reading["status"] = "restart"
            else:
                delta = m.counters - before.counters
                reading["interval_seconds"] = round(max(0.0, poll.time - self.base.time), 3)
                stats = acceptance.acceptance_stats(delta)
                reading.update(
                    num_drafts=delta.num_drafts,
                    delta=delta.to_dict(),
                    acceptance_length=stats["acceptance_length"],
                    acceptance_rate_per_position=stats["acceptance_rate_per_position"],
                    draft_acceptance_rate=stats["draft_acceptance_rate"],
                )
                self.total = self.total + delta
            self.base = poll
        if self.judge is not None:
            self.judge.judge(reading)
        return reading
