"""A served endpoint's speculative-decoding counters, read from its Prometheus ``/metrics`` page (the
page is fetched by :meth:`eaglehub.endpoint.client.EndpointClient.metrics`; this module only reads it).

**vLLM** (``vllm/v1/spec_decode/metrics.py``, ``SpecDecodingProm``; labels ``model_name`` and
``engine``, one label set per engine core) exposes cumulative counters that map one to one onto
:class:`~eaglehub.engines.base.SpecCounters`:

* ``vllm:spec_decode_num_drafts``          → ``num_drafts``
* ``vllm:spec_decode_num_draft_tokens``    → ``num_draft_tokens``
* ``vllm:spec_decode_num_accepted_tokens`` → ``num_accepted_tokens``
* ``vllm:spec_decode_num_accepted_tokens_per_pos{position="i"}`` → ``accepted_per_pos[i]``

Each appears as ``<name>_total`` in the exposition text; the Prometheus text parser names the counter
family without the suffix, and an exposition without ``# TYPE`` lines keeps it, so both spellings
are read (the ``_created`` timestamps are not counts and are skipped). Every label set (engine, model)
is summed. vLLM has no Prometheus counterpart of the per-request ``acceptance_histogram``, so
``accepted_histogram`` stays empty.

**SGLang 0.5.23** (sglang/srt/observability/metrics_collector.py) has cumulative counters, written by
its tokenizer manager once per finished request (``TokenizerMetricsCollector.observe_one_finished_request``,
metrics_collector.py:2092-2113, called at tokenizer_manager.py:3287-3297):

* ``sglang:spec_verify_calls_total`` (metrics_collector.py:1865; the request's ``spec_verify_ct``, its
  verify steps)                              → ``num_drafts``
* ``sglang:generation_tokens_total`` (:1860; the request's completion tokens) and
  ``sglang:num_requests_total`` (:1940; finished requests) → ``num_accepted_tokens`` = generated −
  verify steps − requests: each verify step commits its accepted drafts and one bonus token, and each
  request's first token comes from prefill, not from a verify step. So AL over any window is
  1 + Δaccepted / Δverify steps, AL as eaglehub defines it. Where ``num_requests_total`` is not on the
  page, accepted = generated − verify steps, i.e. AL = Δgenerated / Δverify steps, SGLang's own
  per-request ``spec_accept_length`` (completion tokens / verify steps, tokenizer_manager.py:3166),
  which counts each request's prefill token as if it were accepted. A request cut at ``max_tokens``
  mid-step drops the accepted tokens past the cut from the generated count (both ways), so the page's
  AL can be a little below the requests' own (eaglehub/endpoint/client.py).
* ``sglang:spec_num_steps`` (gauge, :535; the active ``speculative_num_steps``) is k; with
  ``sglang:spec_num_draft_tokens`` (:541, the active ``speculative_num_draft_tokens``) the drafted
  tokens are verify steps × (draft tokens − 1), as SGLang counts them (tokenizer_manager.py:3156), else
  verify steps × k. Both gauges are set at each decode log interval and read 0 before the first
  (metrics_reporter.py:965-1020): k is then unknown (``None``). Under adaptive speculative decoding
  they give the *current* k, and the drafted-token count uses it for the whole history.

The counters carry ``model_name`` and the server's custom labels; ``generation_tokens`` and
``num_requests`` also ``is_streaming``; every label set is summed. There is no per-position counter:
``accepted_per_pos`` stays empty (per-position rates come from the per-request details). A labelled
counter has no sample before its first increment, so a page whose ``sglang:spec_verify_calls`` or
``sglang:spec_num_steps`` family is declared without samples reads as counters at 0.

**Older SGLang** (no such counters) exposes two gauges recomputed at each decode log interval:
``sglang:spec_accept_length`` (mean tokens per verify step, bonus included, over the last log interval)
and ``sglang:spec_accept_rate`` (accepted / drafted tokens in that interval). From them no count, no
per-position rate, no k and no AL over an arbitrary window can be derived: :attr:`ServerSpecMetrics.counters`
is all zeros, :attr:`ServerSpecMetrics.cumulative` is False, and the gauges are given as
:attr:`ServerSpecMetrics.acceptance_length_gauge` and :attr:`ServerSpecMetrics.acceptance_rate_gauge` (the
mean over label sets, e.g. TP / DP ranks). SGLang registers the gauges whether or not it speculates, at 0
before the first decode or without speculation; a value below 1 is read as "no reading" (``None``). 0.5.23
still writes these gauges; they are given beside its counters.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from eaglehub.engines.base import SpecCounters

VLLM_PREFIX = "vllm:spec_decode_"
VLLM_COUNTERS = {
    "vllm:spec_decode_num_drafts": "num_drafts",
    "vllm:spec_decode_num_draft_tokens": "num_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens": "num_accepted_tokens",
}
VLLM_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
SGLANG_AL = "sglang:spec_accept_length"
SGLANG_RATE = "sglang:spec_accept_rate"
SGLANG_VERIFY = "sglang:spec_verify_calls"
SGLANG_GENERATED = "sglang:generation_tokens"
SGLANG_REQUESTS = "sglang:num_requests"
SGLANG_STEPS = "sglang:spec_num_steps"
SGLANG_DRAFT_TOKENS = "sglang:spec_num_draft_tokens"
SGLANG_COUNTERS = (SGLANG_VERIFY, SGLANG_GENERATED, SGLANG_REQUESTS)
SGLANG_GAUGES = (SGLANG_AL, SGLANG_RATE, SGLANG_STEPS, SGLANG_DRAFT_TOKENS)
SGLANG_MARKERS = (SGLANG_VERIFY, SGLANG_STEPS)
"""Families whose presence marks a page with SGLang's counters (0.5.23), samples or not."""
PROCESS_START = "process_start_time_seconds"


