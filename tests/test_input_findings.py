"""Unreadable drafter content is a named E-INPUT-* finding in a schema-valid report, never a traceback:
missing files, bad JSON, truncated or corrupt weights, raw training checkpoints, ambiguous layouts;
an unreadable target config is E-TARGET-CONFIG and the drafter is still checked."""

from __future__ import annotations

import json
import pickle

import pytest
import torch
from helpers.checkpoints import BASE_CONFIG, drafter_tensors
from safetensors.torch import save_file

from eaglehub.checks.validate import validate
from eaglehub.io.schemas import validate_json


def _write_index(path, weight_map):
    (path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))


def _missing_shard(path):
    (path / sorted(path.glob("model-*.safetensors"))[0]).unlink()


def _index_lies(path):
    index = json.loads((path / "model.safetensors.index.json").read_text())
    name = next(iter(index["weight_map"]))
    index["weight_map"][name] = (
        "model-00002-of-00002.safetensors"
        if index["weight_map"][name].startswith("model-00001")
        else "model-00001-of-00002.safetensors"
    )
    _write_index(path, index["weight_map"])


def _data_cut(path):
    f = path / "model.safetensors"
    f.write_bytes(f.read_bytes()[:-100])  # header intact, data short


def _stored_twice(path):
    t = drafter_tensors(dict(BASE_CONFIG))
    t["model.fc.weight"] = t["fc.weight"].clone()
    save_file(t, str(path / "model.safetensors"))


def _legacy_bin(path):
    (path / "model.safetensors").unlink()
    (path / "pytorch_model.bin").write_bytes(pickle.dumps({"fc.weight": [1.0]}, protocol=2))


def _bin_not_a_state_dict(path):
    (path / "model.safetensors").unlink()
    torch.save({"fc.weight": torch.zeros(2), "step": 5}, path / "pytorch_model.bin")


def _raw_specforge(path):
    (path / "model.safetensors").unlink()
    (path / "training_state.pt").write_bytes(b"x")


def _raw_torchspec(path):
    (path / "model.safetensors").unlink()
    (path / "iter_0001" / "model").mkdir(parents=True)
    (path / "iter_0001" / "model" / ".metadata").write_bytes(b"x")


def _config_array(path):
    (path / "config.json").write_text("[1, 2]")


def _bad_provenance(path):
    (path / "eaglehub.json").write_text("{broken")


def _ambiguous(cfg, t):
    for n in [n for n in t if n.startswith("midlayer.")]:
        t["layers.0." + n[len("midlayer.") :]] = t.pop(n)
    cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": cfg.pop("eagle_aux_hidden_state_layer_ids")}


