"""Findings on the checkpoints the real producers write (fixtures/producers/*/, made by each producer's own code;
see each MANIFEST.json): what validate and inspect say about them must be what the engines do with them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers.paths import ROOT
from safetensors import safe_open

from eaglehub.checks.context import Options
from eaglehub.checks.validate import validate
from eaglehub.checks.vocab import check_vocab_maps
from eaglehub.cli import main

PRODUCERS = ROOT / "fixtures" / "producers"
#: every profile a producer fixture is judged for
ALL_PROFILES = ("vllm-0.33-gpu", "vllm-0.33-v1", "vllm-0.32-cpu", "sglang-0.5.23")


def fixture(name: str) -> Path:
    return PRODUCERS / name


def manifest_case(producer: str, case: str) -> dict:
    data = json.loads((PRODUCERS / producer / "MANIFEST.json").read_text())
    return next(c for c in data["cases"] if c["dir"] == case)


def tensor(path: Path, name: str) -> np.ndarray:
    """One integer or bool tensor of ``path``'s model.safetensors (numpy has no bfloat16)."""
    with safe_open(str(path / "model.safetensors"), framework="np") as f:
        return f.get_tensor(name)


def report(path: Path, deep: bool = False, profiles=ALL_PROFILES, **kw) -> dict:
    return validate(path, deep=deep, options=Options(profiles=tuple(profiles)), **kw)


def codes(rep: dict, severity: str | None = None) -> list[str]:
    return [f["code"] for f in rep["findings"] if severity is None or f["severity"] == severity]


def run_cli(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


# --- 1. d2t in frequency order (ModelOpt) ---------------------------------------------------------------------


@pytest.mark.parametrize("case", ["pruned-vocab", "smollm2-pruned"])
def test_modelopt_frequency_ordered_d2t_is_valid(case):
    """ModelOpt's calibrate_frequent_vocab stores d2t most frequent first (the MANIFEST records it unsorted);
    vLLM scatters by id (``logits_new[:, arange(Vd) + d2t] = logits``), so the order is no error."""
    path = fixture(f"modelopt/{case}")
    d2t = tensor(path, "d2t")
    ids = np.arange(len(d2t)) + d2t
    assert not bool((ids[1:] > ids[:-1]).all())  # the fixture really is unsorted
    assert "d2t: not sorted" in manifest_case("modelopt", case)["notes"]
    rep = report(path)
    assert codes(rep, "error") == []
    assert not [c for c in codes(rep) if c.startswith(("E-D2T", "E-T2D"))]


def test_a_repeated_target_id_is_still_an_error():
    d2t = tensor(fixture("modelopt/pruned-vocab"), "d2t").copy()
    ids = np.arange(len(d2t)) + d2t
    d2t[7] = ids[3] - 7  # row 7 now names row 3's id
    found = check_vocab_maps(d2t, None, 512, len(d2t))
    dup = [f for f in found if f.code == "E-D2T-DUPLICATE"]
    assert len(dup) == 1 and f"rows 3 and 7 both map to {int(ids[3])}" in dup[0].message
    d2t[7] = 600 - 7  # past V = 512
    assert "E-D2T-RANGE" in {f.code for f in check_vocab_maps(d2t, None, 512, len(d2t))}


def test_unsorted_d2t_converts_with_its_rows_and_a_matching_t2d(tmp_path):
    """Every output format keeps ModelOpt's row order; the t2d written for SpecForge marks the same ids."""
    src = fixture("modelopt/pruned-vocab")
    before = {n: tensor(src, n) for n in ("d2t",)}
    out = tmp_path / "sf"
    r = run_cli("convert", src, out, "--format", "specforge")
    assert r.exit_code == 0, r.output
    after = {n: tensor(out, n) for n in ("d2t", "t2d")}
    assert np.array_equal(after["d2t"], before["d2t"])
    ids = np.arange(len(before["d2t"])) + before["d2t"]
    assert int(after["t2d"].sum()) == len(ids) and bool(after["t2d"][ids].all())
    assert codes(report(out), "error") == []


# --- 2. null aux ids (speculators convert) ----------------------------------------------------------------------

SPECULATORS_CONVERT = [
    "convert-eagle3",
    "convert-eagle3-embed",
    "convert-eagle3.1-flags",
    "convert-eagle3.1-research",
    "convert-smollm2-eagle3",
]


@pytest.mark.parametrize("case", SPECULATORS_CONVERT)
def test_null_aux_ids_from_speculators_convert_are_valid(case):
    """``speculators convert`` writes ``eagle_aux_hidden_state_layer_ids: null``; vLLM's adapter copies only a
    non-empty list and the runner then captures the target's defaults (no error, nothing dropped)."""
    path = fixture(f"speculators/{case}")
    assert json.loads((path / "config.json").read_text())["eagle_aux_hidden_state_layer_ids"] is None
    assert "'eagle_aux_hidden_state_layer_ids'" in manifest_case("speculators", case)["notes"]
    rep = report(path)
    assert "E-CONFIG-SCHEMA" not in codes(rep)


def test_null_aux_ids_read_as_the_targets_defaults_and_convert(tmp_path):
    from eaglehub.formats.registry import read_drafter
    from eaglehub.profiles import read

    path = fixture("speculators/convert-eagle3")
    reading = read(read_drafter(path), "vllm-0.33-v1")
    assert reading.aux_layer_ids is None and reading.num_aux_hidden_states == 3  # the target's default layers
    r = run_cli("convert", path, tmp_path / "out", "--format", "vllm")
    assert r.exit_code == 0, r.output
    assert codes(report(tmp_path / "out", profiles=ALL_PROFILES[:3]), "error") == []
