"""Discovery: `eaglehub drafters --target T` and `verify --target T` without drafters, over the fake Hub's
model search. Tiny target and drafters, published with `eaglehub publish` (card base_model = the target),
found back through the model-tree tags of the target and of the model a quantized target names as its base;
the scripted engine stands in for vLLM (the real pair runs in test_discovery_real.py)."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.scripted import BASE, GOOD, ScriptedEngine, write_prompts
from huggingface_hub import snapshot_download

from eaglehub.cli import main
from eaglehub.discovery.tree import Base, bases_from_card, bases_from_tags, drafter_view
from eaglehub.engines.base import SpecCounters
from eaglehub.io.schemas import validate_json
from eaglehub.verify import run as verify
from eaglehub.verify.report import write_report

BASE_ID = "org/tiny-target"
QUANT_ID = "org/tiny-target-fp8"
WEAK = {"math": SpecCounters(8, 24, 4, (3, 1, 0)), "coding": SpecCounters(6, 18, 2, (2, 0, 0))}  # AL 1.43


class AnyDrafter(dict):
    """Scripts by drafter directory name; a downloaded drafter's directory is its commit, so one script for all."""

    def __init__(self, script):
        super().__init__()
        self.script = script

    def __missing__(self, key):
        return (BASE, self.script)


