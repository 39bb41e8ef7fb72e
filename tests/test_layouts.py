"""Format detection with evidence (docs/formats.md §6), canonical names, aux-id conventions (§3)."""

from __future__ import annotations

import copy

import pytest
import torch
from helpers.checkpoints import BASE_CONFIG, drafter_tensors, write_checkpoint

from eaglehub.drafter.canonical import default_aux_ids, derive_dims, infer_convention, read_aux, read_flags
from eaglehub.errors import EaglehubError
from eaglehub.formats.registry import FORMATS, read_drafter


def rename_layer0(t, prefix):
    for n in [n for n in t if n.startswith("midlayer.")]:
        t[prefix + n[len("midlayer.") :]] = t.pop(n)


def nest_ids(cfg, ids):
    cfg.pop("eagle_aux_hidden_state_layer_ids")
    cfg.pop("num_aux_hidden_states")
    cfg["eagle_config"] = {**cfg.get("eagle_config", {}), "eagle_aux_hidden_state_layer_ids": ids}


@pytest.mark.parametrize(
    "name,cfg_fn,tensor_fn,fmt,evidence",
    [
        ("native", None, None, "vllm", "top-level C-in"),
        ("research", lambda c: c.update(architectures=["LlamaForCausalLM"]), None, "vllm", "EAGLE research"),
        ("exported", None, lambda t: rename_layer0(t, "layers.0."), "vllm", "layers.0.*"),
        ("specforge", lambda c: nest_ids(c, [1, 3, 4]), None, "specforge", "eagle_config"),
        (
            "modelopt",
            lambda c: (nest_ids(c, [1, 3, 4]), c["eagle_config"].update(next_layer_regular=True)),
            lambda t: (rename_layer0(t, "layers.0."), t.pop("t2d")),
            "modelopt",
            "next_layer_regular",
        ),
        (
            "torchspec",
            lambda c: c.update(_torchspec_version="0.3"),
            lambda t: rename_layer0(t, "layers.0."),
            "torchspec",
            "_torchspec_version",
        ),
        (
            "mla",
            lambda c: c.update(architectures=["Eagle3DeepseekV2ForCausalLM"], kv_lora_rank=32),
            None,
            "vllm",
            "Eagle3DeepseekV2",
        ),
        (
            "mla-nested",
            lambda c: (
                c.update(architectures=["Eagle3DeepseekV2ForCausalLM"], kv_lora_rank=32),
                nest_ids(c, [1, 3, 4]),
            ),
            None,
            "torchspec",
            "SpecForge has no MLA drafters",
        ),
        (
            "specforge-no-ids",
            lambda c: (c.pop("eagle_aux_hidden_state_layer_ids"), c.pop("num_aux_hidden_states")),
            None,
            "specforge",
            "SpecForge always ships both",
        ),
    ],
)
def test_detect_with_evidence(tmp_path, name, cfg_fn, tensor_fn, fmt, evidence):
    cfg = copy.deepcopy(BASE_CONFIG)
    if cfg_fn:
        cfg_fn(cfg)
    t = drafter_tensors(BASE_CONFIG)
    if tensor_fn:
        tensor_fn(t)
    d = read_drafter(write_checkpoint(tmp_path / name, cfg, t))
    assert d.format == fmt and any(evidence in e for e in d.evidence), d.evidence
    assert d.names["midlayer.self_attn.q_proj.weight"] in (
        "midlayer.self_attn.q_proj.weight",
        "layers.0.self_attn.q_proj.weight",
    )
    stored = d.names["midlayer.mlp.up_proj.weight"]
    assert torch.equal(d.load("midlayer.mlp.up_proj.weight"), t[stored])
    # C-out [1, 3, 4] and C-in [2, 4, 5] name the same layers; no ids at all leaves the target defaults
    assert d.aux.c_in == ([2, 4, 5] if "eagle_aux_hidden_state_layer_ids" in cfg or "eagle_config" in cfg else None)


def test_nested_ids_without_marker_are_ambiguous(tmp_path):
    cfg = copy.deepcopy(BASE_CONFIG)
    nest_ids(cfg, [1, 3, 4])
    t = drafter_tensors(BASE_CONFIG)
    rename_layer0(t, "layers.0.")
    path = write_checkpoint(tmp_path / "amb", cfg, t)
    with pytest.raises(EaglehubError, match="ambiguous.*torchspec.*modelopt") as exc:
        read_drafter(path)
    assert "--from" in exc.value.hint
    assert read_drafter(path, fmt="modelopt").format == "modelopt"


def test_two_markers_are_ambiguous(tmp_path):
    cfg = {
        **copy.deepcopy(BASE_CONFIG),
        "_torchspec_version": "0.3",
        "eagle_config": {"next_layer_regular": True},
    }
    with pytest.raises(EaglehubError, match="ambiguous"):
        read_drafter(write_checkpoint(tmp_path / "two", cfg, drafter_tensors(BASE_CONFIG)))


