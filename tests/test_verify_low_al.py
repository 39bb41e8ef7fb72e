"""W-VERIFY-LOW-AL carries its sample (drafts, prompts, the AL's interval over prompts where the engine gives
per-prompt counters) and proposes the fix for this drafter: `eaglehub probe …` for a config reading the
tensors cannot settle, `convert --calibrate` only for an uncalibrated 3.1 upgrade (unit fc_norm gains)."""

from __future__ import annotations

import shlex

import pytest
from helpers.scripted import BASE, ScriptedEngine, write_prompts
from test_verify import _opts, counters_with_al

from eaglehub.engines.base import RunResult, SpecCounters
from eaglehub.verify import run as verify

LOW = {"math": SpecCounters(10, 30, 2, (2, 0, 0)), "coding": SpecCounters(10, 30, 10, (6, 3, 1))}  # 1.2, 2.0


@pytest.fixture
def low(tmp_path, monkeypatch, make_target):
    target = make_target(n_layers=8)
    prompts = tmp_path / "p.jsonl"
    write_prompts(prompts)
    monkeypatch.setattr("eaglehub.engines.chat.encode_chat", lambda t, msgs: [[1, 2, 3]] * len(msgs))
    return tmp_path, target, prompts


def low_al(report: dict) -> list[dict]:
    return [f for f in report["drafters"][0]["findings"] if f["code"] == "W-VERIFY-LOW-AL"]


def test_low_al_names_its_sample_and_proposes_probe(low, make_drafter):
    tmp_path, target, prompts = low
    drafter = make_drafter("plain")
    report = verify.run_verify(_opts(tmp_path, target, prompts, "plain"), engine=ScriptedEngine({"plain": (BASE, LOW)}))
    (f,) = low_al(report)
    assert f["subject"] == "acceptance.per_category.math"
    assert "acceptance length 1.200 < 1.3 over 10 drafts of 2 prompts" in f["message"]
    assert f["hint"].endswith(shlex.join(["eaglehub", "probe", str(drafter), "--target", str(target)]))
    assert "--calibrate" not in f["hint"]


def test_low_al_proposes_calibrate_for_unit_fc_norm_gains(low, make_drafter, tmp_path):
    """The plain 3 → 3.1 upgrade (fc_norm gains all 1) of a drafter: calibrating is the fix, from its source."""
    from click.testing import CliRunner

    from eaglehub.cli import main

    _, target, prompts = low
    src = make_drafter("src")
    up = tmp_path / "up"
    assert CliRunner().invoke(main, ["convert", str(src), str(up), "--to", "3.1"]).exit_code == 0
    report = verify.run_verify(_opts(tmp_path, target, prompts, "up"), engine=ScriptedEngine({"up": (BASE, LOW)}))
    (f,) = low_al(report)
    assert "fc_norm gains are all 1" in f["hint"] and "eaglehub probe" not in f["hint"]
    command = [
        "eaglehub",
        "convert",
        str(src),
        f"{up}-calibrated",
        "--to",
        "3.1",
        "--calibrate",
        "--target",
        str(target),
    ]
    assert f["hint"].endswith(shlex.join(command))
    # a destination that exists (an earlier calibration, as `make demo` leaves one): the hint names a free one,
    # so the command pastes as it is (convert refuses an existing DST without --overwrite)
    (tmp_path / "up-calibrated").mkdir()
    (tmp_path / "up-calibrated-2").mkdir()
    report = verify.run_verify(_opts(tmp_path, target, prompts, "up"), engine=ScriptedEngine({"up": (BASE, LOW)}))
    (f,) = low_al(report)
    command[3] = f"{up}-calibrated-3"
    assert f["hint"].endswith(shlex.join(command))


class PerPrompt(ScriptedEngine):
    """Scripted counters with per-prompt counters too (as vLLM's per-request metrics give them)."""

    def __init__(self, name, per_prompt):
        super().__init__({name: (BASE, {})})
        self.per_prompt = per_prompt

    def run(self, spec, prompt_token_ids, groups, progress=None):
        res = super().run(spec, prompt_token_ids, groups, progress)
        if spec.drafter is None:
            return res
        totals: dict[str, SpecCounters] = {}
        for c, g in zip(self.per_prompt, groups):
            totals[g] = totals[g] + c if g in totals else c
        return RunResult(**{**res.__dict__, "group_counters": totals, "prompt_counters": list(self.per_prompt)})