def cli(*args):
    res = CliRunner().invoke(main, [str(a) for a in args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res


@pytest.fixture
def hub_tree(tmp_path, monkeypatch, make_drafter, make_target, fake_hub, hf_env):
    """On the fake Hub: the tiny target (``org/tiny-target``), a quantized copy whose config has a
    quantization_config (relation inferred ``quantized``), a fine-tune of the target that is a full model
    (not a drafter), and the drafter ``good`` published by `eaglehub publish --base-model org/tiny-target`
    with its scripted verify report (AL 2.1 at k 3, 4 tokens, 4 prompts)."""
    target = make_target(n_layers=8)
    cfg = json.loads((target / "config.json").read_text())
    quant = {**cfg, "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"}}
    fake_hub.create(BASE_ID, files={"config.json": json.dumps(cfg).encode(), "README.md": b"---\nlicense: mit\n---\n"})
    fake_hub.create(
        QUANT_ID,
        files={"config.json": json.dumps(quant).encode(), "README.md": f"---\nbase_model: {BASE_ID}\n---\n".encode()},
    )
    fake_hub.create(
        "org/tiny-target-chat",
        files={"config.json": json.dumps(cfg).encode(), "README.md": f"---\nbase_model: {BASE_ID}\n---\n".encode()},
    )
    prompts = tmp_path / "p.jsonl"
    write_prompts(prompts)
    monkeypatch.setattr("eaglehub.engines.chat.encode_chat", lambda t, msgs: [[1, 2, 3]] * len(msgs))
    drafter = make_drafter("good")
    opts = verify.VerifyOptions(
        target=str(target), drafters=[str(drafter)], k=3, max_tokens=4, prompts_file=str(prompts)
    )
    write_report(verify.run_verify(opts, engine=ScriptedEngine({"good": (BASE, GOOD)})), tmp_path / "good.verify.json")
    res = cli(
        "publish", drafter, "--repo", "org/good-eagle3", "--no-pr", "--base-model", BASE_ID, "--endpoint", fake_hub.url
    )
    assert res.exit_code == 0, res.output
    return {"hub": fake_hub, "target": target, "prompts": prompts, "drafter": drafter}


def test_model_tree_relations_from_tags_and_cards():
    tags = ["eagle3", "base_model:org/a", "base_model:quantized:org/a", "base_model:finetune:org/b", "base_model:x:y"]
    assert bases_from_tags(tags) == [Base("org/a", "quantized"), Base("org/b", "finetune")]
    assert bases_from_card({"base_model": "org/a"}, {"quantization_config": {"quant_method": "fp8"}}) == [
        Base("org/a", "quantized")
    ]
    assert bases_from_card({"base_model": ["org/a", "org/b"]}) == [Base("org/a", "merge"), Base("org/b", "merge")]
    assert bases_from_card({"base_model": "org/a"}, files=["adapter_config.json"]) == [Base("org/a", "adapter")]
    assert bases_from_card({"base_model": "org/a", "base_model_relation": "quantized"}) == [Base("org/a", "quantized")]
    assert bases_from_card({"base_model": "not-an-id"}) == []


def test_drafter_view_tells_drafters_from_targets():
    fixture = json.loads(Path("fixtures/smollm2-eagle3/config.json").read_text())
    view = drafter_view(fixture)
    assert view is not None and (view.format, view.eagle_version) == ("vllm", "3")
    assert drafter_view({**fixture, "norm_output": True}).eagle_version == "3.1"
    spec = {"speculators_model_type": "eagle3", "speculators_config": {"proposal_methods": [{"speculative_tokens": 5}]}}
    assert (drafter_view(spec).format, drafter_view(spec).num_speculative_tokens) == ("speculators", 5)
    assert drafter_view({"architectures": ["LlamaForCausalLM"], "draft_vocab_size": 32000}).format == "vllm"
    target = {"architectures": ["LlamaForCausalLM"], "hidden_size": 576}
    assert drafter_view(target) is None  # the target itself, or a fine-tune of it
    assert drafter_view(target, ["speculative-decoding"]).format == "unknown"  # a card that says drafter


def test_drafters_of_a_quantized_target_are_those_of_its_base(hub_tree):
    hub = hub_tree["hub"]
    res = cli("drafters", "--target", QUANT_ID, "--endpoint", hub.url, "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    validate_json(report, "drafters-report")
    assert report["lineage"] == [
        {"repo_id": QUANT_ID, "relation": None, "of": None},
        {"repo_id": BASE_ID, "relation": "quantized", "of": QUANT_ID},
    ]
    assert report["searched_tags"] == [f"base_model:{QUANT_ID}", f"base_model:{BASE_ID}"]
    (d,) = report["drafters"]  # not the quantized target, not the full-model fine-tune
    assert (d["name"], d["repo_id"], d["source"], d["base_model"]) == ("good-eagle3", "org/good-eagle3", "hub", BASE_ID)
    assert (d["format"], d["eagle_version"], d["relation"]) == ("vllm", "3", "finetune")
    weights = (hub_tree["drafter"] / "model.safetensors").stat().st_size
    assert 0.9 * weights < d["size_bytes"] <= weights  # parameter bytes, without the safetensors header
    claim = d["claim"]
    assert claim["acceptance_length"] == pytest.approx(2.1) and claim["source"] == "eaglehub-verify.json"
    assert (claim["num_speculative_tokens"], claim["max_tokens"], claim["num_prompts"]) == (3, 4, 4)
    assert claim["engine"] == "scripted 1.0" and d["num_speculative_tokens"] == 3
    table = cli("drafters", "--target", QUANT_ID, "--endpoint", hub.url)
    assert "good-eagle3" in table.output and "2.100" in table.output and "quantized of" in table.output
    # the Hub they were found on goes with the command: verify would otherwise look on the default Hub
    assert f"eaglehub verify --target {QUANT_ID} --hub-endpoint {hub.url}" in " ".join(table.output.split())


def test_no_drafter_found_exits_1_and_an_unreachable_hub_is_one_line(hub_tree):
    hub = hub_tree["hub"]
    res = cli("drafters", "--target", "org/tiny-target-chat", "--endpoint", hub.url, "--json")
    assert res.exit_code == 1 and json.loads(res.stdout)["drafters"] == []
    res = cli("drafters", "--target", "org/nowhere", "--endpoint", hub.url, "--json")
    assert res.exit_code == 1
    assert json.loads(res.stdout)["notes"] == [
        f"org/nowhere is not on the Hub at {hub.url} (or not visible with this token)"
    ]
    res = cli("drafters", "--target", BASE_ID, "--endpoint", "http://127.0.0.1:9")
    assert res.exit_code == 2 and "cannot reach the Hub at http://127.0.0.1:9" in res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) <= 2
    res = cli("drafters", "--target", "no such thing")
    assert res.exit_code == 2 and "neither a Hub id" in res.output


def test_offline_discovery_reads_the_local_cache_and_says_so(hub_tree, monkeypatch):
    from huggingface_hub import constants

    hub = hub_tree["hub"]
    for repo in (QUANT_ID, "org/good-eagle3"):
        snapshot_download(repo, endpoint=hub.url)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    res = cli("drafters", "--target", QUANT_ID, "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["offline"] is True and report["endpoint"] is None
    assert any("offline (HF_HUB_OFFLINE)" in n for n in report["notes"])
    assert [s["repo_id"] for s in report["lineage"]] == [QUANT_ID, BASE_ID]  # from the cached card and config
    (d,) = report["drafters"]
    assert (d["repo_id"], d["source"], d["claim"]["acceptance_length"]) == (
        "org/good-eagle3",
        "cache",
        pytest.approx(2.1),
    )
    assert Path(d["path"], "config.json").is_file()


def _verify(hub_tree, monkeypatch, script, *args):
    """`verify --target QUANT_ID` (no drafter, no manifest) with the scripted engine giving every drafter ``script``."""
    hub = hub_tree["hub"]
    snapshot_download(QUANT_ID, endpoint=hub.url)  # the target's files, as a user's download left them
    engine = ScriptedEngine(AnyDrafter(script))
    monkeypatch.setattr("eaglehub.engines.registry.make_engines", lambda *a, **k: [engine])
    return cli(
        "verify", "--target", QUANT_ID, "--hub-endpoint", hub.url, "-k", "3", "--prompts", hub_tree["prompts"], *args
    )


def test_verify_target_alone_verifies_what_discovery_finds(hub_tree, monkeypatch, tmp_path):
    res = _verify(hub_tree, monkeypatch, GOOD, "--max-tokens", "4", "--json", "--report-dir", tmp_path / "out")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    validate_json(summary, "verify-summary")
    assert summary["manifest"] is None and summary["discovery"]["num_drafters"] == 1
    (row,) = summary["pairs"]
    assert (row["target"], row["drafter"], row["lossless"], row["passed"]) == (
        "tiny-target-fp8",
        "good-eagle3",
        True,
        True,
    )
    assert row["acceptance_length"] == pytest.approx(2.1) and row["findings"] == []
    assert Path(row["drafter_path"], "model.safetensors").is_file()  # downloaded into the cache
    assert (tmp_path / "out" / "tiny-target-fp8--good-eagle3.json").is_file()


def test_a_claim_not_reached_at_its_own_settings_fails_and_at_others_warns(hub_tree, monkeypatch, tmp_path):
    res = _verify(hub_tree, monkeypatch, WEAK, "--max-tokens", "4", "--json")
    assert res.exit_code == 1
    (row,) = json.loads(res.stdout)["pairs"]
    assert row["findings"] == ["E-VERIFY-AL-CLAIM"] and not row["passed"] and row["lossless"]
    res = _verify(hub_tree, monkeypatch, WEAK, "--max-tokens", "8", "--json", "--report-dir", tmp_path / "out")
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)["pairs"]
    assert row["findings"] == ["W-VERIFY-AL-CLAIM"] and row["passed"]
    (f,) = json.loads(Path(row["report"]).read_text())["drafters"][0]["findings"]
    assert (
        "claims AL 2.100 (eaglehub-verify.json), this run measured 1.429 (over 14 drafts of 4 prompts, 95 % interval "
        "1.163 to 1.856): 32.0% below" in f["message"]
    )
    assert "max_tokens 4 vs 8" in f["message"]
    assert f["hint"].startswith(
        f"re-run at the claim's settings to hold it to them: eaglehub verify --target {QUANT_ID}"
    )
    assert "-k 3 --max-tokens 4" in f["hint"]
    table = _verify(hub_tree, monkeypatch, WEAK, "--max-tokens", "8")
    assert "good-eagle3: AL 1.429 measured, 2.100 claimed (eaglehub-verify.json, scripted 1.0, k 3)" in table.output


def test_verify_picks_a_discovered_drafter_by_name(hub_tree, monkeypatch):
    res = _verify(hub_tree, monkeypatch, GOOD, "--max-tokens", "4", "--drafter", "good-eagle3", "--json")
    assert res.exit_code == 0 and [r["drafter"] for r in json.loads(res.stdout)["pairs"]] == ["good-eagle3"]
    res = _verify(hub_tree, monkeypatch, GOOD, "--drafter", "other")
    assert (
        res.exit_code == 1
        and "no drafter for org/tiny-target-fp8" in res.output
        and "no drafter named other" in res.output
    )


def test_a_target_not_downloaded_stops_before_any_drafter_download(hub_tree):
    hub = hub_tree["hub"]
    res = cli("verify", "--target", QUANT_ID, "--hub-endpoint", hub.url)
    assert res.exit_code == 2 and "not in the local Hugging Face cache" in res.output
    assert "found 1 drafter(s) for it: org/good-eagle3" in res.output and f"hf download {QUANT_ID}" in res.output
    assert not [path for method, path in hub.log if "/resolve/" in path and "good-eagle3" in path and "model" in path]


def test_drafters_are_judged_per_profile_from_the_config_files(hub_tree, tmp_path):
    """A Granite MoE target: vLLM 0.33 captures its aux states, 0.32 and SGLang 0.5.23 do not (each release's
    engine table); a Qwen3-style drafter for it: vLLM builds its class, SGLang has none. Judged from the
    config files only, and the report says which profiles it judged."""
    import copy

    from helpers.checkpoints import BASE_CONFIG, drafter_tensors, qwen3_layers

    hub = hub_tree["hub"]
    target = json.loads((hub_tree["target"] / "config.json").read_text())
    hub.create(
        "org/granite-moe",
        files={"config.json": json.dumps({**target, "architectures": ["GraniteMoeForCausalLM"]}).encode()},
    )
    cfg = copy.deepcopy(BASE_CONFIG)
    qwen3_layers(cfg, drafter_tensors(cfg))
    card = b"---\nbase_model: org/granite-moe\ntags: [eagle3]\n---\n"
    hub.create("org/q3-eagle3", files={"config.json": json.dumps(cfg).encode(), "README.md": card})
    profiles = ("--profile", "vllm-0.32-cpu", "--profile", "vllm-0.33-gpu", "--profile", "sglang-0.5.23")
    res = cli("drafters", "--target", "org/granite-moe", "--endpoint", hub.url, "--json", *profiles)
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    validate_json(report, "drafters-report")
    assert report["target_architecture"] == "GraniteMoeForCausalLM"
    verdicts = {p["id"]: p["target_eagle3"] for p in report["profiles"]}
    assert verdicts == {"vllm-0.32-cpu": False, "vllm-0.33-gpu": True, "sglang-0.5.23": False}
    assert "registered in vLLM 0.32.0 but" in report["profiles"][0]["target_note"]
    (d,) = report["drafters"]
    builds = {e["profile"]: e["builds"] for e in d["engines"]}
    assert builds == {"vllm-0.32-cpu": True, "vllm-0.33-gpu": True, "sglang-0.5.23": False}
    assert "Eagle3Qwen3ForCausalLM" in next(e["error"] for e in d["engines"] if e["profile"] == "sglang-0.5.23")
    text = " ".join(cli("drafters", "--target", "org/granite-moe", "--endpoint", hub.url, *profiles).output.split())
    assert (
        "vLLM 0.33.0 on GPU (Model Runner V2): GraniteMoeForCausalLM feeds EAGLE-3 drafters; builds q3-eagle3" in text
    )
    assert "SGLang 0.5.23: GraniteMoeForCausalLM cannot feed EAGLE-3 drafters" in text
    default = json.loads(cli("drafters", "--target", BASE_ID, "--endpoint", hub.url, "--json").stdout)
    assert [(p["id"], p["default"], p["target_eagle3"]) for p in default["profiles"]] == [("vllm-0.33-gpu", True, True)]
    assert default["drafters"][0]["engines"] == [{"profile": "vllm-0.33-gpu", "builds": True, "error": None}]


def test_offline_hints_carry_hf_hub_offline(hub_tree, monkeypatch):
    """Where the Hub cannot be reached, the hint is the command that works without it; offline, the verify
    command the listing proposes runs offline too."""
    from huggingface_hub import constants

    res = cli("drafters", "--target", QUANT_ID, "--endpoint", "http://127.0.0.1:9")
    assert res.exit_code == 2
    assert res.stderr.strip().splitlines()[-1] == (
        f"hint: check --endpoint / HF_ENDPOINT and the network; without one: `HF_HUB_OFFLINE=1 eaglehub drafters "
        f"--target {QUANT_ID}`"
    )
    for repo in (QUANT_ID, "org/good-eagle3"):
        snapshot_download(repo, endpoint=hub_tree["hub"].url)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    res = cli("drafters", "--target", QUANT_ID)
    assert res.exit_code == 0, res.output
    assert f"verify them: HF_HUB_OFFLINE=1 eaglehub verify --target {QUANT_ID}" in res.stdout


def test_drafters_show_the_acceptance_curve_a_published_repo_carries(hub_tree):
    """`publish` put the drafter's acceptance curve into its report and its card's metadata: `drafters` lists it
    (AL(k) at k = 1..3 from the scripted rates 0.7 / 0.3 / 0.1), and for a repo with the card but no report, from
    the card's metadata alone; a card whose curve is broken (rates that rise) shows none."""
    import hashlib

    hub = hub_tree["hub"]
    files = hub.files("org/good-eagle3")
    card = files["README.md"].decode()
    hub.create("org/card-only-eagle3", files={"config.json": files["config.json"], "README.md": card.encode()})
    broken = card.replace("- 0.7\n", "- 0.05\n", 1)
    assert broken != card
    hub.create("org/broken-eagle3", files={"config.json": files["config.json"], "README.md": broken.encode()})
    res = cli("drafters", "--target", BASE_ID, "--endpoint", hub.url, "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    validate_json(report, "drafters-report")
    rows = {d["repo_id"]: d for d in report["drafters"]}
    curve = rows["org/good-eagle3"]["acceptance_curve"]
    assert curve["k"] == 3 and curve["rates"] == pytest.approx([0.7, 0.3, 0.1])
    assert curve["al_by_k"] == pytest.approx([1.0, 1.7, 2.0, 2.1]) and curve["num_drafts"] == 10
    assert curve["prompts"] == 4
    assert curve["prompts_sha256"] == hashlib.sha256(hub_tree["prompts"].read_bytes()).hexdigest()
    assert curve["settings"] == {
        "temperature": 0.0,
        "top_p": 1.0,
        "top_k": 0,
        "max_tokens": 4,
        "dtype": "float32",
        "engine": {"name": "scripted", "version": "1.0"},
    }
    assert rows["org/card-only-eagle3"]["claim"] is None  # no report, no model-index: no claimed AL
    assert rows["org/card-only-eagle3"]["acceptance_curve"] == curve  # the card's metadata
    assert rows["org/broken-eagle3"]["acceptance_curve"] is None
    table = " ".join(cli("drafters", "--target", BASE_ID, "--endpoint", hub.url).output.split())
    assert f"AL(k) 1.70 / 2.00 / 2.10 at k=1..3, T=0 (prompts sha256 {curve['prompts_sha256'][:12]}…)" in table
    assert table.count("AL(k) 1.70 / 2.00 / 2.10") == 2  # the published drafter and the card-only one
