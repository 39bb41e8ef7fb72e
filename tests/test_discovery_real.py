"""The Hub as the registry of which drafter goes with which target, on the real pair: the SmolLM2 fixture and
its calibrated EAGLE-3.1 upgrade, verified and published with `eaglehub publish` to the local Hub-compatible
server for HuggingFaceTB/SmolLM2-135M-Instruct, are found back for a quantized-target repo whose card names
that model as its base (`base_model_relation: quantized`), listed with their published AL by `eaglehub
drafters`, and verified by `eaglehub verify --target <that repo>` with no drafter and no manifest, against
the target weights in the local cache. Reference engine; 2 prompts x 16 tokens keep it short."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.paths import FIXTURE
from huggingface_hub import snapshot_download

from eaglehub.cli import main
from eaglehub.io.schemas import validate_json
from eaglehub.target import resolve_target

pytestmark = [pytest.mark.slow, pytest.mark.real]

BASE_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
QUANT_ID = "org/SmolLM2-135M-Instruct-quantized"
RUN = ("--engine", "reference", "-k", "3", "--category", "coding", "--category", "math", "--limit", "1")
RUN += ("--max-tokens", "16")


def cli(*args):
    res = CliRunner().invoke(main, [str(a) for a in args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res


def test_published_drafters_are_found_for_a_quantized_target_and_verified(tmp_path, fake_hub, hf_env):
    calibration = tmp_path / "calibration.jsonl"
    rows = Path("eaglehub/data/prompts/calibration.jsonl").read_text().splitlines()[:3]
    calibration.write_text("\n".join(rows) + "\n")  # one category: 1 prompt fitted, 2 held out
    upgrade = tmp_path / "smollm2-eagle3.1"
    res = cli(
        "convert", FIXTURE, upgrade, "--to", "3.1", "--calibrate", "--target", "smollm2", "--steps", "0",
        "--calibration-prompts", calibration, "--calibration-tokens", "16", "--no-norm-output",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    gate = tmp_path / "verify.json"
    res = cli("verify", "--target", "smollm2", "--drafter", FIXTURE, "--drafter", upgrade, *RUN, "--report", gate)
    assert res.exit_code == 0, res.output
    published = {Path(d["drafter"]).name: d["acceptance"]["overall"] for d in json.loads(gate.read_text())["drafters"]}
    for src, repo in ((FIXTURE, "eaglehub-fixtures/smollm2-eagle3"), (upgrade, "eaglehub-fixtures/smollm2-eagle3.1")):
        res = cli("publish", src, "--repo", repo, "--no-pr", "--report", gate, "--endpoint", fake_hub.url, "--json")
        assert res.exit_code == 0, res.output
        assert json.loads(res.stdout)["card"]["base_model"] == BASE_ID
    # the quantized-target repo: SmolLM2's files under a card naming it as the base it quantizes
    local = resolve_target("smollm2")
    files = {p.name: p.read_bytes() for p in local.iterdir() if p.is_file() and p.name != "eaglehub-source.json"}
    card = f"---\nbase_model: {BASE_ID}\nbase_model_relation: quantized\nlibrary_name: transformers\n---\n# stand-in\n"
    fake_hub.create(QUANT_ID, files={**files, "README.md": card.encode()})
    snapshot_download(QUANT_ID, endpoint=fake_hub.url)  # the user's `hf download`: the target weights are local

    res = cli("drafters", "--target", QUANT_ID, "--endpoint", fake_hub.url, "--json")
    assert res.exit_code == 0, res.output
    listing = json.loads(res.stdout)
    validate_json(listing, "drafters-report")
    assert [s["repo_id"] for s in listing["lineage"]] == [QUANT_ID, BASE_ID]
    found = {d["repo_id"]: d for d in listing["drafters"]}
    assert set(found) == {"eaglehub-fixtures/smollm2-eagle3", "eaglehub-fixtures/smollm2-eagle3.1"}
    assert found["eaglehub-fixtures/smollm2-eagle3"]["eagle_version"] == "3"
    assert found["eaglehub-fixtures/smollm2-eagle3.1"]["eagle_version"] == "3.1"
    for repo, name in (
        ("eaglehub-fixtures/smollm2-eagle3", FIXTURE.name),
        ("eaglehub-fixtures/smollm2-eagle3.1", upgrade.name),
    ):
        claim = found[repo]["claim"]
        assert claim["acceptance_length"] == pytest.approx(published[name]["acceptance_length"])
        assert (claim["num_speculative_tokens"], claim["max_tokens"], claim["num_prompts"]) == (3, 16, 2)
    table = cli("drafters", "--target", QUANT_ID, "--endpoint", fake_hub.url)
    assert f"{published[FIXTURE.name]['acceptance_length']:.3f}" in table.output

    res = cli("verify", "--target", QUANT_ID, "--hub-endpoint", fake_hub.url, *RUN, "--json")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    validate_json(summary, "verify-summary")
    rows = {r["drafter"]: r for r in summary["pairs"]}
    assert set(rows) == {"smollm2-eagle3", "smollm2-eagle3.1"} and summary["manifest"] is None
    by_name = {"smollm2-eagle3": FIXTURE.name, "smollm2-eagle3.1": upgrade.name}
    for name, row in rows.items():
        assert row["lossless"] and row["num_prompts"] == 2 and row["target_spec"] == QUANT_ID
        # the same weights, engine, prompts and settings as the published report: the claim, exactly
        assert row["acceptance_length"] == pytest.approx(published[by_name[name]]["acceptance_length"])
        assert row["acceptance_length"] > 1.2 and row["findings"] == []
        assert Path(row["drafter_path"]).is_relative_to(tmp_path / "hf-home")  # downloaded into hf_env's cache
