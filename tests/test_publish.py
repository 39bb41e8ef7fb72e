"""eaglehub publish over HTTP with the real huggingface_hub client against tests/fakehub.py: the
gate (validate + a passing verify report for these very files), the plan and dry run, one pinned
commit as a pull request, byte-identical downloads, the card, the stale-parent failure in both
modes, permission / token / revision errors as one-line messages, and the token never leaking."""

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.checkpoints import tree_hash
from helpers.fakehub import TOKEN
from helpers.scripted import BASE, DEAD, GOOD, ScriptedEngine, write_prompts
from huggingface_hub import ModelCard, hf_hub_download

from eaglehub.cli import main
from eaglehub.io.digest import files_sha256
from eaglehub.io.schemas import validate_json
from eaglehub.verify import run as verify
from eaglehub.verify.report import write_report


@pytest.fixture
def verified(tmp_path, monkeypatch, make_drafter, make_target):
    """A tiny target, a tiny drafter ``good`` with a passing verify report beside it
    (``good.verify.json``, scripted engine: AL 2.1, rates 0.7 / 0.3 / 0.1), and a drafter ``dead``
    whose report fails (E-VERIFY-NOT-WIRED)."""
    target = make_target(n_layers=8)
    prompts = tmp_path / "p.jsonl"
    write_prompts(prompts)
    monkeypatch.setattr("eaglehub.engines.chat.encode_chat", lambda t, msgs: [[1, 2, 3]] * len(msgs))
    engine = ScriptedEngine({"good": (BASE, GOOD), "dead": (BASE, DEAD)})
    for name in ("good", "dead"):
        drafter = make_drafter(name)
        (drafter / "README.md").write_text("---\nlicense: apache-2.0\n---\n# good\n\nTrained on tests.\n")
        opts = verify.VerifyOptions(
            target=str(target), drafters=[str(drafter)], k=3, max_tokens=4, prompts_file=str(prompts)
        )
        write_report(verify.run_verify(opts, engine=engine), tmp_path / f"{name}.verify.json")
    return tmp_path / "good", target


def publish(hub, src, *args, repo="org/tiny"):
    res = CliRunner().invoke(main, ["publish", str(src), "--repo", repo, "--endpoint", hub.url, *map(str, args)])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res


def test_verify_report_records_the_checkpoint_files_sha256(verified, tmp_path):
    src, _ = verified
    report = json.loads((tmp_path / "good.verify.json").read_text())
    entry = report["drafters"][0]
    assert entry["files_sha256"] == files_sha256(src)
    assert set(entry["files_sha256"]) == {"config.json", "model.safetensors"}
    validate_json(report, "verify-report")


