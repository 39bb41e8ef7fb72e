"""The settings a server runs (eaglehub/endpoint/settings.py) and what they let ``verify --endpoint`` claim
(eaglehub/verify/served.py): a k schedule, a synthetic or lossy rejection method, draft lm_head quantization.

The fake server answers as vLLM 0.32 does: ``/server_info?config_format=json`` with the ``speculative_config``
vLLM 0.32.0 returned for ``--speculative-config`` with a schedule (its non-object fields, as measured on this
machine, the drafter path made relative), per-request ``metrics.speculative_decoding`` with the
``per_step_drafted`` / ``per_step_accepted`` arrays of ``--per-request-spec-decode-metrics detailed``, and
``/metrics`` counters that add up what it answered. The real servers are in test_served_settings_vllm.py.
"""

from __future__ import annotations

import json
import threading

import pytest
from click.testing import CliRunner
from helpers.fake_openai import FakeServer, output_of
from helpers.local_http import LocalHTTPServer, QuietHandler
from helpers.metrics_text import vllm_text

from eaglehub.cli import main
from eaglehub.endpoint.settings import (
    ASSUMED,
    SERVER,
    UNKNOWN,
    assumed,
    combine,
    from_server,
    parse_served_config,
    synthetic_al,
)
from eaglehub.endpoint.steps import al_by_k
from eaglehub.errors import UsageError
from eaglehub.io.schemas import validate_json

SCHEDULE = [[1, 1, 3], [2, 256, 1]]
VLLM_032_SPEC = {  # vLLM 0.32.0's /server_info?config_format=json speculative_config (non-object fields)
    "enforce_eager": None,
    "num_speculative_tokens": 3,
    "model": "fixtures/smollm2-eagle3",
    "method": "eagle3",
    "draft_tensor_parallel_size": 1,
    "parallel_drafting": False,
    "num_speculative_tokens_per_batch_size": SCHEDULE,
    "rejection_sample_method": "standard",
    "synthetic_acceptance_rates": None,
    "synthetic_acceptance_length": None,
    "draft_sample_method": "greedy",
}
# each request's verify steps: (drafted, accepted); k=3 steps and k=1 steps, as a schedule drafts them
STEPS = [(3, 2), (3, 0), (1, 1), (1, 1), (1, 0), (3, 3), (1, 1)]


