"""``verify --endpoint`` and ``watch`` against an SGLang 0.5.23 server whose every reply, ``/metrics`` page,
``/v1/models`` and ``/server_info`` were made by SGLang 0.5.23's own code (fixtures/servers/sglang-0.5.23/,
made by scripts/sglang_fixtures.py from the counters in its MANIFEST.json; the engine tier re-makes them and
compares: tests/test_engine_code.py). The expected figures are computed here from the MANIFEST's inputs (each
request's accepted draft tokens per verify step), never read from the replies.
"""

from __future__ import annotations

import json
import threading

import pytest
from click.testing import CliRunner
from helpers.local_http import LocalHTTPServer, QuietHandler
from helpers.paths import ROOT

from eaglehub.cli import main
from eaglehub.endpoint.client import (
    FIELDS_CHOICE_META,
    FIELDS_SGLANG,
    SGLANG_CHAT_FLAGS,
    SGLANG_FLAGS,
    EndpointClient,
    engine_of,
    parse_completion,
)
from eaglehub.endpoint.metrics import parse_spec_metrics
from eaglehub.engines.base import SpecCounters
from eaglehub.io.schemas import validate_json

FIX = ROOT / "fixtures" / "servers" / "sglang-0.5.23"
MANIFEST = json.loads((FIX / "MANIFEST.json").read_text())
STEPS = MANIFEST["inputs"]["requests_accepted_per_step"]
K = MANIFEST["server_args"]["speculative_num_steps"]


def expected(requests: list[list[int]]) -> SpecCounters:
    """The counters of these requests as eaglehub defines them, from the accepted count of each verify step."""
    steps = [a for r in requests for a in r]
    return SpecCounters(
        num_drafts=len(steps),
        num_draft_tokens=K * len(steps),
        num_accepted_tokens=sum(steps),
        accepted_per_pos=tuple(sum(1 for a in steps if a > i) for i in range(K)),
        accepted_histogram=tuple(steps.count(j) for j in range(K + 1)),
    )


def al(c: SpecCounters) -> float:
    return 1 + c.num_accepted_tokens / c.num_drafts


def page(n: int) -> str:
    return (FIX / f"metrics-after-{n}.prom").read_text()


class SGLangServer(LocalHTTPServer):
    """Answers as the fixture's SGLang 0.5.23: POST i (in arrival order) gets reply ``replies/i.json``;
    ``/metrics`` is the page after the requests answered so far, or, with ``pages``, the next of ``pages`` per
    GET; no ``/version`` (SGLang has none); ``/server_info`` and ``/v1/models`` as SGLang made them."""

    def __init__(self, replies: str = "chat", pages: list[int] | None = None, metrics: bool = True):
        self.replies, self.pages, self.metrics = replies, list(pages or []), metrics
        self.answered = 0
        self.bodies: list[dict] = []
        self.lock = threading.Lock()
        super().__init__(self._handler())

    def _handler(self):
        server = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                path = self.path.split("?")[0]  # FastAPI routes by path: a query SGLang does not read is ignored
                if path == "/v1/models":
                    self.send(200, (FIX / "models.json").read_text())
                elif path == "/server_info":
                    self.send(200, (FIX / "server_info.json").read_text())
                elif path == "/metrics" and server.metrics:
                    with server.lock:
                        n = server.pages.pop(0) if len(server.pages) > 1 else (server.pages or [server.answered])[0]
                        n = min(n, len(STEPS))
                    self.send(200, page(n), "text/plain; version=0.0.4; charset=utf-8")
                else:
                    self.send(404, '{"detail": "Not Found"}')

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                folder = server.replies if self.path.endswith("/chat/completions") else "completions"
                with server.lock:
                    i = len(server.bodies)
                    server.bodies.append(body)
                reply = (FIX / folder / f"{i % len(STEPS)}.json").read_text()
                with server.lock:
                    server.answered += 1
                self.send(200, reply)

        return Handler


def _verify(served: SGLangServer, target: SGLangServer, tmp_path) -> tuple:
    report = tmp_path / "r.json"
    args = ["verify", "--endpoint", served.base_url + "/v1", "--baseline-endpoint", target.base_url]
    args += ["--limit", "1", "--max-tokens", "16", "--concurrency", "1", "--report", str(report)]
    res = CliRunner().invoke(main, args)
    return res, (json.loads(report.read_text()) if report.exists() else None)


@pytest.mark.parametrize(
    ("replies", "fields"),
    [
        ("chat", FIELDS_SGLANG),  # 0.5.23 answering eaglehub's flags: sglext and meta_info, sglext read
        ("chat-meta-info", FIELDS_CHOICE_META),  # 0.5.23 asked for meta_info only
        ("older", FIELDS_CHOICE_META),  # the field names before spec_num_correct_drafts
    ],
)
def test_verify_endpoint_reads_an_sglang_0_5_23_server(replies, fields, tmp_path):
    with SGLangServer(replies) as served, SGLangServer("nospec", metrics=False) as target:
        res, report = _verify(served, target, tmp_path)
    assert res.exit_code == 0, res.output
    validate_json(report, "verify-report")
    d, ep = report["drafters"][0], report["endpoint"]
    # every request asked SGLang for its counters
    assert all(b[f] is True for b in served.bodies for f in SGLANG_CHAT_FLAGS) and len(served.bodies) == 6
    assert d["lossless"] and d["num_prompts"] == 6
    want = expected(STEPS)
    overall = d["acceptance"]["overall"]
    assert (overall["num_drafts"], overall["num_draft_tokens"], overall["num_accepted_tokens"]) == (
        want.num_drafts,
        want.num_draft_tokens,
        want.num_accepted_tokens,
    )
    assert overall["acceptance_length"] == pytest.approx(al(want))
    assert overall["acceptance_rate_per_position"] == pytest.approx(
        [p / want.num_drafts for p in want.accepted_per_pos]
    )
    # per request: the six prompts are one per category, sent in order
    per_cat = [d["acceptance"]["per_category"][c]["acceptance_length"] for c in report_categories(report)]
    assert per_cat == pytest.approx([al(expected([s])) for s in STEPS])
    assert ep["server"] == "sglang" and ep["version"] == MANIFEST["version"]
    assert ep["num_speculative_tokens"] == K and ep["k_source"] == "per-request metrics"
    c = ep["counters"]
    assert c["used"] == "per_request" and c["fields"]["per_request"] == fields
    assert "sglang:spec_verify_calls_total" in c["fields"]["prometheus"]
    # the /metrics delta: the same verify steps, and (no request cut mid-step) the same AL
    assert c["prometheus"]["num_drafts"] == want.num_drafts and c["agree"] is True
    assert c["prometheus"]["acceptance_length"] == pytest.approx(al(want))


