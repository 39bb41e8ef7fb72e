"""The reference engine on the real pair (the committed SmolLM2 drafter + SmolLM2-135M-Instruct):
a drafter with wrong d2t offsets is caught by validate and by acceptance collapse, and the sampling
test passes the standard rule and catches a planted 1 % bias in the acceptance probability.
(Agreement with vLLM on the same pair: tests/test_real_pair.py.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from safetensors.torch import load_file, save_file

from eaglehub.cli import main
from eaglehub.engines.base import RunSpec
from eaglehub.engines.chat import encode_chat
from eaglehub.engines.reference import ReferenceEngine
from eaglehub.measure.prompts import load_prompts
from eaglehub.target import resolve_target
from eaglehub.verify.sampling import AcceptanceRule
from eaglehub.verify.sampling_check import first_per_category, run_sampling_test

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "smollm2-eagle3"


def _shifted_d2t(dst: Path, keep_t2d: bool) -> Path:
    """The fixture with every d2t offset one too large: each draft id maps to the neighbour of its token."""
    shutil.copytree(FIXTURE, dst)
    tensors = load_file(str(dst / "model.safetensors"))
    tensors["d2t"] = tensors["d2t"] + 1
    if not keep_t2d:
        tensors.pop("t2d")
    save_file(tensors, str(dst / "model.safetensors"))
    return dst


@pytest.mark.slow
@pytest.mark.real
def test_wrong_d2t_offsets_are_caught_by_validate_and_by_acceptance_collapse(shared_engine_runs, tmp_path):
    with_t2d = _shifted_d2t(tmp_path / "shifted", keep_t2d=True)
    res = CliRunner().invoke(main, ["validate", str(with_t2d), "--target", "smollm2", "--json"])
    assert res.exit_code == 1 and "E-T2D-MISMATCH" in {f["code"] for f in json.loads(res.output)["findings"]}
    res = CliRunner().invoke(
        main, ["verify", "--target", "smollm2", "--drafter", str(with_t2d), "--engine", "reference"]
    )
    assert res.exit_code == 1 and "E-T2D-MISMATCH" in res.output  # refused before any engine work

    # without t2d nothing in the checkpoint contradicts the offsets: only the run can tell
    blind = _shifted_d2t(tmp_path / "blind", keep_t2d=False)
    report_path = tmp_path / "verify.json"
    res = CliRunner().invoke(
        main,
        [
            "verify",
            "--target",
            "smollm2",
            "--drafter",
            str(FIXTURE),
            "--drafter",
            str(blind),
            "--engine",
            "reference",
            "--limit",
            "1",
            "--max-tokens",
            "32",
            "--sampling-trials",
            "200000",
            "--sampling-prefixes",
            "2",
            "--report",
            str(report_path),
        ],
    )
    assert res.exit_code == 1, res.output
    good, bad = json.loads(report_path.read_text())["drafters"]
    assert good["passed"] and good["lossless"] and bad["lossless"]  # losslessness holds either way
    al_good = good["acceptance"]["overall"]["acceptance_length"]
    al_bad = bad["acceptance"]["overall"]["acceptance_length"]
    assert al_good > 1.5 and al_bad < 1.05
    assert [f["code"] for f in bad["findings"] if f["severity"] == "error"] == ["E-VERIFY-NOT-WIRED"]
    assert good["sampling_test"]["combined"]["passed"] and len(good["sampling_test"]["prefixes"]) == 2


class _PlantedBias(AcceptanceRule):
    """A broken engine's rule: min(1, 1.01 · p/q) — accepts 1 % too often where q > p."""

    name = "planted-1%-bias"

    def acceptance_probability(self, p, q, x):
        return np.minimum(1.0, 1.01 * super().acceptance_probability(p, q, x))


@pytest.mark.slow
@pytest.mark.real
def test_sampling_test_passes_the_rule_and_catches_a_planted_one_percent_bias():
    target = resolve_target("smollm2")
    prompts = load_prompts(None, None, 1)
    chosen = first_per_category(prompts, encode_chat(target, [p.text for p in prompts]), 4)
    spec = RunSpec(target, FIXTURE, 3, 32, temperature=1.0, seed=0)
    good, good_findings = run_sampling_test(ReferenceEngine(), spec, chosen, 2_000_000)
    bad, bad_findings = run_sampling_test(ReferenceEngine(rule=_PlantedBias()), spec, chosen, 2_000_000)
    assert good["combined"]["passed"] and good_findings == []
    assert good["combined"]["p_value"] > 1e-3 and good["combined"]["dof"] == sum(r["dof"] for r in good["prefixes"])
    assert not bad["combined"]["passed"] and [f.code for f in bad_findings] == ["E-SAMPLING-BIASED"]
    assert bad["rule"] == "planted-1%-bias"
    # a real drafter: its first draft is accepted with probability β = Σ min(p, q) (0.69–0.995 here), and at some
    # prefixes rejection is common, so the residual path is exercised too
    betas = [r["acceptance_probability"] for r in good["prefixes"]]
    assert all(0.3 < b <= 1 for b in betas) and min(betas) < 0.9