class SpecServer(LocalHTTPServer):
    """A vLLM-shaped server (module doc): ``spec`` is its speculative_config (``None``: no /server_info, as
    vLLM without VLLM_SERVER_DEV_MODE=1); ``steps``: each request's (drafted, accepted) steps; ``detailed``:
    the per-step arrays in the responses; ``diverge``: outputs differ from the target's (a lossy method)."""

    def __init__(self, spec: dict | None, steps=STEPS, detailed: bool = True, diverge: bool = False, k: int = 3):
        self.spec, self.steps, self.detailed, self.diverge, self.k = spec, steps, detailed, diverge, k
        self.lock = threading.Lock()
        self.totals = [0, 0, 0, [0] * k]
        super().__init__(self._handler())

    def completion(self, body: dict) -> dict:
        out = output_of(body["prompt"] if "prompt" in body else body.get("messages"))
        if self.diverge:
            out = [*out[:3], (out[3] + 1) % 1000, *out[4:]]
        hist = [0] * (self.k + 1)
        for _, a in self.steps:
            hist[a] += 1
        drafted, accepted = sum(d for d, _ in self.steps), sum(a for _, a in self.steps)
        with self.lock:
            t = self.totals
            t[0] += len(self.steps)
            t[1] += drafted
            t[2] += accepted
            t[3] = [p + sum(1 for _, a in self.steps if a > i) for i, p in enumerate(t[3])]
        spec = {
            "mean_acceptance_length": 1 + accepted / len(self.steps),
            "draft_acceptance_rate": accepted / drafted,
            "acceptance_histogram": hist,
            "num_spec_steps": len(self.steps),
            "num_accepted_draft_tokens": accepted,
            "num_draft_tokens": drafted,
            "num_spec_tokens": self.k,
        }
        if self.detailed:
            spec["per_step_accepted"] = [a for _, a in self.steps]
            spec["per_step_drafted"] = [d for d, _ in self.steps]
        choice = {"index": 0, "finish_reason": "length", "text": " ".join(map(str, out)), "token_ids": out}
        return {"id": "x", "object": "text_completion", "choices": [choice], "metrics": {"speculative_decoding": spec}}

    def _handler(self):
        server = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                if self.path == "/version":
                    self.send(200, {"version": "0.32.0"})
                elif self.path == "/v1/models":
                    self.send(200, {"object": "list", "data": [{"id": "t", "root": "/m/t", "owned_by": "vllm"}]})
                elif self.path == "/metrics":
                    d, t, a, pos = server.totals
                    self.send(200, vllm_text({"0": (d, t, a, list(pos))}), "text/plain; version=0.0.4")
                elif self.path == "/server_info?config_format=json" and server.spec is not None:
                    self.send(200, {"vllm_config": {"speculative_config": server.spec}, "vllm_env": {}})
                else:
                    self.send(404, {"detail": "Not Found"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                self.send(200, server.completion(body))

        return Handler


def _verify(served: str, baseline: str, tmp_path, *extra: str):
    report = tmp_path / "r.json"
    args = ["verify", "--endpoint", served, "--baseline-endpoint", baseline, "--target", "smollm2", "--limit", "1"]
    res = CliRunner().invoke(
        main, [*args, "--max-tokens", "8", "--report", str(report), *extra], env={"COLUMNS": "200"}
    )
    assert "Traceback" not in res.output, res.output
    data = json.loads(report.read_text()) if report.exists() else None
    if data is not None:
        validate_json(data, "verify-report")
    return res, data


def _codes(report: dict) -> list[str]:
    return [f["code"] for f in report["drafters"][0]["findings"]]


def test_a_schedule_read_from_the_server_gives_al_per_k_and_no_fixed_k_claim(tmp_path):
    with SpecServer(VLLM_032_SPEC) as served, FakeServer("nospec") as target:
        res, report = _verify(served.base_url, target.url, tmp_path, "--api", "chat")
    assert res.exit_code == 0, res.output
    d, s = report["drafters"][0], report["endpoint"]["served"]
    st = s["settings"]
    assert st["k_schedule"] == {
        "value": SCHEDULE,
        "source": SERVER,
        "where": "GET /server_info vllm_config.speculative_config.num_speculative_tokens_per_batch_size",
    }
    assert st["rejection_method"]["value"] == "standard" and st["k"]["value"] == 3
    assert st["drafter"]["value"] == "fixtures/smollm2-eagle3" and st["version"]["value"] == "0.32.0"
    assert s["claims"]["acceptance_length"] == "mixed_k" and s["claims"]["fixed_k"] is False
    assert s["claims"]["lossless"] == "judged" and d["lossless"] is True
    # per k, from the per-step counts: k=3 steps accept 2, 0, 3; k=1 steps 1, 1, 0, 1 (each of 6 prompts)
    by_k = {r["k"]: r for r in s["acceptance_by_k"]}
    assert by_k[3]["num_drafts"] == 6 * 3 and by_k[3]["acceptance_length"] == pytest.approx(1 + 5 / 3)
    assert by_k[1]["num_drafts"] == 6 * 4 and by_k[1]["acceptance_length"] == pytest.approx(1 + 3 / 4)
    assert by_k[3]["acceptance_rate_per_position"] == pytest.approx([2 / 3, 2 / 3, 1 / 3])
    warn = next(f for f in d["findings"] if f["code"] == "W-ENDPOINT-K-SCHEDULE")
    assert "mix of ks" in warn["message"] and "k=3: 18 steps, AL 2.667" in warn["message"]
    assert "k=1: 24 steps, AL 1.750" in warn["message"] and "sized by the largest k (3)" in warn["message"]
    assert "over a mix of ks: not the AL at one k" in res.output and "AL at k=3" in res.output
    assert "(k ≤ 3, schedule [[1, 1, 3], [2, 256, 1]])" in res.output  # the heading, not "k = 3"
    # the per-step counts gave the AL per k: the hint does not ask to serve for them
    assert "per-request-spec-decode-metrics" not in warn["hint"] and "acceptance_by_k" in warn["hint"]
    # the engine is the per-request metrics' (no settings page named it here? it did: /server_info)
    assert st["engine"]["value"] == "vllm"


def test_one_k_at_one_load_is_no_fixed_k_claim_and_the_engine_is_named(tmp_path):
    """No settings page, no --served-config, every step drafted k=3 (as a schedule [[1, 1, 3], ...] does
    with one request in flight): the schedule stays unknown, no fixed-k claim; the engine is the metrics'."""
    steps = [(3, 2), (3, 0), (3, 3)]
    with SpecServer(None, steps=steps) as served, FakeServer("nospec") as target:
        res, report = _verify(served.base_url, target.url, tmp_path, "--api", "chat")
    assert res.exit_code == 0, res.output
    s = report["endpoint"]["served"]
    assert s["settings"]["k_schedule"] == {
        "value": None,
        "source": UNKNOWN,
        "where": "every step drafted k=3 at this load",
    }
    assert s["claims"]["acceptance_length"] == "one_k_this_load" and s["claims"]["fixed_k"] is None
    assert s["settings"]["engine"] == {"value": "vllm", "source": SERVER, "where": "the per-request metrics' shape"}
    quant = s["settings"]["draft_lm_head_quantization"]
    assert quant["source"] == UNKNOWN and s["claims"]["drafter_as_checkpoint"] is None
    out = " ".join(res.output.split())
    assert "engine │ vllm │ the per-request metrics' shape" in out
    assert "draft lm_head quantization │ ? │ unknown" in out and "none (fixed k)" not in out
    assert "k schedule │ ? │ unknown (every step drafted k=3 at this load)" in out
    assert (
        "at k=3 for this load: every step drafted k=3 at this load; whether the server runs a k schedule is unknown"
        in out
    )
    assert "measured, at one k" not in out and "W-ENDPOINT-K-SCHEDULE" not in _codes(report)


def test_a_stated_schedule_with_one_k_drafted_says_one_thing(tmp_path):
    """--served-config gives the schedule, every step drafted k=3: the table and the warning say the same."""
    cfg = json.dumps(
        {"method": "eagle3", "num_speculative_tokens": 3, "num_speculative_tokens_per_batch_size": SCHEDULE}
    )
    with SpecServer(None, steps=[(3, 2), (3, 0), (3, 3)]) as served, FakeServer("nospec") as target:
        res, report = _verify(served.base_url, target.url, tmp_path, "--api", "chat", "--served-config", cfg)
    assert res.exit_code == 0, res.output
    s = report["endpoint"]["served"]
    assert s["claims"]["acceptance_length"] == "one_k_this_load" and s["claims"]["fixed_k"] is False
    said = "at k=3 only: every step drafted k=3 at this load; the schedule drafts other ks at other loads"
    warn = next(f for f in report["drafters"][0]["findings"] if f["code"] == "W-ENDPOINT-K-SCHEDULE")
    assert said in warn["message"] and said in " ".join(res.output.split())
    assert "mix of ks" not in " ".join(res.output.split())
    assert "ASSUMED, --served-config, vLLM's default" in " ".join(res.output.split())
    assert "(--served-config (" not in res.output


def test_drafts_shorter_than_k_show_a_mix_even_where_the_server_says_nothing(tmp_path):
    """No /server_info, summary-level metrics: the mean draft length below k is the only sign."""
    with SpecServer(None, detailed=False) as served, FakeServer("nospec") as target:
        res, report = _verify(served.base_url, target.url, tmp_path, "--api", "chat")
    assert res.exit_code == 0, res.output
    s = report["endpoint"]["served"]
    assert s["settings"]["k_schedule"]["source"] == UNKNOWN and s["settings"]["rejection_method"]["source"] == UNKNOWN
    assert s["claims"]["acceptance_length"] == "mixed_k" and s["acceptance_by_k"] is None
    warn = next(f for f in report["drafters"][0]["findings"] if f["code"] == "W-ENDPOINT-K-SCHEDULE")
    assert "shorter than k=3" in warn["message"] and "1.86 draft tokens per step on average" in warn["message"]
    assert "--per-request-spec-decode-metrics detailed" in warn["message"]
    assert "not said by the server: k schedule, rejection method" in res.output


def test_a_fixed_k_server_claims_a_measured_al(tmp_path):
    fixed = {**VLLM_032_SPEC, "num_speculative_tokens_per_batch_size": None}
    steps = [(3, 2), (3, 0), (3, 3)]
    with SpecServer(fixed, steps=steps) as served, FakeServer("nospec") as target:
        res, report = _verify(served.base_url, target.url, tmp_path, "--api", "chat")
    assert res.exit_code == 0, res.output
    s = report["endpoint"]["served"]
    assert s["settings"]["k_schedule"]["value"] == [] and s["claims"]["acceptance_length"] == "measured"
    assert s["claims"]["fixed_k"] is True and "W-ENDPOINT-K-SCHEDULE" not in _codes(report)


def test_synthetic_rejection_stated_by_served_config_is_no_pass_and_no_measured_al(tmp_path):
    """vLLM without its development page: the user states the speculative config; the outputs differ (a
    synthetic method accepts drafts the target did not choose)."""
    cfg = {"method": "eagle3", "model": "/d/drafter", "num_speculative_tokens": 3}
    synthetic = {**cfg, "rejection_sample_method": "synthetic", "synthetic_acceptance_length": 2.5}
    steps = [(3, 1), (3, 2), (3, 2), (3, 1)]  # AL 2.5, as configured
    with SpecServer(None, steps=steps, diverge=True) as served, FakeServer("nospec") as target:
        res, report = _verify(
            served.base_url, target.url, tmp_path, "--api", "chat", "--served-config", json.dumps(synthetic)
        )
    assert res.exit_code == 1, res.output
    d, s = report["drafters"][0], report["endpoint"]["served"]
    assert d["lossless"] is None and not d["passed"] and not report["passed"]
    assert s["claims"] == {
        "acceptance_length": "configured",
        "lossless": "not_judged",
        "fixed_k": True,
        "drafter_as_checkpoint": True,
        "per_position": "accepted at position i over all verify steps",
    }
    assert s["settings"]["rejection_method"] == {"value": "synthetic", "source": ASSUMED, "where": "--served-config"}
    assert _codes(report) == ["E-ENDPOINT-SYNTHETIC"]  # no E-VERIFY-LOSSLESS: the outputs differ by design
    f = d["findings"][0]
    assert "configured AL 2.5" in f["message"] and "0/6 token-identical" in f["message"]
    assert f["hint"] == (
        "serve it with standard rejection: vllm serve /m/t --speculative-config "
        """'{"method": "eagle3", "model": "/d/drafter", "num_speculative_tokens": 3}' """
        "--per-request-spec-decode-metrics summary; then rerun this command"
    )
    assert "CONFIGURED by the synthetic rejection method" in res.output and "ASSUMED, --served-config" in res.output
    assert "lossless: not judged" in res.output and "FAIL" in res.output


def test_a_lossy_method_read_from_the_server_gets_no_losslessness_verdict(tmp_path):
    """vLLM 0.33's fly, with draft_lm_head_quantization (0.33 fields), read from the server."""
    fly = {**VLLM_032_SPEC, "num_speculative_tokens_per_batch_size": None, "rejection_sample_method": "fly"}
    fly["draft_lm_head_quantization"] = "fp8"
    with SpecServer(fly, steps=[(3, 3), (3, 2)], diverge=True) as served, FakeServer("nospec") as target:
        res, report = _verify(served.base_url, target.url, tmp_path, "--api", "chat")
    assert res.exit_code == 0, res.output  # the AL is measured (under the lossy rule); warnings only
    d = report["drafters"][0]
    assert d["lossless"] is None and d["num_prompts_matched"] == 0
    assert sorted(_codes(report)) == ["W-ENDPOINT-DRAFT-QUANT", "W-ENDPOINT-LOSSY"]
    assert report["endpoint"]["served"]["claims"]["drafter_as_checkpoint"] is False
    assert "lossless: not judged" in res.output and "lossy by design" in res.output


def test_the_server_overrides_an_assumption_it_contradicts(tmp_path):
    given = json.dumps({"num_speculative_tokens": 3, "rejection_sample_method": "standard"})
    synthetic = {**VLLM_032_SPEC, "num_speculative_tokens_per_batch_size": None}
    synthetic.update(rejection_sample_method="synthetic", synthetic_acceptance_rates=[1.0, 0.5, 0.0])
    with SpecServer(synthetic, steps=[(3, 1), (3, 2)]) as served, FakeServer("nospec") as target:
        res, report = _verify(served.base_url, target.url, tmp_path, "--api", "chat", "--served-config", given)
    assert res.exit_code == 1, res.output
    s = report["endpoint"]["served"]["settings"]
    assert s["rejection_method"]["value"] == "synthetic" and s["rejection_method"]["source"] == SERVER
    assert s["synthetic"]["value"] == {"acceptance_rates": [1.0, 0.5, 0.0], "acceptance_length": 2.5}
    assert s["conflicts"] == [
        "--served-config says rejection_method standard, GET /server_info "
        "vllm_config.speculative_config.rejection_sample_method says synthetic: the server's is used"
    ]
    assert "W-ENDPOINT-SETTINGS-CONFLICT" in _codes(report) and "E-ENDPOINT-SYNTHETIC" in _codes(report)
    assert report["drafters"][0]["lossless"] is None  # the outputs matched, but a synthetic method is not judged


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{not json", "is not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"rejection_sample_method": "lossy"}', "none of vLLM's"),
        ('{"synthetic_acceptance_length": 2.0}', "only valid with rejection_sample_method 'synthetic'"),
        ('{"num_speculative_tokens_per_batch_size": [[2, 4, 3]]}', "must start at batch size 1"),
        ('{"num_speculative_tokens_per_batch_size": [[1, 4, 3], [3, 8, 1]]}', "without overlaps"),
        ('{"num_speculative_tokens": 0}', "not a positive integer"),
        ('{"draft_lm_head_quantization": "int4"}', "fp8 or nvfp4"),
        ("/no/such/file.json", "neither a JSON object nor a readable file"),
    ],
)
def test_a_served_config_vllm_would_refuse_is_a_usage_error(text, words):
    with pytest.raises(UsageError) as info:
        parse_served_config(text)
    assert words in info.value.message + (info.value.hint or "")