@pytest.mark.parametrize(
    "cfg_fn,kind",
    [
        (lambda c: c.update(architectures=["Eagle3Qwen3ForCausalLM"]), "vllm"),  # read since docs/formats.md §10
        (lambda c: c.update(speculators_model_type="dflash"), "unsupported"),
    ],
)
def test_unsupported_kinds(tmp_path, cfg_fn, kind):
    cfg = copy.deepcopy(BASE_CONFIG)
    cfg_fn(cfg)
    assert read_drafter(write_checkpoint(tmp_path / "u", cfg, drafter_tensors(BASE_CONFIG))).format == kind


def test_every_format_names_layer0_and_legacy_norms():
    names = ["layers.0.mlp.up_proj.weight", "layers.1.mlp.up_proj.weight", "aux_norm_mid.weight", "foo.bar"]
    assert FORMATS["torchspec"].canonical_names(names, {}) == {
        "midlayer.mlp.up_proj.weight": "layers.0.mlp.up_proj.weight",
        "layers.1.mlp.up_proj.weight": "layers.1.mlp.up_proj.weight",
        "fc_norm.1.weight": "aux_norm_mid.weight",
        "foo.bar": "foo.bar",
    }
    canon = ["midlayer.norm", "layers.1.norm", "fc.weight", "fc_norm.2.weight"]
    assert FORMATS["vllm"].stored_names(canon, {}) == dict(
        zip(canon, ["midlayer.norm", "layers.1.norm", "fc.weight", "fc_norm.2.weight"])
    )
    assert FORMATS["speculators"].stored_names(canon, {})["midlayer.norm"] == "layers.0.norm"
    # the legacy aux_norm_* names are read, never written: vLLM's loader refuses them (SGLang's renames them)
    assert FORMATS["torchspec"].stored_names(canon, {"legacy_fc_norm": True})["fc_norm.2.weight"] == "fc_norm.2.weight"


def test_dims_defaults_follow_vllm():
    d = derive_dims(
        {
            "hidden_size": 64,
            "num_attention_heads": 4,
            "vocab_size": 100,
            "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3, 4]},
        }
    )
    assert (d.Ht, d.A, d.nkv, d.head_dim, d.Vd, d.layers, d.Ht_declared) == (64, 4, 4, 16, 100, 1, False)
    assert derive_dims({"hidden_size": 64, "target_hidden_size": None}).Ht == 64
    assert derive_dims({"hidden_size": 48, "target_hidden_size": 64, "num_aux_hidden_states": 2}).A == 2


@pytest.mark.parametrize(
    "ids,top,n,conv",
    [
        ([2, 4, 5], True, None, "C-in"),
        ([1, 3, 4], False, None, "C-out"),
        ([2, 4, 5], False, None, "C-in"),
        ([3, 5, 8], False, 8, "C-in"),
        ([3, 5, 4], False, 8, "C-out"),
        ([3, 5, 7], False, 8, "unknown"),
    ],
)
def test_convention_rules(ids, top, n, conv):
    assert infer_convention(ids, top, n)[0] == conv


def test_aux_normalised_to_c_in_and_defaults():
    aux = read_aux({"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 29, 57]}})
    assert (aux.raw, aux.c_in, aux.convention, aux.key) == (
        [1, 29, 57],
        [2, 30, 58],
        "C-out",
        "eagle_config.eagle_aux_hidden_state_layer_ids",
    )
    top = read_aux(
        {
            "eagle_aux_hidden_state_layer_ids": [2, 30, 58],
            "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 29, 57]},
        }
    )
    assert top.key == "eagle_aux_hidden_state_layer_ids" and top.c_in == [2, 30, 58]
    assert read_aux({}).raw is None
    assert default_aux_ids(4) == [2, 2, 1] and default_aux_ids(61) == [2, 30, 58]


def test_flags_nested_norm_before_fc_wins():
    f = read_flags(
        {
            "norm_before_fc": True,
            "eagle_config": {"norm_before_fc": False},
            "fc_norm": True,
            "norm_output": "yes",
        }
    )
    assert (f.norm_before_fc, f.fc_norm, f.norm_output) == (False, True, False)


@pytest.mark.parametrize(
    "ids,fmt,warn",
    [
        ([1, 3, 4], "specforge", None),
        ([3, 5, 6], "specforge", "match no rule; assumed C-out"),
        ([2, 4, 5], "specforge", "read as C-in (nested list starting at 2) although specforge writes C-out"),
    ],
)
def test_convert_warns_when_the_aux_convention_is_a_guess(tmp_path, ids, fmt, warn):
    from eaglehub.convert.plan import aux_warnings

    cfg = copy.deepcopy(BASE_CONFIG)
    nest_ids(cfg, ids)
    d = read_drafter(write_checkpoint(tmp_path / "w", cfg, drafter_tensors(BASE_CONFIG)))
    assert d.format == fmt
    got = aux_warnings(d)
    assert (got == []) if warn is None else (len(got) == 1 and warn in got[0] and "--aux-convention" in got[0])
    assert aux_warnings(read_drafter(tmp_path / "w", aux_convention="C-out")) == []
