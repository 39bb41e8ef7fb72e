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

**SGLang** (``python/sglang/srt/metrics/collector.py``, ``SchedulerMetricsCollector``) exposes no
speculative-decoding counters, only two gauges recomputed at each decode log interval:
``sglang:spec_accept_length`` (mean tokens per verify step, bonus included: AL as eaglehub defines
it, over the last log interval) and ``sglang:spec_accept_rate`` (accepted / drafted tokens in that
interval). From them **no** draft count, accepted-token count, per-position rate or k can be derived,
nor an AL over an arbitrary window: :attr:`ServerSpecMetrics.counters` is all zeros for SGLang, and
the two gauges are given as :attr:`ServerSpecMetrics.acceptance_length_gauge` and
:attr:`ServerSpecMetrics.acceptance_rate_gauge` (the mean over label sets, e.g. TP / DP ranks). SGLang
registers the gauges whether or not it speculates, at 0 before the first decode or without
speculation; a value below 1 is read as "no reading" (``None``), so from ``/metrics`` alone an SGLang
server that does not speculate looks like an idle one that does.
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
PROCESS_START = "process_start_time_seconds"


@dataclass(frozen=True)
class ServerSpecMetrics:
    """One reading of a server's speculative-decoding metrics.

    ``counters``: cumulative since the server started, summed over every label set (engine, model);
    all zeros for SGLang (module doc). ``labels``: the distinct values of each label seen on the
    spec-decode samples except ``position``, e.g. ``{"model_name": ("/x/target",), "engine": ("0",)}``.
    ``server``: ``"vllm"`` or ``"sglang"``. ``process_start_time``: the server process's start time
    (Unix seconds) where the exposition has prometheus_client's ``process_start_time_seconds``, a
    restart signal that does not depend on the counters going down; ``None`` otherwise.
    ``acceptance_length_gauge`` / ``acceptance_rate_gauge``: SGLang's gauges (module doc); ``None`` for vLLM.
    """

    counters: SpecCounters
    labels: dict[str, tuple[str, ...]]
    server: str
    process_start_time: float | None = None
    acceptance_length_gauge: float | None = None
    acceptance_rate_gauge: float | None = None

    @property
    def k(self) -> int | None:
        """Number of positions in the per-position counter (vLLM registers one per draft position
        at start-up, so this is num_speculative_tokens), when known."""
        return len(self.counters.accepted_per_pos) or None

    @property
    def cumulative(self) -> bool:
        """True when :attr:`counters` are real cumulative counters (vLLM), False for SGLang's gauges."""
        return self.server == "vllm"


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
    process_start: float | None = None
    seen_vllm = False
    for family in text_string_to_metric_families(text):
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
            elif name in (SGLANG_AL, SGLANG_RATE):
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
    if not seen_vllm and not sglang:
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
        return ServerSpecMetrics(counters, frozen, "vllm", process_start)
    al = _mean(sglang[SGLANG_AL])
    rate = _mean(sglang[SGLANG_RATE])
    return ServerSpecMetrics(
        SpecCounters(),
        frozen,
        "sglang",
        process_start,
        acceptance_length_gauge=al if al is not None and al >= 1.0 else None,
        acceptance_rate_gauge=rate if al is not None and al >= 1.0 else None,
    )


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