def test_served_config_from_a_file_and_its_defaults(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"method": "eagle3", "model": "/d", "num_speculative_tokens": 4}))
    given = assumed(parse_served_config(str(path)))
    # a config without the keys runs vLLM's defaults: standard rejection, no lm_head quantization, no schedule
    assert given["rejection_method"].value == "standard" and given["rejection_method"].where.endswith(
        ", vLLM's default"
    )
    assert given["k"].value == 4 and given["draft_lm_head_quantization"].value is None
    settings = combine(None, "0.33.0", {}, given)
    assert settings.k_schedule.value == [] and settings.k_schedule.source == ASSUMED  # no schedule unless given
    assert settings.version.value == "0.33.0"


def test_sglang_server_info_gives_k_a_lossy_threshold_and_an_adaptive_schedule():
    """SGLang 0.5.23's /server_info: resolved server arguments (sglang/srt/arg_groups/fields/spec.py)."""
    body = {
        "speculative_algorithm": "EAGLE3",
        "speculative_draft_model_path": "/d",
        "speculative_num_steps": 3,
        "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 4,
        "speculative_accept_threshold_single": 0.7,
        "speculative_accept_threshold_acc": 1.0,
        "speculative_adaptive": True,
        "speculative_draft_model_quantization": None,
        "launch_command": "python -m sglang.launch_server ...",
        "version": "0.5.23",
    }
    engine, read = from_server(("GET /server_info", body))
    s = combine(engine, None, read, {})
    assert (engine, s.k.value, s.version.value, s.k_schedule.value) == ("sglang", 3, "0.5.23", "adaptive")
    assert s.lossy and s.rejection_method.value.startswith("relaxed") and s.scheduled
    body.update(speculative_accept_threshold_single=1.0, speculative_adaptive=False)
    s = combine(*from_server(("GET /server_info", body))[:1], None, from_server(("GET /server_info", body))[1], {})
    assert not s.lossy and not s.scheduled