def test_publish_opens_a_pull_request_whose_files_download_back_byte_identical(verified, fake_hub, hf_env, tmp_path):
    src, target = verified
    before = tree_hash(src)
    res = publish(fake_hub, src, "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    validate_json(doc, "publish-report")
    r = doc["result"]
    assert r["pr_num"] == 1 and r["revision"] == "refs/pr/1" and r["pr_url"].endswith("/org/tiny/discussions/1")
    assert doc["gate"]["verify"]["matched"] and doc["gate"]["verify"]["acceptance_length"] == pytest.approx(2.1)
    assert not doc["gate"]["forced"] and doc["gate"]["target"] == str(target)
    # main keeps the repo's first commit only; the pull request holds everything
    assert set(fake_hub.files("org/tiny", "main")) == {".gitattributes"}
    pr = fake_hub.files("org/tiny", "refs/pr/1")
    assert set(pr) == {
        ".gitattributes",
        "config.json",
        "model.safetensors",
        "README.md",
        "eaglehub-verify.json",
    }
    assert [p for p in fake_hub.posts() if "/commit/" in p] == ["/api/models/org/tiny/commit/main"]
    for name in ("config.json", "model.safetensors"):  # downloaded back through huggingface_hub
        path = hf_hub_download("org/tiny", name, revision="refs/pr/1", endpoint=fake_hub.url, cache_dir=tmp_path / "dl")
        assert Path(path).read_bytes() == (src / name).read_bytes()
    card_path = hf_hub_download(
        "org/tiny", "README.md", revision="refs/pr/1", endpoint=fake_hub.url, cache_dir=tmp_path / "dl"
    )
    card = ModelCard.load(card_path)
    assert card.data.library_name == "vllm" and card.data.pipeline_tag == "text-generation"
    assert card.data.license == "apache-2.0"  # carried over from the checkpoint's own card
    assert {"speculative-decoding", "eagle3", "draft-model"} <= set(card.data.tags)
    assert "| **this drafter** | 4 / 4 token-identical | 2.100 | 0.700 / 0.300 / 0.100 |" in card.text
    assert "| math | 2.500 |" in card.text and "| coding | 1.500 |" in card.text
    # a local target is no Hub id: the line takes $TARGET (never the directory's name), the words say to set it
    assert 'vllm serve "${TARGET:?' in card.text and "vllm serve target8" not in card.text
    assert str(tmp_path) not in card.text
    assert card.data.base_model is None and "pass --base-model" not in card.text
    assert '"model": "org/tiny"' in card.text and 'num_speculative_tokens": 3' in card.text
    assert "`[2, 4, 5]` via `eagle_aux_hidden_state_layer_ids` (C-in" in card.text
    assert "scripted 1.0" in card.text and "Trained on tests." in card.text
    # not converted by eaglehub (no eaglehub.json): the checkpoint's own card is this drafter's notes
    assert "## Notes from the checkpoint" in card.text and "Card of the source checkpoint" not in card.text
    uploaded = json.loads(pr["eaglehub-verify.json"])
    validate_json(uploaded, "verify-report")
    assert [d["files_sha256"] for d in uploaded["drafters"]] == [files_sha256(src)]
    assert tree_hash(src) == before  # the source is never modified


def test_the_token_never_appears_in_output_reports_cards_or_requests(verified, fake_hub, hf_env, tmp_path):
    src, _ = verified
    outputs = [publish(fake_hub, src, "--dry-run"), publish(fake_hub, src, "--json"), publish(fake_hub, src)]
    fake_hub.fail("commit", 403)
    outputs.append(publish(fake_hub, src, "--no-pr"))
    assert [o.exit_code for o in outputs] == [0, 0, 0, 2]
    for o in outputs:
        assert TOKEN not in o.output and TOKEN not in (o.stderr or "")
    for repo in fake_hub.repos.values():
        for c in repo.commits.values():
            assert not any(TOKEN.encode() in data for data in c.files.values())
    assert not any(TOKEN.encode() in body for body in fake_hub.bodies)  # only ever in the Authorization header
    assert all(h.get("Authorization") == f"Bearer {TOKEN}" for h in fake_hub.headers if "Authorization" in h)
    assert not any(
        TOKEN in p.read_text(errors="ignore") for p in tmp_path.rglob("*") if p.is_file() and p.stat().st_size < 2**20
    )


def test_dry_run_prints_the_plan_and_writes_nothing(verified, fake_hub, hf_env):
    src, _ = verified
    res = publish(fake_hub, src, "--dry-run", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["dry_run"] and doc["result"] is None and not doc["repo"]["exists"] and doc["parent_commit"] is None
    files = {f["path"]: f for f in doc["files"]}
    assert set(files) == {"config.json", "model.safetensors", "README.md", "eaglehub-verify.json"}
    assert all(f["status"] == "new" for f in files.values())
    assert files["model.safetensors"]["size"] == (src / "model.safetensors").stat().st_size
    assert files["model.safetensors"]["sha256"] == files_sha256(src)["model.safetensors"]
    assert doc["bytes_to_upload"] == sum(f["size"] for f in files.values())
    assert fake_hub.posts() == [] and "org/tiny" not in fake_hub.repos
    # against an existing repo: pinned to its head, nothing posted either
    head = fake_hub.create("org/tiny").refs["main"]
    text = publish(fake_hub, src, "--dry-run")
    assert text.exit_code == 0 and f"pull request against main at {head}" in text.output
    assert "model.safetensors" in text.output and fake_hub.posts() == []
    assert "the card has no base_model" in text.output and "pass --base-model" in text.output
    named = json.loads(
        publish(fake_hub, src, "--dry-run", "--json", "--base-model", "meta-llama/Llama-3.1-8B-Instruct").stdout
    )
    assert named["card"]["base_model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert "base_model: meta-llama/Llama-3.1-8B-Instruct" in named["card"]["text"]
    assert "vllm serve meta-llama/Llama-3.1-8B-Instruct --speculative-config" in named["card"]["text"]


def test_a_moved_branch_fails_the_commit_and_changes_nothing(verified, fake_hub, hf_env):
    src, _ = verified
    fake_hub.create("org/tiny")
    # another writer commits between our check of the head and our commit: the Hub answers 412
    fake_hub.before("commit", lambda hub: hub.push("org/tiny", {"theirs.txt": b"concurrent"}))
    res = publish(fake_hub, src, "--no-pr")
    assert res.exit_code == 1
    assert "org/tiny@main moved since the plan was made (412" in res.stderr and "nothing was changed" in res.stderr
    assert "Traceback" not in res.output
    assert set(fake_hub.files("org/tiny")) == {
        ".gitattributes",
        "theirs.txt",
    }  # theirs kept, ours not written
    assert fake_hub.repos["org/tiny"].prs == 0


def test_a_branch_moved_after_the_plan_fails_before_any_upload_in_pr_mode(verified, fake_hub, hf_env):
    src, _ = verified
    repo = fake_hub.create("org/tiny")
    planned = repo.refs["main"]
    fake_hub.before("whoami", lambda hub: hub.push("org/tiny", {"theirs.txt": b"x"}))
    res = publish(fake_hub, src)
    assert res.exit_code == 1 and f"planned parent {planned}" in res.stderr and "nothing was changed" in res.stderr
    assert not [p for p in fake_hub.posts() if "/preupload/" in p or "/commit/" in p] and repo.prs == 0


def test_parent_commit_from_a_reviewed_dry_run(verified, fake_hub, hf_env):
    src, _ = verified
    repo = fake_hub.create("org/tiny")
    plan = json.loads(publish(fake_hub, src, "--dry-run", "--json").stdout)
    assert plan["parent_commit"] == repo.refs["main"]
    fake_hub.push("org/tiny", {"theirs.txt": b"x"})
    res = publish(fake_hub, src, "--parent-commit", plan["parent_commit"])
    assert res.exit_code == 1 and f"not at the planned parent {plan['parent_commit']}" in res.stderr
    assert repo.prs == 0
    ok = publish(fake_hub, src, "--parent-commit", repo.refs["main"][:12], "--json")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["result"]["pr_num"] == 1


@pytest.mark.parametrize(
    "token, status, message",
    [
        ("hf_read_only", 403, "the token may not write to org/tiny (403"),
        ("not-a-token", 401, "refused the token (401"),
    ],
)
def test_permission_errors_are_one_line_with_a_hint(verified, fake_hub, hf_env, monkeypatch, token, status, message):
    src, _ = verified
    fake_hub.create("org/tiny")
    monkeypatch.setenv("HF_TOKEN", token)
    res = publish(fake_hub, src, "--no-pr")
    assert res.exit_code == 2 and message in res.stderr and "hint:" in res.stderr
    assert "Traceback" not in res.output and token not in res.output
    assert set(fake_hub.files("org/tiny")) == {".gitattributes"}


def test_missing_token_revision_and_unreachable_hub(verified, fake_hub, hf_env, monkeypatch):
    src, _ = verified
    fake_hub.create("org/tiny")
    res = publish(fake_hub, src, "--dry-run", repo="not a repo")
    assert res.exit_code == 2 and "is not a Hub repo id" in res.stderr and fake_hub.log == []
    res = publish(fake_hub, src, "--revision", "nope")
    assert res.exit_code == 2 and "revision 'nope' does not exist in org/tiny" in res.stderr
    fake_hub.fail("whoami", 401)
    res = publish(fake_hub, src)
    assert res.exit_code == 2 and "refused the token (401" in res.stderr
    res = CliRunner().invoke(
        main, ["publish", str(src), "--repo", "org/tiny", "--endpoint", "http://127.0.0.1:9", "--dry-run"]
    )
    assert res.exit_code == 2 and "cannot reach the Hub at http://127.0.0.1:9" in res.stderr
    monkeypatch.delenv("HF_TOKEN")
    res = publish(fake_hub, src)
    assert res.exit_code == 2 and "no Hugging Face token found" in res.stderr and "HF_TOKEN" in res.stderr
    assert publish(fake_hub, src, "--dry-run").exit_code == 0  # a dry run of a public repo needs no token


def test_the_gate_refuses_unverified_failed_or_changed_checkpoints(verified, fake_hub, hf_env, tmp_path, make_drafter):
    src, _ = verified
    res = publish(fake_hub, tmp_path / "dead")
    assert (
        res.exit_code == 1
        and "refusing to publish" in res.stderr
        and "verify failed (E-VERIFY-NOT-WIRED)" in res.stderr
    )
    other = make_drafter("other", seed=3)  # no report covers it
    res = publish(fake_hub, other, "--report", tmp_path / "good.verify.json")
    assert res.exit_code == 1 and "no drafter with these files' sha256" in res.stderr
    # the same drafter with one weight changed after verification
    changed = tmp_path / "changed"
    changed.mkdir()
    for f in src.iterdir():
        (changed / f.name).write_bytes(f.read_bytes())
    data = bytearray((changed / "model.safetensors").read_bytes())
    data[-1] ^= 1
    (changed / "model.safetensors").write_bytes(bytes(data))
    res = publish(fake_hub, changed, "--report", tmp_path / "good.verify.json")
    assert res.exit_code == 1 and "no drafter with these files' sha256" in res.stderr
    assert fake_hub.posts() == []
    # --force publishes and says so in the card
    res = publish(fake_hub, tmp_path / "dead", "--force", "--json")
    assert res.exit_code == 0
    doc = json.loads(res.stdout)
    assert doc["gate"]["forced"] and "E-VERIFY-NOT-WIRED" in doc["gate"]["reasons"][0]
    assert "Published with `--force`" in fake_hub.files("org/tiny", "refs/pr/1")["README.md"].decode()


def test_a_validation_error_is_refused(verified, fake_hub, hf_env, tmp_path, monkeypatch):
    src, target = verified
    # F8: the config implies an own head but lm_head is missing; verify's report would not exist for it,
    # so forge one with the scripted engine past the preflight
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in src.iterdir():
        (broken / f.name).write_bytes(f.read_bytes())
    from safetensors.torch import load_file, save_file

    tensors = load_file(broken / "model.safetensors")
    del tensors["lm_head.weight"]
    save_file(tensors, broken / "model.safetensors")
    monkeypatch.setattr(verify, "preflight", lambda d, t, profiles=None: None)
    opts = verify.VerifyOptions(
        target=str(target), drafters=[str(broken)], k=3, max_tokens=4, prompts_file=str(tmp_path / "p.jsonl")
    )
    write_report(
        verify.run_verify(opts, engine=ScriptedEngine({"broken": (BASE, GOOD)})),
        tmp_path / "broken.verify.json",
    )
    res = publish(fake_hub, broken, "--dry-run")
    assert res.exit_code == 1 and "validate finds E-LMHEAD-MISSING" in res.stderr


def test_republishing_sends_only_changes_and_removes_stale_files(verified, fake_hub, hf_env):
    src, _ = verified
    first = json.loads(publish(fake_hub, src, "--no-pr", "--tag", "v1", "--json").stdout)
    repo = fake_hub.repos["org/tiny"]
    assert first["result"]["revision"] == "main" and repo.tags == {"v1": first["result"]["commit_oid"]}
    assert repo.refs["main"] == first["result"]["commit_oid"]
    again = json.loads(publish(fake_hub, src, "--no-pr", "--json").stdout)
    assert {f["status"] for f in again["files"]} == {"unchanged"} and again["bytes_to_upload"] == 0
    assert again["result"]["commit_oid"] is None and "no commit" in again["result"]["note"]
    fake_hub.push("org/tiny", {"model-00001-of-00002.safetensors": b"old shard"})
    third = json.loads(publish(fake_hub, src, "--no-pr", "--json").stdout)
    assert [(f["path"], f["status"]) for f in third["files"] if f["status"] != "unchanged"] == [
        ("model-00001-of-00002.safetensors", "deleted")
    ]
    assert "model-00001-of-00002.safetensors" not in fake_hub.files("org/tiny")
    res = publish(fake_hub, src, "--no-pr", "--tag", "v1")  # an existing tag: refused by the plan
    assert (
        res.exit_code == 1
        and "tag 'v1' already exists on org/tiny" in res.stderr
        and "choose another --tag" in res.stderr
    )
    assert json.loads(publish(fake_hub, src, "--no-pr", "--tag", "v2", "--json").stdout)["result"]["tag"] == "v2"
    assert repo.tags["v2"] == repo.refs["main"]


def test_offline_dry_run_reads_nothing(verified, fake_hub, hf_env, monkeypatch):
    from huggingface_hub import constants

    src, _ = verified
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    res = publish(fake_hub, src, "--dry-run", "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["repo"]["exists"] is None and fake_hub.log == []
    res = publish(fake_hub, src)
    assert res.exit_code == 2 and "HF_HUB_OFFLINE is set" in res.stderr


def test_publishing_to_another_branch(verified, fake_hub, hf_env):
    from huggingface_hub import HfApi

    src, _ = verified
    repo = fake_hub.create("org/tiny", files={"main-only.txt": b"m"})
    HfApi(endpoint=fake_hub.url, token=TOKEN).create_branch("org/tiny", branch="dev", revision=repo.refs["main"])
    fake_hub.push("org/tiny", {"dev-only.txt": b"d"}, branch="dev")
    res = publish(fake_hub, src, "--revision", "dev", "--no-pr", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["result"]["revision"] == "dev" and repo.refs["dev"] == doc["result"]["commit_oid"]
    deleted = sorted(f["path"] for f in doc["files"] if f["status"] == "deleted")
    assert deleted == ["dev-only.txt", "main-only.txt"]  # the branch now holds exactly the checkpoint
    assert set(fake_hub.files("org/tiny", "main")) == {".gitattributes", "main-only.txt"}  # main untouched
    assert fake_hub.files("org/tiny", "dev")["model.safetensors"] == (src / "model.safetensors").read_bytes()
    pr = json.loads(publish(fake_hub, src, "--revision", "dev", "--json").stdout)["result"]
    assert pr["commit_oid"] is None and pr["pr_url"] is None and repo.prs == 0  # nothing differs from dev: no empty PR
    fake_hub.push("org/tiny", {"model.safetensors": b"changed on dev"}, branch="dev")
    pr = json.loads(publish(fake_hub, src, "--revision", "dev", "--json").stdout)["result"]
    assert (
        pr["revision"] == "refs/pr/1"
        and fake_hub.files("org/tiny", "refs/pr/1")["model.safetensors"] == (src / "model.safetensors").read_bytes()
    )
    assert fake_hub.files("org/tiny", "dev")["model.safetensors"] == b"changed on dev"  # the PR is not merged


def test_card_metadata_the_hub_rejects_is_one_line(verified, fake_hub, hf_env, monkeypatch):
    src, _ = verified
    monkeypatch.setattr(
        fake_hub,
        "_r_validate_yaml",
        lambda user, query, body: (
            400,
            {"Content-Type": "application/json"},
            json.dumps({"errors": [{"message": "bad base_model"}], "warnings": []}).encode(),
        ),
    )
    res = publish(fake_hub, src)
    assert res.exit_code == 1 and "huggingface_hub refused the request for org/tiny" in res.stderr
    assert "bad base_model" in res.stderr and "Traceback" not in res.output
    assert not [p for p in fake_hub.posts() if "/commit/" in p]


def test_an_existing_tag_is_refused_before_anything_is_sent(verified, fake_hub, hf_env):
    src, _ = verified
    repo = fake_hub.create("org/tiny")
    head = repo.refs["main"]
    repo.tags["v1"] = head
    fake_hub.log.clear()
    dry = publish(fake_hub, src, "--no-pr", "--tag", "v1", "--dry-run")
    assert dry.exit_code == 1, dry.output  # the dry run says the real run would fail
    assert (
        f"tag 'v1' already exists on org/tiny (at commit {head}): publishing would fail; nothing was sent" in dry.stderr
    )
    assert "choose another --tag, or delete it first (`hf repos tag delete org/tiny v1`)" in dry.stderr
    assert ("GET", "/api/models/org/tiny/refs") in fake_hub.log  # list_repo_refs
    res = publish(fake_hub, src, "--no-pr", "--tag", "v1")
    assert (
        res.exit_code == 1
        and "tag 'v1' already exists on org/tiny" in res.stderr
        and "refusing to publish" in res.stderr
    )
    # off a terminal the status is a progress line before them ("publish: hashing, …")
    assert "Traceback" not in res.output and [line.split(":")[0] for line in res.stderr.strip().splitlines()] == [
        "publish",
        "error",
        "hint",
    ]
    assert fake_hub.posts() == [] and repo.refs["main"] == head and repo.tags == {"v1": head}
    # a free tag name is planned without complaint
    assert publish(fake_hub, src, "--no-pr", "--tag", "v2", "--dry-run").exit_code == 0


def test_a_tag_created_after_the_plan(verified, fake_hub, hf_env):
    src, _ = verified
    repo = fake_hub.create("org/tiny")
    head = repo.refs["main"]
    # between the plan and the commit: the re-check with the head refuses, nothing is committed
    fake_hub.before("whoami", lambda hub: repo.tags.__setitem__("v1", head))
    res = publish(fake_hub, src, "--no-pr", "--tag", "v1")
    assert res.exit_code == 1 and "refusing to publish; nothing was sent" in res.stderr
    assert not [p for p in fake_hub.posts() if "/commit/" in p] and repo.refs["main"] == head
    # between the commit and create_tag (a race): the commit landed, only the tag failed, and it says so
    fake_hub.before("tag", lambda hub: repo.tags.__setitem__("v2", head))
    res = publish(fake_hub, src, "--no-pr", "--tag", "v2")
    landed = repo.refs["main"]
    assert res.exit_code == 1 and landed != head and "model.safetensors" in fake_hub.files("org/tiny")
    assert (
        f"the commit landed on org/tiny@main ({landed}, {fake_hub.url}/org/tiny/commit/{landed}) but tagging it "
        "'v2' failed: conflict on org/tiny (409: Tag v2 already exists)"
    ) in res.stderr
    assert f"hf repos tag create org/tiny TAG --revision {landed}" in res.stderr and "Traceback" not in res.output
    assert repo.tags == {"v1": head, "v2": head}


def test_forced_reasons_top_the_card_without_local_paths(verified, fake_hub, hf_env, tmp_path, make_drafter):
    def card_of(src, *args):
        res = publish(fake_hub, src, "--force", "--dry-run", "--json", *args)
        assert res.exit_code == 0, res.output
        doc = json.loads(res.stdout)
        return doc["gate"]["reasons"], ModelCard(doc["card"]["text"]).text

    dead = tmp_path / "dead"
    reasons, text = card_of(dead)
    assert reasons == ["verify failed (E-VERIFY-NOT-WIRED) in ../dead.verify.json"]
    # right below the title, before the description and the serve line
    assert text.lstrip().startswith(
        "# tiny\n\n> **Published with `--force`** despite: verify failed (E-VERIFY-NOT-WIRED) in ../dead.verify.json\n"
    )
    assert str(tmp_path) not in text
    # the tester's case: the report inside SRC is named relative to it
    (dead / "eaglehub-verify.json").write_bytes((tmp_path / "dead.verify.json").read_bytes())
    reasons, text = card_of(dead)
    assert reasons == ["verify failed (E-VERIFY-NOT-WIRED) in eaglehub-verify.json"] and str(tmp_path) not in text
    other = make_drafter("other", seed=3)
    reasons, text = card_of(other)
    assert reasons == [
        "no verify report covers these files (no verify report given (--report) or found beside the drafter "
        "(eaglehub-verify.json, ../other.verify.json, ../verify.json, relative to the drafter's directory))"
    ]
    assert str(tmp_path) not in text and text.index("Published with `--force`") < text.index("## Use with vLLM")
    refused = publish(fake_hub, other, "--dry-run")
    pasted = refused.stderr.split("fix it and run `")[1].split("`")[0]
    shell = subprocess.run(["bash", "-c", pasted], capture_output=True, text=True, env={**os.environ, "TARGET": ""})
    assert shell.returncode != 0 and "set TARGET to the target the drafter serves" in shell.stderr, shell.stderr
    reasons, _ = card_of(other, "--report", tmp_path / "good.verify.json")
    assert reasons == ["no verify report covers these files (../good.verify.json: no drafter with these files' sha256)"]


def test_a_converted_or_quantized_drafter_labels_the_source_card(verified, fake_hub, hf_env, tmp_path):
    src, _ = verified
    for args, words in [
        (["convert", src, tmp_path / "v31", "--to", "3.1"], "conversion"),
        (["quantize", src, tmp_path / "fp8"], "quantization"),
        (["quantize", tmp_path / "v31", tmp_path / "v31-fp8"], "conversion and quantization"),
    ]:
        made = CliRunner().invoke(main, list(map(str, args)))
        assert made.exit_code == 0, made.output
        out = Path(args[2])
        assert (out / "README.md").read_text() == (src / "README.md").read_text()  # carried over as is
        res = publish(fake_hub, out, "--force", "--dry-run", "--json")
        assert res.exit_code == 0, res.output
        text = ModelCard(json.loads(res.stdout)["card"]["text"]).text
        assert "## Notes from the checkpoint" not in text
        label = (
            f"## Card of the source checkpoint\n\n*Before {words}: this is the card the source checkpoint came "
            "with; its figures (dtype, size, acceptance, …) describe that checkpoint, not this drafter (see above).*"
            "\n\nTrained on tests."
        )
        assert label in text and text.index("## How it was made") < text.index(label)


def test_an_unreadable_report_is_called_a_verify_report(verified, fake_hub, hf_env, tmp_path):
    src, _ = verified
    missing = tmp_path / "nonexist.json"
    res = publish(fake_hub, src, "--report", missing, "--dry-run")
    assert res.exit_code == 2 and f"verify report {missing}: cannot read it" in res.stderr
    assert "reference report" not in res.stderr and fake_hub.log == []
    # a path that names nothing is the path's fault, not the eaglehub version's
    assert "hint: check the path" in res.stderr and "version" not in res.stderr


def test_a_qwen3_style_drafter_publishes_with_its_attention_on_the_card(verified, fake_hub, hf_env, make_drafter):
    from helpers.checkpoints import qwen3_layers

    src, target = verified
    q3 = make_drafter("q3", mutate=lambda cfg, t: qwen3_layers(cfg, t, 256))
    engine = ScriptedEngine({"q3": (BASE, GOOD)})
    opts = verify.VerifyOptions(
        target=str(target), drafters=[str(q3)], k=3, max_tokens=4, prompts_file=str(src.parent / "p.jsonl")
    )
    write_report(verify.run_verify(opts, engine=engine), src.parent / "q3.verify.json")
    res = publish(fake_hub, q3, "--dry-run", "--json")
    assert res.exit_code == 0, res.output
    card = json.loads(res.stdout)["card"]["text"]
    assert "| layout | vllm (`Eagle3Qwen3ForCausalLM`)" in card
    assert "| attention | Qwen3-style, q/k RMSNorm per head (`Eagle3Qwen3ForCausalLM`, vLLM ≥ 0.24), " in card
    assert "a sliding window of 256 positions in its layer |" in card
    good = json.loads(publish(fake_hub, src, "--dry-run", "--json").stdout)["card"]["text"]
    assert "| attention | Llama-style, full causal attention |" in good


def test_the_gate_judges_the_profiles_asked_and_the_card_names_only_those(
    verified, fake_hub, hf_env, tmp_path, make_drafter
):
    """A drafter whose aux ids sit only in eagle_config: vLLM 0.33 on GPU (Model Runner V2) never reads them, the
    V1 runner does. Verified on the vLLM CPU build, it is refused for the default profile; published for the
    V1 profiles it passes, and the card says which profiles were checked and writes the serve line for them."""
    from test_profiles import _nested_only
    from test_verify import ProfiledEngine

    src, target = verified
    nested = make_drafter("nested", mutate=_nested_only([1, 3, 4, 6]))
    opts = verify.VerifyOptions(
        target=str(target), drafters=[str(nested)], k=3, max_tokens=4, prompts_file=str(tmp_path / "p.jsonl")
    )
    report = verify.run_verify(opts, engine=ProfiledEngine({"nested": (BASE, GOOD)}, "vllm-0.32-cpu"))
    write_report(report, tmp_path / "nested.verify.json")
    res = publish(fake_hub, nested, "--dry-run")
    assert res.exit_code == 1 and "validate finds E-AUX-IGNORED (on vLLM 0.33.0 on GPU (Model Runner V2))" in (
        " ".join(res.stderr.split())
    )
    doc = json.loads(publish(fake_hub, nested, "--dry-run", "--json", "--profile", "vllm-0.33-v1").stdout)
    assert [p["id"] for p in doc["gate"]["profiles"]] == ["vllm-0.33-v1"] and doc["gate"]["validate"]["ok"]
    card = doc["card"]["text"]
    assert "for vLLM 0.33.0 on GPU with the V1 runner (VLLM_USE_V2_MODEL_RUNNER=0) (`vllm-0.33-v1`): 0 errors" in card
    assert "Other engines and releases were not checked." in card and "vllm-0.33-gpu" not in card
    assert "VLLM_USE_V2_MODEL_RUNNER=0 vllm serve " in card
    validate_json(doc, "publish-report")
    both = publish(fake_hub, nested, "--dry-run", "--json", "--profile", "sglang-0.5.23", "--profile", "vllm-0.32-cpu")
    card = json.loads(both.stdout)["card"]["text"]  # SGLang reads the nested list only: it serves too
    assert "for SGLang 0.5.23 (`sglang-0.5.23`); vLLM 0.32.0 on CPU (V1 runner) (`vllm-0.32-cpu`): 0 errors" in card
    assert "For vLLM 0.32.0 on CPU (V1 runner):" in card and "VLLM_USE_V2_MODEL_RUNNER" not in card
    text = publish(fake_hub, nested, "--dry-run", "--profile", "vllm-0.33-v1")
    assert text.exit_code == 0 and "gate: validate for vLLM 0.33.0 on GPU with the V1 runner" in " ".join(
        text.output.split()
    )
    default = json.loads(publish(fake_hub, src, "--dry-run", "--json").stdout)
    assert default["gate"]["profiles"] == [
        {"id": "vllm-0.33-gpu", "title": "vLLM 0.33.0 on GPU (Model Runner V2)", "default": True}
    ]
    assert "(`vllm-0.33-gpu`)" in default["card"]["text"]


def test_offline_hints_carry_hf_hub_offline(verified, fake_hub, hf_env, monkeypatch, make_drafter):
    """An unreachable Hub: the dry run's hint is the offline dry run; offline, a refusal's commands run offline."""
    from huggingface_hub import constants

    src, _ = verified
    res = CliRunner().invoke(
        main, ["publish", str(src), "--repo", "org/tiny", "--endpoint", "http://127.0.0.1:9", "--dry-run"]
    )
    assert res.exit_code == 2
    assert res.stderr.strip().splitlines()[-1] == (
        f"hint: check --endpoint / HF_ENDPOINT and the network; without one: `HF_HUB_OFFLINE=1 eaglehub publish "
        f"{src} --repo org/tiny --dry-run`"
    )
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    res = publish(fake_hub, make_drafter("unverified", seed=5), "--dry-run")
    assert res.exit_code == 1 and "fix it and run `HF_HUB_OFFLINE=1 eaglehub verify --target" in res.stderr


def test_the_offline_hint_keeps_the_options_the_user_gave(make_drafter, fake_hub, hf_env, monkeypatch):
    """An unreachable Hub under --force / --profile: the offline command the hint proposes keeps them, so pasted it
    runs the dry run the user asked for (without --force it would refuse an unverified drafter instead)."""
    from huggingface_hub import constants

    src = make_drafter("forced", seed=6)
    asked = ["--repo", "org/forced", "--profile", "sglang-0.5.23", "--dry-run", "--force"]
    res = CliRunner().invoke(main, ["publish", str(src), *asked, "--endpoint", "http://127.0.0.1:9"])
    assert res.exit_code == 2, res.output
    hint = res.stderr.split("without one: `")[1].split("`")[0]
    assert hint.startswith("HF_HUB_OFFLINE=1 eaglehub publish ") and "--force" in hint and "sglang-0.5.23" in hint
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    pasted = CliRunner().invoke(main, shlex.split(hint)[2:])
    assert pasted.exit_code == 0, pasted.output


def test_the_card_serve_line_never_holds_a_placeholder_target(verified, fake_hub, hf_env, tmp_path, make_drafter):
    """A target that is not a Hub id (a local directory, or none found) gives no ``vllm serve 'the target'`` /
    ``vllm serve target8``: the words say to set TARGET, and the line, pasted as printed, stops the shell with
    that message while TARGET is unset and serves TARGET once it is set."""
    import re
    import subprocess

    def serve_block(src):
        res = publish(fake_hub, src, "--force", "--dry-run", "--json")
        assert res.exit_code == 0, res.output
        text = ModelCard(json.loads(res.stdout)["card"]["text"]).text
        section = text[text.index("## Use with vLLM") :].split("\n## ")[0]
        (block,) = re.findall(r"```bash\n(.*?)\n```", section, re.S)
        return section, block

    for src in (tmp_path / "dead", make_drafter("other", seed=3)):  # a local target8; no report, no target
        section, line = serve_block(src)
        assert "the target'" not in line and "target8" not in line and "vllm serve" in line
        assert "set `TARGET` to the id or local path of the target this drafter was trained for" in section
        unset = subprocess.run(["bash", "-c", line], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
        assert unset.returncode != 0 and "set TARGET to the Hub id or path of the target model" in unset.stderr
        shown = subprocess.run(
            ["bash", "-c", 'vllm() { printf "%s\\n" "$@"; }; ' + line],
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", "TARGET": "org/base"},
        )
        assert shown.returncode == 0 and shown.stdout.splitlines()[:2] == ["serve", "org/base"], shown
    # a Hub id is written as the target, no variable
    res = publish(fake_hub, tmp_path / "dead", "--force", "--dry-run", "--json", "--base-model", "org/base")
    text = ModelCard(json.loads(res.stdout)["card"]["text"]).text
    assert "vllm serve org/base --speculative-config" in text and "TARGET" not in text


def test_the_card_carries_the_acceptance_curve_as_a_table_and_in_its_metadata(verified, fake_hub, hf_env, tmp_path):
    """The published card has a row per k (AL(k), the rate at position k: the scripted rates 0.7 / 0.3 / 0.1 at
    k = 3), the prompts' hash and settings, and the curve in its metadata (``eaglehub.acceptance_curve``), equal to
    the uploaded report's; a report written before reports recorded the curve gives the same card (from its
    counters)."""
    import hashlib

    from eaglehub.measure.curve import AcceptanceCurve

    src, _ = verified
    res = publish(fake_hub, src, "--no-pr")
    assert res.exit_code == 0, res.output
    files = fake_hub.files("org/tiny")
    card = ModelCard(files["README.md"].decode())
    curve = card.data.eaglehub["acceptance_curve"]
    assert curve == json.loads(files["eaglehub-verify.json"])["drafters"][0]["acceptance_curve"]
    c = AcceptanceCurve.from_dict(curve)
    assert (c.k, c.rates, c.al_by_k(), c.num_drafts, c.prompts) == (3, (0.7, 0.3, 0.1), [1.0, 1.7, 2.0, 2.1], 10, 4)
    sha = hashlib.sha256((tmp_path / "p.jsonl").read_bytes()).hexdigest()
    assert c.prompts_sha256 == sha and c.settings["engine"] == {"name": "scripted", "version": "1.0"}
    assert c.settings["temperature"] == 0.0 and c.settings["max_tokens"] == 4
    table = "| k | AL(k) | rate at position k |\n|---|---|---|\n| 0 | 1.000 | — |\n| 1 | 1.700 | 0.700 |\n"
    table += "| 2 | 2.000 | 0.300 |\n| 3 | 2.100 | 0.100 |\n"
    assert table in card.text and f"prompts sha256 `{sha}`" in card.text
    assert '`{"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": [0.7, 0.3, 0.1]}`' in card.text
    old = json.loads((tmp_path / "good.verify.json").read_text())
    del old["drafters"][0]["acceptance_curve"]
    (tmp_path / "good.verify.json").write_text(json.dumps(old))
    doc = json.loads(publish(fake_hub, src, "--dry-run", "--json").stdout)
    assert ModelCard(doc["card"]["text"]).data.eaglehub["acceptance_curve"] == curve and table in doc["card"]["text"]
