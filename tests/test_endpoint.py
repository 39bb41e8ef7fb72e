"""``verify --endpoint``: the response parsers and every failure a server can hand back, end to end through the CLI.

The servers are helpers/fake_openai.py: real HTTP servers on 127.0.0.1 that answer in vLLM's or SGLang's
response layout and fail on purpose (500, a timeout, a dropped connection, no speculative decoding). The
fake's SGLang responses carry ``meta_info`` with SGLang's field names; replies and pages made by SGLang
0.5.23's own code are served in tests/test_endpoint_sglang.py. The agreement with a real ``vllm serve`` is
tests/test_verify_endpoint_vllm.py.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from helpers.fake_openai import HIST, FakeServer, K
from helpers.servers import free_port

from eaglehub.cli import main
from eaglehub.endpoint.client import counters_from_sglang, counters_from_vllm, parse_completion, server_root
from eaglehub.io.schemas import validate_json

SECRET = "sk-test-do-not-show-0123456789"
STEPS, ACCEPTED = sum(HIST), sum(j * n for j, n in enumerate(HIST))


def test_vllm_per_request_metrics_become_counters():
    c, k = counters_from_vllm(
        {
            "mean_acceptance_length": 2.5,
            "draft_acceptance_rate": 0.5,
            "acceptance_histogram": [2, 1, 0, 1],
            "num_spec_steps": 4,
            "num_accepted_draft_tokens": 4,
            "num_draft_tokens": 12,
            "num_spec_tokens": 3,
        }
    )
    assert k == 3 and (c.num_drafts, c.num_draft_tokens, c.num_accepted_tokens) == (4, 12, 4)
    # position i is accepted in every step that accepted more than i drafts
    assert c.accepted_per_pos == (2, 1, 1) and c.accepted_histogram == (2, 1, 0, 1)
    assert sum(c.accepted_per_pos) == c.num_accepted_tokens


@pytest.mark.parametrize(
    "meta",
    [
        # current names (with the backward-compatible aliases SGLang still writes)
        {"spec_verify_ct": 4, "spec_num_correct_drafts": 4, "spec_num_proposed_drafts": 12,
         "spec_correct_drafts_histogram": [2, 1, 0, 1], "spec_accepted_drafts": 4, "spec_accept_histogram": [2, 1, 0, 1]},
        # the previous release's names
        {"spec_verify_ct": 4, "spec_accepted_drafts": 4, "spec_proposed_drafts": 12, "spec_accept_histogram": [2, 1, 0, 1]},
    ],
)  # fmt: skip
def test_sglang_meta_info_becomes_counters(meta):
    c, k = counters_from_sglang(meta)
    assert k == 3 and (c.num_drafts, c.num_draft_tokens, c.num_accepted_tokens) == (4, 12, 4)
    assert c.accepted_per_pos == (2, 1, 1)


def test_sglang_older_and_sparse_meta_info():
    c, k = counters_from_sglang({"spec_verify_ct": 5, "spec_accept_token_num": 6, "spec_draft_token_num": 15})
    assert (k, c.num_drafts, c.num_draft_tokens, c.num_accepted_tokens, c.accepted_per_pos) == (3, 5, 15, 6, ())
    # only SGLang's own AL ingredients: accepted = completion tokens - verify steps
    c, k = counters_from_sglang({"spec_verify_ct": 10, "completion_tokens": 25})
    assert (k, c.num_drafts, c.num_accepted_tokens) == (None, 10, 15)
    per_pos = {"spec_verify_ct": 4, "spec_num_correct_drafts": 4, "spec_num_correct_drafts_by_position": [3, 1, 0]}
    assert counters_from_sglang(per_pos)[0].accepted_per_pos == (3, 1, 0)
    assert counters_from_sglang({"completion_tokens": 25}) is None  # no speculation


def test_completion_parsing_and_urls():
    body = {"choices": [{"text": "hi", "token_ids": [5, 6], "finish_reason": "stop"}]}
    c = parse_completion(body, chat=False)
    assert (c.token_ids, c.text, c.counters, c.source) == ([5, 6], "hi", None, None)
    with pytest.raises(Exception, match="no choices"):
        parse_completion({"object": "error"}, chat=False)
    assert server_root("http://h:8000/v1/") == server_root("http://h:8000") == "http://h:8000"


def _verify(drafter: str, baseline: str, *extra: str, tmp_path=None):
    report = tmp_path / "r.json"
    args = ["verify", "--endpoint", drafter, "--baseline-endpoint", baseline, "--limit", "1", "--max-tokens", "8"]
    res = CliRunner().invoke(main, [*args, "--api-key", SECRET, "--report", str(report), *extra])
    text = report.read_text() if report.exists() else ""
    assert SECRET not in res.output and SECRET not in res.stderr and SECRET not in text
    assert "Traceback" not in res.output
    return res, (json.loads(text) if text else None)


@pytest.mark.parametrize("mode", ["ok", "sglang"])
def test_a_served_drafter_is_measured_from_its_own_counters(mode, tmp_path):
    with FakeServer(mode) as served, FakeServer("nospec") as target:
        res, report = _verify(served.url + "/v1", target.url, tmp_path=tmp_path)
    assert res.exit_code == 0, res.output
    validate_json(report, "verify-report")
    d, ep = report["drafters"][0], report["endpoint"]
    assert d["lossless"] and d["num_prompts"] == 6 and d["speculative_config"] is None
    overall = d["acceptance"]["overall"]
    assert (overall["num_drafts"], overall["num_accepted_tokens"]) == (6 * STEPS, 6 * ACCEPTED)
    assert overall["acceptance_length"] == pytest.approx(1 + ACCEPTED / STEPS)
    assert ep["num_speculative_tokens"] == K and ep["k_source"] == "per-request metrics"
    assert ep["server"] == ("sglang" if mode == "sglang" else "vllm") and ep["counters"]["used"] == "per_request"
    # vLLM's /metrics delta counts the same steps; the fake SGLang serves no counters there
    assert ep["counters"]["agree"] is (True if mode == "ok" else None)
    assert ep["baseline"]["endpoint"]["version"] == "fake-0.1" and ep["api"] == "chat"
    assert served.headers and all(h == f"Bearer {SECRET}" for h in served.headers)  # sent, never shown
    assert f"served endpoint {served.url}" in res.output and "counters agree" in res.output


@pytest.mark.parametrize(
    ("mode", "code", "used", "factor"),
    [
        ("noper", "W-ENDPOINT-NO-PER-REQUEST", "prometheus", 1),
        ("busy", "W-ENDPOINT-COUNTERS-DISAGREE", "per_request", 2),
    ],
)
def test_the_two_counter_sources_are_checked_against_each_other(mode, code, used, factor, tmp_path):
    with FakeServer(mode) as served, FakeServer("nospec") as target:
        res, report = _verify(served.url, target.url, tmp_path=tmp_path)
    assert res.exit_code == 0, res.output  # warnings: the acceptance is still measured
    d, counters = report["drafters"][0], report["endpoint"]["counters"]
    assert [f["code"] for f in d["findings"]] == [code] and counters["used"] == used
    assert counters["prometheus"]["num_drafts"] == factor * 6 * STEPS
    # acceptance: the requests' own counters where the server gives them (other traffic cannot inflate them)
    assert d["acceptance"]["overall"]["num_drafts"] == 6 * STEPS
    assert report["endpoint"]["num_speculative_tokens"] == K  # from the per-position counter when nothing else says


def test_some_failed_requests_keep_the_answered_ones(tmp_path):
    with FakeServer("every3") as served, FakeServer("nospec") as target:
        res, report = _verify(served.url, target.url, "--concurrency", "1", tmp_path=tmp_path)
    assert res.exit_code == 1, res.output
    d, ep = report["drafters"][0], report["endpoint"]
    assert [f["code"] for f in d["findings"]] == ["E-ENDPOINT-REQUESTS-FAILED"]
    assert [(f["kind"], f["status"], f["run"]) for f in ep["failures"]] == [("http", 500, "drafter")] * 2
    assert ep["requests"] == {"sent": 6, "answered": 4, "compared": 4} and d["num_prompts"] == 4 and d["lossless"]
    # acceptance over exactly the compared requests; the categories whose one request failed are gone
    assert d["acceptance"]["overall"]["num_drafts"] == 4 * STEPS and len(d["acceptance"]["per_category"]) == 4
    # the server echoed the Authorization header into its error text: the report has it redacted
    assert all("***" in f["message"] for f in ep["failures"])


@pytest.mark.parametrize(
    ("mode", "extra", "words"),
    [
        ("500", (), "answered 500"),
        ("timeout", ("--timeout", "0.5"), "timed out after 0.5 s"),
        ("drop", (), "closed the connection"),
    ],
)
def test_nothing_answered_is_a_one_line_error(mode, extra, words, tmp_path):
    with FakeServer(mode, delay=2.0) as served, FakeServer("nospec") as target:
        res, report = _verify(served.url, target.url, "--category", "coding", *extra, tmp_path=tmp_path)
    assert res.exit_code == 1 and report is None
    assert words in res.output and "no request answered" in res.output, res.output
    assert len([line for line in res.output.splitlines() if line.startswith("error")]) == 1


def test_a_refused_connection_fails_before_any_work(tmp_path):
    with FakeServer("nospec") as target:
        res, report = _verify(f"http://127.0.0.1:{free_port()}", target.url, tmp_path=tmp_path)
    assert res.exit_code == 1 and report is None and "connection refused" in res.output, res.output


def test_a_server_that_does_not_speculate_is_named(tmp_path):
    with FakeServer("nospec") as served, FakeServer("nospec") as target:
        res, report = _verify(served.url, target.url, tmp_path=tmp_path)
    assert res.exit_code == 1, res.output
    d = report["drafters"][0]
    assert [f["code"] for f in d["findings"]] == ["E-ENDPOINT-NO-SPEC"]
    assert "--speculative-config" in d["findings"][0]["hint"] and report["endpoint"]["counters"]["used"] == "none"


def test_text_only_responses_are_compared_as_text(tmp_path):
    with FakeServer("noids") as served, FakeServer("noids") as target:
        res, report = _verify(served.url, target.url, tmp_path=tmp_path)
    assert res.exit_code == 0, res.output
    assert report["endpoint"]["outputs_compared_as"] == "text" and report["drafters"][0]["lossless"]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--drafter", "x"], "--drafter does not apply"),
        (["--api", "completions"], "needs the target's tokenizer"),
        ([], "needs a baseline"),
    ],
)
def test_options_that_do_not_fit_an_endpoint(args, words):
    res = CliRunner().invoke(main, ["verify", "--endpoint", "http://127.0.0.1:1", *args])
    assert res.exit_code == 2 and words in res.output, res.output


@pytest.mark.real
def test_served_settings_reach_the_endpoint_and_give_a_sampled_acceptance(tmp_path):
    """--temperature with --endpoint: the greedy run proves losslessness, then every prompt is sampled
    --samples times at the served settings (no per-request seed, so repeats differ), giving the sampled AL
    beside the greedy one."""
    settings = ["--temperature", "0.7", "--top-p", "0.9", "--top-k", "20", "--samples", "2"]
    with FakeServer() as served, FakeServer("nospec") as target:
        args = ["--target", "smollm2", "--api", "completions", *settings]
        args += ["--chat-template-kwargs", '{"enable_thinking": false}']
        res, report = _verify(served.url, target.url, *args, tmp_path=tmp_path)
    assert res.exit_code == 0, res.output
    validate_json(report, "verify-report")
    greedy = [b for b in served.bodies if b["temperature"] == 0]
    hot = [b for b in served.bodies if b["temperature"] > 0]
    assert len(greedy) == 6 and len(hot) == 12
    assert all((b["top_p"], b["top_k"], "seed" in b) == (0.9, 20, False) for b in hot)
    assert all("top_p" not in b and "top_k" not in b for b in greedy)
    s = report["drafters"][0]["sampled_acceptance"]
    assert s["num_requests"] == 12 and s["greedy_acceptance_length"] == pytest.approx(1 + ACCEPTED / STEPS)
    assert s["acceptance"]["overall"]["acceptance_length"] == pytest.approx(1 + ACCEPTED / STEPS)
    ci = s["acceptance_length_ci"]
    assert ci["low"] <= s["acceptance"]["overall"]["acceptance_length"] <= ci["high"]
    assert report["settings"]["chat_template_kwargs"] == {"enable_thinking": False}


@pytest.mark.real
def test_long_context_prompts_reach_the_endpoint_as_token_ids(tmp_path):
    """--context with --api completions: both servers receive every prompt padded to the length, as the
    target's token ids; the report records the lengths sent. The chat API (text) cannot be padded exactly."""
    with FakeServer() as served, FakeServer("nospec") as target:
        args = ["--target", "smollm2", "--api", "completions", "--context", "1500"]
        res, report = _verify(served.url, target.url, *args, tmp_path=tmp_path)
    assert res.exit_code == 0, res.output
    validate_json(report, "verify-report")
    sent = [len(b["prompt"]) for b in served.bodies]
    assert len(sent) == 6 and all(1499 <= n <= 1500 for n in sent)
    assert sorted(len(b["prompt"]) for b in target.bodies) == sorted(sent)
    c = report["settings"]["context"]
    assert c["context_tokens"] == 1500 and sorted(c["prompt_tokens"]) == sorted(sent)
    assert "every prompt padded to 1500 tokens" in res.output
    res = CliRunner().invoke(
        main, ["verify", "--endpoint", served.url, "--baseline-endpoint", target.url, "--context", "1k"]
    )
    assert res.exit_code == 2 and "--context pads token-id prompts" in res.output, res.output


def test_servers_given_as_host_port_are_http_and_other_schemes_are_refused(tmp_path):
    """As watch: ``host:port`` is http://host:port (as curl reads it), for --endpoint and --baseline-endpoint;
    another scheme is a usage error whose hint is the option as it should read."""
    with FakeServer("ok") as served, FakeServer("nospec") as target:
        bare = served.url.removeprefix("http://")
        res, report = _verify(bare + "/v1", target.url.removeprefix("http://"), tmp_path=tmp_path)
        bad = CliRunner().invoke(main, ["verify", "--endpoint", f"ftp://{bare}", "--baseline-endpoint", target.url])
    assert res.exit_code == 0, res.output
    assert report["endpoint"]["url"].startswith(served.url) and report["drafters"][0]["lossless"]
    assert bad.exit_code == 2 and f"hint: eaglehub verify --endpoint http://{bare}\n" in bad.output, bad.output
