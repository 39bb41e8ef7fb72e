"""Rough edges of issue #37: what `inspect` shows for an MLA drafter, the file modes of the built target cache,
and a mistyped local path taken as a Hub id when the Hub cannot be reached."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.formats_factory import write_format
from helpers.paths import ROOT

from eaglehub.cli import main
from eaglehub.io.schemas import validate_json


def cli(*args):
    res = CliRunner().invoke(main, [str(a) for a in args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res


def test_inspect_shows_an_mla_drafters_ranks_not_head_dim(tmp_path):
    mla = write_format(tmp_path / "mla", "vllm", layer_kind="mla", dtype="float32").path
    config = json.loads((mla / "config.json").read_text())
    keys = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
    assert "head_dim" not in config and all(isinstance(config[k], int) for k in keys)
    res = cli("inspect", mla, "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    validate_json(report, "inspect-report")
    assert report["mla"] == {k: config[k] for k in keys}
    lines = cli("inspect", mla).stdout.splitlines()
    dims = next(line for line in lines if line.startswith("dims:"))
    ranks = " ".join(lines[lines.index(dims) + 1 :][:2])  # the MLA line, wrapped at 80 columns
    assert "head_dim" not in dims and ranks.startswith("MLA: ")
    for k in keys:
        assert f"{k}={config[k]}" in ranks
    # a Llama-style drafter keeps its head_dim and has no MLA section
    llama = write_format(tmp_path / "llama", "vllm", dtype="float32").path
    report = json.loads(cli("inspect", llama, "--json").stdout)
    assert (
        report["mla"] is None
        and report["dims"]["head_dim"] == json.loads((llama / "config.json").read_text())["head_dim"]
    )
    assert f"head_dim={report['dims']['head_dim']} " in cli("inspect", llama).stdout


@pytest.mark.slow
def test_target_build_leaves_the_cache_readable_by_other_users(tmp_path, monkeypatch):
    """The weights were 0600 (written through a temporary file and renamed): another user's `vllm serve` of
    the shared cache got "No such file". Files get the umask's mode, as a plain write would."""
    monkeypatch.setenv("EAGLEHUB_CACHE", str(tmp_path / "cache"))
    old = os.umask(0o022)
    try:
        res = cli("target", "build", "smollm2", "--json")
        assert res.exit_code == 0, res.output
        built = Path(json.loads(res.stdout)["path"])
        assert built.is_relative_to(tmp_path)
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in built.iterdir() if p.is_file()}
        assert "model.safetensors" in modes and set(modes.values()) == {0o644}, modes
        # a cache built before this fix: `target build` finds it and repairs the modes
        (built / "model.safetensors").chmod(0o600)
        os.umask(0o027)  # the mode follows the umask, not a fixed 0644
        res = cli("target", "build", "smollm2")
        assert res.exit_code == 0, res.output
        assert stat.S_IMODE((built / "model.safetensors").stat().st_mode) == 0o640
    finally:
        os.umask(old)


@pytest.fixture
def no_hub(monkeypatch):
    """Fail the test on any Hub lookup: a mistyped path must never become one."""
    import huggingface_hub

    def refuse(*args, **kwargs):
        pytest.fail(f"looked up on the Hub: {args}")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", refuse)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", refuse)
    monkeypatch.chdir(ROOT)


@pytest.mark.parametrize(
    "args, spec",
    [
        (["inspect", "./fixtures/smolm2-eagle3"], "./fixtures/smolm2-eagle3"),
        (["validate", "fixtures/smolm2-eagle3"], "fixtures/smolm2-eagle3"),
        (["convert", "runs/a/drafter", "out", "--to", "3.1"], "runs/a/drafter"),
        (
            ["validate", "fixtures/smollm2-eagle3", "--target", "fixtures/smolm2-eagle3"],
            "target fixtures/smolm2-eagle3",
        ),
        (["drafters", "--target", "fixtures/smolm2-eagle3"], "target fixtures/smolm2-eagle3"),
        (
            ["verify", "--target", "smollm2", "--drafter", "fixtures/smolm2-eagle3", "--dry-run"],
            "fixtures/smolm2-eagle3",
        ),
    ],
)
def test_a_mistyped_path_is_no_such_directory_at_once(no_hub, hf_env, args, spec):
    res = cli(*args)
    assert res.exit_code == 2, res.output
    error, hint = res.stderr.strip().splitlines()
    assert error == f"error: {spec}: no such directory"
    assert hint.startswith("hint: ") and "download" not in hint
    if "smolm2-eagle3" in spec:
        assert hint.startswith("hint: did you mean fixtures/smollm2-eagle3")


def test_a_path_under_an_existing_directory_lists_what_it_holds(no_hub, hf_env):
    res = cli("inspect", "fixtures/nope")
    assert res.exit_code == 2
    held = sorted(p.name for p in Path("fixtures").iterdir() if not p.name.startswith("."))
    assert len(held) > 6  # the hint shows the first six and says there are more
    assert res.stderr.splitlines() == [
        "error: fixtures/nope: no such directory",
        f"hint: fixtures holds no nope (it holds {', '.join(held[:6])}, …): pass an existing directory",
    ]


def test_a_hub_id_offline_is_one_line_naming_hf_hub_offline(hf_env, monkeypatch, capfd):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    res = cli("inspect", "org/drafter")
    assert res.exit_code == 2
    error, hint = res.stderr.strip().splitlines()
    assert error == (
        "error: org/drafter is not a local directory, and HF_HUB_OFFLINE=1 keeps to the local Hugging Face cache, "
        "where org/drafter has no config.json"
    )
    assert "hf download org/drafter" in hint
    # no network (the endpoint refuses): huggingface_hub's retries say nothing, the error names the switch
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    capfd.readouterr()
    start = time.monotonic()
    res = cli("inspect", "org/drafter")
    assert time.monotonic() - start < 5  # not after huggingface_hub's five retries (about 24 s)
    assert res.exit_code == 2
    assert res.stderr.strip().splitlines() == [
        "error: org/drafter is not a local directory, and the Hub cannot be reached for org/drafter (config.json is "
        "not in the local cache either)",
        "hint: check the network; without one, set HF_HUB_OFFLINE=1 (the local cache only) and pass a local "
        "directory or a repo the cache holds",
    ]
    assert capfd.readouterr().err == ""  # nothing from huggingface_hub's logger either


def test_a_cached_hub_id_is_read_from_the_cache_at_once_when_the_hub_cannot_be_reached(
    hf_env, fake_hub, make_drafter, monkeypatch
):
    from huggingface_hub import constants, snapshot_download
    from safetensors.torch import load_file

    drafter = make_drafter("cached")
    fake_hub.create("org/cached", files={p.name: p.read_bytes() for p in drafter.iterdir() if p.is_file()})
    snapshot_download("org/cached", endpoint=fake_hub.url)  # a download made while there was a network
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # the network is gone
    start = time.monotonic()
    res = cli("inspect", "org/cached", "--json")
    assert res.exit_code == 0, res.output
    assert time.monotonic() - start < 5  # huggingface_hub alone retries about 24 s before it reads its cache
    assert {t["name"] for t in json.loads(res.stdout)["tensors"]} == set(load_file(drafter / "model.safetensors"))