def report_categories(report: dict) -> list[str]:
    """The categories in the order their prompts were sent (the report's prompt list)."""
    from eaglehub.measure.prompts import load_prompts
    from eaglehub.measure.requests import requests_of

    order = [r.category for r in requests_of(load_prompts(None, None, 1))]
    assert sorted(order) == sorted(report["drafters"][0]["acceptance"]["per_category"])
    return order


def test_completion_replies_one_object_or_a_list_per_choice():
    """The completions layout: sglext.spec_tokens_details is one object for n = 1 and a list for n = 2 (choice
    0's entry is read); k is proposed drafts ÷ verify steps, the histogram is padded to k + 1 entries."""
    for i, steps in enumerate(STEPS):
        c = parse_completion(json.loads((FIX / "completions" / f"{i}.json").read_text()), chat=False)
        assert (c.source, c.fields, c.k) == ("sglang", FIELDS_SGLANG, K)
        assert c.counters == expected([steps]) and c.token_ids is not None
    n2 = json.loads((FIX / "completions-n2.json").read_text())
    assert isinstance(n2["sglext"]["spec_tokens_details"], list)
    c = parse_completion(n2, chat=False)
    assert c.counters == expected([STEPS[0]]) and c.k == K


def test_k_is_never_the_histogram_length():
    """Request 1 never accepts more than one draft: SGLang's histogram has 2 entries, k is still 3 (W9)."""
    body = json.loads((FIX / "chat" / "1.json").read_text())
    assert len(body["sglext"]["spec_tokens_details"]["spec_correct_drafts_histogram"]) == 2
    c = parse_completion(body, chat=True)
    assert c.k == K and c.counters.accepted_histogram == expected([STEPS[1]]).accepted_histogram
    assert len(c.counters.accepted_per_pos) == K


def test_completions_client_sends_the_flags_and_reads_the_server():
    with SGLangServer() as served, EndpointClient(served.base_url) as client:
        got = client.complete("eaglehub/fixture-target", [1, 2, 3], {"max_tokens": 16, "temperature": 0.0})
        assert client.version() == MANIFEST["version"]  # no /version: /server_info's
        info = client.server_info()
        assert engine_of(client.models()) == "sglang"
    assert all(served.bodies[0][f] is True for f in SGLANG_FLAGS)
    assert got.counters == expected([STEPS[0]]) and got.k == K
    assert info is not None and info["speculative_num_steps"] == K and info["speculative_algorithm"] == "EAGLE3"


def test_metrics_pages_are_cumulative_counters_with_k():
    fresh, after3, after6 = (parse_spec_metrics(page(n)) for n in (0, 3, 6))
    assert fresh is not None and after3 is not None and after6 is not None
    # a fresh server: the counter families are declared without samples, the gauges not yet set
    assert fresh.server == "sglang" and fresh.cumulative and fresh.counters == SpecCounters() and fresh.k is None
    assert after6.k == K and after6.cumulative and after6.labels["model_name"] == ("eaglehub/fixture-target",)
    for got, n in ((after3, 3), (after6, 6)):
        want = expected(STEPS[:n])
        assert (got.counters.num_drafts, got.counters.num_draft_tokens, got.counters.num_accepted_tokens) == (
            want.num_drafts,
            want.num_draft_tokens,
            want.num_accepted_tokens,
        )
    delta = after6.counters - after3.counters
    assert al(delta) == pytest.approx(al(expected(STEPS[3:])))
    assert "sglang:spec_num_steps" in after6.fields and "sglang:generation_tokens_total" in after6.fields


def test_watch_reads_the_al_of_each_interval_from_sglang_counters(tmp_path):
    report = tmp_path / "w.json"
    with SGLangServer(pages=[1, 3, 6]) as served:
        args = ["watch", "--endpoint", served.base_url, "--interval", "0.2", "--count", "2", "--report", str(report)]
        res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    w = json.loads(report.read_text())
    validate_json(w, "watch-report")
    assert w["server"] == "sglang" and w["num_speculative_tokens"] == K
    assert [r["status"] for r in w["intervals"]] == ["ok", "ok"]
    for r, (lo, hi) in zip(w["intervals"], ((1, 3), (3, 6))):
        want = expected(STEPS[lo:hi])
        assert r["num_drafts"] == want.num_drafts and r["acceptance_length"] == pytest.approx(al(want))
        assert r["draft_acceptance_rate"] == pytest.approx(want.num_accepted_tokens / want.num_draft_tokens)
    assert w["overall"]["acceptance_length"] == pytest.approx(al(expected(STEPS[1:])))
