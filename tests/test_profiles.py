"""Engine profiles: each profile's reading of a drafter, and the findings that name the profiles they hold for.

One test per engine fact of docs/profiles.md (W1–W7, W11, W13, M1, M2, M4–M7): each fails on the reading
eaglehub had before profiles (one vLLM 0.32 reading for every engine) and passes now.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from helpers.checkpoints import vocab_maps
from helpers.formats_factory import write_format

from eaglehub.checks.validate import Options, validate
from eaglehub.cli import main
from eaglehub.convert.run import convert
from eaglehub.errors import EaglehubError
from eaglehub.formats.registry import read_drafter
from eaglehub.profiles import DEFAULT_PROFILE, PROFILES, ServedTarget, Stored, read, resolve, stored_of

ROOT = Path(__file__).resolve().parent.parent

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


# --- shapes: the stored tensors against the parameters each class builds -------------------------


def test_speculators_fc_for_four_ids_does_not_fit_the_three_vllm_builds(tmp_path):
    """4 top-level ids, no count: the adapter keeps the ids, the Llama class sizes fc for 3, and the loader
    refuses the stored [H, 4 Ht] fc (vLLM's own code raises AssertionError there: tests/test_engine_code.py)."""
    d = write_format(tmp_path / "spec4", "speculators", aux_c_in=(1, 3, 5, 7)).path
    for profile in ("vllm-0.33-gpu", "vllm-0.32-cpu"):
        r = read(read_drafter(d), profile)
        assert not r.loads and r.num_aux_hidden_states == 3
        (f,) = r.failures
        assert (f.field, f.tensor, f.implied) == ("transformer_layer_config.num_aux_hidden_states", "fc.weight", 4)
        assert f.message.startswith("AssertionError: fc.weight is stored [64, 256]") and "[64, 192]" in f.message
    found = [f for f in validate(d)["findings"] if f.get("profiles")]
    # one wrong field, one finding: E-AUX-COUNT says it with the edit; no E-ENGINE-LOAD repeats it
    assert [f["code"] for f in found if f["code"].startswith(("E-AUX", "E-ENGINE"))] == ["E-AUX-COUNT"]
    assert "--set transformer_layer_config.num_aux_hidden_states=4" in codes({"findings": found})["E-AUX-COUNT"]["hint"]
    # the stored fc is as trained: no E-TENSOR-SHAPE asking to re-export it; the id-count finding gives the edit
    plain = [f for f in validate(d)["findings"] if not f.get("profiles")]
    assert "E-TENSOR-SHAPE" not in [f["code"] for f in plain]
    (count,) = [f for f in plain if f["code"] == "E-AUX-COUNT"]
    assert count["hint"].endswith("--set num_aux_hidden_states=4")
    fixed = tmp_path / "spec4-fixed"
    convert(d, fixed, settings={"num_aux_hidden_states": 4})
    assert not [f for f in validate(fixed)["findings"] if f["severity"] == "error"]


@pytest.mark.parametrize(
    ("change", "raised", "field", "implied"),
    [
        # k/v rows short of the shard the config sizes: the shard narrowing raises
        ({"num_key_value_heads": 4}, "RuntimeError", "num_key_value_heads", 2),
        # d2t (vLLM) and lm_head (SGLang) rows: strict
        ({"draft_vocab_size": 48}, "AssertionError", "draft_vocab_size", 32),
    ],
)
def test_a_config_dimension_the_tensors_contradict_fails_to_load(make_drafter, change, raised, field, implied):
    d = read_drafter(make_drafter(mutate=lambda c, t: c.update(change)))
    for profile in ("vllm-0.33-gpu", "sglang-0.5.23"):
        r = read(d, profile)
        assert not r.loads and (r.failures[0].field, r.failures[0].implied) == (field, implied), profile
        assert (r.load_error or "").startswith(f"{raised}: ")


def test_wider_mlp_tensors_load_cut_as_the_loaders_narrow_them(make_drafter):
    """intermediate_size 96 under [128, 64] gate/up and [64, 128] down: both engines narrow the rows/columns
    to the shard and load without a word (E-CONFIG-DIM says the field is wrong)."""
    d = read_drafter(make_drafter(mutate=lambda c, t: c.update(intermediate_size=96)))
    for profile in ("vllm-0.33-gpu", "sglang-0.5.23"):
        r = read(d, profile)
        assert r.loads, r.load_error
        cut = {w.stored for w in r.weights if "extra along dimension" in w.why}
        assert cut == {f"midlayer.mlp.{p}_proj.weight" for p in ("gate", "up", "down")}
    assert "E-CONFIG-DIM" in codes(validate(d.path))


# --- vLLM's MTP rewrite of DeepSeek-family model types ---------------------------------------------


def test_mla_drafter_with_model_type_deepseek_v3_does_not_load_on_vllm():
    d = read_drafter(ROOT / "fixtures" / "producers" / "torchspec" / "mla-eagle3")
    for profile in ("vllm-0.33-gpu", "vllm-0.33-v1", "vllm-0.32-cpu", "vllm-0.32-gpu"):
        r = read(d, profile)
        assert not r.loads and r.failures[0].field == "model_type" and r.model_class is None
        assert r.load_error.startswith("ValidationError: ") and "Eagle3DeepSeekMTPModel" in r.load_error
    assert read(d, "sglang-0.5.23").loads
    renamed = Stored({**d.raw_config, "model_type": "deepseek_v2"}, stored_of(d).tensors)
    assert read(renamed, "vllm-0.33-gpu").loads
    report = validate(d.path, options=Options(profiles=("vllm-0.33-gpu", "sglang-0.5.23")))
    assert "E-MLA-MODELTYPE" in codes(report) and "E-ENGINE-LOAD" not in codes(report)  # said once
    # SGLang rewrites draft configs by architectures, not model_type: the finding is vLLM's and says so
    f = codes(report)["E-MLA-MODELTYPE"]
    assert f["profiles"] == ["vllm-0.33-gpu"] and f["message"].endswith("(not on SGLang 0.5.23)")
    sglang = validate(d.path, options=Options(profiles=("sglang-0.5.23",)))
    assert not [f for f in sglang["findings"] if f["severity"] == "error"]


# --- SGLang's Llama drafter: what it builds whatever the config says --------------------------------


def test_sglang_builds_no_norm_before_residual_and_no_mlp_or_qkv_biases(make_drafter):
    def flags(cfg, t):
        cfg.update(norm_before_residual=True, mlp_bias=True, attention_bias=True)
        for p in ("q", "k", "v", "o"):
            t[f"midlayer.self_attn.{p}_proj.bias"] = torch.zeros(t[f"midlayer.self_attn.{p}_proj.weight"].shape[0])
        for p in ("gate", "up", "down"):
            t[f"midlayer.mlp.{p}_proj.bias"] = torch.zeros(t[f"midlayer.mlp.{p}_proj.weight"].shape[0])

    d = make_drafter(mutate=flags)
    sg, vl = read(read_drafter(d), "sglang-0.5.23"), read(read_drafter(d), "vllm-0.33-gpu")
    assert (sg.norm_before_residual, sg.mlp_bias, sg.attention_bias) == (False, False, False)
    assert (vl.norm_before_residual, vl.mlp_bias, vl.attention_bias) == (True, True, True)
    # o_proj keeps Llama's attention_bias bias in SGLang; the q/k/v and MLP biases have no parameter
    assert "model.layers.0.self_attn.o_proj.bias" in (sg.parameter_names or ())
    skipped = {w.stored for w in sg.weights if w.fate == "ignored"}
    assert skipped == {f"midlayer.self_attn.{p}_proj.bias" for p in "qkv"} | {
        f"midlayer.mlp.{p}_proj.bias" for p in ("gate", "up", "down")
    }
    found = validate(d, options=Options(profiles=("sglang-0.5.23",)))["findings"]
    ignored = [f for f in found if f["code"] == "W-ENGINE-IGNORED"]
    assert {f["subject"] for f in ignored} == skipped
    assert all(f"eaglehub validate {d} --profile vllm-0.33-gpu" in f["hint"] for f in ignored)


def test_sglang_tied_head_has_the_full_vocabulary(make_drafter):
    def tied(cfg, t):
        cfg["tie_word_embeddings"] = True
        t["embed_tokens.weight"] = torch.zeros(cfg["vocab_size"], cfg["hidden_size"])

    r = read(read_drafter(make_drafter(mutate=tied)), "sglang-0.5.23")
    assert r.draft_vocab_size == r.vocab_size == 256 and r.loads
    assert "lm_head.weight" not in (r.parameter_names or ())
    assert read(read_drafter(make_drafter("v", mutate=tied)), "vllm-0.33-gpu").draft_vocab_size == 32


@pytest.mark.parametrize(("pruned", "raised"), [(True, "AssertionError"), (False, "AttributeError")])
def test_sglang_builds_its_target_class_from_the_research_layout(tmp_path, pruned, raised):
    """architectures [LlamaForCausalLM]: SGLang's registry has its target class and builds it (no fc): a pruned
    head does not fit its vocab_size rows; a full one loads, and the EAGLE-3 worker then reads hot_token_id."""
    d = write_format(tmp_path / "research", "vllm", research=True, pruned=pruned).path
    r = read(read_drafter(d), "sglang-0.5.23")
    assert (r.model_class, r.num_aux_hidden_states, r.target_hidden_size) == ("LlamaForCausalLM", None, None)
    assert r.draft_vocab_size == r.vocab_size and not r.loads and r.load_error.startswith(f"{raised}: ")
    assert read(read_drafter(d), "vllm-0.33-gpu").model_class == "Eagle3LlamaForCausalLM"
    found = validate(d, options=Options(profiles=("sglang-0.5.23",)))["findings"]
    mine = sorted(f["code"] for f in found if f.get("profiles"))
    assert mine == ["E-ENGINE-LOAD"], mine  # one finding: no per-tensor warnings, no aux count of a class without fc


def test_torchspec_legacy_aux_norms_fail_on_vllm_and_convert_fixes_them(tmp_path):
    d = write_format(tmp_path / "legacy", "torchspec", fc_norm=True, legacy_aux_norm=True).path
    assert read(read_drafter(d), "sglang-0.5.23").loads  # SGLang renames aux_norm_* to fc_norm.i
    assert not read(read_drafter(d), "vllm-0.33-gpu").loads
    weight = [f for f in validate(d)["findings"] if f["code"] == "E-ENGINE-WEIGHT"]
    assert {f["subject"] for f in weight} == {f"aux_norm_{p}.weight" for p in ("low", "mid", "high")}
    assert weight[0]["hint"].endswith("--format vllm")
    out = tmp_path / "legacy-fixed"
    res = CliRunner().invoke(main, ["convert", str(d), str(out), "--format", "vllm"])
    assert res.exit_code == 0, res.output
    assert read(read_drafter(out), "vllm-0.33-gpu").loads


# --- the aux-id checks (checks/aux.py) name the runners that capture the list --------------------------

MRV2_033, CPU_032, SGL = "vllm-0.33-gpu", "vllm-0.32-cpu", "sglang-0.5.23"
ALL3 = Options(profiles=(MRV2_033, CPU_032, SGL))


def _title(pid: str) -> str:
    return resolve(pid).title


def _nested(ids):
    def mutate(cfg, t):
        del cfg[AUX]
        cfg.pop("num_aux_hidden_states", None)
        cfg["eagle_config"] = {AUX: list(ids)}

    return mutate


def _set_top(ids):
    def mutate(cfg, t):
        cfg[AUX] = list(ids)

    return mutate


@pytest.mark.parametrize(
    "code,mutate,holds",
    [
        # a top-level list: every vLLM runner captures it, SGLang never reads it
        ("E-AUX-ORDER", _set_top([4, 2, 5]), [MRV2_033, CPU_032]),
        ("E-AUX-DUPLICATE", _set_top([2, 4, 4]), [MRV2_033, CPU_032]),
        # a nested list: the V1 runner and SGLang capture it, Model Runner V2 never reads it
        ("E-AUX-ORDER", _nested([3, 1, 4]), [CPU_032, SGL]),
        ("E-AUX-DUPLICATE", _nested([1, 3, 3]), [CPU_032, SGL]),
    ],
)
def test_repeated_or_unsorted_ids_hold_where_the_runner_captures_the_list(make_drafter, code, mutate, holds):
    """Each engine captures a listed layer once, in ascending layer order (vLLM interfaces.py sorted(set()),
    SGLang's layer loop): the finding holds on the runners that capture the stored list, says which do not, and
    with none of them judged it is about the list, naming no engine."""
    d = make_drafter(mutate=mutate)
    (f,) = [f for f in validate(d, options=ALL3)["findings"] if f["code"] == code]
    assert f["profiles"] == holds
    others = [p for p in (MRV2_033, CPU_032, SGL) if p not in holds]
    assert f["message"].startswith("; ".join(_title(p) for p in holds) + ": ")
    assert f["message"].endswith(f"(not on {_title(others[0])})")
    assert "the target captures each listed layer once, in ascending layer order" in f["message"]
    # judged only where the list is not read: a finding about the list itself, no engine named as reading it
    (alone,) = [f for f in validate(d, options=Options(profiles=tuple(others)))["findings"] if f["code"] == code]
    assert "profiles" not in alone and "an engine that reads this list captures" in alone["message"]
    assert "vLLM" not in alone["message"] and "SGLang" not in alone["message"]


def test_the_default_aux_layers_are_every_engines(make_drafter, make_target):
    """No id list: vLLM (both runners) and SGLang all ask the target for (2, N//2, N-3); with a 4-layer target
    that repeats layer 2 everywhere, and I-AUX-DEFAULT names every judged profile."""
    d = make_drafter(mutate=lambda cfg, t: cfg.pop(AUX))
    report = validate(d, make_target(4), options=ALL3)
    (dup,) = [f for f in report["findings"] if f["code"] == "E-AUX-DUPLICATE"]
    assert dup["subject"] == f"{AUX} (default for N=4)" and dup["profiles"] == [MRV2_033, CPU_032, SGL]
    assert "not on" not in dup["message"] and "[2, 2, 1] repeat [2]" in dup["message"]
    (info,) = [f for f in validate(d, make_target(8), options=ALL3)["findings"] if f["code"] == "I-AUX-DEFAULT"]
    assert info["profiles"] == [MRV2_033, CPU_032, SGL] and "[2, 4, 5]" in info["message"]
    assert "vLLM captures" not in info["message"]


def test_a_top_level_list_starting_at_1_is_read_as_c_in_by_vllm_only(make_drafter):
    d = make_drafter(mutate=_set_top([1, 3, 4]))
    (f,) = [f for f in validate(d, options=ALL3)["findings"] if f["code"] == "W-AUX-CONVENTION"]
    assert f["profiles"] == [MRV2_033, CPU_032] and f["message"].endswith(f"(not on {_title(SGL)})")


# --- config keys one engine reads and another does not (checks/config.py) ----------------------------

VLLM_SGL = Options(profiles=(MRV2_033, SGL))


def test_tie_word_embeddings_is_unread_on_vllm_and_ties_the_head_on_sglang(make_drafter):
    d = make_drafter(mutate=lambda cfg, t: cfg.update(tie_word_embeddings=True, draft_vocab_size=cfg["vocab_size"]))
    found = codes(validate(d, options=VLLM_SGL))
    assert found["W-CONFIG-TIE"]["profiles"] == [MRV2_033]
    assert found["W-CONFIG-TIE"]["message"].endswith(f"(not on {_title(SGL)})")
    assert found["W-ENGINE-TIED"]["profiles"] == [SGL]
    assert "W-CONFIG-TIE" not in codes(validate(d, options=Options(profiles=(SGL,))))


def test_the_use_aux_norm_alias_is_read_by_sglang_only(make_drafter):
    def alias(cfg, t):  # an EAGLE-3.1 drafter that names its fc_norm switch the SGLang way
        cfg.pop("fc_norm")
        cfg["use_aux_norm"] = True

    d = make_drafter(mutate=alias, v31=True)
    assert read(read_drafter(d), SGL).fc_norm and not read(read_drafter(d), MRV2_033).fc_norm
    f = codes(validate(d, options=VLLM_SGL))["W-FCNORM-ALIAS"]
    assert f["profiles"] == [MRV2_033] and f["message"].endswith(f"(not on {_title(SGL)})")
    assert "W-FCNORM-ALIAS" not in codes(validate(d, options=Options(profiles=(SGL,))))


@pytest.mark.parametrize(
    "code,change",
    [("E-MLA-QLORA", {"q_lora_rank": None}), ("E-MLA-NORMBEFOREFC", {"norm_before_fc": True})],
)
def test_mla_query_lora_and_pre_fc_norm_hold_on_both_engines(make_drafter, code, change):
    from test_findings import to_mla

    def mutate(cfg, t):
        to_mla(cfg, t)
        cfg.update(change)

    f = codes(validate(make_drafter(mutate=mutate), options=VLLM_SGL))[code]
    assert f["profiles"] == [MRV2_033, SGL] and "not on" not in f["message"]
    assert "vLLM" in f["message"] and "SGLang" in f["message"]


# --- sliding windows (checks/windows.py): vLLM reads them from the config, SGLang from its server flag -------


def test_windows_applied_and_declared_name_the_profiles(make_drafter):
    applied = make_drafter(
        "applied", mutate=lambda cfg, t: cfg.update(layer_types=["sliding_attention"], sliding_window=1024)
    )
    found = codes(validate(applied, options=VLLM_SGL))
    assert found["I-WINDOW-APPLIED"]["profiles"] == [MRV2_033]
    assert found["I-WINDOW-APPLIED"]["message"].endswith(f"(not on {_title(SGL)})")
    assert found["W-ENGINE-WINDOW"]["profiles"] == [SGL]
    # a window the Llama config class never applies: full attention on both engines
    unread = make_drafter("unread", mutate=lambda cfg, t: cfg.update(use_sliding_window=True, sliding_window=2048))
    f = codes(validate(unread, options=VLLM_SGL))["W-SLIDING-WINDOW"]
    assert f["profiles"] == [MRV2_033, SGL] and "not on" not in f["message"]
    # a malformed layer_types: where windows are read from the config; with none judged, a finding about the file
    bad = make_drafter("bad", mutate=lambda cfg, t: cfg.update(layer_types=[], sliding_window=1024))
    f = codes(validate(bad, options=VLLM_SGL))["E-WINDOW-INVALID"]
    assert f["profiles"] == [MRV2_033] and f["message"].endswith(f"(not on {_title(SGL)})")
    alone = codes(validate(bad, options=Options(profiles=(SGL,))))["E-WINDOW-INVALID"]
    assert "profiles" not in alone


# --- tensors the loaders take differently (checks/tensors.py) ----------------------------------------


def _by_code(report: dict, code: str) -> list[dict]:
    return [f for f in report["findings"] if f["code"] == code]


def test_model_prefixed_names_fail_on_vllm_and_lose_only_the_head_on_sglang(make_drafter):
    def prefixed(cfg, t, head=True):
        for n in [n for n in t if head or n != "lm_head.weight"]:
            t["model." + n] = t.pop(n)

    found = {
        tuple(f["profiles"]): f["message"]
        for f in _by_code(validate(make_drafter("all", mutate=prefixed), options=VLLM_SGL), "E-TENSOR-PREFIX")
    }
    assert "raises on the doubled name" in found[(MRV2_033,)]
    assert "skips model.lm_head.weight" in found[(SGL,)] and found[(SGL,)].startswith(_title(SGL))
    # the head stored as lm_head.weight: SGLang loads every prefixed name (its own carry model.), vLLM still fails
    body = make_drafter("body", mutate=lambda cfg, t: prefixed(cfg, t, head=False))
    assert [f["profiles"] for f in _by_code(validate(body, options=VLLM_SGL), "E-TENSOR-PREFIX")] == [[MRV2_033]]
    assert _by_code(validate(body, options=Options(profiles=(SGL,))), "E-TENSOR-PREFIX") == []


def test_unused_norm_weights_are_what_each_loader_does_with_them(make_drafter):
    def inorm(cfg, t):
        t["input_norm.weight"] = torch.ones(3 * cfg["hidden_size"], dtype=torch.bfloat16)

    found = {
        f["profiles"][0]: f
        for f in _by_code(validate(make_drafter("in", mutate=inorm), options=VLLM_SGL), "E-INPUTNORM-UNUSED")
    }
    assert set(found) == {MRV2_033, SGL} and "skips it without a word" in found[SGL]["message"]

    # fc_norm weights under SGLang's use_aux_norm: SGLang loads them, so nothing about them on SGLang
    def unset(cfg, t, alias=False):
        cfg.update(fc_norm=False, norm_output=False, **({"use_aux_norm": True} if alias else {}))

    report = validate(make_drafter("off", mutate=unset, v31=True), options=VLLM_SGL)
    # SGLang skips them (a warning); vLLM's loader raises on them, so there it is the load failure, with the edit
    off = _by_code(report, "W-FCNORM-UNUSED")
    assert {f["profiles"][0] for f in off} == {SGL} and len(off) == 3
    fails = [f for f in _by_code(report, "E-ENGINE-WEIGHT") if f["subject"].startswith("fc_norm.")]
    assert [f["profiles"] for f in fails] == [[MRV2_033]] * 3 and all("--set fc_norm=true" in f["hint"] for f in fails)
    assert "raises" in fails[0]["message"]
    alias = make_drafter("alias", mutate=lambda cfg, t: unset(cfg, t, alias=True), v31=True)
    assert _by_code(validate(alias, options=Options(profiles=(SGL,))), "W-FCNORM-UNUSED") == []


def test_missing_norm_weights_hold_where_the_engine_builds_the_norm(make_drafter):
    fc = make_drafter("fc", mutate=lambda cfg, t: t.pop("fc_norm.1.weight"), v31=True)
    (f,) = _by_code(validate(fc, options=VLLM_SGL), "E-FCNORM-MISSING")  # every engine's: about the files
    assert "profiles" not in f and "vLLM and SGLang alike" in f["message"] and "unit gains" in f["message"]
    # a Qwen3-style drafter: SGLang has no such class (E-ENGINE-LOAD), so the q/k-norm gains are vLLM's
    qwen3 = make_drafter("q", mutate=lambda cfg, t: cfg.update(architectures=["Eagle3Qwen3ForCausalLM"]))
    found = _by_code(validate(qwen3, options=VLLM_SGL), "E-QKNORM-MISSING")
    assert [f["profiles"] for f in found] == [[MRV2_033]] * 2
    assert all(f["message"].endswith(f"(not on {_title(SGL)})") for f in found)
    alone = _by_code(validate(qwen3, options=Options(profiles=(SGL,))), "E-QKNORM-MISSING")
    assert [("profiles" in f, "unit" in f["message"]) for f in alone] == [(False, False)] * 2


def test_t2d_is_read_by_no_engine_and_its_findings_say_so(make_drafter):
    from test_findings import _t2d_other

    d = make_drafter(mutate=lambda cfg, t: t.update(t2d=_t2d_other(t)))
    for pid in (MRV2_033, SGL):  # both loaders drop it: a statement about the files, true of every engine
        assert [w.fate for w in read(read_drafter(d), pid).weights if w.stored == "t2d"] == ["skipped"]
    f = codes(validate(d, options=VLLM_SGL))["E-T2D-MISMATCH"]
    assert "profiles" not in f and "SGLang tooling" not in f["message"] and "d2t only" in f["message"]


# --- where the switches live (checks/flags.py): what each profile's drafter class reads -------------------


def test_a_nested_switch_holds_where_the_class_runs_with_another_value(make_drafter, tmp_path):
    # fc_norm only in eagle_config: neither engine reads it there, and both then build no fc_norm
    def nested(cfg, t, alias=False):
        cfg.pop("fc_norm")
        cfg["eagle_config"] = {"fc_norm": True}
        if alias:
            cfg["use_aux_norm"] = True

    f = codes(validate(make_drafter("n", mutate=nested, v31=True), options=VLLM_SGL))["E-FLAG-MISPLACED"]
    assert f["profiles"] == [MRV2_033, SGL] and "not on" not in f["message"] and "fc_norm = False" in f["message"]
    # with SGLang's use_aux_norm at the top level SGLang builds fc_norm after all: vLLM's finding only
    alias = make_drafter("a", mutate=lambda cfg, t: nested(cfg, t, alias=True), v31=True)
    f = codes(validate(alias, options=VLLM_SGL))["E-FLAG-MISPLACED"]
    assert f["profiles"] == [MRV2_033] and f["message"].endswith(f"(not on {_title(SGL)})")
    assert "E-FLAG-MISPLACED" not in codes(validate(alias, options=Options(profiles=(SGL,))))


def test_a_nested_norm_before_fc_is_read_by_every_engine(make_drafter):
    def nested(cfg, t, top=False):
        cfg["eagle_config"] = {"norm_before_fc": True}
        if top:
            cfg["norm_before_fc"] = True
        t["input_norm.weight"] = (1 + 0.1 * torch.randn(3 * cfg["hidden_size"])).to(torch.bfloat16)

    d = make_drafter("n", mutate=nested)
    assert all(read(read_drafter(d), pid).norm_before_fc for pid in (MRV2_033, SGL))
    f = codes(validate(d, options=VLLM_SGL))["W-INPUTNORM-NESTED"]
    assert f["profiles"] == [MRV2_033, SGL] and "not on" not in f["message"] and "applies input_norm" in f["message"]
    top = make_drafter("t", mutate=lambda cfg, t: nested(cfg, t, top=True))
    assert "W-INPUTNORM-NESTED" not in codes(validate(top, options=VLLM_SGL))


def test_both_input_norms_hold_where_the_class_builds_both(make_drafter):
    def both_norms(cfg, t, alias=False):
        cfg["norm_before_fc"] = True
        t["input_norm.weight"] = (1 + 0.1 * torch.randn(3 * cfg["hidden_size"])).to(torch.bfloat16)
        if alias:  # fc_norm named the SGLang way: vLLM builds no fc_norm
            cfg.pop("fc_norm")
            cfg["use_aux_norm"] = True

    f = codes(validate(make_drafter("b", mutate=both_norms, v31=True), options=VLLM_SGL))["W-NORMS-BOTH"]
    assert f["profiles"] == [MRV2_033, SGL] and "not on" not in f["message"]
    alias = make_drafter("a", mutate=lambda cfg, t: both_norms(cfg, t, alias=True), v31=True)
    f = codes(validate(alias, options=VLLM_SGL))["W-NORMS-BOTH"]
    assert f["profiles"] == [SGL] and f["message"].endswith(f"(not on {_title(MRV2_033)})")
    assert "W-NORMS-BOTH" not in codes(validate(alias, options=Options(profiles=(MRV2_033,))))


def test_a_producer_flag_names_every_engine_that_reads_it_so(tmp_path):
    sf = write_format(tmp_path / "sf", "specforge", fc_norm=True, norm_output=True).path
    f = codes(validate(sf, options=VLLM_SGL))["W-PRODUCER-FLAG"]
    assert f["profiles"] == [MRV2_033, SGL] and "the engine reads it as EAGLE-3.1's post-norm" in f["message"]
    off = write_format(tmp_path / "off", "specforge", fc_norm=True, norm_output=False).path
    assert "W-PRODUCER-FLAG" not in codes(validate(off, options=VLLM_SGL))


# --- the pair as each engine serves it (checks/served.py) ------------------------------------------------


def test_an_own_embedding_is_kept_by_vllm_and_replaced_by_sglang(make_drafter, make_target):
    def own(cfg, t):  # a table trained with the drafter, not the target's
        t["embed_tokens.weight"] = (torch.randn(cfg["vocab_size"], cfg["hidden_size"]) * 0.05).to(torch.bfloat16)

    d, t = make_drafter(mutate=own), make_target(8, weights=True)
    found = codes(validate(d, t, options=VLLM_SGL))
    assert (
        found["I-EMBED-TRAINED"]["profiles"] == [MRV2_033]
        and "keeps the drafter's own" in found["I-EMBED-TRAINED"]["message"]
    )
    assert (
        found["W-ENGINE-EMBED"]["profiles"] == [SGL]
        and "replaces it with the target's" in found["W-ENGINE-EMBED"]["message"]
    )
    assert found["W-ENGINE-EMBED"]["message"].endswith(f"(not on {_title(MRV2_033)})")
    assert "W-ENGINE-EMBED" not in codes(validate(d, t, options=Options(profiles=(MRV2_033,))))
    assert "I-EMBED-TRAINED" not in codes(validate(d, t, options=Options(profiles=(SGL,))))


def test_a_shorter_drafter_context_is_raised_by_vllm_and_refused_by_sglang(make_drafter, make_target):
    d = make_drafter("short", mutate=lambda cfg, t: cfg.update(max_position_embeddings=2048))
    report = validate(d, make_target(8), options=VLLM_SGL)
    short = _by_code(report, "W-CONTEXT-SHORT")
    assert [f["profiles"] for f in short] == [[MRV2_033]] and "vLLM raises" in short[0]["message"]
    (load,) = [f for f in _by_code(report, "E-ENGINE-LOAD") if f["subject"] == "max_position_embeddings"]
    assert load["profiles"] == [SGL] and "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" in load["message"]
    assert load["hint"].endswith("--set max_position_embeddings=4096")
    # only the training was shorter: SGLang loads it, and both engines serve past what it saw
    trained = make_drafter("trained")
    (trained / "training.json").write_text(json.dumps({"max_seq_len": 1024}))
    report = validate(trained, make_target(8, name="t2"), options=VLLM_SGL)
    assert [f["profiles"] for f in _by_code(report, "W-CONTEXT-SHORT")] == [[MRV2_033, SGL]]
    assert [f for f in _by_code(report, "E-ENGINE-LOAD") if f["subject"] == "max_position_embeddings"] == []


def test_a_drafter_tokenizer_is_read_by_no_engine(make_drafter, make_target):
    from test_target_findings import write_tokenizer

    target, drafter = make_target(8), make_drafter()
    write_tokenizer(target / "tokenizer.json", 250)
    write_tokenizer(drafter / "tokenizer.json", 250, rename={17: "hello"})
    f = codes(validate(drafter, target, options=VLLM_SGL))["W-TOKENIZER-MISMATCH"]
    assert "profiles" not in f and "vLLM and SGLang draft on the target's token ids" in f["message"]
    write_tokenizer(drafter / "tokenizer.json", 250)  # the target's own: nothing to say
    assert "W-TOKENIZER-MISMATCH" not in codes(validate(drafter, target, options=VLLM_SGL))


def test_a_drafter_model_type_is_parsed_alike_by_every_engine(make_drafter):
    d = make_drafter("m", mutate=lambda cfg, t: cfg.update(model_type="mistral"))
    (f,) = [f for f in _by_code(validate(d, options=VLLM_SGL), "E-CONFIG-ARCH") if f["subject"] == "model_type"]
    assert "profiles" not in f and "vLLM and SGLang parse the config" in f["message"] and "'llama'" in f["message"]
    llama = make_drafter("l")
    assert [
        f for f in _by_code(validate(llama, options=VLLM_SGL), "E-CONFIG-ARCH") if f["subject"] == "model_type"
    ] == []


def test_a_quantized_target_with_a_plain_drafter_is_history_on_every_engine(make_drafter, make_target):
    d = make_drafter()
    fp8 = make_target(8, name="fp8", quantization_config={"quant_method": "fp8"})
    f = codes(validate(d, fp8, options=VLLM_SGL))["I-QUANT-PAIRING"]
    assert "profiles" not in f and "the engines judged here take the drafter's from its own config" in f["message"]
    assert "I-QUANT-PAIRING" not in codes(validate(d, make_target(8, name="bf16"), options=VLLM_SGL))


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


@pytest.mark.parametrize(
    ("profile", "near"), [("sglang-0.4", "SGLang 0.5.23"), ("vllm-9.9", "vLLM 0.33.0"), ("vllm-0.30", "vLLM 0.32.0")]
)
def test_a_release_whose_code_was_not_read_is_said_not_judged_ok_silently(make_drafter, profile, near):
    """Only vLLM 0.32.0 / 0.33.0 and SGLang 0.5.23 were read (the engine-code tier): another release is judged with
    the nearest read release's code, and the verdict says so; a read release gets no such warning."""
    d = make_drafter()
    (f,) = _by_code(validate(d, options=Options(profiles=(profile,))), "W-PROFILE-UNREAD")
    assert f["profiles"] == [resolve(profile).id] and f"judged with {near}'s code" in f["message"]
    assert _by_code(validate(d, options=Options(profiles=("vllm-0.33-gpu", "sglang-0.5.23"))), "W-PROFILE-UNREAD") == []


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda c: c["transformer_layer_config"].update(model_type=[]), "transformer_layer_config.model_type"),
        (lambda c: c.update(speculators_model_type={"eagle3": 1}), "speculators_model_type"),
    ],
)
def test_a_list_or_object_where_vllm_looks_up_a_name_is_vllm_s_type_error(tmp_path, edit, field):
    """vLLM's speculators adapter looks the names up with ``in`` (algos.py L43-45, base.py L51-56): a list or an
    object there raises TypeError in vLLM, and is a load failure of that kind here, not an exception."""
    w = write_format(tmp_path / "d", "speculators")
    cfg = json.loads((w.path / "config.json").read_text())
    edit(cfg)
    reading = read(Stored(cfg), "vllm-0.33-gpu")
    assert not reading.loads
    failure = next(f for f in reading.failures if f.field == field)
    assert failure.message.startswith("TypeError: unhashable type")
