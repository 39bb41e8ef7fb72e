"""eaglehub pipeline: validate → convert → quantize → verify → publish per manifest drafter, one
summary valid against schemas/pipeline-report.schema.json. Tiny checkpoints with a scripted engine
(fast), and the fixture manifest end to end in vLLM against the fake hub (`vllm`, `real`)."""

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.scripted import BASE, GOOD, ScriptedEngine, write_prompts
from huggingface_hub import hf_hub_download
from safetensors import safe_open

from eaglehub.cli import main
from eaglehub.io.schemas import validate_json
from eaglehub.verify import run as verify
from eaglehub.verify.manifest import load_manifest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "smollm2-eagle3"
FIXTURE_MANIFEST = ROOT / "fixtures" / "manifests" / "smollm2-pipeline.toml"


def _run(*args):
    res = CliRunner(env={"COLUMNS": "250"}).invoke(main, [str(a) for a in args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res


@pytest.fixture
def tiny(tmp_path, monkeypatch, make_drafter, make_target):
    """A manifest with the tiny target and two drafters: ``good`` (→ 3.1 → FP8, verified with its
    source, published) and ``broken`` (no lm_head: validation fails); the scripted engine verifies."""
    make_target(n_layers=8)
    make_drafter("good")
    make_drafter("broken", mutate=lambda cfg, t: t.pop("lm_head.weight"))
    write_prompts(tmp_path / "p.jsonl")
    (tmp_path / "pipeline.toml").write_text("""
[targets.tiny]
spec = "./target8"

[[drafters]]
path = "good"
target = "tiny"
name = "good-fp8"
num_speculative_tokens = 3
convert = { to = "3.1" }
quantize = { scheme = "fp8-dynamic" }
verify = { prompts = "p.jsonl", max_tokens = 4, engine = "reference" }
publish = { repo = "org/good-fp8" }

[[drafters]]
path = "broken"
target = "tiny"
verify = { prompts = "p.jsonl", max_tokens = 4 }
publish = { repo = "org/broken" }
""")
    engine = ScriptedEngine({"quantized": (BASE, GOOD), "good": (BASE, {k: c for k, c in GOOD.items() if k == "math"})})
    chosen = []
    monkeypatch.setattr(verify, "make_engines", lambda names, **kw: chosen.append(names) or [engine])
    monkeypatch.setattr("eaglehub.engines.chat.encode_chat", lambda t, msgs: [[1, 2, 3]] * len(msgs))
    return tmp_path, engine, chosen


def test_the_manifest_sections_load_and_verify_ignores_them(tiny):
    tmp_path, _, _ = tiny
    m = load_manifest(tmp_path / "pipeline.toml")
    assert m.entries[0].stages == {
        "convert": {"to": "3.1"},
        "quantize": {"scheme": "fp8-dynamic"},
        "verify": {"prompts": "p.jsonl", "max_tokens": 4, "engine": "reference"},
        "publish": {"repo": "org/good-fp8"},
    }
    assert m.entries[0].settings == {"num_speculative_tokens": 3}
    bad = tmp_path / "bad.toml"
    bad.write_text((tmp_path / "pipeline.toml").read_text().replace('scheme = "fp8-dynamic"', 'scheme = "int3"'))
    res = _run("pipeline", bad)
    assert res.exit_code == 2 and "drafters[0].quantize.scheme" in res.stderr
    bad.write_text(
        (tmp_path / "pipeline.toml").read_text().replace('convert = { to = "3.1" }', "convert = { calibrate = true }")
    )
    res = _run("pipeline", bad)
    assert res.exit_code == 2 and "drafters[0].convert" in res.stderr and "'to' is a required property" in res.stderr
    assert load_manifest(ROOT / "fixtures" / "manifests" / "smollm2.toml").entries[0].stages == {}


@pytest.mark.slow
def test_pipeline_dry_run_end_to_end_on_tiny_checkpoints(tiny, fake_hub, hf_env):
    tmp_path, engine, chosen = tiny
    work = tmp_path / "work"
    res = _run(
        "pipeline",
        tmp_path / "pipeline.toml",
        "--work-dir",
        work,
        "--endpoint",
        fake_hub.url,
        "--report",
        tmp_path / "summary.json",
        "--json",
    )
    assert res.exit_code == 1, res.output  # `broken` fails validation
    summary = json.loads(res.stdout)
    validate_json(summary, "pipeline-report")
    assert summary == json.loads((tmp_path / "summary.json").read_text())
    good, broken = summary["drafters"]
    assert [(s["name"], s["status"]) for s in good["steps"]] == [
        ("validate", "ok"),
        ("convert", "ok"),
        ("quantize", "ok"),
        ("verify", "ok"),
        ("publish", "ok"),
    ]
    assert good["passed"] and good["output"] == str(work / "tiny--good-fp8" / "quantized")
    steps = {s["name"]: s["summary"] for s in good["steps"]}
    assert steps["quantize"]["scheme"] == "fp8-dynamic" and steps["quantize"]["sizes"]["ratio"] < 0.7
    with safe_open(work / "tiny--good-fp8" / "quantized" / "model.safetensors", "pt") as f:
        assert str(f.get_slice("midlayer.self_attn.q_proj.weight").get_dtype()) == "F8_E4M3"
        assert "fc_norm.0.weight" in f.keys()  # the 3.1 upgrade came first
    v = steps["verify"]
    assert chosen == [["reference"]] and [c[0] for c in engine.calls] == [None, "quantized", "good"]
    assert [Path(d["drafter"]).name for d in v["drafters"]] == ["quantized", "good"]
    assert v["drafters"][0]["acceptance_length"] == pytest.approx(2.1) and v["drafters"][0]["lossless"] == "4/4"
    assert v["drafters"][1]["acceptance_length"] == pytest.approx(2.5)
    assert Path(v["report"]) == work / "tiny--good-fp8" / "quantized.verify.json"
    p = steps["publish"]
    assert p["dry_run"] and p["repo"] == "org/good-fp8" and p["result"] is None and p["parent_commit"] is None
    assert set(p["changed"]) == {
        "config.json",
        "model.safetensors",
        "eaglehub.json",
        "README.md",
        "eaglehub-verify.json",
    }
    assert [(s["name"], s["status"]) for s in broken["steps"]] == [
        ("validate", "failed"),
        ("verify", "skipped"),
        ("publish", "skipped"),
    ]
    assert "E-LMHEAD-MISSING" in broken["steps"][0]["error"] and not broken["passed"] and not summary["passed"]
    assert fake_hub.posts() == []  # a dry run writes nothing
    table = _run(
        "pipeline",
        tmp_path / "pipeline.toml",
        "--work-dir",
        work,
        "--endpoint",
        fake_hub.url,
        "--drafter",
        "good-fp8",
    )
    assert table.exit_code == 0 and "2.100 vs 2.500" in table.output and "dry run: org/good-fp8@main" in table.output


def test_pipeline_publish_opens_the_pull_request(tiny, fake_hub, hf_env):
    tmp_path, _, _ = tiny
    res = _run(
        "pipeline",
        tmp_path / "pipeline.toml",
        "--work-dir",
        tmp_path / "work",
        "--endpoint",
        fake_hub.url,
        "--drafter",
        "good-fp8",
        "--publish",
        "--json",
    )
    assert res.exit_code == 0, res.output
    step = json.loads(res.stdout)["drafters"][0]["steps"][-1]["summary"]
    assert not step["dry_run"] and step["result"]["pr_num"] == 1
    card = fake_hub.files("org/good-fp8", "refs/pr/1")["README.md"].decode()
    assert "- compressed-tensors" in card and "- eagle3.1" in card and "- fp8" in card
    assert "| **this drafter** | 4 / 4 token-identical | 2.100 |" in card and "| `good` (same run) |" in card
    assert "quantized: `compressed-tensors`" in card
    assert "`good` (vllm, EAGLE-3) → vllm, EAGLE-3.1; added `fc_norm.0.weight`" in card
    assert "`converted` (vllm, EAGLE-3.1) → vllm, EAGLE-3.1; quantized fp8-dynamic (7 tensors" in card
    assert str(tmp_path) not in card  # local paths stay out of the card


@pytest.mark.vllm
@pytest.mark.real
def test_fixture_pipeline_in_vllm_then_publish_the_fixture(fake_hub, hf_env, shared_engine_runs, tmp_path):
    """The fixture manifest end to end on this CPU (vLLM, one prompt per category, 32 tokens: the shared settings of
    helpers/real_runs.py, so the target-alone and fixture runs are the other real-pair tests' runs):
    both drafters pass; the dry runs write nothing; then the fixture drafter is published for real
    with the pipeline's verify report: its files download back byte-identical and the card holds
    the AL measured."""
    assert os.environ.get("EAGLEHUB_CACHE") or (Path.home() / ".cache" / "eaglehub" / "targets").is_dir()
    work = tmp_path / "work"
    # the closed-form gains only (calibration_steps = 0): fine-tuning is test_calibrate's, and its 20 steps here
    # were 30 s of this test; the upgrade still has to keep the source's acceptance
    text = FIXTURE_MANIFEST.read_text().replace('path = "../smollm2-eagle3"', f'path = "{FIXTURE}"')
    manifest = tmp_path / "smollm2-pipeline.toml"
    manifest.write_text(text.replace("calibration_limit = 3 }", "calibration_limit = 3, calibration_steps = 0 }"))
    assert manifest.read_text().count("calibration_steps = 0") == 1 and "../" not in manifest.read_text()
    res = _run("pipeline", manifest, "--work-dir", work, "--endpoint", fake_hub.url, "--json")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    validate_json(summary, "pipeline-report")
    plain, fp8 = summary["drafters"]
    assert [s["name"] for s in fp8["steps"]] == ["validate", "convert", "quantize", "verify", "publish"]
    assert all(s["status"] == "ok" for r in (plain, fp8) for s in r["steps"])
    verified = {r["drafter"]: {s["name"]: s["summary"] for s in r["steps"]}["verify"] for r in (plain, fp8)}
    assert verified["eagle3"]["engine"]["name"] == "vllm" and verified["eagle3"]["prompts"] == 6
    al_plain = verified["eagle3"]["drafters"][0]["acceptance_length"]
    al_fp8, al_source = (d["acceptance_length"] for d in verified["eagle3.1-fp8"]["drafters"])
    assert al_source == pytest.approx(al_plain)  # the same drafter, prompts and settings in both runs
    # the calibrated 3.1 upgrade, FP8: near the source (a plain upgrade would fall to ~1.1); 6 prompts x 32 tokens
    assert 1.3 < al_plain and abs(al_fp8 - al_plain) < 0.1 * al_plain
    calibration = {s["name"]: s["summary"] for s in fp8["steps"]}["convert"]["calibration"]
    held = calibration["held_out_acceptance_length"]
    assert calibration["norm_output"] is False and held["calibrated"] > held["plain_upgrade"] + 0.3
    assert calibration["fine_tuning_steps"] == 0
    assert all(d["lossless"] == "6/6" for v in verified.values() for d in v["drafters"])
    assert fake_hub.posts() == []
    report = Path(verified["eagle3"]["report"])
    res = _run(
        "publish",
        FIXTURE,
        "--repo",
        "eaglehub-fixtures/smollm2-eagle3",
        "--endpoint",
        fake_hub.url,
        "--report",
        report,
        "--json",
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert (
        doc["result"]["revision"] == "refs/pr/1" and doc["card"]["base_model"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    )
    for name in ("config.json", "model.safetensors", "training.json"):
        path = hf_hub_download(
            "eaglehub-fixtures/smollm2-eagle3",
            name,
            revision="refs/pr/1",
            endpoint=fake_hub.url,
            cache_dir=tmp_path / "dl",
        )
        assert Path(path).read_bytes() == (FIXTURE / name).read_bytes()
    card = fake_hub.files("eaglehub-fixtures/smollm2-eagle3", "refs/pr/1")["README.md"].decode()
    entry = json.loads(report.read_text())["drafters"][0]
    rates = " / ".join(f"{r:.3f}" for r in entry["acceptance"]["overall"]["acceptance_rate_per_position"])
    assert f"| **this drafter** | 6 / 6 token-identical | {al_plain:.3f} | {rates} |" in card
    assert "vllm 0.32.0" in card and "vllm serve HuggingFaceTB/SmolLM2-135M-Instruct" in card
