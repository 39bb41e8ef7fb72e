"""``verify --endpoint`` against real ``vllm serve`` processes (helpers/servers.py): SmolLM2-135M-Instruct with
the fixture drafter at k 3, and the target served alone.

Done when (issue 17): k 3, 32 tokens, greedy float32, the served pair gives the same AL, per-position rates
and draft counts as the offline vLLM engine on the same token ids and settings (within 1 %; the shared
settings' six prompts), and the 48 prompts of the default set are lossless against the target-alone server;
the target-alone server measured as a drafter endpoint is a named finding; the API key is never shown.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from helpers.paths import FIXTURE
from helpers.real_runs import LIMIT, SETTINGS, cli

from eaglehub.cli import main
from eaglehub.target import resolve_target

K, MAX_TOKENS, PROMPTS = 3, 32, 48
SECRET = "sk-eaglehub-test-0123456789abcdef"
RTOL = 0.01


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= RTOL * abs(b)


def _endpoint_verify(fixture_server, target_server, tmp_path, *extra: str) -> tuple[dict, str, object]:
    report_path = tmp_path / f"endpoint{len(extra)}.json"
    args = ["verify", "--endpoint", fixture_server.base_url + "/v1", "--baseline-endpoint", target_server.base_url]
    args += ["--target", "smollm2", "--max-tokens", str(MAX_TOKENS), "--concurrency", "8", "--api-key", SECRET]
    res = CliRunner().invoke(main, [*args, *extra, "--report", str(report_path)])
    assert res.exit_code == 0, res.output
    text = report_path.read_text()
    assert SECRET not in res.output and SECRET not in res.stderr and SECRET not in text
    return json.loads(text), text, res


@pytest.mark.vllm
@pytest.mark.real
def test_served_fixture_is_lossless_and_matches_offline_vllm(
    fixture_server, target_server, shared_engine_runs, tmp_path
):
    """All 48 prompts against the target-alone server; then the served acceptance against the offline engine on
    the shared settings' prompts (one per category, helpers/real_runs.py), whose offline run the other
    real-pair tests share. (Measured on all 48 as well: 933 drafts and AL 1.5445 both ways, docs/verify.md.)"""
    report, _, _ = _endpoint_verify(fixture_server, target_server, tmp_path)
    d, ep = report["drafters"][0], report["endpoint"]
    assert (d["num_prompts"], d["num_prompts_matched"], d["lossless"]) == (PROMPTS, PROMPTS, True), d["findings"]
    assert ep["num_speculative_tokens"] == K and ep["server"] == "vllm" and ep["requests"]["compared"] == PROMPTS
    assert ep["counters"]["used"] == "per_request" and ep["counters"]["agree"] is True, ep["counters"]
    assert (
        ep["baseline"]["kind"] == "endpoint" and ep["model"] == str(resolve_target("smollm2")) and ep["failures"] == []
    )
    got = d["acceptance"]["overall"]
    # the per-request histogram sums to the drafts, and the per-position counts follow from it
    h = got["accepted_histogram"]
    assert sum(h) == got["num_drafts"] and got["accepted_per_pos"] == [sum(h[i + 1 :]) for i in range(K)]

    res = cli("verify", *SETTINGS, "--drafter", FIXTURE, "--engine", "vllm", "--json")
    assert res.exit_code == 0, res.output
    off = json.loads(res.stdout)["drafters"][0]["acceptance"]["overall"]
    report, _, _ = _endpoint_verify(fixture_server, target_server, tmp_path, "--limit", str(LIMIT))
    got = report["drafters"][0]["acceptance"]["overall"]
    print(f"\nAL endpoint {got['acceptance_length']:.4f} offline {off['acceptance_length']:.4f}; "
          f"drafts {got['num_drafts']} / {off['num_drafts']}; per position "
          f"{got['acceptance_rate_per_position']} / {off['acceptance_rate_per_position']}")  # fmt: skip
    assert _close(got["acceptance_length"], off["acceptance_length"])
    assert _close(got["num_drafts"], off["num_drafts"]) and _close(got["num_draft_tokens"], off["num_draft_tokens"])
    assert all(_close(a, b) for a, b in zip(got["acceptance_rate_per_position"], off["acceptance_rate_per_position"]))
    assert len(got["acceptance_rate_per_position"]) == K


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
