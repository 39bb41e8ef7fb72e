"""eaglehub watch without a vLLM: the interval logic on synthetic counter sequences (hypothesis: no reading
ever has a negative count or rate), the AL-drop judge, the reference choice from real verify reports
(written by verify on the scripted engine), the poll loop on scripted /metrics answers, and the CLI against
a real HTTP socket serving /metrics texts (helpers/metrics_text.py). The real-server tests are in
test_watch_vllm.py."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest
from click.testing import CliRunner
from helpers.metrics_text import MetricsServer, vllm_text
from helpers.scripted import BASE, GOOD, ScriptedEngine, write_prompts
from hypothesis import given, settings
from hypothesis import strategies as st

from eaglehub.cli import main
from eaglehub.endpoint.metrics import ServerSpecMetrics
from eaglehub.engines.base import SpecCounters
from eaglehub.errors import EaglehubError, EndpointError
from eaglehub.findings import rule_catalogue
from eaglehub.io.schemas import load_schema, validate_json
from eaglehub.verify import run as verify
from eaglehub.verify.report import write_report
from eaglehub.watch.intervals import Intervals, Judge, Poll
from eaglehub.watch.reference import choose_reference
from eaglehub.watch.run import WatchOptions, run_watch

KEY = "sk-test-NEVER-SHOWN"


def m(c: SpecCounters, start: float | None = 1.0) -> ServerSpecMetrics:
    return ServerSpecMetrics(c, {"model_name": ("/t",)}, "vllm", process_start_time=start)


def counters(drafts: int, accepted_per_pos: tuple[int, ...], k: int = 3) -> SpecCounters:
    return SpecCounters(drafts, k * drafts, sum(accepted_per_pos), accepted_per_pos)


# --- intervals -----------------------------------------------------------------------------------


def test_delta_al_and_rates_per_interval():
    iv = Intervals()
    iv.start(Poll(100.0, m(counters(10, (6, 3, 1)))))
    r = iv.add(Poll(102.0, m(counters(110, (66, 33, 11)))))
    validate_json(r, "watch-interval")
    assert r["status"] == "ok" and r["interval_seconds"] == 2.0 and r["num_drafts"] == 100
    assert r["delta"] == {
        "num_drafts": 100,
        "num_draft_tokens": 300,
        "num_accepted_tokens": 100,
        "accepted_per_pos": [60, 30, 10],
    }
    assert r["acceptance_length"] == pytest.approx(2.0)
    assert r["acceptance_rate_per_position"] == pytest.approx([0.6, 0.3, 0.1])
    assert r["cumulative"]["num_drafts"] == 110
    idle = iv.add(Poll(104.0, m(counters(110, (66, 33, 11)))))
    assert idle["status"] == "ok" and idle["num_drafts"] == 0 and idle["acceptance_length"] is None
    assert idle["acceptance_rate_per_position"] == [None, None, None]


def test_restart_has_no_rate_and_the_next_reading_counts_from_the_new_counters():
    iv = Intervals()
    iv.start(Poll(0.0, m(counters(500, (300, 150, 50)))))
    r = iv.add(Poll(2.0, m(counters(20, (10, 4, 1)), start=50.0)))
    assert r["status"] == "restart" and r["delta"] is None and r["acceptance_length"] is None
    assert r["cumulative"]["num_drafts"] == 20
    nxt = iv.add(Poll(4.0, m(counters(120, (70, 34, 11)), start=50.0)))
    assert (
        nxt["status"] == "ok" and nxt["delta"]["num_drafts"] == 100 and nxt["acceptance_length"] == pytest.approx(2.0)
    )
    assert iv.total.num_drafts == 100


def test_restart_seen_by_the_start_time_when_the_counters_overtook_the_old_ones():
    iv = Intervals()
    iv.start(Poll(0.0, m(counters(10, (5, 2, 0)), start=1.0)))
    r = iv.add(Poll(60.0, m(counters(400, (200, 100, 50)), start=30.0)))
    assert r["status"] == "restart"


def test_failed_polls_keep_the_base_and_the_next_reading_covers_the_gap():
    iv = Intervals()
    iv.start(Poll(0.0, m(counters(0, (0, 0, 0)))))
    down = iv.add(Poll(2.0, error="GET http://h/metrics failed: ConnectError"))
    empty = iv.add(Poll(4.0, None))
    back = iv.add(Poll(6.0, m(counters(30, (15, 6, 3)))))
    assert (down["status"], empty["status"]) == ("unreachable", "no_spec_metrics")
    assert down["interval_seconds"] == 2.0 and "ConnectError" in down["error"]
    assert back["status"] == "ok" and back["interval_seconds"] == 6.0 and back["num_drafts"] == 30
    for r in (down, empty, back):
        validate_json(r, "watch-interval")


def test_sglang_gauge_is_shown_not_judged():
    iv = Intervals(Judge(2.0, min_drafts=1))
    g = ServerSpecMetrics(
        SpecCounters(), {}, "sglang", acceptance_length_gauge=1.2, acceptance_rate_gauge=0.1, gauges_only=True
    )  # an SGLang older than 0.5.23: gauges, no counters
    iv.start(Poll(0.0, g))
    r = iv.add(Poll(1.0, g))
    validate_json(r, "watch-interval")
    assert r["status"] == "gauge" and r["acceptance_length"] == 1.2 and not r["judged"] and r["streak"] == 0


# Server lifetimes: per lifetime a list of (new drafts, accepted per position) increments; polls may fail.
increment = st.tuples(st.integers(0, 60), st.integers(0, 60), st.integers(0, 60), st.integers(0, 60)).map(
    lambda t: (t[0], tuple(sorted((min(x, t[0]) for x in t[1:]), reverse=True)))
)
lifetime = st.lists(st.tuples(increment, st.booleans()), min_size=1, max_size=8)


@settings(max_examples=150, deadline=None)
@given(st.lists(lifetime, min_size=1, max_size=4))
def test_no_reading_ever_has_a_negative_count_or_rate(lifetimes):
    iv = Intervals(Judge(1.5, min_drafts=1, patience=2))
    t = 0.0
    expected_total = SpecCounters()
    restarts = 0
    started = False
    for n, life in enumerate(lifetimes):
        c = SpecCounters(0, 0, 0, (0, 0, 0))
        seen: list[SpecCounters] = []
        for (drafts, pos), fails in life:
            t += 1.0
            c = c + counters(drafts, pos)
            if fails and started:
                r = iv.add(Poll(t, error="refused"))
            else:
                poll = Poll(t, m(c, start=float(n)))
                if not started:
                    iv.start(poll)
                    started = True
                    seen.append(c)
                    continue
                r = iv.add(poll)
                restarts += r["status"] == "restart"
                seen.append(c)
            validate_json(r, "watch-interval")
            assert r["num_drafts"] >= 0 and (r["acceptance_length"] is None or r["acceptance_length"] >= 1)
            for x in r["acceptance_rate_per_position"]:
                assert x is None or 0 <= x <= 1
            if r["delta"] is not None:
                assert (
                    min(r["delta"]["num_drafts"], r["delta"]["num_accepted_tokens"], *r["delta"]["accepted_per_pos"])
                    >= 0
                )
        if seen:
            expected_total = expected_total + (seen[-1] - seen[0])
    # every lifetime after the one that gave the base and that was polled once is one restart
    assert restarts == sum(1 for life in lifetimes[1:] if life) - _lifetimes_without_a_good_poll(lifetimes, iv)
    assert iv.total.num_drafts == expected_total.num_drafts
    assert iv.total.num_accepted_tokens == expected_total.num_accepted_tokens


def _lifetimes_without_a_good_poll(lifetimes, iv) -> int:
    # a lifetime after the first whose polls all failed is never seen: no restart is counted for it
    return sum(1 for life in lifetimes[1:] if all(fails for _, fails in life))


# --- the judge -----------------------------------------------------------------------------------


def _reading(status="ok", al=1.5, drafts=200) -> dict:
    return {"status": status, "acceptance_length": al, "num_drafts": drafts}


def test_patience_min_drafts_and_what_ends_a_run_below():
    j = Judge(2.0, tolerance=0.05, patience=3, min_drafts=100)
    assert j.threshold == pytest.approx(1.9)
    seq = [
        _reading(al=1.8),  # below: 1
        _reading(al=1.0, drafts=99),  # too few drafts: not judged, the run goes on
        _reading("unreachable", al=None, drafts=0),  # a failed poll: neither
        _reading(al=1.85),  # below: 2
        _reading(al=1.95),  # within the tolerance: the run ends
        _reading(al=1.7),
        _reading(al=1.7),
        _reading("restart", al=None, drafts=0),  # a new process: the run ends
        _reading(al=1.7),
        _reading(al=1.7),
        _reading(al=1.7),  # 3 in a row: confirmed
        _reading(al=1.7),  # still below, the same episode
    ]
    for r in seq:
        j.judge(r)
    assert [r["judged"] for r in seq] == [True, False, False, True, True, True, True, False, True, True, True, True]
    assert [r["streak"] for r in seq] == [1, 1, 1, 2, 0, 1, 2, 0, 1, 2, 3, 4]
    assert [r["drop_confirmed"] for r in seq].index(True) == 10 and sum(r["drop_confirmed"] for r in seq) == 1
    assert seq[1]["below_reference"] is None and seq[4]["below_reference"] is False
    assert j.episodes == 1


def test_watch_codes_are_registered_in_the_report_schema_in_order():
    codes = [r["code"] for r in rule_catalogue("watch")]
    assert codes == [
        "E-WATCH-AL-DROP",
        "E-WATCH-NO-READING",
        "W-WATCH-NOT-JUDGED",
        "W-WATCH-UNREACHABLE",
        "I-WATCH-RESTART",
        "W-WATCH-SETTINGS-DIFFER",
        "W-WATCH-REFERENCE-MIXED-K",
    ]
    finding = load_schema("watch-report")["properties"]["findings"]["items"]
    assert finding["properties"]["code"]["enum"] == codes


# --- the reference -------------------------------------------------------------------------------


@pytest.fixture
def reports(tmp_path, monkeypatch, make_drafter, make_target):
    """Real verify reports from the scripted engine: `good` (AL 2.1) alone at k 3, `good` + `other` at
    k 3, and `good` at k 2."""
    target = make_target(n_layers=8)
    make_drafter("good")
    make_drafter("other")
    prompts = tmp_path / "p.jsonl"
    write_prompts(prompts)
    monkeypatch.setattr("eaglehub.engines.chat.encode_chat", lambda t, msgs: [[1, 2, 3]] * len(msgs))
    engine = ScriptedEngine({"good": (BASE, GOOD), "other": (BASE, GOOD)})
    out = {}
    for name, drafters, k in (("one", ["good"], 3), ("two", ["good", "other"], 3), ("k2", ["good"], 2)):
        opts = verify.VerifyOptions(
            target=str(target),
            drafters=[str(tmp_path / d) for d in drafters],
            k=k,
            max_tokens=4,
            prompts_file=str(prompts),
        )
        out[name] = tmp_path / f"{name}.json"
        write_report(verify.run_verify(opts, engine=engine), out[name])
    return out


def test_reference_choice(reports):
    one = choose_reference(reports["one"], server_k=3)
    assert one.acceptance_length == pytest.approx(2.1) and one.drafter.endswith("good") and "only" in one.chosen_by
    two = choose_reference(reports["two"], server_k=3)
    assert two.drafter.endswith("good") and "first of 2" in two.chosen_by and "--reference-drafter" in two.chosen_by
    named = choose_reference(reports["two"], server_k=3, drafter="other")
    assert named.drafter.endswith("other") and named.chosen_by.startswith("--reference-drafter")
    assert choose_reference(reports["one"], server_k=None).k == 3  # SGLang: k unknown


@pytest.mark.parametrize(
    ("which", "k", "drafter", "needle"),
    [("k2", 3, None, "no drafter at k=3"), ("one", 3, "nope", "no such drafter"), ("k2", 3, "good", "k=2")],
)
def test_unusable_reference_is_a_usage_error(reports, which, k, drafter, needle):
    with pytest.raises(EaglehubError, match=needle) as err:
        choose_reference(reports[which], server_k=k, drafter=drafter)
    assert err.value.exit_code == 2


# --- the poll loop -------------------------------------------------------------------------------


class FakeTime:
    def __init__(self):
        self.t = 1_780_000_000.0

    def clock(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def scripted_transport(answers: list, seen: list):
    """Answers /metrics in order: an exposition text (200), an int (that status), or an exception class to raise;
    the settings pages (eaglehub/endpoint/settings.py, read once at the start) answer 404, as vLLM's without
    VLLM_SERVER_DEV_MODE=1."""

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        if req.url.path != "/metrics":
            return httpx.Response(404, json={"detail": "Not Found"})
        a = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(a, type):
            raise a("scripted", request=req)
        if isinstance(a, int):
            return httpx.Response(a, text="error")
        return httpx.Response(200, text=a)

    return httpx.MockTransport(handler)


def text(drafts: int, pos: tuple[int, ...], start: float = 1.0) -> str:
    return vllm_text({"0": counters(drafts, pos)}, start_time=start)


def test_loop_drop_confirmed_stops_with_stop_on_drop_and_key_only_in_the_header(reports):
    fake, seen = FakeTime(), []
    # reference AL 2.1, threshold 1.995: every interval below adds 200 drafts at AL 1.5
    answers = [text(200 * i, (100 * i, 0, 0)) for i in range(10)]
    opts = WatchOptions(
        "http://127.0.0.1:9/v1",
        interval=2,
        duration=60,
        api_key=KEY,
        reference_report=str(reports["one"]),
        stop_on_drop=True,
    )
    got = []
    report = run_watch(opts, None, got.append, scripted_transport(answers, seen), fake.clock, fake.sleep)
    validate_json(report, "watch-report")
    assert report["stopped"] == "drop" and not report["passed"] and report["num_intervals"] == 3
    assert [f["code"] for f in report["findings"]] == ["E-WATCH-AL-DROP"]
    assert "1.500, 1.500, 1.500" in report["findings"][0]["message"]
    assert [r["streak"] for r in got] == [1, 2, 3] and got[-1]["drop_confirmed"]
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in seen)
    assert KEY not in json.dumps(report) and report["endpoint"] == "http://127.0.0.1:9/v1"
    assert report["reference"]["threshold"] == pytest.approx(2.1 * 0.95)


def test_loop_keeps_readings_through_errors_and_a_restart(reports):
    fake, seen = FakeTime(), []
    answers = [
        text(0, (0, 0, 0)),
        text(100, (60, 30, 20)),  # AL 2.1: ok, not below (and not judged: 100 drafts)
        500,
        httpx.ReadTimeout,
        text(5, (3, 1, 0), start=99.0),  # a new process
        text(205, (123, 61, 40), start=99.0),
    ]
    opts = WatchOptions("http://127.0.0.1:9", interval=1, duration=100, count=5, reference_report=str(reports["one"]))
    report = run_watch(opts, transport=scripted_transport(answers, seen), clock=fake.clock, sleep=fake.sleep)
    validate_json(report, "watch-report")
    assert [r["status"] for r in report["intervals"]] == ["ok", "unreachable", "unreachable", "restart", "ok"]
    assert "answered 500" in report["intervals"][1]["error"] and "timed out" in report["intervals"][2]["error"]
    assert report["stopped"] == "count" and report["passed"]
    assert sorted(f["code"] for f in report["findings"]) == ["I-WATCH-RESTART", "W-WATCH-UNREACHABLE"]
    assert report["overall"]["num_drafts"] == 300 and report["overall"]["acceptance_length"] == pytest.approx(2.1)
    assert report["status_counts"] == {"ok": 2, "restart": 1, "unreachable": 2, "no_spec_metrics": 0, "gauge": 0}


def test_loop_duration_bounds_the_readings_and_paces_the_polls():
    fake, seen = FakeTime(), []
    t0 = fake.t
    report = run_watch(
        WatchOptions("http://h:1", interval=2.5, duration=10),
        transport=scripted_transport([text(0, (0, 0, 0))], seen),
        clock=fake.clock,
        sleep=fake.sleep,
    )
    assert report["num_intervals"] == 4 and report["stopped"] == "duration" and report["reference"] is None
    assert fake.t - t0 == pytest.approx(10.0)


@pytest.mark.parametrize(
    ("answer", "needle"),
    [
        (httpx.ConnectError, "not reachable"),
        (500, "answered 500"),
        ("# TYPE x gauge\nx 1\n", "no speculative-decoding metrics"),
    ],
)
def test_first_poll_failure_is_an_endpoint_error(answer, needle):
    with pytest.raises(EndpointError, match=needle):
        run_watch(WatchOptions("http://h:1"), transport=scripted_transport([answer], []), clock=FakeTime().clock)


# --- the CLI against a real socket ---------------------------------------------------------------


class Script:
    """Bodies served in order (the last one repeats)."""

    def __init__(self, *answers):
        self.answers = list(answers)

    def __call__(self):
        a = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return (a, "boom") if isinstance(a, int) else (200, a)


def test_cli_json_lines_and_summary(tmp_path, reports):
    script = Script(*[text(200 * i, (100 * i, 20 * i, 0)) for i in range(10)])
    with MetricsServer(script) as srv:
        res = CliRunner(env={"OPENAI_API_KEY": KEY}).invoke(
            main,
            ["watch", "--endpoint", srv.base_url, "--interval", "0.2", "--count", "4", "--json"]
            + ["--reference-report", str(reports["one"]), "--patience", "2", "--report", str(tmp_path / "w.json")],
        )
    lines = [json.loads(x) for x in res.stdout.splitlines()]
    assert res.exit_code == 1, res.output
    for r in lines[:-1]:
        validate_json(r, "watch-interval")
        assert r["acceptance_length"] == pytest.approx(1.6)
    validate_json(lines[-1], "watch-report")
    assert len(lines) == 5 and lines[-1]["kind"] == "summary" and not lines[-1]["passed"]
    assert json.loads((tmp_path / "w.json").read_text()) == lines[-1]
    assert srv.headers[0]["Authorization"] == f"Bearer {KEY}"
    assert KEY not in res.output and KEY not in (tmp_path / "w.json").read_text()


def test_cli_table_notes_a_mid_watch_500(tmp_path):
    script = Script(text(0, (0, 0, 0)), text(40, (20, 8, 0)), 500, text(80, (40, 16, 0)))
    with MetricsServer(script) as srv:
        res = CliRunner().invoke(
            main, ["watch", "--endpoint", srv.base_url + "/v1", "--interval", "0.2", "--count", "3"]
        )
    assert res.exit_code == 0, res.output
    assert "unreachable" in res.output and "metrics answered 500" in res.output
    assert "W-WATCH-UNREACHABLE" in res.output and "1.700" in res.output


@pytest.mark.parametrize(
    ("script", "needle"),
    [(Script(500), "answered 500"), (Script("# TYPE x gauge\nx 1\n"), "no speculative-decoding metrics")],
)
def test_cli_start_errors_are_one_line_with_a_hint(script, needle):
    with MetricsServer(script) as srv:
        res = CliRunner().invoke(main, ["watch", "--endpoint", srv.base_url, "--api-key", KEY, "--count", "1"])
    assert res.exit_code == 1 and needle in res.output and "hint:" in res.output
    assert "Traceback" not in res.output and KEY not in res.output


def test_cli_unreachable_server():
    from helpers.servers import free_port

    res = CliRunner().invoke(main, ["watch", "--endpoint", f"http://127.0.0.1:{free_port()}", "--count", "1"])
    assert res.exit_code == 1 and "not reachable" in res.output and "hint:" in res.output


# --- issue 37: wall-clock duration, verdicts, hints, scheme, 80 columns -------------------------------------


def timing_out_transport(fake: FakeTime, seen: list, first: str):
    """The first answer is ``first``; every later poll waits out the timeout it was given (on the fake clock)
    and times out, as a hung server does."""

    def handler(req: httpx.Request) -> httpx.Response:
        if req.url.path != "/metrics":  # the settings pages (read once at the start): none, as vLLM's by default
            return httpx.Response(404, json={"detail": "Not Found"})
        seen.append(req.extensions["timeout"]["read"])
        if len(seen) == 1:
            return httpx.Response(200, text=first)
        fake.t += req.extensions["timeout"]["read"]
        raise httpx.ReadTimeout("scripted", request=req)

    return httpx.MockTransport(handler)


def test_duration_bounds_wall_clock_time_on_a_hung_server():
    """--interval 2 --duration 55 on a server that hangs after the baseline: each poll waits its 10 s, so the
    schedule moves to the next slot ahead, and the poll at 50 s is given only the 5 s left. Each failed poll's
    interval spans until it failed (12 s: 2 s of schedule + 10 s of wait)."""
    fake, seen = FakeTime(), []
    t0 = fake.t
    report = run_watch(
        WatchOptions("http://h:1", interval=2, duration=55),
        transport=timing_out_transport(fake, seen, text(0, (0, 0, 0))),
        clock=fake.clock,
        sleep=fake.sleep,
    )
    validate_json(report, "watch-report")
    assert fake.t - t0 == pytest.approx(55.0)
    assert report["stopped"] == "duration" and report["num_intervals"] == 5
    assert [r["interval_seconds"] for r in report["intervals"]] == [12.0, 12.0, 12.0, 12.0, 7.0]
    assert seen[1:] == [10.0, 10.0, 10.0, 10.0, 5.0]
    assert report["intervals"][-1]["error"] == "GET /metrics: no answer in the 5.0 s left of --duration"
    assert report["verdict"] == "no_reading" and not report["passed"]


class Hangs:
    """The baseline, then every poll hangs (until the test ends, at most 30 s)."""

    def __init__(self, first: str):
        self.first, self.calls, self.release = first, 0, threading.Event()

    def __call__(self):
        self.calls += 1
        if self.calls > 1:
            self.release.wait(30)
            return 500, "late"
        return 200, self.first


def test_cli_duration_ends_on_time_with_a_hung_server_and_fails_for_no_reading(tmp_path):
    hangs = Hangs(text(0, (0, 0, 0)))
    with MetricsServer(hangs) as srv:
        t0 = time.monotonic()
        res = CliRunner().invoke(
            main, ["watch", "--endpoint", srv.base_url, "--interval", "1", "--duration", "3"]
            + ["--report", str(tmp_path / "w.json")],
        )  # fmt: skip
        took = time.monotonic() - t0
        hangs.release.set()
    assert took < 6, (took, res.output)
    report = json.loads((tmp_path / "w.json").read_text())
    assert report["stopped"] == "duration" and report["verdict"] == "no_reading"
    assert res.exit_code == 1, res.output
    last = res.output.strip().splitlines()[-1]
    assert last.startswith("FAILED: no reading in") and "server unreachable" in last, res.output


def test_no_reading_is_a_failure_with_its_finding_and_an_exact_command():
    script = Script(text(0, (0, 0, 0)), 500)
    with MetricsServer(script) as srv:
        res = CliRunner().invoke(main, ["watch", "--endpoint", srv.base_url, "--interval", "0.2", "--count", "3"])
    assert res.exit_code == 1, res.output
    assert "E-WATCH-NO-READING" in res.output and f"`curl -m 10 {srv.base_url}/metrics`" in res.output
    assert res.output.strip().splitlines()[-1] == "FAILED: no reading in 3 poll(s) (server unreachable)"
    assert "OK" not in res.output


def test_timeouts_name_no_option_watch_does_not_have():
    """The client's timeout hint is verify's (--timeout, --concurrency); watch has neither."""
    fake = FakeTime()
    with pytest.raises(EndpointError) as err:
        run_watch(WatchOptions("http://h:1"), transport=timing_out_transport(fake, [None], ""), clock=fake.clock)
    assert "--timeout" not in str(err.value) and "--concurrency" not in str(err.value)
    assert err.value.hint == "check that the server answers within 10 s: `curl -m 10 http://h:1/metrics`"
    report = run_watch(
        WatchOptions("http://h:1", interval=1, count=2),
        transport=timing_out_transport(fake, [], text(0, (0, 0, 0))),
        clock=fake.clock,
        sleep=fake.sleep,
    )
    for r in report["intervals"]:
        assert r["error"] == "GET /metrics timed out after 10 s", r["error"]
    assert "--timeout" not in json.dumps(report) and "--concurrency" not in json.dumps(report)


def test_nothing_judged_is_inconclusive_never_ok(reports):
    script = Script(*[text(20 * i, (10 * i, 4 * i, 0)) for i in range(10)])
    with MetricsServer(script) as srv:
        res = CliRunner().invoke(
            main, ["watch", "--endpoint", srv.base_url, "--interval", "0.2", "--count", "3"]
            + ["--reference-report", str(reports["one"])],
        )  # fmt: skip
    assert res.exit_code == 1, res.output
    lines = res.output.strip().splitlines()
    assert lines[-1] == "INCONCLUSIVE: no interval reached 200 drafts (sample too small to judge)"
    assert "OK" not in res.output and "W-WATCH-NOT-JUDGED" in res.output
    # the hint is the command that would judge: intervals of 200 drafts at the 20 drafts per 0.2 s seen, ×1.2
    assert f"eaglehub watch --endpoint {srv.base_url} --reference-report {reports['one']} --interval 3" in res.output


def test_an_endpoint_without_a_scheme_is_http_and_another_scheme_is_refused():
    script = Script(*[text(20 * i, (10 * i, 4 * i, 0)) for i in range(10)])
    with MetricsServer(script) as srv:
        hostport = srv.base_url.removeprefix("http://")
        res = CliRunner().invoke(main, ["watch", "--endpoint", hostport, "--interval", "0.2", "--count", "2"])
        bad = CliRunner().invoke(main, ["watch", "--endpoint", f"ftp://{hostport}", "--count", "2"])
    assert res.exit_code == 0, res.output
    assert f"watching {srv.base_url} " in res.output and "1.700" in res.output
    assert bad.exit_code == 2 and f"eaglehub watch --endpoint http://{hostport}" in bad.output


def test_the_url_is_also_the_one_argument():
    script = Script(*[text(20 * i, (10 * i, 4 * i, 0)) for i in range(10)])
    with MetricsServer(script) as srv:
        hostport = srv.base_url.removeprefix("http://")
        res = CliRunner().invoke(main, ["watch", hostport, "--interval", "0.2", "--count", "2"])
        bad = CliRunner().invoke(main, ["watch", f"ftp://{hostport}", "--count", "2"])
    assert res.exit_code == 0, res.output
    assert f"watching {srv.base_url} " in res.output and "1.700" in res.output
    assert bad.exit_code == 2 and f"eaglehub watch --endpoint http://{hostport}" in bad.output
    none = CliRunner().invoke(main, ["watch", "--count", "1"])
    assert none.exit_code == 2 and "no server given" in none.output and "eaglehub watch http://host:port" in none.output
    two = CliRunner().invoke(main, ["watch", "http://a:1", "--endpoint", "http://b:2"])
    assert two.exit_code == 2 and "two servers given" in two.output


def test_a_duration_shorter_than_the_interval_is_a_usage_error():
    res = CliRunner().invoke(main, ["watch", "--endpoint", "http://h:1", "--interval", "5", "--duration", "2"])
    assert res.exit_code == 2 and "eaglehub watch --endpoint http://h:1 --interval 5 --duration 50" in res.output


@pytest.mark.parametrize("k", [3, 7])
def test_table_says_what_bounds_the_run_and_fits_80_columns(reports, k):
    pos = (60, 40, 20, 10, 5, 2, 1)[:k]
    script = Script(
        *[vllm_text({"0": counters(300 * i, tuple(p * 3 * i for p in pos), k=k)}, start_time=1.0) for i in range(3)],
        500,
    )
    with MetricsServer(script) as srv:
        res = CliRunner(env={"COLUMNS": "80"}).invoke(
            main, ["watch", "--endpoint", srv.base_url, "--interval", "0.2", "--count", "3"]
            + ([] if k == 7 else ["--reference-report", str(reports["one"])]),
        )  # fmt: skip
    out = res.output
    assert "every 0.2 s until 3 interval(s) or 60 s, whichever comes first" in " ".join(out.split()), out
    assert "for 60 s" not in out
    for line in out.splitlines():
        if "curl -m" not in line:
            assert len(line) <= 80, (len(line), line)
    rows = [ln for ln in out.splitlines() if ln[:3].strip().isdigit()]
    assert len(rows) == 3 and rows[2].split()[3] == "unreachable"
    assert "     GET /metrics answered 500" in out
    if k == 7:
        assert "(of k=7; every position in --json and --report)" in " ".join(out.split())
