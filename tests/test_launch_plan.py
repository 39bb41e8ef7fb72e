"""Launch plans (``verify --dry-run``, eaglehub.plan): footprints counted from real configs checked against
arithmetic done here from the published shapes, the TP / PP / backend chosen on the machines of
docs/verify.md, the refusal's numbers, the report's schema and the serve line (docs/verify.md,
"Launch plans (--dry-run)")."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from eaglehub.cli import main
from eaglehub.engines.vllm_engine import speculative_config
from eaglehub.io.schemas import schema_errors
from eaglehub.plan import inputs, memory
from eaglehub.plan.launch import GIB, OVERHEAD_BYTES, Machine, plan_launch

REPO = Path(__file__).resolve().parent.parent
CONFIGS = REPO / "fixtures" / "configs"
LLAMA = CONFIGS / "llama-3.1-8b-instruct"
KIMI = CONFIGS / "kimi-k2.6-nvfp4"
DRAFTER = REPO / "fixtures" / "smollm2-eagle3"
UTIL = 0.92

# Llama-3.1-8B: H 4096, 32 layers, 32 heads of 128, 8 KV heads, I 14336, V 128256, untied, bf16
H, L, NKV, HD, I, V = 4096, 32, 8, 128, 14336, 128256
LLAMA_PARAMS = 2 * V * H + L * (2 * H * H + 2 * H * NKV * HD + 3 * H * I + 2 * H) + H
# Kimi-K2 (DeepSeek-V3 layout): 61 layers, H 7168, 64 heads, MLA q 1536 / kv 512 / rope 64 / nope 128 / v 128,
# layer 0 dense (I 18432), 60 MoE layers of 384 routed + 1 shared experts of 2048, router with bias, V 163840
KH, KL, NH = 7168, 61, 64
K_ATTN = KH * 1536 + 1536 + 1536 * NH * 192 + KH * 576 + 512 + 512 * NH * 256 + NH * 128 * KH
K_EXPERT = 3 * KH * 2048
K_MLP = [3 * KH * 18432] + [385 * K_EXPERT] * 60  # quantized (NVFP4)
K_ROUTER = 60 * (384 * KH + 384)
K_BF16 = 2 * 163840 * KH + KL * (K_ATTN + 2 * KH) + KH + K_ROUTER  # excluded: embeddings, lm_head, attention, norms


def cfg(path: Path) -> dict:
    return json.loads((path / "config.json").read_text())


def plan(path: Path, gpus: int, gb: float, nodes: int = 1, max_model_len: int = 2048, **kw) -> dict:
    return plan_launch(
        cfg(path),
        Machine(gpus, gb, nodes, UTIL),
        target_spec=str(path),
        target_path=path,
        max_model_len=max_model_len,
        **kw,
    )


def usable_gib(gb: float) -> float:
    return gb * 1e9 * UTIL / GIB


# --- footprint ------------------------------------------------------------------------------------


def test_llama_8b_params_are_the_published_count():
    fp = plan(LLAMA, 1, 80)
    assert LLAMA_PARAMS == 8_030_261_248  # the count published for Llama-3.1-8B
    assert fp["params"]["total"] == LLAMA_PARAMS and fp["params"]["quantized"] == 0
    assert fp["weights_bytes"]["computed"] == 2 * LLAMA_PARAMS


def test_kimi_nvfp4_footprint():
    r = plan(KIMI, 8, 141)
    total = sum(K_MLP) + K_BF16
    assert r["params"]["total"] == total
    assert abs(total - 1.026e12) / 1.026e12 < 0.01
    assert r["params"]["quantized"] == sum(K_MLP)
    expected_bytes = sum(K_MLP) * (0.5 + 1 / 16) + 2 * K_BF16
    assert r["weights_bytes"]["computed"] == round(expected_bytes)
    assert 550e9 <= expected_bytes <= 620e9
    assert r["quantization"]["scheme"] == "nvfp4" and r["attention"] == "mla"


def test_kv_cache_per_token():
    llama, kimi = memory.text_config(cfg(LLAMA)), memory.text_config(cfg(KIMI))
    assert memory.kv_bytes_per_token(llama, 2, 1) == 2 * L * NKV * HD * 2 == 131072
    assert memory.kv_bytes_per_token(llama, 2, 4) == 2 * L * 2 * HD * 2  # 2 of the 8 KV heads per rank
    assert memory.kv_bytes_per_token(llama, 2, 16) == 2 * L * 1 * HD * 2  # replicated past 8 ranks
    assert memory.kv_bytes_per_token(kimi, 2, 1) == KL * (512 + 64) * 2 == 70272
    assert memory.kv_bytes_per_token(kimi, 2, 8) == 70272  # the MLA latent is not split by TP


def test_tp_rules_and_stages():
    llama = memory.text_config(cfg(LLAMA))
    assert [t for t in (1, 2, 4, 8, 16, 32, 64) if memory.tp_allowed(llama, t)] == [1, 2, 4, 8, 16, 32]
    qwen7b = {"hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4}
    assert [t for t in (1, 2, 4, 8) if memory.tp_allowed(qwen7b, t)] == [1, 2, 4]
    assert memory.stage_layers(61, 2) == [31, 30]  # the extra layer goes to a stage before the last
    assert memory.stage_layers(61, 4) == [15, 15, 16, 15]  # one extra layer: the stage just before the last
    assert sum(memory.stage_layers(61, 7)) == 61


def test_mla_projections_are_replicated_across_tp():
    kimi = memory.text_config(cfg(KIMI))
    ws = memory.price(memory.weights(kimi), memory.quantization(kimi), 2)
    replicated = 2 * (KL * (KH * 1536 + KH * 576 + 1536 + 512 + 2 * KH) + KH + K_ROUTER)
    sharded = sum(w.params * w.bytes_per_param for w in ws) - replicated
    # TP 8: the final norm sits on the last stage with lm_head, so it is on the one stage there is
    assert memory.rank_bytes(ws, kimi, 8, 1) == pytest.approx(sharded / 8 + replicated, rel=1e-12)


def test_index_total_size_is_preferred(tmp_path):
    (tmp_path / "config.json").write_text((LLAMA / "config.json").read_text())
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 16_060_522_496 + 1024}, "weight_map": {}})
    )
    config, _, index = inputs.read_target(str(tmp_path))
    r = plan_launch(config, Machine(1, 80), target_spec="t", target_path=tmp_path, index_bytes=index)
    assert r["weights_bytes"] == {"computed": 2 * LLAMA_PARAMS, "index": 2 * LLAMA_PARAMS + 1024, "used": "index"}
    assert r["plan"]["per_gpu"]["weights_bytes"] == 2 * LLAMA_PARAMS + 1024
    fp32 = plan_launch(
        config, Machine(1, 80), target_spec="t", target_path=tmp_path, index_bytes=index, dtype="float32"
    )
    assert fp32["weights_bytes"]["used"] == "computed"  # the index is the bf16 checkpoint, not fp32 weights
    assert fp32["plan"]["per_gpu"]["weights_bytes"] == 4 * LLAMA_PARAMS


# --- layouts chosen -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "gpus", "gb", "nodes", "tp", "pp", "backend"),
    [
        (LLAMA, 1, 24, 1, 1, 1, "uni"),
        (LLAMA, 1, 80, 1, 1, 1, "uni"),
        (LLAMA, 8, 141, 1, 1, 1, "uni"),
        (KIMI, 4, 186, 1, 4, 1, "mp"),  # the reference run: TP 4 on GB200
        (KIMI, 8, 141, 1, 8, 1, "mp"),
        (KIMI, 8, 80, 2, 8, 2, "ray"),
    ],
)
def test_chosen_layout(path, gpus, gb, nodes, tp, pp, backend):
    r = plan(path, gpus, gb, nodes)
    p = r["plan"]
    assert r["fits"] and (p["tp"], p["pp"], p["backend"]) == (tp, pp, backend)
    assert p["per_gpu"]["total_bytes"] <= gb * 1e9 * UTIL
    assert schema_errors(r, "launch-plan") == []


def test_kimi_tp4_does_not_fit_an_h200():
    """TP 4 holds a quarter of the sharded weights plus the replicated ones: more than 0.92 x 141 GB."""
    r = plan(KIMI, 8, 141)
    tp4 = next(c for c in r["candidates"] if c["tp"] == 4)
    assert not tp4["fits"]
    assert tp4["per_gpu"]["weights_bytes"] / GIB > usable_gib(141) - OVERHEAD_BYTES / GIB
    assert "TP 4 needs 142.0 GiB" in r["plan"]["reason"]


# --- refusals -------------------------------------------------------------------------------------


def test_kimi_on_one_80gb_gpu_is_refused_with_numbers():
    r = plan(KIMI, 1, 80)
    assert not r["fits"] and r["plan"] is None
    weights = (sum(K_MLP) * 0.5625 + 2 * K_BF16) / GIB
    msg = r["refusal"]["message"]
    assert f"weights {weights:.1f} GiB" in msg and f"{usable_gib(80):.1f} GiB usable" in msg
    assert r["refusal"]["would_fit"] == {"tp": 8, "pp": 2, "gpus": 16, "nodes": 2}
    assert "--gpus 8 --gpu-memory 80 --nodes 2" in r["refusal"]["hint"]
    assert schema_errors(r, "launch-plan") == []


def test_llama_at_131072_tokens_on_24gb_is_refused():
    r = plan(LLAMA, 1, 24, max_model_len=131072)
    kv = 131072 * 131072 / GIB
    assert kv == 16.0
    total = (2 * LLAMA_PARAMS + 131072 * 131072 + OVERHEAD_BYTES) / GIB
    msg = r["refusal"]["message"]
    assert f"KV {kv:.1f} GiB" in msg and f"= {total:.1f} GiB > {usable_gib(24):.1f} GiB usable" in msg
    longest = int((24e9 * UTIL - 2 * LLAMA_PARAMS - OVERHEAD_BYTES) // 131072)
    assert r["refusal"]["max_model_len_fits"] == longest
    assert r["refusal"]["would_fit"]["gpus"] == 2  # half the weights and half the KV heads per GPU
    assert plan(LLAMA, 2, 24, max_model_len=131072)["plan"]["tp"] == 2


# --- serve line and LLM(...) arguments ------------------------------------------------------------


def test_serve_line_carries_the_engines_speculative_config():
    drafter = inputs.read_drafter(str(DRAFTER))
    r = plan(KIMI, 8, 80, 2, drafter=drafter, k=4)
    p = r["plan"]
    argv = shlex.split(p["serve_command"])
    assert argv[:3] == ["vllm", "serve", str(KIMI)]
    flags = dict(zip(argv[3::2], argv[4::2]))
    assert json.loads(flags["--speculative-config"]) == speculative_config(DRAFTER, 4)
    assert flags["--tensor-parallel-size"] == "8" and flags["--pipeline-parallel-size"] == "2"
    assert flags["--distributed-executor-backend"] == "ray"
    kwargs = p["llm_kwargs"]
    assert kwargs["speculative_config"] == speculative_config(DRAFTER, 4)
    assert (kwargs["tensor_parallel_size"], kwargs["pipeline_parallel_size"]) == (8, 2)
    assert kwargs["kv_cache_memory_bytes"] >= p["per_gpu"]["kv_cache_bytes"] + p["per_gpu"]["drafter_kv_cache_bytes"]
    weights = sum(f.stat().st_size for f in DRAFTER.glob("*.safetensors"))
    assert p["per_gpu"]["drafter_bytes"] == weights


def test_serve_line_writes_local_paths_absolute(make_drafter, make_target, monkeypatch):
    """Target and drafter given relative to the working directory: both absolute in the serve line (it pastes
    from any directory; a Hub id stays as given: test_cli_hub_id_reads_config_from_the_cache)."""
    target, drafter = make_target(8), make_drafter("rel-drafter")
    monkeypatch.chdir(target.parent)
    args = ["--target", target.name, "--drafter", drafter.name, "--dry-run", "--gpus", "1", "--gpu-memory", "24"]
    res = run(*args, "--json")
    assert res.exit_code == 0, res.output
    argv = shlex.split(json.loads(res.output)["plan"]["serve_command"])
    assert argv[:3] == ["vllm", "serve", str(target.absolute())]
    assert json.loads(argv[argv.index("--speculative-config") + 1])["model"] == str(drafter.absolute())


@pytest.mark.real
def test_serve_line_names_the_bundled_target_by_its_directory():
    """``--target smollm2`` is eaglehub's name for the target it builds, not a Hub id vLLM knows: the serve line
    names the directory it resolved to, as the LLM(...) arguments do."""
    res = run(
        "--target", "smollm2", "--drafter", str(DRAFTER), "--dry-run", "--gpus", "1", "--gpu-memory", "80", "--json"
    )
    assert res.exit_code == 0, res.output
    p = json.loads(res.output)["plan"]
    served = shlex.split(p["serve_command"])[2]
    assert served == p["llm_kwargs"]["model"] and (Path(served) / "config.json").is_file()


def test_without_drafter_the_line_serves_the_target_alone():
    p = plan(LLAMA, 1, 80)["plan"]
    assert "--speculative-config" not in p["serve_command"] and not p["serve_has_drafter"]
    assert p["llm_kwargs"]["distributed_executor_backend"] == "uni"  # eaglehub's one-process run
    assert "speculative_config" not in p["llm_kwargs"]


# --- the command ----------------------------------------------------------------------------------


def run(*args: str):
    return CliRunner().invoke(main, ["verify", *args])


def flat(text: str) -> str:
    """The text with its line wrapping undone: rich wraps at 80 columns off a terminal, so where a break falls
    depends on the length of the paths printed (a clone under a deeper folder moves it)."""
    return " ".join(text.split())


def test_cli_plans_and_prints_json():
    res = run("--target", str(KIMI), "--dry-run", "--gpus", "4", "--gpu-memory", "186", "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert schema_errors(report, "launch-plan") == [] and report["plan"]["tp"] == 4
    res = run("--target", str(KIMI), "--dry-run", "--gpus", "4", "--gpu-memory", "186")
    assert res.exit_code == 0 and "TP 4 x PP 1" in flat(res.output) and "vllm serve" in flat(res.output)


def test_cli_refusal_exits_1():
    res = run("--target", str(LLAMA), "--dry-run", "--gpus", "1", "--gpu-memory", "24", "--context", "131072")
    assert res.exit_code == 1, res.output
    assert "refused" in flat(res.output) and "16.0 GiB" in flat(res.output)


def test_cli_context_sets_max_model_len():
    res = run("--target", str(LLAMA), "--dry-run", "--gpus", "1", "--gpu-memory", "80", "--context", "8192", "--json")
    assert json.loads(res.output)["max_model_len"] == 8192 + 64 + 3  # context + --max-tokens + k


def test_cli_without_gpus_on_a_machine_without_one(monkeypatch):
    monkeypatch.setattr(inputs, "local_gpus", lambda: (0, 0))
    res = run("--target", str(LLAMA), "--dry-run")
    assert res.exit_code == 2 and "--gpus N --gpu-memory GB" in flat(res.output)
    monkeypatch.setattr(inputs, "local_gpus", lambda: (2, 85_520_809_984))  # what torch reports for an H100
    res = run("--target", str(LLAMA), "--dry-run", "--json")
    machine = json.loads(res.output)["machine"]
    assert machine["source"] == "machine" and machine["gpus_per_node"] == 2
    assert math.isclose(machine["gpu_memory_gb"], 85.521)


def test_cli_launch_options_need_dry_run():
    res = run("--target", str(LLAMA), "--gpus", "2")
    assert res.exit_code == 2 and "--dry-run" in flat(res.output)


def test_cli_hub_id_reads_config_from_the_cache(tmp_path, monkeypatch):
    import huggingface_hub.constants as hf_constants

    repo = tmp_path / "hub" / "models--meta-llama--Llama-3.1-8B-Instruct"
    snap = repo / "snapshots" / ("c" * 40)
    snap.mkdir(parents=True)
    (snap / "config.json").write_text((LLAMA / "config.json").read_text())
    (snap / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 16_060_522_496}}))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("c" * 40)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    res = run(
        "--target", "meta-llama/Llama-3.1-8B-Instruct", "--dry-run", "--gpus", "1", "--gpu-memory", "24", "--json"
    )
    assert res.exit_code == 0, res.output
    r = json.loads(res.output)
    assert r["weights_bytes"]["index"] == 16_060_522_496 and r["weights_bytes"]["used"] == "index"
    assert r["plan"]["serve_command"].startswith("vllm serve meta-llama/Llama-3.1-8B-Instruct ")
    assert r["plan"]["llm_kwargs"]["model"] == str(snap)


# --- the release the lines are for (verify --dry-run --profile) -----------------------------------


def test_speculative_methods_and_fields_are_the_releases():
    """vLLM 0.33 dropped the medusa and mlp_speculator methods and added SpeculativeConfig fields (its table,
    generated from each release's config/speculative.py); SpeculativeConfig forbids extra fields, so either is
    refused at start-up and the plan refuses to write it."""
    from eaglehub.engines.release import check_speculative_config, release
    from eaglehub.errors import EaglehubError

    v32, v33 = release("vllm-0.32-gpu"), release("vllm-0.33-gpu")
    eagle3 = {"method": "eagle3", "model": "/d", "num_speculative_tokens": 3}
    for rel in (v32, v33):
        check_speculative_config(eagle3, rel)
    for method in ("medusa", "mlp_speculator"):
        check_speculative_config({**eagle3, "method": method}, v32)
        with pytest.raises(EaglehubError, match=f"vLLM 0.33.0 has no speculative method '{method}'"):
            check_speculative_config({**eagle3, "method": method}, v33)
    newer = {**eagle3, "draft_lm_head_quantization": None}  # a 0.33 field
    check_speculative_config(newer, v33)
    with pytest.raises(EaglehubError, match="vLLM 0.32.0's SpeculativeConfig has no field draft_lm_head_quantization"):
        check_speculative_config(newer, v32)


def test_engine_args_are_the_releases():
    """The LLM(...) keywords and serve flags a plan writes are EngineArgs fields of both shipped releases; a
    keyword a release lacks is refused."""
    from eaglehub.engines.release import check_engine_args, release
    from eaglehub.errors import EaglehubError

    drafter = inputs.read_drafter(str(DRAFTER))
    for profile in ("vllm-0.32-gpu", "vllm-0.33-gpu"):
        rel = release(profile)
        assert rel.table.engine_args is not None and "per_request_spec_decode_metrics" in rel.table.engine_args
        p = plan(LLAMA, 1, 80, drafter=drafter, release=rel)["plan"]
        assert set(p["llm_kwargs"]) <= rel.table.engine_args
        check_engine_args(p["llm_kwargs"], rel, "LLM(...)")
        with pytest.raises(EaglehubError, match=f"vLLM {rel.profile.version}'s EngineArgs has no made_up_flag"):
            check_engine_args({**p["llm_kwargs"], "made_up_flag": 1}, rel, "LLM(...)")


def test_runner_and_release_of_the_plan():
    """MRV2 is vLLM's CUDA default from 0.32: a -v1 profile's line sets VLLM_USE_V2_MODEL_RUNNER=0, the -gpu
    one sets nothing; per-request spec-decode metrics are an EngineArgs field from 0.32 only."""
    from eaglehub.engines.release import release

    drafter = inputs.read_drafter(str(DRAFTER))
    gpu = plan(LLAMA, 1, 80, drafter=drafter, release=release("vllm-0.33-gpu"))
    assert gpu["profile"]["runner"] == "Model Runner V2 (the CUDA default)" and gpu["profile"]["env"] == {}
    assert gpu["plan"]["serve_command"].startswith(f"vllm serve {LLAMA} ")
    assert gpu["plan"]["llm_kwargs"]["per_request_spec_decode_metrics"] == "summary"
    v1 = plan(LLAMA, 1, 80, drafter=drafter, release=release("vllm-0.33-v1"))
    assert v1["profile"]["env"] == {"VLLM_USE_V2_MODEL_RUNNER": "0"}
    assert shlex.split(v1["plan"]["serve_command"])[:3] == ["VLLM_USE_V2_MODEL_RUNNER=0", "vllm", "serve"]
    old = plan(LLAMA, 1, 80, drafter=drafter, release=release("vllm-0.29"))
    assert old["profile"]["id"] == "vllm-0.29-v1" and old["profile"]["env"] == {}  # V1 was the only runner
    assert "per_request_spec_decode_metrics" not in old["plan"]["llm_kwargs"]
    assert "oldest shipped" in old["profile"]["table_note"]
    for r in (gpu, v1, old):
        assert schema_errors(r, "launch-plan") == []
    assert plan(LLAMA, 1, 80)["profile"]["id"] == "vllm-0.33-gpu"  # the default profile


def _unpruned(cfg, t):
    import torch
    from helpers.checkpoints import vocab_maps

    v = cfg["vocab_size"]
    cfg["draft_vocab_size"] = v
    t["lm_head.weight"] = (torch.randn(v, cfg["hidden_size"]) * 0.05).to(torch.bfloat16)
    t["d2t"], t["t2d"] = vocab_maps(list(range(v)), v)


def test_cli_dry_run_judges_the_drafter_for_the_plans_release(make_drafter, make_target):
    """A d2t shipped with an unpruned vocabulary: vLLM refuses it from 0.30 on (no draft_id_to_target_id
    parameter), earlier releases load it; the plan says so for its release and exits 1."""
    target, drafter = make_target(8), make_drafter(mutate=_unpruned)
    args = ["--target", str(target), "--drafter", str(drafter), "--dry-run", "--gpus", "1", "--gpu-memory", "24"]
    res = run(*args, "--json")
    assert res.exit_code == 1, res.output
    check = json.loads(res.output)["drafter_check"]
    assert check["profile"] == "vllm-0.33-gpu" and not check["ok"]
    assert [f["code"] for f in check["findings"] if f["severity"] == "error"] == ["E-ENGINE-WEIGHT"]
    res = run(*args, "--json", "--profile", "vllm-0.29")
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert report["drafter_check"]["ok"] and report["profile"]["id"] == "vllm-0.29-v1"
    res = run(*args, "--profile", "vllm-0.33-v1")
    assert res.exit_code == 1 and "E-ENGINE-WEIGHT" in flat(res.output)
    assert "vLLM 0.33.0 on GPU with the V1 runner" in flat(res.output)


@pytest.mark.parametrize(
    "profile, message",
    [
        ("sglang-0.5.23", "a launch plan is a vllm serve line; sglang-0.5.23 is SGLang 0.5.23"),
        ("vllm-0.32-cpu", "a launch plan sizes GPUs; vllm-0.32-cpu is vLLM's CPU build"),
        ("trtllm-1", "unknown engine profile 'trtllm-1'"),
    ],
)
def test_cli_dry_run_refuses_a_profile_it_cannot_plan_for(profile, message):
    res = run("--target", str(LLAMA), "--dry-run", "--gpus", "1", "--gpu-memory", "80", "--profile", profile)
    assert res.exit_code == 2 and message in flat(res.output), res.output