def test_al_per_k_and_synthetic_al():
    rows = al_by_k([(3, 2), (1, 1), (3, 0), (1, 0)])
    assert rows == [
        {
            "k": 1,
            "num_drafts": 2,
            "num_accepted_tokens": 1,
            "acceptance_length": 1.5,
            "acceptance_rate_per_position": [0.5],
        },
        {
            "k": 3,
            "num_drafts": 2,
            "num_accepted_tokens": 2,
            "acceptance_length": 2.0,
            "acceptance_rate_per_position": [0.5, 0.5, 0.0],
        },
    ]
    # vLLM resolves synthetic_acceptance_length 2.5 at k 3 to [1.0, 0.5, 0.0] (config/speculative.py L552-560)
    assert synthetic_al([1.0, 0.5, 0.0]) == 2.5


def _watch(url: str, reference, *extra: str):
    args = ["watch", "--endpoint", url, "--interval", "0.2", "--duration", "0.5", "--min-drafts", "1"]
    res = CliRunner().invoke(main, [*args, "--reference-report", str(reference), "--json", *extra])
    assert "Traceback" not in res.output, res.output
    summary = json.loads(res.output.strip().splitlines()[-1])
    validate_json(summary, "watch-report")
    return res.exit_code, summary


def test_watch_compares_like_with_like_and_says_when_the_settings_differ(tmp_path):
    """A verify --endpoint report of a schedule server is the reference: a server with the same schedule is
    judged against it; a fixed-k server, or one whose settings are stated otherwise, is not (different ALs)."""
    with SpecServer(VLLM_032_SPEC) as served, FakeServer("nospec") as target:
        res, report = _verify(served.base_url, target.url, tmp_path, "--api", "chat")
        assert res.exit_code == 0, res.output
        reference = tmp_path / "r.json"
        assert report["endpoint"]["served"]["settings"]["k_schedule"]["value"] == SCHEDULE
        code, same = _watch(served.base_url, reference)
    assert same["served"]["k_schedule"]["value"] == SCHEDULE
    assert same["reference"]["served"] == {
        "num_speculative_tokens": 3,
        "k_schedule": SCHEDULE,
        "rejection_method": "standard",
        "draft_lm_head_quantization": None,
    }
    assert "W-WATCH-SETTINGS-DIFFER" not in [f["code"] for f in same["findings"]]
    fixed = {**VLLM_032_SPEC, "num_speculative_tokens_per_batch_size": None}
    with SpecServer(fixed) as other:
        code, differ = _watch(other.base_url, reference)
    assert code == 1 and differ["verdict"] == "inconclusive" and differ["num_judged"] == 0
    f = next(f for f in differ["findings"] if f["code"] == "W-WATCH-SETTINGS-DIFFER")
    assert f["message"].startswith(
        "the server's settings differ from the reference run's (k_schedule none here, [[1, 1, 3], [2, 256, 1]] in "
        "the reference)"
    )
    # a server that says nothing, stated synthetic by --served-config, against the same reference
    with SpecServer(None) as quiet:
        stated = json.dumps({"num_speculative_tokens": 3, "rejection_sample_method": "synthetic",
                             "synthetic_acceptance_length": 2.0})  # fmt: skip
        code, assumed_run = _watch(quiet.base_url, reference, "--served-config", stated)
    assert assumed_run["served"]["rejection_method"] == {
        "value": "synthetic",
        "source": ASSUMED,
        "where": "--served-config",
    }
    assert assumed_run["served"]["engine"] == {"value": "vllm", "source": SERVER, "where": "the /metrics names"}
    f = next(f for f in assumed_run["findings"] if f["code"] == "W-WATCH-SETTINGS-DIFFER")
    assert "rejection_method synthetic here, standard in the reference" in f["message"]