@dataclass(frozen=True)
class ServerSpecMetrics:
    """One reading of a server's speculative-decoding metrics.

    ``counters``: cumulative since the server started, summed over every label set (engine, model);
    all zeros for an older SGLang (module doc). ``labels``: the distinct values of each label seen on the
    spec-decode samples except ``position``, e.g. ``{"model_name": ("/x/target",), "engine": ("0",)}``.
    ``server``: ``"vllm"`` or ``"sglang"``. ``process_start_time``: the server process's start time
    (Unix seconds) where the exposition has prometheus_client's ``process_start_time_seconds``, a
    restart signal that does not depend on the counters going down; ``None`` otherwise.
    ``acceptance_length_gauge`` / ``acceptance_rate_gauge``: SGLang's gauges (module doc); ``None`` for vLLM.
    ``gauges_only``: an older SGLang page (no counters). ``num_speculative_tokens``: SGLang's
    ``sglang:spec_num_steps`` (``None`` at 0 or absent). ``fields``: the metric families read, in the
    order of :data:`VLLM_COUNTERS` / :data:`SGLANG_COUNTERS` + :data:`SGLANG_GAUGES`.
    """

    counters: SpecCounters
    labels: dict[str, tuple[str, ...]]
    server: str
    process_start_time: float | None = None
    acceptance_length_gauge: float | None = None
    acceptance_rate_gauge: float | None = None
    gauges_only: bool = False
    num_speculative_tokens: int | None = None
    fields: tuple[str, ...] = ()

    @property
    def k(self) -> int | None:
        """num_speculative_tokens when known: the number of positions of vLLM's per-position counter
        (registered one per draft position at start-up), SGLang's ``sglang:spec_num_steps``."""
        return len(self.counters.accepted_per_pos) or self.num_speculative_tokens

    @property
    def cumulative(self) -> bool:
        """True when :attr:`counters` are real cumulative counters (vLLM, SGLang 0.5.23), False for an
        older SGLang's gauges."""
        return not self.gauges_only


def _base_name(sample_name: str) -> str:
    return sample_name[: -len("_total")] if sample_name.endswith("_total") else sample_name


def _count(value: float) -> int:
    # Counters are exposed as floats ("12.0"); they count whole drafts and tokens.
    return round(value) if math.isfinite(value) else 0


