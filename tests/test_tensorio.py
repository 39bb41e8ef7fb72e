"""Header-only tensor reading: single, sharded, .bin, model. prefix, bad files (formats.md §6.7)."""

from __future__ import annotations

import copy

import pytest
import torch

from conftest import BASE_CONFIG, drafter_tensors, write_checkpoint
from eaglehub.errors import EaglehubError
from eaglehub.tensorio import TensorIndex, read_index


@pytest.fixture
def tensors():
    return drafter_tensors(copy.deepcopy(BASE_CONFIG))


@pytest.mark.parametrize("fmt,expect", [("safetensors", "safetensors"), ("sharded", "safetensors-sharded"), ("bin", "pytorch")])
def test_formats_agree(tmp_path, tensors, fmt, expect):
    idx = read_index(write_checkpoint(tmp_path / fmt, None, tensors, fmt))
    assert idx.format == expect
    assert set(idx.names()) == set(tensors)
    assert idx.tensors["fc.weight"].shape == (64, 192) and idx.tensors["fc.weight"].dtype == "bfloat16"
    assert idx.tensors["d2t"].dtype == "int64" and idx.tensors["t2d"].dtype == "bool"
    assert idx.nbytes == sum(t.numel() * t.element_size() for t in tensors.values())
    assert idx.numel == sum(t.numel() for t in tensors.values())
    if fmt == "sharded":
        assert len(idx.files) == 2 and len({i.file for i in idx.tensors.values()}) == 2
    assert torch.equal(idx.load("lm_head.weight"), tensors["lm_head.weight"])
    assert torch.equal(idx.load("fc.weight", max_rows=3), tensors["fc.weight"][:3])
    loaded = idx.load_all()
    assert list(loaded) == idx.names() and all(torch.equal(loaded[n], tensors[n]) for n in tensors)


def test_model_prefix_is_stripped_and_recorded(tmp_path, tensors):
    idx = read_index(write_checkpoint(tmp_path / "p", None, {"model." + n: t for n, t in tensors.items()}))
    assert idx.stripped_prefix == "model."
    assert idx.tensors["fc.weight"].source_name == "model.fc.weight"
    assert torch.equal(idx.load("fc.weight"), tensors["fc.weight"])


def test_name_stored_twice_is_refused(tmp_path, tensors):
    path = write_checkpoint(tmp_path / "dup", None, {"fc.weight": tensors["fc.weight"], "model.fc.weight": tensors["fc.weight"].clone()})
    with pytest.raises(EaglehubError, match="stored twice"):
        read_index(path)


def test_truncated_safetensors_is_a_one_line_error(tmp_path, tensors):
    path = write_checkpoint(tmp_path / "t", None, tensors)
    f = path / "model.safetensors"
    f.write_bytes(f.read_bytes()[:-100])
    with pytest.raises(EaglehubError) as err:
        read_index(path)
    assert err.value.exit_code == 2 and "\n" not in err.value.message and err.value.hint


@pytest.mark.parametrize("setup,match", [
    (lambda p: None, "not a directory"),
    (lambda p: p.mkdir(), "no weights"),
    (lambda p: (p.mkdir(), (p / "training_state.pt").write_bytes(b"x")), "SpecForge"),
    (lambda p: (p.mkdir(), (p / "pytorch_model.bin").write_bytes(b"not a zip")), "cannot read"),
])
def test_bad_directories(tmp_path, setup, match):
    path = tmp_path / "x"
    setup(path)
    with pytest.raises(EaglehubError, match=match):
        read_index(path)


def test_missing_shard(tmp_path, tensors):
    path = write_checkpoint(tmp_path / "s", None, tensors, "sharded")
    (path / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(EaglehubError, match="shard .* is missing"):
        read_index(path)


def test_index_reads_headers_only(tmp_path, tensors, monkeypatch):
    path = write_checkpoint(tmp_path / "h", None, tensors)
    monkeypatch.setattr(TensorIndex, "load", lambda *a, **k: pytest.fail("data loaded"))
    monkeypatch.setattr(TensorIndex, "load_all", lambda *a, **k: pytest.fail("data loaded"))
    from eaglehub.inspection import inspect_drafter

    (path / "config.json").write_text(__import__("json").dumps(BASE_CONFIG))
    assert inspect_drafter(path)["parameters"] == sum(t.numel() for t in tensors.values())
