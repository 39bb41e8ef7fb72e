"""Engine profiles: each profile's reading of a drafter, and the findings that name the profiles they hold for.

One test per engine fact of docs/profiles.md (W1–W7, W11, W13, M1, M2, M4–M7): each fails on the reading
eaglehub had before profiles (one vLLM 0.32 reading for every engine) and passes now.
"""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner
from helpers.checkpoints import vocab_maps
from helpers.formats_factory import write_format

from eaglehub.checks.validate import Options, validate
from eaglehub.cli import main
from eaglehub.errors import EaglehubError
from eaglehub.formats.registry import read_drafter
from eaglehub.profiles import DEFAULT_PROFILE, PROFILES, ServedTarget, Stored, read, resolve

AUX = "eagle_aux_hidden_state_layer_ids"


def codes(report: dict) -> dict[str, dict]:
    return {f["code"]: f for f in report["findings"]}


def _nested_only(ids):
    def mutate(cfg, t):
        del cfg[AUX]
        cfg.pop("num_aux_hidden_states", None)
        cfg["eagle_config"] = {AUX: list(ids)}
        if len(ids) != 3:
            h = cfg["target_hidden_size"]
            t["fc.weight"] = (torch.randn(cfg["hidden_size"], h * len(ids)) * 0.05).to(torch.bfloat16)

    return mutate


# --- registry (M1) -------------------------------------------------------------------------------


def test_profiles_named_and_parsed():
    assert DEFAULT_PROFILE == "vllm-0.33-gpu" and PROFILES[DEFAULT_PROFILE].runner == "mrv2"
    assert resolve("vllm-0.32-cpu").runner == "v1" and resolve("vllm-0.32-cpu").platform == "cpu"
    assert resolve("vllm-0.33").id == "vllm-0.33-gpu"
    assert resolve("vllm-0.29").runner == "v1"  # MRV2 was read as the CUDA default from 0.32 only
    assert resolve("vllm-0.30.1-cpu").version == "0.30.1"
    with pytest.raises(EaglehubError):
        resolve("trtllm-1.0")


# --- W1: where the runner takes the aux ids from --------------------------------------------------


def test_w1_nested_only_four_ids_fail_on_mrv2_and_load_on_v1(make_drafter, make_target):
    d = make_drafter(mutate=_nested_only([1, 3, 4, 6]))
    on_gpu = read(read_drafter(d), "vllm-0.33-gpu")
    on_v1 = read(read_drafter(d), "vllm-0.33-v1")
    assert on_gpu.aux_layer_ids is None and on_gpu.num_aux_hidden_states == 4
    assert on_v1.aux_layer_ids == (1, 3, 4, 6)
    report = validate(d, make_target(8), options=Options(profiles=("vllm-0.33-gpu", "vllm-0.32-cpu")))
    f = codes(report)["E-AUX-IGNORED"]
    assert f["profiles"] == ["vllm-0.33-gpu"] and "not on vLLM 0.32.0 on CPU" in f["message"]
    assert "first draft step fails" in f["message"]
    assert f"--set '{AUX}=[2,4,5,7]'" in f["hint"]  # C-out nested ids written C-in at the top level
    assert report["ok"] is False


def test_w1_sglang_ignores_a_top_level_list(make_drafter, make_target):
    report = validate(make_drafter(), make_target(10), options=Options(profiles=("sglang-0.5.23",)))
    f = codes(report)["E-AUX-IGNORED"]
    assert f["subject"] == AUX and "[2, 5, 7]" in f["message"]  # SGLang's default for 10 layers
    assert f"eagle_config.{AUX}=[1,3,4]" in f["hint"]


# --- W2: the speculators adapter copies named keys only ------------------------------------------


def _speculators(tmp_path, **top):
    d = write_format(tmp_path / "spec", "speculators").path
    cfg = json.loads((d / "config.json").read_text())
    for k, v in top.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def test_w2_top_level_num_aux_is_dropped(tmp_path):
    d = _speculators(tmp_path, num_aux_hidden_states=4)
    r = read(read_drafter(d), "vllm-0.33-gpu")
    assert "num_aux_hidden_states" in r.dropped_keys and r.num_aux_hidden_states == 3
    f = codes(validate(d))["E-SPECULATORS-DROPPED"]
    assert "transformer_layer_config.num_aux_hidden_states=4" in f["hint"]


