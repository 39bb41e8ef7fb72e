"""`eaglehub probe` on the real SmolLM2 pair: a copy of the fixture whose config was edited to a wrong
reading is named with its field and both values, and `--write` restores the configured config."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from helpers.paths import FIXTURE

from eaglehub.cli import main
from eaglehub.io.schemas import validate_json


@pytest.mark.slow
@pytest.mark.real
def test_a_flipped_norm_before_residual_is_named_and_written_back(tmp_path):
    wrong, fixed = tmp_path / "wrong", tmp_path / "fixed"
    res = CliRunner().invoke(main, ["convert", str(FIXTURE), str(wrong), "--set", "norm_before_residual=true"])
    assert res.exit_code == 0, res.output
    args = ["probe", str(wrong), "--target", "smollm2", "--limit", "1", "--max-tokens", "32"]
    args += ["--field", "norm_before_residual", "--json"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1, res.output
    report = json.loads(res.stdout)
    validate_json(report, "probe-report")
    (f,) = report["findings"]
    assert f["code"] == "E-PROBE-READING" and f["subject"] == "norm_before_residual"
    assert "true" in f["message"] and "false" in f["message"] and "--write" in f["hint"]
    (field,) = report["fields"]
    assert field["configured"] is True and field["trained"] is False
    assert field["trained_acceptance_length"] > field["configured_acceptance_length"] * 1.2
    res = CliRunner().invoke(main, [*args, "--write", str(fixed)])
    assert res.exit_code == 0, res.output
    cfg = json.loads((fixed / "config.json").read_text())
    assert cfg["norm_before_residual"] is False
    prov = json.loads((fixed / "eaglehub.json").read_text())
    assert {"key": "norm_before_residual", "old": True, "new": False} in prov["conversion"]["config_set"]