def test_sglang_server_info_made_by_sglang_reads_as_its_settings():
    """fixtures/servers/sglang-0.5.23/server_info.json: SGLang 0.5.23's own /server_info (scripts/sglang_fixtures.py)."""
    from helpers.paths import ROOT

    body = json.loads((ROOT / "fixtures" / "servers" / "sglang-0.5.23" / "server_info.json").read_text())
    engine, read = from_server(("GET /server_info", body))
    s = combine(engine, None, read, {})
    assert (engine, s.k.value, s.version.value, s.method.value) == ("sglang", 3, "0.5.23", "EAGLE3")
    assert s.rejection_method.value == "standard" and not s.lossy and s.k_schedule.value == []
    assert s.k.where == "GET /server_info speculative_num_steps"


def test_served_config_without_an_endpoint_is_refused():
    res = CliRunner().invoke(
        main, ["verify", "--target", "smollm2", "--served-config", '{"num_speculative_tokens": 3}']
    )
    assert res.exit_code == 2 and "--served-config states the settings of a server" in res.output


def test_a_served_config_key_vllm_has_no_field_for_is_refused(tmp_path):
    """vLLM's SpeculativeConfig forbids extra fields (vllm 0.32.0 / 0.33.0 config/utils.py L70-71)."""
    text = '{"method": "eagle3", "num_speculative_tokens": 3, "bogus_key": 1, "rejection_sample_method": "fly"}'
    with SpecServer(None, steps=[(3, 2)]) as served, FakeServer("nospec") as target:
        res, report = _verify(served.base_url, target.url, tmp_path, "--api", "chat", "--served-config", text)
    assert res.exit_code == 2 and report is None, res.output
    assert "bogus_key is no speculative config field of any vLLM release" in res.output
    assert "Traceback" not in res.output and "hint: drop bogus_key" in res.output