def test_w2_top_level_quantization_config_is_dropped(tmp_path):
    d = _speculators(tmp_path, quantization_config={"quant_method": "compressed-tensors"})
    assert read(read_drafter(d), "vllm-0.33-gpu").quantization is None
    assert "E-SPECULATORS-DROPPED" in codes(validate(d))


def test_w2_adapter_copies_only_named_keys(tmp_path):
    d = _speculators(tmp_path, rope_theta=123.0, max_position_embeddings=99)
    r = read(read_drafter(d), "vllm-0.33-gpu")
    assert set(r.dropped_keys) == {"rope_theta", "max_position_embeddings"}
    assert r.rope_theta != 123.0 and r.max_position_embeddings != 99
    assert "W-SPECULATORS-DROPPED" in codes(validate(d))


# --- W3: each class counts its aux states its own way ---------------------------------------------


def test_w3_qwen3_counts_the_top_level_ids():
    cfg = {"architectures": ["Eagle3Qwen3ForCausalLM"], "hidden_size": 64, AUX: [1, 2, 3, 4]}
    assert read(Stored(cfg), "vllm-0.33-gpu").num_aux_hidden_states == 4
    cfg["architectures"] = ["LlamaForCausalLMEagle3"]
    assert read(Stored(cfg), "vllm-0.33-gpu").num_aux_hidden_states == 3  # Llama: nested list or 3
    cfg["num_aux_layers"] = 5
    cfg["architectures"] = ["Eagle3Qwen3ForCausalLM"]
    assert read(Stored(cfg), "vllm-0.33-gpu").num_aux_hidden_states == 5


# --- W5: d2t with Vd == V -------------------------------------------------------------------------


def test_w5_unpruned_d2t_fails_on_vllm_030_and_loads_on_sglang(make_drafter):
    def unpruned(cfg, t):
        v = cfg["vocab_size"]
        cfg["draft_vocab_size"] = v
        t["lm_head.weight"] = (torch.randn(v, cfg["hidden_size"]) * 0.05).to(torch.bfloat16)
        t["d2t"], t["t2d"] = vocab_maps(list(range(v)), v)

    d = make_drafter(mutate=unpruned)
    report = validate(d, options=Options(profiles=("vllm-0.33-gpu", "vllm-0.29", "sglang-0.5.23")))
    f = codes(report)["E-ENGINE-WEIGHT"]
    assert f["profiles"] == ["vllm-0.33-gpu"] and "draft_id_to_target_id" in f["message"]
    assert "--format vllm" in f["hint"]


# --- W6 / W7: the weight loader -------------------------------------------------------------------


def test_w6_unknown_name_is_a_value_error_and_a_stray_bias_is_skipped(make_drafter):
    def stray(cfg, t):
        t["midlayer.self_attn.q_proj.bias"] = torch.zeros(t["midlayer.self_attn.q_proj.weight"].shape[0])
        t["midlayer.extra.weight"] = torch.zeros(4)

    report = validate(make_drafter(mutate=stray))
    found = codes(report)
    assert "ValueError" in found["E-TENSOR-UNEXPECTED"]["message"]
    assert found["W-ENGINE-IGNORED"]["subject"] == "midlayer.self_attn.q_proj.bias"
    assert "--set attention_bias=true" in found["W-ENGINE-IGNORED"]["hint"]