def parse_spec_metrics(text: str) -> ServerSpecMetrics | None:
    """Read the speculative-decoding metrics from a Prometheus exposition ``text``.

    Returns ``None`` when the text has no speculative-decoding metric (a server that does not
    speculate, or not vLLM / SGLang). Raises :class:`ValueError` when ``text`` is not Prometheus
    exposition text.
    """
    from prometheus_client.parser import text_string_to_metric_families  # here: `eaglehub watch --help` needs none

    totals: dict[str, int] = defaultdict(int)
    per_pos: dict[int, int] = defaultdict(int)
    labels: dict[str, set[str]] = defaultdict(set)
    sglang: dict[str, list[float]] = defaultdict(list)
    families: set[str] = set()
    process_start: float | None = None
    seen_vllm = False
    for family in text_string_to_metric_families(text):
        families.add(_base_name(family.name))
        for s in family.samples:
            if s.name.endswith("_created"):
                continue
            name = _base_name(s.name)
            if name in VLLM_COUNTERS or name == VLLM_PER_POS:
                seen_vllm = True
                if name == VLLM_PER_POS:
                    try:
                        pos = int(s.labels.get("position", ""))
                    except ValueError:
                        continue  # a per-position sample without a usable position cannot be placed
                    per_pos[pos] += _count(s.value)
                else:
                    totals[VLLM_COUNTERS[name]] += _count(s.value)
            elif name in SGLANG_COUNTERS:
                totals[name] += _count(s.value)
            elif name in SGLANG_GAUGES:
                if math.isfinite(s.value):
                    sglang[name].append(s.value)
            elif name == PROCESS_START:
                process_start = s.value
                continue
            else:
                continue
            for key, value in s.labels.items():
                if key != "position":
                    labels[key].add(value)
    counted = any(f in families for f in SGLANG_MARKERS)
    if not seen_vllm and not counted and not (sglang[SGLANG_AL] or sglang[SGLANG_RATE]):
        return None
    frozen = {k: tuple(sorted(v)) for k, v in sorted(labels.items())}
    if seen_vllm:
        n = max(per_pos) + 1 if per_pos else 0
        counters = SpecCounters(
            num_drafts=totals["num_drafts"],
            num_draft_tokens=totals["num_draft_tokens"],
            num_accepted_tokens=totals["num_accepted_tokens"],
            accepted_per_pos=tuple(per_pos.get(i, 0) for i in range(n)),
        )
        fields = tuple(f"{name}_total" for name in (*VLLM_COUNTERS, VLLM_PER_POS) if name in families)
        return ServerSpecMetrics(counters, frozen, "vllm", process_start, fields=fields)
    al = _mean(sglang[SGLANG_AL])
    rate = _mean(sglang[SGLANG_RATE])
    al_gauge = al if al is not None and al >= 1.0 else None
    rate_gauge = rate if al_gauge is not None else None
    if not counted:
        return ServerSpecMetrics(
            SpecCounters(), frozen, "sglang", process_start, al_gauge, rate_gauge, gauges_only=True,
            fields=tuple(n for n in (SGLANG_AL, SGLANG_RATE) if sglang[n]),
        )  # fmt: skip
    k = _gauge_int(sglang[SGLANG_STEPS])
    draft_tokens = _gauge_int(sglang[SGLANG_DRAFT_TOKENS])
    per_step = draft_tokens - 1 if draft_tokens and draft_tokens > 1 else k
    steps, generated = totals[SGLANG_VERIFY], totals[SGLANG_GENERATED]
    requests = totals[SGLANG_REQUESTS] if SGLANG_REQUESTS in families else 0
    counters = SpecCounters(
        num_drafts=steps,
        num_draft_tokens=steps * (per_step or 0),
        num_accepted_tokens=max(generated - steps - requests, 0),
    )
    fields = tuple(
        f"{name}_total" if name in SGLANG_COUNTERS else name
        for name in (*SGLANG_COUNTERS, SGLANG_STEPS, SGLANG_DRAFT_TOKENS)
        if name in families
    )  # the families the counters and k came from
    return ServerSpecMetrics(
        counters, frozen, "sglang", process_start, al_gauge, rate_gauge, num_speculative_tokens=k, fields=fields
    )


def _gauge_int(values: list[float]) -> int | None:
    """A gauge that holds a whole setting (k), ``None`` when absent or 0 (not yet set: module doc); the
    largest over label sets (ranks agree; a rank that has not logged yet reads 0)."""
    return round(max(values)) if values and max(values) >= 1 else None


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def is_reset(before: SpecCounters, after: SpecCounters) -> bool:
    """True when any cumulative counter of ``after`` is lower than in ``before``: the server restarted
    (or its counters were reset) between the two readings. A position missing from ``after`` reads 0."""
    if (
        after.num_drafts < before.num_drafts
        or after.num_draft_tokens < before.num_draft_tokens
        or after.num_accepted_tokens < before.num_accepted_tokens
    ):
        return True
    delta = after - before
    return any(x < 0 for x in delta.accepted_per_pos) or any(x < 0 for x in delta.accepted_histogram)
