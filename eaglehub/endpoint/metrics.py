"""A served endpoint's speculative-decoding counters, read from its Prometheus ``/metrics`` page.

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
from urllib.parse import urlsplit, urlunsplit

import httpx
from prometheus_client.parser import text_string_to_metric_families

from eaglehub.engines.base import SpecCounters
from eaglehub.errors import EndpointError

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
METRICS_TIMEOUT_S = 10.0
"""Seconds allowed for one ``GET /metrics``: the page is a few hundred kB at most and rendered from
memory, so a server that takes longer is overloaded or hung."""


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


def redact_url(url: str) -> str:
    """``url`` without any ``user:password@`` part, fit for messages and reports."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def metrics_url(base_url: str) -> str:
    """The ``/metrics`` URL of a server given as ``http://host:port`` or its OpenAI base
    ``http://host:port/v1`` (``/metrics`` sits at the server root in vLLM and SGLang)."""
    base = base_url.rstrip("/")
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    return base + "/metrics"


def fetch_metrics(client: httpx.Client, base_url: str) -> ServerSpecMetrics | None:
    """``GET {base}/metrics`` and :func:`parse_spec_metrics` it; ``None`` when the server exposes no
    speculative-decoding metrics.

    The client carries any ``Authorization`` header; the errors name the URL (credentials removed)
    and never a header. Raises :class:`EndpointError`: refused or dropped connection, timeout, an HTTP
    error status, a body that is not Prometheus exposition text.
    """
    url = metrics_url(base_url)
    shown = redact_url(url)
    try:
        response = client.get(url, timeout=METRICS_TIMEOUT_S)
    except httpx.TimeoutException as exc:
        raise EndpointError(
            f"GET {shown} timed out after {METRICS_TIMEOUT_S:.0f} s",
            hint="the server is overloaded or hung; check its log",
        ) from exc
    except httpx.TransportError as exc:
        raise EndpointError(
            f"GET {shown} failed: {type(exc).__name__} (the server is not reachable or dropped the connection)",
            hint="check the URL and port, and that the server is running",
        ) from exc
    if response.status_code in (401, 403):
        raise EndpointError(
            f"GET {shown} answered {response.status_code}",
            hint="pass the server's API key with --api-key or OPENAI_API_KEY",
        )
    if response.status_code == 404:
        raise EndpointError(
            f"GET {shown} answered 404: the server has no /metrics page",
            hint="vLLM serves /metrics by default; SGLang needs --enable-metrics",
        )
    if response.status_code >= 400:
        raise EndpointError(f"GET {shown} answered {response.status_code}", hint="check the server's log")
    try:
        return parse_spec_metrics(response.text)
    except ValueError as exc:
        raise EndpointError(
            f"GET {shown} did not return Prometheus exposition text",
            hint="point --endpoint at the vLLM or SGLang server itself, not a proxy page",
        ) from exc


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
