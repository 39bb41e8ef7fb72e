"""Layout detection (formats.md §6), canonical names, aux-id conventions (§3) and the native writer."""

from __future__ import annotations

import copy

import pytest
import torch

from conftest import BASE_CONFIG, drafter_tensors, write_checkpoint
from eaglehub.drafter import default_aux_ids, derive_dims, infer_convention, read_aux, read_flags
from eaglehub.layouts import native, read_drafter


def rename_layer0(t, prefix):
    for n in [n for n in t if n.startswith("midlayer.")]:
        t[prefix + n[len("midlayer."):]] = t.pop(n)


@pytest.mark.parametrize("name,cfg_over,tensor_fn,layout", [
    ("native", {}, None, "eagle3-native"),
    ("research", {"architectures": ["LlamaForCausalLM"]}, None, "eagle3-research"),
    ("exported", {}, lambda t: rename_layer0(t, "layers.0."), "eagle3-exported"),
    ("modelopt", {"eagle_config": {"next_layer_regular": True}}, lambda t: (rename_layer0(t, "layers.0."), t.pop("t2d")), "modelopt"),
    ("torchspec", {"_torchspec_version": "0.3"}, lambda t: rename_layer0(t, "layers.0."), "torchspec"),
    ("speculators", {"speculators_model_type": "eagle3"}, None, "speculators"),
    ("mla", {"architectures": ["Eagle3DeepseekV2ForCausalLM"], "kv_lora_rank": 512}, None, "mla"),
    ("qwen3", {"architectures": ["Eagle3Qwen3ForCausalLM"]}, None, "eagle3-qwen3"),
])
def test_detect(tmp_path, name, cfg_over, tensor_fn, layout):
    cfg = {**copy.deepcopy(BASE_CONFIG), **cfg_over}
    t = drafter_tensors(cfg)
    if tensor_fn:
        tensor_fn(t)
    d = read_drafter(write_checkpoint(tmp_path / name, cfg, t))
    assert d.layout == layout
    if layout in ("eagle3-exported", "modelopt", "torchspec"):
        assert "midlayer.self_attn.q_proj.weight" in d.names
        assert d.names["midlayer.self_attn.q_proj.weight"] == "layers.0.self_attn.q_proj.weight"
        assert torch.equal(d.load("midlayer.mlp.up_proj.weight"), t["layers.0.mlp.up_proj.weight"])


def test_canonical_names_keep_unknown_and_second_layers():
    names = ["layers.0.mlp.up_proj.weight", "layers.1.mlp.up_proj.weight", "foo.bar"]
    assert native.canonical_names(names) == {
        "midlayer.mlp.up_proj.weight": "layers.0.mlp.up_proj.weight",
        "layers.1.mlp.up_proj.weight": "layers.1.mlp.up_proj.weight",
        "foo.bar": "foo.bar",
    }
    assert native.stored_name("midlayer.norm", "layers.0.") == "layers.0.norm"
    assert native.stored_name("fc.weight", "layers.0.") == "fc.weight"


def test_writer_round_trip_is_bit_exact(tmp_path):
    cfg = copy.deepcopy(BASE_CONFIG)
    t = drafter_tensors(cfg)
    t["tied"] = t["lm_head.weight"]  # shared storage must still be written
    (tmp_path / "out").mkdir()
    written = native.write(tmp_path / "out", cfg, t, prefix="layers.0.")
    d = read_drafter(tmp_path / "out")
    assert written == sum(p.stat().st_size for p in (tmp_path / "out").iterdir())
    assert d.config == cfg and d.layout == "eagle3-exported"
    back = d.load_all()
    assert set(back) == set(t) and all(torch.equal(back[n], t[n]) and back[n].dtype == t[n].dtype for n in t)


def test_dims_defaults_follow_vllm():
    d = derive_dims({"hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100,
                     "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3, 4]}})
    assert (d.Ht, d.A, d.nkv, d.head_dim, d.Vd, d.layers, d.Ht_declared) == (64, 4, 4, 16, 100, 1, False)
    assert derive_dims({"hidden_size": 64, "target_hidden_size": None}).Ht == 64
    assert derive_dims({"hidden_size": 48, "target_hidden_size": 64, "num_aux_hidden_states": 2}).A == 2


@pytest.mark.parametrize("ids,top,n,conv", [
    ([2, 4, 5], True, None, "C-in"),
    ([1, 3, 4], False, None, "C-out"),
    ([2, 4, 5], False, None, "C-in"),
    ([3, 5, 8], False, 8, "C-in"),
    ([3, 5, 4], False, 8, "C-out"),
    ([3, 5, 7], False, 8, "unknown"),
])
def test_convention_rules(ids, top, n, conv):
    assert infer_convention(ids, top, n)[0] == conv


def test_aux_normalised_to_c_in_and_defaults():
    aux = read_aux({"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 29, 57]}})
    assert (aux.raw, aux.c_in, aux.convention, aux.key) == ([1, 29, 57], [2, 30, 58], "C-out", "eagle_config.eagle_aux_hidden_state_layer_ids")
    top = read_aux({"eagle_aux_hidden_state_layer_ids": [2, 30, 58], "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 29, 57]}})
    assert top.key == "eagle_aux_hidden_state_layer_ids" and top.c_in == [2, 30, 58]
    assert read_aux({}).raw is None
    assert default_aux_ids(4) == [2, 2, 1] and default_aux_ids(61) == [2, 30, 58]


def test_flags_nested_norm_before_fc_wins():
    f = read_flags({"norm_before_fc": True, "eagle_config": {"norm_before_fc": False}, "fc_norm": True, "norm_output": "yes"})
    assert (f.norm_before_fc, f.fc_norm, f.norm_output) == (False, True, False)
