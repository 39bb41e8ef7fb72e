"""convert --to 3.1: added tensors, bit-exact copies, untouched source, atomic output (docs/formats.md §7)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import torch
from helpers.checkpoints import tree_hash

from eaglehub.checks.validate import validate
from eaglehub.convert import run as convert_mod
from eaglehub.convert import write as convert_write
from eaglehub.convert.run import convert
from eaglehub.errors import EaglehubError
from eaglehub.io.schemas import validate_json
from eaglehub.io.tensorio import read_index


def test_upgrade_adds_fc_norm_and_copies_bit_exact(make_drafter, make_target, tmp_path):
    src = make_drafter()
    (src / "README.md").write_text("card\n")
    before = tree_hash(src)
    report = convert(src, tmp_path / "out", to="3.1", norm_output=True)
    validate_json(report, "convert-report")
    assert tree_hash(src) == before
    assert [t["name"] for t in report["added_tensors"]] == [
        "fc_norm.0.weight",
        "fc_norm.1.weight",
        "fc_norm.2.weight",
    ]
    assert report["config_changes"] == [
        {"key": "fc_norm", "old": None, "new": True},
        {"key": "norm_output", "old": None, "new": True},
    ]
    assert report["copied_files"] == ["README.md"] and (tmp_path / "out" / "README.md").read_text() == "card\n"
    assert "not numerically equivalent" in report["warnings"][0]

    old, new = read_index(src), read_index(tmp_path / "out")
    assert set(new.names()) == set(old.names()) | {f"fc_norm.{i}.weight" for i in range(3)}
    old_t, new_t = old.load_all(), new.load_all()
    for name, t in old_t.items():
        assert new_t[name].dtype == t.dtype and new_t[name].shape == t.shape
        assert torch.equal(new_t[name].reshape(-1).view(torch.uint8), t.reshape(-1).view(torch.uint8))
    for i in range(3):
        w = new_t[f"fc_norm.{i}.weight"]
        assert w.dtype == torch.bfloat16 and w.shape == (64,) and bool((w == 1).all())

    cfg_old = json.loads((src / "config.json").read_text())
    cfg_new = json.loads((tmp_path / "out" / "config.json").read_text())
    assert {k: v for k, v in cfg_new.items() if k not in ("fc_norm", "norm_output")} == cfg_old
    assert cfg_new["fc_norm"] is True and cfg_new["norm_output"] is True
    clean = validate(tmp_path / "out", make_target(8))
    assert [f["code"] for f in clean["findings"]] == ["W-FCNORM-UNIT"] and clean["ok"]  # unit gains: uncalibrated


def test_no_norm_output_and_layers0_spelling_kept(make_drafter, tmp_path):
    def rename(cfg, t):
        for n in [n for n in t if n.startswith("midlayer.")]:
            t["layers.0." + n[len("midlayer.") :]] = t.pop(n)
        cfg["norm_output"] = False

    report = convert(make_drafter(mutate=rename), tmp_path / "out", to="3.1", norm_output=False)
    assert report["config_changes"] == [{"key": "fc_norm", "old": None, "new": True}]
    assert "norm_output changes" not in report["warnings"][0]
    names = read_index(tmp_path / "out").names()
    assert "layers.0.self_attn.q_proj.weight" in names and not any(n.startswith("midlayer.") for n in names)
    assert validate(tmp_path / "out")["ok"]


def test_bin_source_becomes_safetensors(make_drafter, tmp_path):
    src = make_drafter(fmt="bin")
    report = convert(src, tmp_path / "out", to="3.1")
    assert read_index(tmp_path / "out").format == "safetensors"
    assert report["copied_tensors"] == 15
    old, new = read_index(src).load_all(), read_index(tmp_path / "out").load_all()
    assert all(
        torch.equal(new[n].reshape(-1).view(torch.uint8), t.reshape(-1).view(torch.uint8)) for n, t in old.items()
    )


def test_existing_destination_is_refused_then_overwritten(make_drafter, tmp_path):
    src, dst = make_drafter(), tmp_path / "out"
    dst.mkdir()
    (dst / "keep").write_text("x")
    with pytest.raises(EaglehubError, match="already exists"):
        convert(src, dst, to="3.1")
    assert (dst / "keep").read_text() == "x"
    convert(src, dst, to="3.1", overwrite=True)
    assert not (dst / "keep").exists() and (dst / "model.safetensors").is_file()


def test_failure_leaves_no_destination(make_drafter, tmp_path, monkeypatch):
    src = make_drafter()
    before = tree_hash(src)

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(convert_write, "copy_side_files", boom)
    with pytest.raises(RuntimeError):
        convert(src, tmp_path / "out", to="3.1")
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["drafter"]  # no temporary left behind
    assert tree_hash(src) == before


@pytest.mark.parametrize(
    "kwargs,match,code",
    [
        ({"v31": True}, "already an EAGLE-3.1", 2),
        ({"mutate": lambda c, t: t.pop("lm_head.weight")}, r"E-LMHEAD-MISSING\); refusing", 1),
    ],
)
def test_refusals(make_drafter, tmp_path, kwargs, match, code):
    with pytest.raises(EaglehubError, match=match) as err:
        convert(make_drafter(**kwargs), tmp_path / "out", to="3.1")
    assert err.value.exit_code == code and not (tmp_path / "out").exists()


def test_destination_equal_to_source_is_refused(make_drafter):
    src = make_drafter()
    with pytest.raises(EaglehubError, match="source directory"):
        convert(src, src, to="3.1", overwrite=True)


@pytest.mark.parametrize("where", ["inside", "deep-inside", "parent", "cwd"])
def test_destinations_that_touch_the_source_are_refused(make_drafter, tmp_path, monkeypatch, where):
    src = make_drafter()
    (tmp_path / "precious.txt").write_text("x")
    before, other = tree_hash(src), (tmp_path / "precious.txt").read_text()
    dst = {"inside": src / "out", "deep-inside": src / "a" / "b", "parent": tmp_path, "cwd": "."}[where]
    monkeypatch.chdir(tmp_path)
    with pytest.raises(EaglehubError, match="inside the source|contains the source") as err:
        convert(src, dst, fmt="specforge", overwrite=True)
    assert err.value.exit_code == 2 and tree_hash(src) == before and (tmp_path / "precious.txt").read_text() == other
    assert not (src / "out").exists() and not (src / "a").exists()


def test_unwritable_destination_is_a_one_line_error(make_drafter, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    immutable = os.access(ro, os.W_OK)  # root ignores mode bits; the immutable attribute stops root too
    if immutable:
        subprocess.run(["chattr", "+i", str(ro)], check=True)
    try:
        with pytest.raises(EaglehubError, match="cannot write") as err:
            convert(make_drafter(), ro / "out", fmt="specforge")
        assert err.value.exit_code == 2 and list(ro.iterdir()) == []
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(ro)], check=True)
        ro.chmod(0o755)


@pytest.mark.parametrize(
    "size,expected", [("10KB", 10_000), ("2.5MB", 2_500_000), ("1GiB", 1 << 30), (4096, 4096), ("123", 123)]
)
def test_shard_sizes(size, expected):
    assert convert_mod.shard_size(size) == expected


@pytest.mark.parametrize("size", ["abc", "0", "-5", "7XB", "1.5.2GB"])
def test_bad_shard_size_is_refused_before_writing(make_drafter, tmp_path, size):
    with pytest.raises(EaglehubError, match="is not a size") as err:
        convert(make_drafter(), tmp_path / "out", fmt="vllm", max_shard_size=size)
    assert err.value.exit_code == 2 and not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_overwrite_replaces_a_file_or_link_without_leftovers(make_drafter, tmp_path, kind):
    dst = tmp_path / "dst"
    if kind == "file":
        dst.write_text("x")
    else:
        (tmp_path / "elsewhere").mkdir()
        dst.symlink_to(tmp_path / "elsewhere")
    convert(make_drafter(), dst, fmt="specforge", overwrite=True)
    assert dst.is_dir() and not dst.is_symlink() and (dst / "model.safetensors").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["drafter", "dst"] + (["elsewhere"] if kind == "symlink" else [])
    )


def test_side_files_never_include_weights_or_directories(make_drafter, tmp_path):
    src = make_drafter()
    (src / "tokenizer.json").write_text("{}")
    (src / "pytorch_model.bin").write_bytes(b"stale")
    (src / "checkpoints").mkdir()
    report = convert(src, tmp_path / "out", to="3.1")
    assert report["copied_files"] == ["tokenizer.json"] and report["skipped_files"] == [
        "checkpoints/",
        "pytorch_model.bin",
    ]
    assert not (tmp_path / "out" / "pytorch_model.bin").exists()


def test_from_cannot_contradict_the_evidence(make_drafter, tmp_path):
    with pytest.raises(
        EaglehubError, match="--from speculators contradicts the evidence: this checkpoint reads as vllm"
    ) as err:
        convert(make_drafter(), tmp_path / "out", fmt="vllm", source_format="speculators")
    assert err.value.exit_code == 2 and not (tmp_path / "out").exists()


def test_aux_convention_does_not_apply_to_top_level_ids(make_drafter, tmp_path):
    with pytest.raises(EaglehubError, match="C-in by definition"):
        convert(make_drafter(), tmp_path / "out", fmt="torchspec", aux_convention="c-out")


def test_report_shows_the_ids_as_written(make_drafter, tmp_path):
    report = convert(make_drafter(), tmp_path / "out", fmt="specforge")
    assert report["aux"]["c_in"] == [2, 4, 5] and report["aux"]["output_ids"] == [1, 3, 4]
    assert report["aux"]["output_key"] == "eagle_config.eagle_aux_hidden_state_layer_ids"


def test_an_index_that_disagrees_with_its_shards_is_refused(make_drafter, tmp_path):
    src = make_drafter(fmt="sharded")
    index = src / "model.safetensors.index.json"
    data = json.loads(index.read_text())
    data["weight_map"]["ghost.weight"] = next(iter(data["weight_map"].values()))
    index.write_text(json.dumps(data))
    with pytest.raises(EaglehubError, match="disagrees with the shards on 1 tensor.*ghost.weight"):
        convert(src, tmp_path / "out", fmt="vllm")


def test_set_edits_the_config_only_and_records_each_edit(make_drafter, tmp_path):
    """``convert --set``: the config says the new values, every tensor is the source's byte for byte, the
    source is untouched, and each edit is in the report and in eaglehub.json with the value it replaced."""
    from click.testing import CliRunner

    from eaglehub.cli import main

    src = make_drafter()
    before = tree_hash(src)
    out = tmp_path / "out"
    args = ["convert", str(src), str(out), "--set", "norm_output=true"]
    args += ["--set", "eagle_aux_hidden_state_layer_ids=[1,2,4]", "--set", "eagle_config.note=x", "--json"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    validate_json(report, "convert-report")
    cfg_old, cfg = json.loads((src / "config.json").read_text()), json.loads((out / "config.json").read_text())
    old_ids = cfg_old.get("eagle_aux_hidden_state_layer_ids")
    assert report["config_changes"][:3] == [
        {"key": "norm_output", "old": None, "new": True, "why": "--set"},
        {"key": "eagle_aux_hidden_state_layer_ids", "old": old_ids, "new": [1, 2, 4], "why": "--set"},
        {"key": "eagle_config.note", "old": None, "new": "x", "why": "--set"},
    ]
    assert cfg["norm_output"] is True and cfg["eagle_aux_hidden_state_layer_ids"] == [1, 2, 4]
    prov = json.loads((out / "eaglehub.json").read_text())
    validate_json(prov, "provenance")
    assert prov["conversion"]["config_set"][0] == {"key": "norm_output", "old": None, "new": True}
    assert tree_hash(src) == before
    old_t, new_t = read_index(src).load_all(), read_index(out).load_all()
    assert set(old_t) == set(new_t)
    for name, t in old_t.items():
        assert torch.equal(new_t[name].reshape(-1).view(torch.uint8), t.reshape(-1).view(torch.uint8))


@pytest.mark.parametrize(
    "args, message",
    [
        (["--set", "norm_output"], "--set takes KEY=VALUE"),
        (["--set", "=1"], "--set takes KEY=VALUE"),
        (["--set", "hidden_act.x=1"], "is not an object"),
        (["--set", "norm_output=true", "--to", "3.1", "--calibrate", "--target", "smollm2"], "plain conversion"),
    ],
)
def test_bad_set_is_a_one_line_error(make_drafter, tmp_path, args, message):
    from click.testing import CliRunner

    from eaglehub.cli import main

    res = CliRunner().invoke(main, ["convert", str(make_drafter()), str(tmp_path / "out"), *args])
    assert res.exit_code == 2 and message in res.output and "Traceback" not in res.output, res.output
    assert not (tmp_path / "out").exists()