def test_a_served_config_method_the_servers_release_lacks_contradicts_the_server(tmp_path):
    """fly is vLLM 0.33's (config/speculative.py L83); a server that reports 0.32.0 cannot run it."""
    cfg = json.dumps({"method": "eagle3", "num_speculative_tokens": 3, "rejection_sample_method": "fly"})
    with SpecServer(None, steps=[(3, 2)]) as served, FakeServer("nospec") as target:
        res, report = _verify(served.base_url, target.url, tmp_path, "--api", "chat", "--served-config", cfg)
    assert res.exit_code == 2 and report is None, res.output
    out = " ".join(res.output.split())
    assert (
        "rejection_sample_method 'fly' is not in vLLM 0.32.0, the server's release (its methods: block, standard, synthetic)"
        in out
    )
    assert "lossy by design" not in out
    draft_quant = json.dumps({"num_speculative_tokens": 3, "draft_lm_head_quantization": "fp8"})
    with SpecServer(None, steps=[(3, 2)]) as served, FakeServer("nospec") as target:
        res, _ = _verify(served.base_url, target.url, tmp_path, "--api", "chat", "--served-config", draft_quant)
    assert (
        res.exit_code == 2 and "draft_lm_head_quantization is no speculative config field of vLLM 0.32.0" in res.output
    )


