"""eaglehub.endpoint.metrics: reading a server's spec-decode counters from its /metrics text (and
EndpointClient.metrics, which fetches it).

The gauge-only SGLang exposition (releases before 0.5.23's counters) is written from SGLang's documented
format, since SGLang cannot run on this machine; SGLang 0.5.23's pages, made by its own metric collectors,
are read in tests/test_endpoint_sglang.py. The vLLM pages in tests/data/metrics/
were captured from a real server (SOURCES.md there); the small vLLM texts are hand-made edge cases in
the layout prometheus_client writes.
"""

from __future__ import annotations

import httpx
import pytest
from helpers.metrics_text import vllm_text

from eaglehub.endpoint.client import EndpointClient, metrics_url, redact_url
from eaglehub.endpoint.metrics import ServerSpecMetrics, is_reset, parse_spec_metrics
from eaglehub.engines.base import SpecCounters
from eaglehub.errors import EndpointError

PLAIN = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="/m/target"} 0.0
# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.7645e+09
"""


def test_no_spec_metrics_is_none():
    assert parse_spec_metrics(PLAIN) is None
    assert parse_spec_metrics("") is None


def test_one_engine_counters_and_labels():
    m = parse_spec_metrics(PLAIN + vllm_text({"0": (10, 30, 17, [8, 6, 3])}))
    assert m == ServerSpecMetrics(
        SpecCounters(10, 30, 17, (8, 6, 3)),
        {"engine": ("0",), "model_name": ("/m/target",)},
        "vllm",
        process_start_time=1.7645e09,
        fields=tuple(f"vllm:spec_decode_{n}_total" for n in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"))
        + ("vllm:spec_decode_num_accepted_tokens_per_pos_total",),
    )
    assert m.k == 3 and m.cumulative


def test_two_engines_are_summed():
    m = parse_spec_metrics(vllm_text({"0": (10, 30, 17, [8, 6, 3]), "1": (5, 15, 4, [3, 1, 0])}))
    assert m is not None
    assert m.counters == SpecCounters(15, 45, 21, (11, 7, 3))
    assert m.labels["engine"] == ("0", "1")


def test_without_type_lines_total_suffix_is_read():
    # Without "# TYPE" lines the parser keeps the _total suffix on the family name.
    m = parse_spec_metrics(vllm_text({"0": (4, 12, 5, [3, 2, 0])}, types=False))
    assert m is not None and m.counters == SpecCounters(4, 12, 5, (3, 2, 0))


def test_fresh_server_knows_k_before_traffic():
    m = parse_spec_metrics(vllm_text({"0": (0, 0, 0, [0, 0, 0, 0, 0])}))
    assert m is not None and m.k == 5 and m.counters.num_drafts == 0


def test_not_prometheus_text_raises():
    with pytest.raises(ValueError):
        parse_spec_metrics("<html><body>not metrics {</body></html>\n")


SGLANG = """# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 2.75
sglang:spec_accept_length{engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="1"} 2.25
# HELP sglang:spec_accept_rate The average acceptance rate of speculative decoding (`accepted tokens / total draft tokens` in batch).
# TYPE sglang:spec_accept_rate gauge
sglang:spec_accept_rate{engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 0.6
sglang:spec_accept_rate{engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="1"} 0.4
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 7.0
"""


def test_sglang_gauges_mapped_counters_not_derivable():
    # Written from SGLang's documented exposition (SchedulerMetricsCollector's gauges), not captured.
    m = parse_spec_metrics(SGLANG)
    assert m is not None and m.server == "sglang" and not m.cumulative
    assert m.counters == SpecCounters() and m.k is None
    assert m.acceptance_length_gauge == pytest.approx(2.5)
    assert m.acceptance_rate_gauge == pytest.approx(0.5)
    assert m.labels["model_name"] == ("meta-llama/Llama-3.1-8B-Instruct",)
    assert m.labels["tp_rank"] == ("0", "1")


def test_sglang_gauge_zero_is_no_reading():
    m = parse_spec_metrics(SGLANG.replace(" 2.75", " 0.0").replace(" 2.25", " 0.0"))
    assert m is not None and m.acceptance_length_gauge is None and m.acceptance_rate_gauge is None


def test_is_reset():
    a = SpecCounters(10, 30, 17, (8, 6, 3))
    assert not is_reset(a, a)
    assert not is_reset(a, SpecCounters(11, 33, 17, (8, 6, 3)))
    assert is_reset(a, SpecCounters(2, 6, 1, (1, 0, 0)))
    # A restarted server that already drafted more than before still has a lower per-position count.
    assert is_reset(a, SpecCounters(12, 36, 18, (9, 5, 4)))
    assert is_reset(a, SpecCounters(10, 30, 17, (8, 6)))  # a position vanished: a new server with a smaller k
    assert not is_reset(SpecCounters(), a)


def test_urls():
    assert metrics_url("http://h:8000/v1/") == "http://h:8000/metrics"
    assert metrics_url("http://h:8000") == "http://h:8000/metrics"
    assert redact_url("http://user:s3cret@h:8000/metrics") == "http://h:8000/metrics"
    assert redact_url("http://h:8000/metrics") == "http://h:8000/metrics"


def _client(handler, url: str = "http://h:1") -> EndpointClient:
    return EndpointClient(url, api_key="sk-SECRET", transport=httpx.MockTransport(handler))


@pytest.mark.parametrize(
    ("status", "body", "needle"),
    [(500, "boom", "answered 500"), (401, "", "--api-key"), (404, "", "no /metrics"), (200, "<html>{", "Prometheus")],
)
def test_fetch_errors_are_one_line_without_key(status, body, needle):
    respond = lambda req: httpx.Response(status, text=body)  # noqa: E731
    with _client(respond, "http://u:pw@h:1/v1") as client, pytest.raises(EndpointError) as err:
        client.metrics()
    text = str(err.value)
    assert needle in text and "\n" not in text
    assert "SECRET" not in text and "pw" not in text


def test_fetch_transport_errors():
    def refuse(req):
        raise httpx.ConnectError("refused", request=req)

    def slow(req):
        raise httpx.ReadTimeout("slow", request=req)

    for handler, needle in ((refuse, "not reachable"), (slow, "timed out")):
        with _client(handler) as client, pytest.raises(EndpointError, match=needle):
            client.metrics()


def test_fetch_sends_client_headers_and_parses():
    seen = {}

    def handler(req: httpx.Request) -> httpx.Response:
        seen["auth"] = req.headers.get("authorization")
        seen["path"] = req.url.path
        return httpx.Response(200, text=vllm_text({"0": (3, 9, 2, [2, 0, 0])}))

    with _client(handler, "http://h:1/v1") as client:
        m = client.metrics()
    assert seen == {"auth": "Bearer sk-SECRET", "path": "/metrics"}
    assert m is not None and m.counters.num_accepted_tokens == 2


def test_captured_vllm_pages():
    """Real /metrics bodies of a vllm serve of the fixture pair (tests/data/metrics/SOURCES.md)."""
    from helpers.paths import DATA

    from eaglehub.measure.acceptance import check_consistency

    fresh = parse_spec_metrics((DATA / "metrics" / "vllm-0.32.0-fixture-fresh.prom").read_text())
    after = parse_spec_metrics((DATA / "metrics" / "vllm-0.32.0-fixture-after-6-requests.prom").read_text())
    assert fresh is not None and after is not None
    assert fresh.counters == SpecCounters(0, 0, 0, (0, 0, 0)) and fresh.k == 3
    assert after.counters == SpecCounters(83, 249, 76, (43, 20, 13)) and after.k == 3
    assert check_consistency(after.counters, 3) == []
    assert after.labels == {"engine": ("0",), "model_name": ("/models/SmolLM2-135M-Instruct",)}
    assert after.process_start_time == fresh.process_start_time == pytest.approx(1.79622394597e09)
    assert not is_reset(fresh.counters, after.counters) and is_reset(after.counters, fresh.counters)