def test_low_al_gives_its_interval_and_says_when_the_sample_cannot_tell(low, make_drafter):
    tmp_path, target, prompts = low
    make_drafter("d")
    # AL 1.0 and 1.4 on the math prompts, 1.1 and 1.2 on coding: overall 1.175, every interval reaches 1.3
    per = [
        SpecCounters(10, 30, 0, (0, 0, 0)),
        SpecCounters(10, 30, 4, (4, 0, 0)),
        SpecCounters(10, 30, 1, (1, 0, 0)),
        SpecCounters(10, 30, 2, (2, 0, 0)),
    ]
    report = verify.run_verify(_opts(tmp_path, target, prompts, "d"), engine=PerPrompt("d", per))
    overall = next(f for f in low_al(report) if f["subject"] == "acceptance.overall")
    assert "1.175 < 1.3 over 40 drafts of 4 prompts (95 % interval " in overall["message"]
    assert "the interval reaches 1.3, too few prompts to tell" in overall["message"]
    # a clearly low drafter: the same AL on every prompt, the interval stays below the bar
    flat = [SpecCounters(10, 30, 1, (1, 0, 0))] * 4
    report = verify.run_verify(_opts(tmp_path, target, prompts, "d"), engine=PerPrompt("d", flat))
    overall = next(f for f in low_al(report) if f["subject"] == "acceptance.overall")
    assert "over 40 drafts of 4 prompts (95 % interval 1.100 to 1.100 over prompts)" in overall["message"]
    assert "too few" not in overall["message"]


def test_counters_with_al_still_warn(low, make_drafter):
    tmp_path, target, prompts = low
    make_drafter("dead")
    engine = ScriptedEngine({"dead": (BASE, counters_with_al(1.25))})
    report = verify.run_verify(_opts(tmp_path, target, prompts, "dead"), engine=engine)
    assert [f["subject"] for f in low_al(report)] == [
        "acceptance.overall",
        "acceptance.per_category.math",
        "acceptance.per_category.coding",
    ]


def _claim_report(drafts: int, draft_tokens: int, accepted: int, prompts: int = 2) -> dict:
    overall = {"num_drafts": drafts, "num_draft_tokens": draft_tokens, "num_accepted_tokens": accepted}
    overall["acceptance_length"] = 1 + accepted / drafts
    entry = {"acceptance": {"overall": overall}, "num_prompts": prompts, "findings": [], "passed": True}
    settings = {"num_speculative_tokens": 3, "max_tokens": 8, "temperature": 0.0}
    return {"settings": settings, "prompts": {"sha256": "ab" * 32}, "drafters": [entry], "passed": True}


def test_a_claim_is_held_to_the_run_only_outside_the_runs_interval():
    """AL 1.667 against a claim of 2.1 at the claim's own settings: on 3 drafts the 95 % interval (exact
    binomial on draft tokens) holds 2.1, so the shortfall is inconclusive (a warning); on 300 drafts it fails."""
    from eaglehub.verify.claims import check_claim

    claim = {
        "acceptance_length": 2.1,
        "source": "eaglehub-verify.json",
        "num_speculative_tokens": 3,
        "max_tokens": 8,
        "temperature": 0.0,
        "prompts_sha256": "ab" * 32,
    }
    small = _claim_report(3, 9, 2)
    f = check_claim(small, claim, 0.05, "d", "t", "/d")
    assert f["code"] == "W-VERIFY-AL-CLAIM" and small["passed"]
    assert "this run measured 1.667 (over 3 drafts of 2 prompts, 95 % interval 1.084 to " in f["message"]
    assert "inconclusive: the claim is inside this run's interval" in f["message"]
    assert f["hint"].startswith("measure more: eaglehub verify --target t --drafter /d -k 3 --max-tokens 8")
    large = _claim_report(300, 900, 200, prompts=24)
    f = check_claim(large, claim, 0.05, "d", "t", "/d")
    assert f["code"] == "E-VERIFY-AL-CLAIM" and not large["passed"]
    assert "over 300 drafts of 24 prompts, 95 % interval 1.5" in f["message"] and "inconclusive" not in f["message"]