def test_served_config_with_dry_run_is_refused():
    res = CliRunner().invoke(
        main, ["verify", "--target", "smollm2", "--dry-run", "--served-config", '{"num_speculative_tokens": 3}']
    )
    assert res.exit_code == 2 and "--served-config states the settings of a server" in res.output, res.output
    assert "--dry-run plans a launch" in res.output and "hint: drop --served-config" in res.output


def test_watch_says_settings_differ_as_the_reason_it_is_inconclusive(tmp_path):
    """W-WATCH-SETTINGS-DIFFER and enough drafts: the last line gives that reason, not a small sample."""
    with SpecServer(VLLM_032_SPEC) as served, FakeServer("nospec") as target:
        res, _ = _verify(served.base_url, target.url, tmp_path, "--api", "chat")
        assert res.exit_code == 0, res.output
    fixed = {**VLLM_032_SPEC, "num_speculative_tokens_per_batch_size": None}
    args = ["watch", "--endpoint", "", "--interval", "0.2", "--duration", "0.5", "--min-drafts", "1"]
    with SpecServer(fixed) as other:
        args[2] = other.base_url
        res = CliRunner().invoke(main, [*args, "--reference-report", str(tmp_path / "r.json")])
    assert res.exit_code == 1, res.output
    last = res.output.strip().splitlines()[-1]
    assert last == "INCONCLUSIVE: the server's settings differ from the reference run's (not judged)"


