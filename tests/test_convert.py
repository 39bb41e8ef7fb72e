"""convert --to 3.1: added tensors, bit-exact copies, untouched source, atomic output (formats.md §7)."""

from __future__ import annotations

import json

import pytest
import torch

from conftest import tree_hash
from eaglehub import convert as convert_mod
from eaglehub.convert import convert
from eaglehub.errors import EaglehubError
from eaglehub.schemas import validate_json
from eaglehub.tensorio import read_index
from eaglehub.validate import validate


def test_upgrade_adds_fc_norm_and_copies_bit_exact(make_drafter, make_target, tmp_path):
    src = make_drafter()
    (src / "README.md").write_text("card\n")
    before = tree_hash(src)
    report = convert(src, tmp_path / "out", to="3.1", norm_output=True)
    validate_json(report, "convert-report")
    assert tree_hash(src) == before
    assert [t["name"] for t in report["added_tensors"]] == ["fc_norm.0.weight", "fc_norm.1.weight", "fc_norm.2.weight"]
    assert report["config_changes"] == [{"key": "fc_norm", "old": None, "new": True}, {"key": "norm_output", "old": None, "new": True}]
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
    assert clean["findings"] == [] and clean["ok"]


def test_no_norm_output_and_layers0_spelling_kept(make_drafter, tmp_path):
    def rename(cfg, t):
        for n in [n for n in t if n.startswith("midlayer.")]:
            t["layers.0." + n[len("midlayer."):]] = t.pop(n)
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
    assert all(torch.equal(new[n].reshape(-1).view(torch.uint8), t.reshape(-1).view(torch.uint8)) for n, t in old.items())


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

    monkeypatch.setattr(convert_mod, "_copy_side_files", boom)
    with pytest.raises(RuntimeError):
        convert(src, tmp_path / "out", to="3.1")
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["drafter"]  # no temporary left behind
    assert tree_hash(src) == before


@pytest.mark.parametrize("kwargs,match,code", [
    ({"v31": True}, "already an EAGLE-3.1", 2),
    ({"mutate": lambda c, t: t.pop("lm_head.weight")}, r"E-LMHEAD-MISSING\); refusing", 1),
])
def test_refusals(make_drafter, tmp_path, kwargs, match, code):
    with pytest.raises(EaglehubError, match=match) as err:
        convert(make_drafter(**kwargs), tmp_path / "out", to="3.1")
    assert err.value.exit_code == code and not (tmp_path / "out").exists()


def test_destination_equal_to_source_is_refused(make_drafter):
    src = make_drafter()
    with pytest.raises(EaglehubError, match="source directory"):
        convert(src, src, to="3.1", overwrite=True)
