"""``eaglehub watch``: poll a server's ``/metrics`` every interval and report AL per interval.

:class:`Watch` sends no traffic: it only reads ``GET /metrics`` (:meth:`eaglehub.endpoint.client.EndpointClient.metrics`). The
first poll is the baseline; it must succeed and show speculative-decoding metrics, otherwise
:meth:`Watch.start` raises :class:`~eaglehub.errors.EndpointError` (a one-line error, exit 1). Each
later poll, at ``start + i · interval``, gives one reading (eaglehub/watch/intervals.py); a failed
poll mid-watch is a noted reading, and the watch goes on. It ends after ``duration`` seconds, after
``count`` readings, at a confirmed AL drop with ``stop_on_drop``, or when the caller stops iterating
(Ctrl-C in the CLI); :meth:`Watch.summary` then gives the report (``schemas/watch-report.schema.json``).

The API key goes into the client's ``Authorization: Bearer`` header only: no reading, summary or error
contains it.
"""

from __future__ import annotations

import math
import shlex
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from eaglehub import __version__
from eaglehub.endpoint.client import METRICS_TIMEOUT_S, EndpointClient, RequestFailed, metrics_url, redact_url
from eaglehub.endpoint.metrics import ServerSpecMetrics
from eaglehub.endpoint.served_config import parse_served_config
from eaglehub.endpoint.settings import UNKNOWN, ServedSettings, read_served_settings, with_observed
from eaglehub.errors import EndpointError
from eaglehub.findings import Finding, count_by_severity, finding
from eaglehub.io.schemas import check_output, write_output
from eaglehub.measure import acceptance
from eaglehub.watch.intervals import DEFAULT_PATIENCE, MIN_DRAFTS_TO_JUDGE, Intervals, Judge, Poll, iso_time
from eaglehub.watch.reference import ReferenceAL, choose_reference, settings_differences

REPORT_VERSION = 1
INTERVAL_SCHEMA = "watch-interval"
REPORT_SCHEMA = "watch-report"
MIN_POLL_TIMEOUT_S = 0.2
"""The least time a poll is given, even at the very end of --duration."""


def _watch_error(exc: EndpointError, shown_metrics: str) -> str:
    """A poll's failure as a reading's note: without the URL (the head names the server once, and the note
    then fits a line) and without the client's hint, which names other verbs' options."""
    return exc.message.replace(f"GET {shown_metrics}", "GET /metrics", 1)


@dataclass(frozen=True)
class WatchOptions:
    """``endpoint``: the server (``http://host:port`` or its ``/v1`` base); ``interval`` and ``duration``
    in seconds; ``count``: at most this many readings (``None``: until ``duration``); the AL-drop rule
    (``reference_report`` and its entry ``reference_drafter``, ``al_tolerance`` a fraction,
    ``patience``, ``min_drafts``); ``stop_on_drop``: end at the first confirmed drop."""

    endpoint: str
    interval: float = 5.0
    duration: float = 60.0
    count: int | None = None
    api_key: str | None = None
    reference_report: str | None = None
    reference_drafter: str | None = None
    al_tolerance: float = acceptance.DEFAULT_AL_TOLERANCE
    patience: int = DEFAULT_PATIENCE
    min_drafts: int = MIN_DRAFTS_TO_JUDGE
    stop_on_drop: bool = False
    served_config: str | None = None
    """The server's speculative config as the user states it, where the server does not say its settings
    (:mod:`eaglehub.endpoint.settings`)."""


