"""``verify --endpoint`` against real ``vllm serve`` processes (helpers/servers.py): SmolLM2-135M-Instruct with
the fixture drafter at k 3, and the target served alone.

Done when (issue 17): on the 48 prompts of the default set, k 3, 32 tokens, greedy float32, the served
pair gives the same AL, per-position rates and draft counts as the offline vLLM engine on the same token
ids and settings (within 1 %), and 48/48 prompts are lossless against the target-alone server; the
target-alone server measured as a drafter endpoint is a named finding; the API key is never shown.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from helpers.paths import FIXTURE

from eaglehub.cli import main
from eaglehub.engines.base import RunSpec
from eaglehub.engines.chat import encode_chat
from eaglehub.engines.vllm_engine import VllmEngine
from eaglehub.measure import acceptance
from eaglehub.measure.prompts import load_prompts
from eaglehub.target import resolve_target

K, MAX_TOKENS, PROMPTS = 3, 32, 48
SECRET = "sk-eaglehub-test-0123456789abcdef"
RTOL = 0.01


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= RTOL * abs(b)


@pytest.mark.vllm
@pytest.mark.real
def test_served_fixture_matches_offline_vllm_and_is_lossless(fixture_server, target_server, tmp_path):
    target = resolve_target("smollm2")
    prompts = load_prompts(None, [], None)
    assert len(prompts) == PROMPTS
    ids = encode_chat(target, [p.turns[0] for p in prompts])
    offline = VllmEngine().run(RunSpec(target, FIXTURE, K, MAX_TOKENS), ids, [p.category for p in prompts])
    off = acceptance.acceptance_stats(acceptance.total(offline.group_counters.values()))

    report_path = tmp_path / "endpoint.json"
    args = ["verify", "--endpoint", fixture_server.base_url + "/v1", "--baseline-endpoint", target_server.base_url]
    args += ["--target", "smollm2", "--max-tokens", str(MAX_TOKENS), "--concurrency", "8", "--api-key", SECRET]
    res = CliRunner().invoke(main, [*args, "--report", str(report_path)])
    text = report_path.read_text()
    assert res.exit_code == 0, res.output
    report = json.loads(text)
    d, ep = report["drafters"][0], report["endpoint"]
    assert (d["num_prompts"], d["num_prompts_matched"], d["lossless"]) == (PROMPTS, PROMPTS, True), d["findings"]
    assert ep["num_speculative_tokens"] == K and ep["server"] == "vllm" and ep["requests"]["compared"] == PROMPTS
    assert ep["counters"]["used"] == "per_request" and ep["counters"]["agree"] is True, ep["counters"]
    assert ep["baseline"]["kind"] == "endpoint" and ep["model"] == str(target) and ep["failures"] == []

    got = d["acceptance"]["overall"]
    print(f"\nAL endpoint {got['acceptance_length']:.4f} offline {off['acceptance_length']:.4f}; "
          f"drafts {got['num_drafts']} / {off['num_drafts']}; per position "
          f"{got['acceptance_rate_per_position']} / {off['acceptance_rate_per_position']}")  # fmt: skip
    assert _close(got["acceptance_length"], off["acceptance_length"])
    assert _close(got["num_drafts"], off["num_drafts"]) and _close(got["num_draft_tokens"], off["num_draft_tokens"])
    assert all(_close(a, b) for a, b in zip(got["acceptance_rate_per_position"], off["acceptance_rate_per_position"]))
    assert len(got["acceptance_rate_per_position"]) == K
    # the per-request histogram sums to the drafts, and the per-position counts follow from it
    h = got["accepted_histogram"]
    assert sum(h) == got["num_drafts"] and got["accepted_per_pos"] == [sum(h[i + 1 :]) for i in range(K)]
    assert SECRET not in res.output and SECRET not in res.stderr and SECRET not in text


@pytest.mark.vllm
@pytest.mark.real
def test_a_server_without_speculative_decoding_is_a_named_finding(target_server, tmp_path):
    report_path = tmp_path / "no-spec.json"
    args = ["verify", "--endpoint", target_server.base_url, "--baseline-endpoint", target_server.base_url]
    args += ["--target", "smollm2", "--max-tokens", "8", "--limit", "1", "--category", "coding"]
    res = CliRunner().invoke(main, [*args, "--report", str(report_path), "--api-key", SECRET])
    assert res.exit_code == 1, res.output
    text = report_path.read_text()
    d = json.loads(text)["drafters"][0]
    codes = [f["code"] for f in d["findings"]]
    assert "E-ENDPOINT-NO-SPEC" in codes and "E-VERIFY-NOT-WIRED" not in codes
    assert "--speculative-config" in next(f["hint"] for f in d["findings"] if f["code"] == "E-ENDPOINT-NO-SPEC")
    assert d["lossless"]  # the same server twice, greedy
    assert SECRET not in res.output and SECRET not in text