CASES = [  # (id, fmt, break the written files, expected code, subject)
    ("no-config", "safetensors", lambda p: (p / "config.json").unlink(), "E-INPUT-MISSING", "config.json"),
    (
        "no-weights",
        "safetensors",
        lambda p: (p / "model.safetensors").unlink(),
        "E-INPUT-MISSING",
        "weight files",
    ),
    ("missing-shard", "sharded", _missing_shard, "E-INPUT-MISSING", "weight files"),
    (
        "bad-json",
        "safetensors",
        lambda p: (p / "config.json").write_text('{"hidden_size": 64,'),
        "E-INPUT-CONFIG",
        "config.json",
    ),
    ("config-array", "safetensors", _config_array, "E-INPUT-CONFIG", "config.json"),
    ("data-cut", "safetensors", _data_cut, "E-INPUT-WEIGHTS", "weight files"),
    (
        "header-garbage",
        "safetensors",
        lambda p: (p / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json!!!!!!}"),
        "E-INPUT-WEIGHTS",
        "weight files",
    ),
    ("stored-twice", "safetensors", _stored_twice, "E-INPUT-WEIGHTS", "weight files"),
    ("index-lies", "sharded", _index_lies, "E-INPUT-WEIGHTS", "weight files"),
    ("legacy-pickle-bin", "safetensors", _legacy_bin, "E-INPUT-WEIGHTS", "weight files"),
    ("bin-not-state-dict", "safetensors", _bin_not_a_state_dict, "E-INPUT-WEIGHTS", "weight files"),
    ("raw-specforge", "safetensors", _raw_specforge, "E-INPUT-RAW", "weight files"),
    ("raw-torchspec", "safetensors", _raw_torchspec, "E-INPUT-RAW", "weight files"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_unreadable_content_is_one_finding(make_drafter, case):
    _, fmt, breakage, code, subject = case
    path = make_drafter(fmt=fmt)
    breakage(path)
    for deep in (False, True):
        report = validate(path, deep=deep)
        validate_json(report, "validate-report")
        assert report["layout"] == "unreadable" and report["ok"] is False
        assert [(f["code"], f["subject"]) for f in report["findings"]] == [(code, subject)]
        assert report["findings"][0]["hint"] and "\n" not in report["findings"][0]["message"]


def test_broken_provenance_is_a_finding_and_the_drafter_is_still_checked(make_drafter):
    """eaglehub.json is an optional record: a broken one is reported, and every other check still runs."""
    path = make_drafter(mutate=lambda cfg, t: cfg.update(eagle_aux_hidden_state_layer_ids=[4, 2, 5]))
    _bad_provenance(path)
    report = validate(path)
    validate_json(report, "validate-report")
    assert report["layout"] == "vllm"
    assert [(f["code"], f["subject"]) for f in report["findings"]] == [
        ("E-INPUT-CONFIG", "eaglehub.json"),
        ("E-AUX-ORDER", "eagle_aux_hidden_state_layer_ids"),
    ]


def test_ambiguous_layout_names_the_candidates(make_drafter):
    report = validate(make_drafter(mutate=_ambiguous))
    (f,) = report["findings"]
    assert f["code"] == "E-INPUT-AMBIGUOUS" and "torchspec" in f["message"] and "modelopt" in f["message"]
    assert "--from" in f["hint"]
    assert validate(make_drafter("named", mutate=_ambiguous), source_format="torchspec")["layout"] == "torchspec"


def test_data_truncated_after_the_header_was_read_is_a_finding_of_the_check(make_drafter, monkeypatch):
    """A file that shrinks between indexing and reading (only the value checks read data) ends the
    check that read it with E-INPUT-WEIGHTS; the other checks still report."""
    from eaglehub.io.tensorio import TensorIndex

    def short_read(self, name, max_rows=None, start_row=0):
        from eaglehub.errors import EaglehubError

        raise EaglehubError(f"cannot read {name}: the file ends early", hint="re-download it", code="E-INPUT-WEIGHTS")

    drafter = make_drafter(mutate=lambda cfg, t: cfg.update(tie_word_embeddings=True))
    monkeypatch.setattr(TensorIndex, "load_numpy", short_read)
    codes = [f["code"] for f in validate(drafter, deep=True)["findings"]]
    assert "E-INPUT-WEIGHTS" in codes and "E-CONFIG-TIE-PRUNED" in codes


@pytest.mark.parametrize("text", ["{oops", "[]", "null"])
def test_unreadable_target_config_is_a_finding_and_the_drafter_is_still_checked(make_drafter, tmp_path, text):
    target = tmp_path / "target"
    target.mkdir()
    (target / "config.json").write_text(text)
    report = validate(
        make_drafter(mutate=lambda cfg, t: cfg.update(eagle_aux_hidden_state_layer_ids=[4, 2, 5])), target
    )
    validate_json(report, "validate-report")
    codes = [(f["code"], f["subject"]) for f in report["findings"]]
    assert ("E-TARGET-CONFIG", "target config.json") in codes and (
        "E-AUX-ORDER",
        "eagle_aux_hidden_state_layer_ids",
    ) in codes
    assert report["target"] is None and report["layout"] == "vllm"