def test_watch_takes_a_mixed_k_reference_at_the_served_k_or_judges_nothing(tmp_path):
    """A reference whose AL is over a mix of ks (no schedule known on the watched server) is no k=3 yardstick:
    its AL at k=3 from acceptance_by_k where it has one, else nothing is judged (W-WATCH-REFERENCE-MIXED-K)."""
    with SpecServer(None) as served, FakeServer("nospec") as target:  # per-step counts: AL per k
        res, report = _verify(served.base_url, target.url, tmp_path, "--api", "chat")
        assert report["endpoint"]["served"]["claims"]["acceptance_length"] == "mixed_k"
        code, summary = _watch(served.base_url, tmp_path / "r.json")
    ref = summary["reference"]
    assert ref["acceptance_length"] == pytest.approx(1 + 5 / 3)  # the k=3 steps' AL, not the mix's 2.143
    assert "its AL at k=3 over 18 steps (acceptance_by_k), not its overall AL 2.143" in ref["chosen_by"]
    summary_only = tmp_path / "s"
    summary_only.mkdir()
    with SpecServer(None, detailed=False) as served, FakeServer("nospec") as target:  # no AL per k
        res, report = _verify(served.base_url, target.url, summary_only, "--api", "chat")
        assert report["endpoint"]["served"]["acceptance_by_k"] is None
        code, summary = _watch(served.base_url, summary_only / "r.json")
    assert code == 1 and summary["verdict"] == "inconclusive" and summary["num_judged"] == 0
    f = next(f for f in summary["findings"] if f["code"] == "W-WATCH-REFERENCE-MIXED-K")
    assert f["message"].startswith("the reference AL 2.143 is over a mix of ks (no per-step counts), not an AL at k=3")


def test_at_80_columns_metric_names_are_whole_and_acceptance_rows_are_one_line(tmp_path):
    with SpecServer(None) as served, FakeServer("nospec") as target:
        args = ["verify", "--endpoint", served.base_url, "--baseline-endpoint", target.url, "--target", "smollm2"]
        res = CliRunner().invoke(
            main, [*args, "--limit", "1", "--max-tokens", "8", "--api", "chat"], env={"COLUMNS": "80"}
        )
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    endpoint = lines[next(i for i, line in enumerate(lines) if line.startswith("served endpoint")) :]
    endpoint = endpoint[: next(i for i, line in enumerate(endpoint) if line.startswith("└"))]
    assert not any("…" in line for line in endpoint)  # folded, never cut
    cells = "".join(line.split("│")[2].strip() for line in endpoint if line.count("│") == 3)
    for name in ("vllm:spec_decode_num_draft_tokens_total", "vllm:spec_decode_num_accepted_tokens_total"):
        assert name in cells
    overall = next(line for line in lines if line.startswith("│ overall"))
    assert "2.143" in overall and "0.71/0.29/0.14" in overall and "0.615" in overall  # one line, every figure
    assert "the rates given the one before are in the report" in " ".join(res.output.split())


@pytest.mark.parametrize("verb", ["verify", "watch"])
def test_a_served_config_vllm_refuses_fails_before_the_server_is_asked(verb):
    """Nothing listens on the port: the bad --served-config is what the user hears of, exit 2, not the server."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # a port nothing listens on once the socket is closed
    args = [verb, "--endpoint", f"http://127.0.0.1:{port}", *(["--target", "smollm2"] if verb == "verify" else [])]
    bad = '{"rejection_sample_method": "synthetic", "synthetic_acceptance_length": 9.0, "num_speculative_tokens": 3}'
    res = CliRunner().invoke(main, [*args, "--served-config", bad])
    assert res.exit_code == 2, res.output
    assert "synthetic_acceptance_length 9.0 is not in [1, 4]" in " ".join(res.output.split())
    assert "not reachable" not in res.output