def test_w7_attention_bias_builds_an_o_proj_bias(make_drafter):
    def biases(cfg, t, o=True):
        cfg["attention_bias"] = True
        for p in ("q", "k", "v", "o"):
            if p != "o" or o:
                t[f"midlayer.self_attn.{p}_proj.bias"] = torch.zeros(
                    t[f"midlayer.self_attn.{p}_proj.weight"].shape[0], dtype=torch.bfloat16
                )

    shipped = validate(make_drafter("with-o", mutate=biases))
    assert shipped["findings"] == [], shipped["findings"]  # o_proj.bias is a tensor vLLM builds and loads
    missing = validate(make_drafter("without-o", mutate=lambda c, t: biases(c, t, o=False)))
    assert codes(missing)["E-ENGINE-UNFILLED"]["subject"] == "model.layers.0.self_attn.o_proj.bias"
    assert not read(read_drafter(make_drafter("sg", mutate=biases)), "sglang-0.5.23").attention_bias


# --- W11: the served context ----------------------------------------------------------------------


def test_w11_yarn_drafter_lowers_the_context_on_033_gpu_only(make_drafter, make_target):
    def yarn(cfg, t):
        cfg["max_position_embeddings"] = 2048
        cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 1024}

    d, target = make_drafter(mutate=yarn), make_target(8, max_position_embeddings=8192)
    report = validate(d, target, options=Options(profiles=("vllm-0.33-gpu", "vllm-0.32-gpu")))
    f = codes(report)["W-CONTEXT-LOWERED"]
    assert f["profiles"] == ["vllm-0.33-gpu"] and "from 8192 to 2048" in f["message"]
    served = ServedTarget(vocab_size=256, num_layers=8, max_model_len=8192)
    assert read(read_drafter(d), "vllm-0.32-gpu", served).max_position_embeddings == 8192
    assert read(read_drafter(d), "vllm-0.33-gpu", served).max_position_embeddings == 2048


# --- W13: id N is captured ------------------------------------------------------------------------


def test_w13_the_last_id_is_captured(make_drafter, make_target):
    def last(cfg, t):
        cfg[AUX] = [2, 4, 8]

    report = validate(make_drafter(mutate=last), make_target(8))
    # vLLM's Llama target captures id N after its last layer (llama.py L425-442): no range finding, no "< N"
    assert report["ok"] and not [f for f in report["findings"] if "< N" in f["message"] or f["code"] == "E-AUX-RANGE"]


# --- M2, M4, M5, M6, M7 ---------------------------------------------------------------------------


def test_m2_a_speculators_drafter_serves_alone_only_with_a_hub_verifier(tmp_path, monkeypatch):
    d = write_format(tmp_path / "spec", "speculators").path
    cfg = json.loads((d / "config.json").read_text())
    cfg["speculators_config"]["verifier"]["name_or_path"] = "org/target"
    (d / "config.json").write_text(json.dumps(cfg))
    monkeypatch.chdir(tmp_path)
    assert read(read_drafter(d), "vllm-0.33-gpu").verifier_error is None  # a Hub id: vllm serve DRAFTER works
    (tmp_path / "org" / "target").mkdir(parents=True)  # the same id now names a local directory
    r = read(read_drafter(d), "vllm-0.33-gpu")
    assert r.verifier_error and "local path" in r.verifier_error
    cfg["speculators_config"]["verifier"]["name_or_path"] = str(tmp_path)
    (d / "config.json").write_text(json.dumps(cfg))
    assert "not a Hub repo id" in (read(read_drafter(d), "vllm-0.33-gpu").verifier_error or "")
    assert codes(validate(d))["I-SERVE-VERIFIER"]["profiles"] == ["vllm-0.33-gpu"]
    assert read(read_drafter(d), "vllm-0.32-cpu").verifier_error is None


def test_m4_sglang_ties_the_head(make_drafter):
    d = make_drafter(mutate=lambda c, t: c.update(tie_word_embeddings=True))
    assert read(read_drafter(d), "sglang-0.5.23").tie_word_embeddings
    assert not read(read_drafter(d), "vllm-0.33-gpu").tie_word_embeddings


