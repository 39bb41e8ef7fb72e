"""The committed Qwen3-style drafter (fixtures/smollm2-eagle3-qwen3: ``Eagle3Qwen3ForCausalLM``, q/k-norm
attention, a 256-position sliding window) with the real target SmolLM2-135M-Instruct.

Static part (headers, seconds): clean validation against the target with ``--deep``; speculators ↔
vLLM-native conversion bit-exact; a copy with its window switched off or its q-norm gone is caught with
the field named. Dynamic part (vLLM and the reference engine, shared target-alone runs,
helpers/real_runs.py): a copy of the fixture whose window (24 positions) every run outgrows is lossless
in vLLM, and the reference engine's AL is within 5 % of vLLM's, so both apply the q/k norms and the window
alike (one vLLM drafter run: the suite's time budget; the fixture's own figures at its 256-position window,
on prompts up to 8k tokens, are in docs/benchmarks.md §14).
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from click.testing import CliRunner
from helpers.paths import FIXTURE_QWEN3
from helpers.real_runs import PROMPTS, SETTINGS, VERIFIER
from safetensors.torch import load_file, save_file

from eaglehub.cli import main
from eaglehub.formats.registry import read_drafter


def _run(*args) -> object:
    return CliRunner().invoke(main, [str(a) for a in args])


def _findings(res) -> list[dict]:
    return json.loads(res.output)["findings"]


@pytest.mark.real
def test_the_qwen3_fixture_validates_clean_against_the_real_target():
    d = read_drafter(FIXTURE_QWEN3)
    assert (d.format, d.layer_kind, d.windows) == ("vllm", "qwen3", [256])
    res = _run("validate", FIXTURE_QWEN3, "--target", "smollm2", "--deep", "--json")
    assert res.exit_code == 0, res.output
    # fp16 weights for an fp32 target (as the Llama fixture), and the window vLLM applies, listed
    assert sorted(f["code"] for f in _findings(res)) == ["I-WINDOW-APPLIED", "W-DTYPE-MISMATCH"], res.output


def test_speculators_round_trip_of_the_qwen3_fixture_is_bit_exact(tmp_path):
    spec, back = tmp_path / "speculators", tmp_path / "back"
    assert _run("convert", FIXTURE_QWEN3, spec, "--format", "speculators", "--verifier", VERIFIER).exit_code == 0
    layer = json.loads((spec / "config.json").read_text())["transformer_layer_config"]
    assert (layer["model_type"], layer["sliding_window"], layer["layer_types"]) == ("qwen3", 256, ["sliding_attention"])
    assert _run("convert", spec, back, "--format", "vllm").exit_code == 0
    a, b = load_file(FIXTURE_QWEN3 / "model.safetensors"), load_file(back / "model.safetensors")
    assert a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]) for k in a)
    assert read_drafter(back).windows == [256] and read_drafter(back).layer_kind == "qwen3"


@pytest.mark.parametrize(
    ("edit", "code", "field"),
    [
        ({"use_sliding_window": False}, "W-SLIDING-WINDOW", "use_sliding_window"),
        ({"sliding_window": 0}, "E-WINDOW-INVALID", "sliding_window"),
        ("q_norm", "E-QKNORM-MISSING", "midlayer.self_attn.q_norm.weight"),
    ],
    ids=["window-off", "window-zero", "no-q-norm"],
)
def test_a_broken_copy_of_the_qwen3_fixture_is_caught_with_the_field_named(tmp_path, edit, code, field):
    copy = tmp_path / "copy"
    shutil.copytree(FIXTURE_QWEN3, copy)
    if edit == "q_norm":
        t = load_file(copy / "model.safetensors")
        save_file({k: v for k, v in t.items() if "q_norm" not in k}, str(copy / "model.safetensors"))
    else:
        cfg = json.loads((copy / "config.json").read_text())
        (copy / "config.json").write_text(json.dumps({**cfg, **edit}))
    found = [f for f in _findings(_run("validate", copy, "--json")) if f["code"] == code]
    assert found and found[0]["subject"] == field


@pytest.mark.vllm
@pytest.mark.real
def test_the_qwen3_drafter_is_lossless_in_vllm_and_the_engines_agree_past_its_window(shared_engine_runs, tmp_path):
    narrow = tmp_path / "window-24"
    assert _run("convert", FIXTURE_QWEN3, narrow, "--set", "sliding_window=24").exit_code == 0
    assert read_drafter(narrow).windows == [24]  # the 32 output tokens alone outgrow it, on every prompt
    report_path = tmp_path / "verify.json"
    res = _run(
        "verify",
        *SETTINGS,
        "--drafter",
        narrow,
        "--engine",
        "vllm",
        "--engine",
        "reference",
        "--report",
        report_path,
    )
    assert res.exit_code == 0, res.output
    report = json.loads(report_path.read_text())
    for d in report["drafters"]:
        assert len(d["prompts"]) == PROMPTS and all(p["match"] for p in d["prompts"])
    other = report["cross_engine"]["engines"][0]
    assert other["engine"]["name"] == "reference"
    for row, d in zip(other["comparison"], other["drafters"]):
        assert row["agree"] and abs(row["relative_difference"]) <= 0.05, row
        assert d["lossless"]
    (d,) = report["drafters"]
    assert d["acceptance"]["overall"]["acceptance_length"] > 1.3  # trained, and still drafting with 24 positions
