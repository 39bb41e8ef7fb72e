"""The card and the files `eaglehub publish` uploads for a calibrated EAGLE-3.1 upgrade of the committed SmolLM2
drafter (a real `convert --to 3.1 --calibrate` against SmolLM2-135M-Instruct, 1 fine-tuning step): what the
calibration rewrote, with the fit's figures; aux ids the config leaves to the engine written as the engine's
default for this target; no local path in the card, the uploaded `eaglehub.json` or `eaglehub-verify.json`;
and the text dry run shows the card it would upload."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.paths import FIXTURE
from helpers.scripted import BASE, GOOD, ScriptedEngine, write_prompts
from huggingface_hub import ModelCard, hf_hub_download

from eaglehub.cli import main
from eaglehub.io.schemas import validate_json
from eaglehub.verify import run as verify
from eaglehub.verify.report import write_report

pytestmark = [pytest.mark.slow, pytest.mark.real]

REPO = "org/smollm2-eagle3.1"


def cli(*args):
    res = CliRunner().invoke(main, [str(a) for a in args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """``(upgrade, convert --json report)``: the fixture upgraded with calibration (1 prompt fitted, 2 held out,
    16 tokens each; one fine-tuning step of every weight)."""
    root = tmp_path_factory.mktemp("calibrated")
    prompts = root / "calibration.jsonl"
    rows = Path("eaglehub/data/prompts/calibration.jsonl").read_text().splitlines()[:3]
    prompts.write_text("\n".join(rows) + "\n")
    out = root / "smollm2-eagle3.1"
    res = cli(
        "convert", FIXTURE, out, "--to", "3.1", "--calibrate", "--target", "smollm2", "--steps", "1",
        "--calibration-prompts", prompts, "--calibration-tokens", "16", "--no-norm-output", "--json",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    return out, json.loads(res.stdout)


def _local_strings(*roots: Path) -> list[str]:
    """What a leaked local path would contain: these directories, the home and working directories, the cache."""
    from eaglehub.io.resources import cache_dir

    return [str(p) for p in (*roots, Path.home(), Path.cwd(), cache_dir())]


def test_card_and_uploaded_files_say_what_calibration_did_without_local_paths(
    calibrated, fake_hub, hf_env, tmp_path, monkeypatch
):
    upgrade, report = calibrated
    cal = report["calibration"]
    replaced = report["replaced_tensors"]
    assert len(replaced) == 13 and "fc.weight" in replaced  # one step of every trained weight rewrote them all
    # a passing verify report for these very files (scripted engine: no second model run)
    prompts = tmp_path / "p.jsonl"
    write_prompts(prompts)
    monkeypatch.setattr("eaglehub.engines.chat.encode_chat", lambda t, msgs: [[1, 2, 3]] * len(msgs))
    engine = ScriptedEngine({upgrade.name: (BASE, GOOD)})
    opts = verify.VerifyOptions(target="smollm2", drafters=[str(upgrade)], k=3, max_tokens=4, prompts_file=str(prompts))
    gate = tmp_path / "gate.verify.json"
    write_report(verify.run_verify(opts, engine=engine), gate)
    leaks = _local_strings(upgrade.parent, tmp_path)
    assert any(s in gate.read_text() for s in leaks)  # the local report does hold them

    res = cli("publish", upgrade, "--repo", REPO, "--no-pr", "--report", gate, "--endpoint", fake_hub.url, "--json")
    assert res.exit_code == 0, res.output
    uploaded = {
        name: Path(hf_hub_download(REPO, name, endpoint=fake_hub.url, cache_dir=tmp_path / "dl")).read_text()
        for name in ("README.md", "eaglehub.json", "eaglehub-verify.json")
    }
    for name, text in uploaded.items():
        assert not [s for s in leaks if s in text], name
    provenance, verify_report = json.loads(uploaded["eaglehub.json"]), json.loads(uploaded["eaglehub-verify.json"])
    validate_json(provenance, "provenance")
    validate_json(verify_report, "verify-report")
    assert provenance["source"]["path"] == FIXTURE.name
    assert provenance["conversion"]["calibration"]["target"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert provenance["conversion"]["calibration"]["prompts"]["file"] == "calibration.jsonl"
    assert provenance["conversion"]["replaced_tensors"] == replaced  # the rest is the local file's, as it was
    assert verify_report["drafters"][0]["drafter"] == upgrade.name  # --reference-report still matches it by name
    assert verify_report["target"]["path"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert verify_report["prompts"]["file"] == prompts.name

    text = ModelCard(uploaded["README.md"]).text
    made = text[text.index("## How it was made") :]
    step = next(line for line in made.splitlines() if line.startswith("- eaglehub"))
    assert f"`{FIXTURE.name}` (vllm, EAGLE-3) → vllm, EAGLE-3.1" in step
    assert "vllm serve HuggingFaceTB/SmolLM2-135M-Instruct --speculative-config" in text
    assert "added `fc_norm.0.weight`, `fc_norm.1.weight`, `fc_norm.2.weight`" in step
    assert f"rewrote 13 trained tensors by fine-tuning: {', '.join(f'`{t}`' for t in replaced)}" in step
    assert "calibrated on HuggingFaceTB/SmolLM2-135M-Instruct" in step
    assert "fitted by least squares per channel to the target's aux states on 1 prompt" in step
    assert f"({cal['prompts']['tokens']} target tokens, `calibration.jsonl`)" in step
    tune = cal["fine_tuning"]
    assert f"fine-tuned (all) for 1 step at lr 0.0001, {tune['objective']}" in step
    assert f"loss {tune['loss_first']:.3f} → {tune['loss_last']:.3f}" in step
    al = cal["acceptance"]
    assert (
        "acceptance length on 2 held-out prompts (reference engine): "
        f"source {al['source']['acceptance_length']:.3f}, "
        f"plain upgrade (unit gains) {al['plain_upgrade']['acceptance_length']:.3f}, "
        f"fitted gains {al['closed_form']['acceptance_length']:.3f}, "
        f"calibrated {al['calibrated']['acceptance_length']:.3f}"
    ) in step
    assert "| aux-layer ids | `[2, 15, 27]` via `eagle_aux_hidden_state_layer_ids`" in made

    # the text dry run shows the card it would upload
    res = cli("publish", upgrade, "--repo", REPO, "--report", gate, "--endpoint", fake_hub.url, "--dry-run")
    assert res.exit_code == 0, res.output
    assert "model card (uploaded as README.md" in res.stdout
    assert "## How it was made" in res.stdout and "rewrote 13 trained tensors" in res.stdout
    assert not [s for s in leaks if s in res.stdout.split("model card (uploaded", 1)[1]]


def test_aux_ids_left_to_the_engine_are_written_as_its_default(calibrated, fake_hub, hf_env, tmp_path):
    upgrade, _ = calibrated
    bare = tmp_path / "no-aux-ids"
    shutil.copytree(upgrade, bare)
    config = json.loads((bare / "config.json").read_text())
    del config["eagle_aux_hidden_state_layer_ids"]
    (bare / "config.json").write_text(json.dumps(config, indent=2))

    def aux_row(*args) -> str:
        res = cli("publish", bare, "--repo", REPO, "--endpoint", fake_hub.url, "--force", "--dry-run", "--json", *args)
        assert res.exit_code == 0, res.output
        text = ModelCard(json.loads(res.stdout)["card"]["text"]).text
        assert "None" not in text
        return next(line for line in text.splitlines() if line.startswith("| aux-layer ids |"))

    # SmolLM2-135M-Instruct has 30 layers: vLLM captures (2, N//2, N-3)
    assert aux_row("--target", "smollm2") == (
        "| aux-layer ids | engine default: layers 2, 15, 27 for this target, as vLLM 0.33.0 on GPU (Model Runner V2) "
        "captures them when the drafter names none |"
    )
    assert aux_row() == (
        "| aux-layer ids | engine default: layers (2, N//2, N-3) of the target's N (target not known), as vLLM 0.33.0 "
        "on GPU (Model Runner V2) captures them when the drafter names none |"
    )