def test_m5_sglang_ignores_config_windows(make_drafter):
    def window(cfg, t):
        cfg["sliding_window"] = 64
        cfg["layer_types"] = ["sliding_attention"]

    d = make_drafter(mutate=window)
    assert read(read_drafter(d), "vllm-0.33-gpu").sliding_windows == (64,)
    assert read(read_drafter(d), "sglang-0.5.23").sliding_windows == (None,)
    f = codes(validate(d, options=Options(profiles=("sglang-0.5.23",))))["W-ENGINE-WINDOW"]
    assert f["profiles"] == ["sglang-0.5.23"]


def test_m6_sglang_has_no_qwen3_class_and_no_speculators_reader(tmp_path):
    qwen3 = {"architectures": ["Eagle3Qwen3ForCausalLM"], "hidden_size": 64}
    assert not read(Stored(qwen3), "sglang-0.5.23").loads
    spec = write_format(tmp_path / "spec", "speculators").path
    r = read(read_drafter(spec), "sglang-0.5.23")
    assert not r.loads and "speculators" in (r.load_error or "")


def test_m7_peagle_and_layer_ids():
    cfg = {"architectures": ["PeagleQwen3ForCausalLM"], "hidden_size": 64, "eagle_config": {"layer_ids": [3, 9, 12]}}
    r = read(Stored(cfg), "vllm-0.33-gpu")
    assert r.model_class == "Eagle3Qwen3ForCausalLM" and r.aux_layer_ids == (3, 9, 12)
    assert read(Stored(cfg), "vllm-0.33-v1").aux_layer_ids is None
    top = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 64, "target_layer_ids": [1, 14, 26]}
    assert read(Stored(top), "vllm-0.33-gpu").aux_layer_ids == (2, 15, 27)


def test_null_target_hidden_size_fails_to_load_everywhere(make_drafter):
    d = make_drafter(mutate=lambda c, t: c.update(target_hidden_size=None))
    report = validate(d, options=Options(profiles=("vllm-0.33-gpu", "sglang-0.5.23")))
    loads = [f for f in report["findings"] if f["code"] == "E-ENGINE-LOAD"]
    assert sorted(p for f in loads for p in f["profiles"]) == ["sglang-0.5.23", "vllm-0.33-gpu"]
    assert all(f["subject"] == "target_hidden_size" and "--set target_hidden_size=64" in f["hint"] for f in loads)


# --- the CLI --------------------------------------------------------------------------------------


def test_cli_states_the_default_profile_and_takes_several(make_drafter):
    d = make_drafter()
    out = CliRunner().invoke(main, ["validate", str(d)])
    assert out.exit_code == 0 and "judged for vLLM 0.33.0 on GPU (Model Runner V2) (the default" in out.output
    js = CliRunner().invoke(
        main, ["validate", str(d), "--json", "--profile", "sglang-0.5.23", "--profile", "vllm-0.32-cpu"]
    )
    report = json.loads(js.output)
    assert [p["id"] for p in report["profiles"]] == ["sglang-0.5.23", "vllm-0.32-cpu"]
    bad = CliRunner().invoke(main, ["validate", str(d), "--profile", "nope"])
    assert bad.exit_code == 2 and "unknown engine profile" in bad.output and "Traceback" not in bad.output


# --- writing where the engines read ---------------------------------------------------------------


def test_w2_convert_writes_model_keys_inside_the_layer_config(tmp_path):
    src = _speculators(tmp_path, num_aux_hidden_states=3, quantization_config=None)
    assert "num_aux_hidden_states" in read(read_drafter(src), "vllm-0.33-gpu").dropped_keys
    out = tmp_path / "out"
    res = CliRunner().invoke(
        main, ["convert", str(src), str(out), "--format", "speculators", "--set", "rope_theta=500000"]
    )
    assert res.exit_code == 0, res.output
    cfg = json.loads((out / "config.json").read_text())
    assert "num_aux_hidden_states" not in cfg and cfg["transformer_layer_config"]["num_aux_hidden_states"] == 3
    assert "rope_theta" not in cfg and cfg["transformer_layer_config"]["rope_theta"] == 500000
    r = read(read_drafter(out), "vllm-0.33-gpu")
    assert r.dropped_keys == () and r.rope_theta == 500000.0 and r.num_aux_hidden_states == 3
