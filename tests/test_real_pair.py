"""The real pair end to end: the committed SmolLM2 drafter, its 3.1 upgrade, and SmolLM2-135M-Instruct.

Static part (headers only, seconds): the fixture and its upgrade validate clean against the real
target, and the three breakages of the issue's "Done when" each give a named error and exit 1.
Dynamic part (vLLM, minutes; runs shared with the session's other real-pair tests,
helpers/real_runs.py): both drafters verified against one target-alone run on one prompt per category: token-identical outputs and a wired drafter (position-0 acceptance well above 0);
the fixture converted to the speculators format in 5 MB shards accepts exactly what the fixture accepts.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.paths import FIXTURE
from helpers.real_runs import PROMPTS, SETTINGS
from safetensors.torch import load_file, save_file

from eaglehub.cli import main
from eaglehub.target import resolve_target


def _run(*args: str):
    return CliRunner().invoke(main, list(args))


def _codes(res) -> list[str]:
    return [f["code"] for f in json.loads(res.output)["findings"] if f["severity"] == "error"]


@pytest.fixture
def upgraded(real_drafters) -> Path:
    """The fixture's plain 3.1 upgrade (``convert --to 3.1``), written once per session."""
    return real_drafters.upgraded


def _rewrite(src: Path, dst: Path, edit) -> Path:
    shutil.copytree(src, dst)
    tensors = load_file(str(dst / "model.safetensors"))
    save_file(edit(tensors), str(dst / "model.safetensors"))
    return dst


@pytest.mark.real
def test_fixture_and_upgrade_validate_clean_against_the_real_target(upgraded):
    """No errors with --target smollm2 --deep; the only warnings are ones a person agrees with: the
    drafter is fp16 and the target fp32 (W-DTYPE-MISMATCH), and the upgrade's fc_norm gains are the
    unit gains of an uncalibrated 3.1 upgrade (W-FCNORM-UNIT, hint: calibrate)."""
    expected = {FIXTURE: ["W-DTYPE-MISMATCH"], upgraded: ["W-FCNORM-UNIT", "W-DTYPE-MISMATCH"]}
    for drafter, warnings in expected.items():
        res = _run("validate", str(drafter), "--target", "smollm2", "--deep", "--json")
        assert res.exit_code == 0, res.output
        report = json.loads(res.output)
        assert report["deep"] is True and [f["code"] for f in report["findings"]] == warnings, res.output
    unit = next(
        f
        for f in json.loads(_run("validate", str(upgraded), "--json").output)["findings"]
        if f["code"] == "W-FCNORM-UNIT"
    )
    assert "calibrate" in unit["hint"]
    assert json.loads((upgraded / "config.json").read_text())["fc_norm"] is True


@pytest.mark.real
def test_breaking_the_upgrade_gives_named_errors(upgraded, tmp_path):
    no_norm = _rewrite(
        upgraded, tmp_path / "no-fc-norm", lambda t: {k: v for k, v in t.items() if k != "fc_norm.1.weight"}
    )
    res = _run("validate", str(no_norm), "--target", "smollm2", "--json")
    assert res.exit_code == 1 and "E-FCNORM-MISSING" in _codes(res)

    renamed = _rewrite(
        upgraded,
        tmp_path / "renamed",
        lambda t: {k.replace("midlayer.", "decoder."): v for k, v in t.items()},
    )
    res = _run("validate", str(renamed), "--target", "smollm2", "--json")
    assert res.exit_code == 1 and {"E-TENSOR-UNEXPECTED", "E-TENSOR-MISSING"} <= set(_codes(res))

    small = tmp_path / "small-target"
    small.mkdir()
    cfg = json.loads((resolve_target("smollm2") / "config.json").read_text())
    (small / "config.json").write_text(json.dumps(dict(cfg, num_hidden_layers=16)))  # aux id 27 needs ≥ 27 layers
    res = _run("validate", str(upgraded), "--target", str(small), "--json")
    assert res.exit_code == 1 and "E-AUX-RANGE" in _codes(res)


@pytest.mark.vllm
@pytest.mark.real
def test_verify_fixture_and_upgrade_in_vllm(real_drafters, shared_engine_runs, tmp_path):
    """The fixture, its 3.1 upgrade and the fixture in the speculators layout in 5 MB shards (both loaders'
    paths in one copy), in vLLM and in the reference engine, with the shared settings (helpers/real_runs.py: one
    prompt per category, 32 tokens)."""
    assert len(list(real_drafters.speculators.glob("model-*-of-*.safetensors"))) == 4
    report_path = tmp_path / "verify.json"
    drafters = [FIXTURE, real_drafters.upgraded, real_drafters.speculators]
    res = _run(
        "verify",
        *SETTINGS,
        *[a for d in drafters for a in ("--drafter", str(d))],
        "--report",
        str(report_path),
        "--engine",
        "vllm",
        "--engine",
        "reference",
    )
    report = json.loads(report_path.read_text())
    assert res.exit_code == 0, res.output
    # the embedded reference engine agrees with vLLM (issue 5: AL within 5 %) and is lossless too, in every layout
    other = report["cross_engine"]["engines"][0]
    assert other["engine"]["name"] == "reference"
    for row, d in zip(other["comparison"], other["drafters"]):
        assert row["agree"] and abs(row["relative_difference"]) <= 0.05, row
        assert d["lossless"] and d["passed"]
    for d in report["drafters"]:
        assert all(p["match"] for p in d["prompts"]) and len(d["prompts"]) == PROMPTS
        a = d["acceptance"]["overall"]
        assert a["acceptance_length"] == pytest.approx(1 + a["num_accepted_tokens"] / a["num_drafts"])
        assert a["acceptance_rate_per_position"][0] > 0.05
    al = [d["acceptance"]["overall"]["acceptance_length"] for d in report["drafters"]]
    assert al[0] > 1.2  # a trained drafter, not a wired-but-random one (random: ~1.0)
    counts = [
        (d["acceptance"]["overall"]["num_drafts"], d["acceptance"]["overall"]["num_accepted_tokens"])
        for d in report["drafters"]
    ]
    assert counts[2] == counts[0]  # same weights, same acceptance, in another layout and in shards