class Watch:
    """One watch of one server (module doc). ``transport``, ``clock`` (Unix seconds) and ``sleep`` can be
    replaced (tests); ``clock`` also schedules the polls."""

    def __init__(
        self,
        opts: WatchOptions,
        transport: httpx.BaseTransport | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.opts = opts
        self.client = EndpointClient(opts.endpoint, opts.api_key, transport=transport)
        self.clock, self.sleep = clock, sleep
        self.readings: list[dict] = []
        self.reference: ReferenceAL | None = None
        self.intervals: Intervals | None = None
        self.started: float | None = None
        self.first: ServerSpecMetrics | None = None
        self.stopped = "duration"
        self.shown = redact_url(metrics_url(opts.endpoint))
        self.settings: ServedSettings | None = None
        self.differences: list[str] = []
        """How the server's settings differ from the reference run's: its AL is then not judged against it."""

    def _poll(self, deadline: float) -> Poll:
        """One poll, given no more than the time left before ``deadline``: a poll in flight at the end of
        ``--duration`` must not hold the watch for the full :data:`METRICS_TIMEOUT_S`."""
        now = self.clock()
        timeout = min(METRICS_TIMEOUT_S, max(deadline - now, MIN_POLL_TIMEOUT_S))
        try:
            return Poll(now, self.client.metrics(timeout=timeout))
        except EndpointError as exc:
            error = _watch_error(exc, self.shown)
            if isinstance(exc, RequestFailed) and exc.kind == "timeout" and timeout < METRICS_TIMEOUT_S:
                error = f"GET /metrics: no answer in the {timeout:.1f} s left of --duration"
            # a failed poll's interval runs until the failure was known: a poll that waited 10 s for a hung
            # server spans those 10 s, not the 2 s of the schedule
            return Poll(self.clock(), error=error)

    def start(self) -> dict:
        """Take the baseline poll and choose the reference; returns what the watch is about (the
        summary's head: server, labels, k, reference).

        Raises:
            EndpointError: the first poll failed or found no speculative-decoding metrics (exit 1).
            EaglehubError: the reference report cannot be used (exit 2).
        """
        parse_served_config(self.opts.served_config)  # a --served-config vLLM would refuse fails before any poll
        shown = redact_url(metrics_url(self.opts.endpoint))
        first = self.clock()
        try:
            metrics = self.client.metrics()
        except RequestFailed as exc:
            # nothing to watch; the client's own hint names verify's options (--timeout, --concurrency)
            if exc.kind == "timeout":
                raise EndpointError(
                    exc.message, hint=f"check that the server answers within 10 s: `curl -m 10 {shown}`"
                ) from exc
            raise
        if metrics is None:
            raise EndpointError(
                f"{shown} has no speculative-decoding metrics (no vllm:spec_decode_*, sglang:spec_verify_calls_total or sglang:spec_accept_*)",
                hint="start the server with a drafter (vLLM: --speculative-config; SGLang: --speculative-algorithm "
                "and --enable-metrics)",
            )
        judge = None
        # read once: the server's settings page where it has one, else --served-config (eaglehub.endpoint.settings)
        try:
            settings = read_served_settings(self.client, self.opts.served_config, None, METRICS_TIMEOUT_S)
        except RequestFailed:  # the server went away after the baseline poll: the polls will say so
            settings = read_served_settings(None, self.opts.served_config, None)
        engine = (metrics.server, "the /metrics names") if metrics.server else None
        if metrics.k is not None or engine is not None:
            settings = with_observed(settings, metrics.k, "/metrics per-position counter", None, engine)
        self.settings = settings
        if self.opts.reference_report:
            known_schedule = settings.k_schedule.source != UNKNOWN and settings.scheduled
            self.reference = choose_reference(
                self.opts.reference_report, metrics.k, self.opts.reference_drafter, known_schedule
            )
            # like with like: an AL measured with other settings (a schedule, another rejection method, a
            # quantized head) is no reference for this server's
            self.differences = settings_differences(settings.comparable(), self.reference.served or {})
            if not self.differences and self.reference.not_at_k is None:
                judge = Judge(
                    self.reference.acceptance_length, self.opts.al_tolerance, self.opts.patience, self.opts.min_drafts
                )
        self.intervals = Intervals(judge)
        self.intervals.start(Poll(first, metrics))
        self.started, self.first = first, metrics
        return self._head()

    def _head(self) -> dict:
        assert self.first is not None and self.started is not None
        judge = self.intervals.judge if self.intervals else None
        if judge is None and self.reference is not None:  # settings differ: the rule shown, not applied
            judge = Judge(
                self.reference.acceptance_length, self.opts.al_tolerance, self.opts.patience, self.opts.min_drafts
            )
        return {
            "endpoint": redact_url(self.opts.endpoint),
            "server": self.first.server,
            "labels": {k: list(v) for k, v in self.first.labels.items()},
            "num_speculative_tokens": self.first.k,
            "started": iso_time(self.started),
            "interval_seconds": self.opts.interval,
            "duration_seconds": self.opts.duration,
            "served": None if self.settings is None else self.settings.to_dict(),
            "reference": None
            if self.reference is None or judge is None
            else {
                **self.reference.to_dict(),
                "tolerance": judge.tolerance,
                "threshold": judge.threshold,
                "patience": judge.patience,
                "min_drafts": judge.min_drafts,
            },
        }

    def readings_iter(self) -> Iterator[dict]:
        """Yield each reading as it is taken (schema-checked); :meth:`start` first."""
        assert self.intervals is not None and self.started is not None, "start() first"
        # --duration bounds wall-clock time, not a number of polls: a poll that waited on a hung server
        # moves the schedule on to the next slot still ahead, and the last poll gets only the time left
        deadline = self.started + self.opts.duration + 1e-9
        slot = 0
        while True:
            slot = max(slot + 1, math.floor((self.clock() - self.started) / self.opts.interval) + 1)
            due = self.started + slot * self.opts.interval
            if due > deadline:
                self.stopped = "duration"
                return
            wait = due - self.clock()
            if wait > 0:
                self.sleep(wait)
            reading = self.intervals.add(self._poll(deadline))
            check_output(reading, INTERVAL_SCHEMA, "watch interval")
            self.readings.append(reading)
            yield reading
            if self.opts.stop_on_drop and reading.get("drop_confirmed"):
                self.stopped = "drop"
                return
            if self.opts.count is not None and len(self.readings) >= self.opts.count:
                self.stopped = "count"
                return

    def summary(self, interrupted: bool = False) -> dict:
        """The report of the watch so far (schema-checked): every reading, the counters and AL over the
        ``ok`` intervals, the findings and ``passed`` (no error finding)."""
        assert self.intervals is not None
        if interrupted:
            self.stopped = "interrupted"
        findings = self._findings()
        counts = dict.fromkeys(("ok", "restart", "unreachable", "no_spec_metrics", "gauge"), 0)
        for r in self.readings:
            counts[r["status"]] += 1
        report = {
            "kind": "summary",
            "report_version": REPORT_VERSION,
            "tool": {"name": "eaglehub", "version": __version__},
            **self._head(),
            "ended": iso_time(self.clock()),
            "stopped": self.stopped,
            "num_intervals": len(self.readings),
            "status_counts": counts,
            "num_judged": sum(1 for r in self.readings if r.get("judged")),
            "overall": acceptance.acceptance_stats(self.intervals.total),
            "definitions": {
                "acceptance_length": acceptance.AL_DEFINITION,
                "acceptance_rate_per_position": acceptance.PER_POSITION_DEFINITION,
            },
            "intervals": self.readings,
            "findings": [f.as_dict() for f in findings],
            "finding_counts": count_by_severity(findings),
            "verdict": self._verdict(findings),
        }
        # nothing judged is not a pass: the verdict, the final line and the exit code say the same
        report["passed"] = report["verdict"] in ("ok", "not_judged")
        check_output(report, REPORT_SCHEMA, "watch report")
        return report

    def _verdict(self, findings: list[Finding]) -> str:
        """``drop`` (E-WATCH-AL-DROP), ``no_reading`` (E-WATCH-NO-READING), ``inconclusive`` (a reference but
        no interval judged), ``ok`` (intervals judged, no drop) or ``not_judged`` (no reference)."""
        codes = {f.code for f in findings}
        if "E-WATCH-AL-DROP" in codes:
            return "drop"
        if "E-WATCH-NO-READING" in codes:
            return "no_reading"
        if self.reference is None:
            return "not_judged"
        return "ok" if any(r.get("judged") for r in self.readings) else "inconclusive"

    def _findings(self) -> list[Finding]:
        out = []
        judge = self.intervals.judge if self.intervals else None
        for r in self.readings:
            if r.get("drop_confirmed") and judge is not None:
                below = [x for x in self.readings[: r["index"]] if x.get("judged")][-judge.patience :]
                als = ", ".join(f"{x['acceptance_length']:.3f}" for x in below)
                out.append(
                    finding(
                        "E-WATCH-AL-DROP",
                        f"intervals {below[0]['index']}-{r['index']}",
                        f"AL fell below {judge.threshold:.3f} (reference {judge.reference_al:.3f} − "
                        f"{judge.tolerance:.1%}) in {judge.patience} judged intervals in a row: {als}",
                    )
                )
        if self.differences and self.reference is not None:
            out.append(
                finding(
                    "W-WATCH-SETTINGS-DIFFER",
                    "reference",
                    f"the server's settings differ from the reference run's ({'; '.join(self.differences)}): "
                    f"its AL is not judged against the reference AL {self.reference.acceptance_length:.3f}",
                )
            )
        elif self.reference is not None and self.reference.not_at_k is not None:
            out.append(finding("W-WATCH-REFERENCE-MIXED-K", "reference", self.reference.not_at_k))
        restarts = [r["index"] for r in self.readings if r["status"] == "restart"]
        if restarts:
            out.append(
                finding(
                    "I-WATCH-RESTART",
                    "interval " + ", ".join(map(str, restarts)),
                    f"the server's counters started again from 0 ({len(restarts)}x): a restart; no rate is given "
                    "for those intervals",
                )
            )
        failed = [r for r in self.readings if r["status"] in ("unreachable", "no_spec_metrics")]
        if len(failed) == len(self.readings) and (failed or self.stopped != "interrupted"):
            last = f"; last: {failed[-1]['error']}" if failed else ""
            out.append(
                finding(
                    "E-WATCH-NO-READING",
                    f"{len(failed)} poll(s)",
                    f"no poll after the baseline read the server's counters: nothing was measured{last}",
                    hint=f"check that the server is up and answers in time: `curl -m 10 {self.shown}`",
                )
            )
        elif failed:
            out.append(
                finding(
                    "W-WATCH-UNREACHABLE",
                    "interval " + ", ".join(str(r["index"]) for r in failed),
                    f"{len(failed)} of {len(self.readings)} polls read no counters; last: {failed[-1]['error']}",
                )
            )
        if judge is not None and self.readings and not any(r.get("judged") for r in self.readings):
            if len(failed) < len(self.readings):
                most = max((r["num_drafts"] for r in self.readings if r["status"] == "ok"), default=0)
                out.append(
                    finding(
                        "W-WATCH-NOT-JUDGED",
                        f"{len(self.readings)} interval(s)",
                        f"no interval reached {judge.min_drafts} drafts (the most: {most}): the sample is too small "
                        "to judge the AL against the reference",
                        hint=self._longer_watch(most, judge),
                    )
                )
        return out

    def _longer_watch(self, most: int, judge: Judge) -> str:
        """The command that would judge: intervals long enough for ``min_drafts`` at the rate seen (with a
        fifth to spare), over ``patience + 1`` of them."""
        o = self.opts
        base = f"eaglehub watch --endpoint {shlex.quote(redact_url(o.endpoint))} --reference-report {shlex.quote(str(o.reference_report))}"
        if most == 0:
            return f"the server drafted nothing while watched: watch it under traffic: {base}"
        interval = math.ceil(o.interval * judge.min_drafts / most * 1.2)
        duration = max(math.ceil(o.duration), interval * (judge.patience + 1))
        return f"{base} --interval {interval} --duration {duration}"

    def close(self) -> None:
        self.client.close()


def write_report(report: dict, path: str | Path) -> None:
    """Validate, then write the watch ``report`` to ``path`` atomically (``schemas/watch-report.schema.json``)."""
    write_output(report, path, REPORT_SCHEMA, "watch report")


def run_watch(
    opts: WatchOptions,
    on_start: Callable[[dict], None] | None = None,
    on_reading: Callable[[dict], None] | None = None,
    transport: httpx.BaseTransport | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> dict:
    """Watch the server (module doc) and return the report; ``on_start(head)`` is called after the
    baseline poll, ``on_reading(reading)`` after each poll. Ctrl-C (KeyboardInterrupt) ends the watch
    with the report of the readings so far (``stopped: interrupted``).

    Raises:
        EndpointError: the first poll failed or found no speculative-decoding metrics (exit 1).
        EaglehubError: the reference report cannot be used (exit 2).
    """
    watch = Watch(opts, transport, clock, sleep)
    try:
        head = watch.start()
        if on_start is not None:
            on_start(head)
        try:
            for reading in watch.readings_iter():
                if on_reading is not None:
                    on_reading(reading)
        except KeyboardInterrupt:
            return watch.summary(interrupted=True)
        return watch.summary()
    finally:
        watch.close()
