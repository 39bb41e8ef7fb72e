"""Launch plans (``verify --dry-run``, eaglehub.plan): footprints counted from real configs checked against
arithmetic done here from the published shapes, the TP / PP / backend chosen on the machines of
docs/verify.md, the refusal's numbers, the report's schema and the serve line (docs/verify.md,
"Launch plans (--dry-run)")."""

from __future__ import annotations

import itertools
import json
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from eaglehub.cli import main
from eaglehub.engines.vllm_engine import speculative_config
from eaglehub.io.schemas import schema_errors
from eaglehub.plan import inputs, memory
from eaglehub.plan.cards import read_gpu_memory
from eaglehub.plan.launch import GIB, OVERHEAD_BYTES, Machine, plan_launch

REPO = Path(__file__).resolve().parent.parent
CONFIGS = REPO / "fixtures" / "configs"
LLAMA = CONFIGS / "llama-3.1-8b-instruct"
KIMI = CONFIGS / "kimi-k2.6-nvfp4"
DRAFTER = REPO / "fixtures" / "smollm2-eagle3"
UTIL = 0.92
H100_BYTES = round(79.19 * 2**30)  # an H100 80GB as CUDA reports it: vLLM's start-up line says 79.19 GiB

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


def plan(path: Path, gpus: int, card: str, nodes: int = 1, max_model_len: int = 2048, **kw) -> dict:
    mem = read_gpu_memory(card)
    return plan_launch(
        cfg(path),
        Machine(gpus, mem.total_bytes, nodes, UTIL, card=mem.card, read_as=mem.read_as),
        target_spec=str(path),
        target_path=path,
        max_model_len=max_model_len,
        **kw,
    )


def usable_gib(card: str) -> float:
    return read_gpu_memory(card).total_bytes * UTIL / GIB


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
    h100 = Machine(1, H100_BYTES)
    r = plan_launch(config, h100, target_spec="t", target_path=tmp_path, index_bytes=index)
    assert r["weights_bytes"] == {"computed": 2 * LLAMA_PARAMS, "index": 2 * LLAMA_PARAMS + 1024, "used": "index"}
    assert r["verify_run"]["per_gpu"]["weights_bytes"] == 2 * LLAMA_PARAMS + 1024
    fp32 = plan_launch(config, h100, target_spec="t", target_path=tmp_path, index_bytes=index, dtype="float32")
    assert fp32["weights_bytes"]["used"] == "computed"  # the index is the bf16 checkpoint, not fp32 weights
    assert fp32["verify_run"]["per_gpu"]["weights_bytes"] == 4 * LLAMA_PARAMS


# --- GPU memory as CUDA reports it ----------------------------------------------------------------


def test_gpu_memory_is_the_cards_cuda_total():
    """A card sold as "80 GB" is an H100: 79.19 GiB to CUDA (vLLM's start-up line), not 80 x 10^9 bytes
    (74.5 GiB); named cards, GiB and explicit GB read as said; a number naming no card is GiB."""
    from eaglehub.errors import UsageError

    for text in ("80", "H100", "nvidia-h100-80gb"):
        mem = read_gpu_memory(text)
        assert (mem.card, mem.total_bytes) == ("h100", round(79.19 * GIB)), text
    assert read_gpu_memory("141").total_bytes == read_gpu_memory("H200").total_bytes == round(139.81 * GIB)
    assert read_gpu_memory("186").card == "gb200" and read_gpu_memory("186").total_bytes == round(184.31 * GIB)
    assert read_gpu_memory("B200").total_bytes == round(178.35 * GIB)
    assert read_gpu_memory("79.5GiB").total_bytes == round(79.5 * GIB)
    assert read_gpu_memory("24").total_bytes == 24 * GIB
    with pytest.raises(UsageError, match="not a card"):
        read_gpu_memory("lots")


def test_a_size_a_card_is_sold_as_reads_as_that_card_whatever_the_unit():
    """ "80 GB" on a spec sheet is an H100, not 80 x 10^9 bytes (74.5 GiB, which refused a 70B plan on 2 x H100
    that fits): 80, 80GB, 80 GB and 141GB read as the card and say so; only a size that names no card is
    literal (GB = 10^9 bytes, GiB = 2^30), and the reading says that too."""
    for text in ("80GB", "80 GB", "80gb", "80"):
        mem = read_gpu_memory(text)
        assert (mem.card, mem.total_bytes) == ("h100", round(79.19 * GIB)), text
        assert "H100" in mem.read_as and "79.19 GiB" in mem.read_as, mem.read_as
    assert read_gpu_memory("141GB").card == "h200" and read_gpu_memory("192 GB").card == "b200"
    assert read_gpu_memory("80GiB").total_bytes == 80 * GIB and read_gpu_memory("80GiB").card is None
    literal = read_gpu_memory("96GB")
    assert (literal.card, literal.total_bytes) == (None, 96 * 10**9) and "10^9 bytes" in literal.read_as


# --- layouts vLLM 0.33 accepts with EAGLE-3 ------------------------------------------------------

#: vLLM 0.33.0: the decoders with ``supports_aux_hidden_states_over_pp = True`` (model_executor/models/llama.py
#: L358, qwen2.py L335, sarvam.py L466; subclasses inherit it) and the architectures that build them
RELAYING = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "Glm4ForCausalLM"}


def vllm_refuses(lay: dict, config: dict, gpus_per_node: int, offline: bool) -> str | None:
    """The checks vLLM 0.33.0 makes, written out here from its code:
    - PP > 1 with EAGLE-3 on Model Runner V2 raises "<model> does not support eagle3 with pipeline parallelism"
      unless the decoder relays aux hidden states (v1/worker/gpu/spec_decode/eagle/eagle3_utils.py L57-63,
      called from v1/worker/gpu/model_runner.py L412-416);
    - TP must divide the attention heads (config/model.py L1559-1564);
    - expert parallelism needs experts (config/model.py L1498-1503);
    - offline data parallelism (LLM(...)) is refused for dense models (config/parallel.py L1030-1034);
    - mp cannot hold a world larger than the node without --nnodes, and --nnodes is refused with Ray
      (config/parallel.py L1066-1075, L1104-1112): a replica over several nodes is Ray's."""
    text = config.get("text_config") or config
    arch = config["architectures"][0]
    if lay["pp"] > 1 and arch not in RELAYING:
        return "pp"
    if text["num_attention_heads"] % lay["tp"]:
        return "tp"
    moe = bool(text.get("n_routed_experts") or text.get("num_experts"))
    if lay["ep"] and not moe:
        return "ep"
    if lay["dp"] > 1 and (offline or not moe):
        return "dp"
    if lay["tp"] * lay["pp"] > gpus_per_node and lay["backend"] != "ray":
        return "nodes"
    return None


MACHINES = [(8, "80", 1), (8, "141", 1), (8, "141", 2), (4, "186", 1)]


@pytest.mark.parametrize("path", [KIMI, LLAMA], ids=["kimi", "llama"])
@pytest.mark.parametrize(("gpus", "card", "nodes"), MACHINES, ids=["8x80", "8x141", "16x141", "4x186"])
def test_plans_contain_no_layout_vllm_refuses(path, gpus, card, nodes):
    """Issue #38: the Kimi-K2-class target on 16 H200s was planned TP 8 x PP 2 over Ray, which vLLM 0.33 refuses
    (DeepSeek-V3's decoder relays no aux states over stages); no plan on these machines may print such a layout,
    nor enforce_eager for a GPU, nor --nnodes beside Ray."""
    drafter = inputs.read_drafter(str(DRAFTER))
    r = plan(path, gpus, card, nodes, drafter=drafter)
    config = cfg(path)
    run, serve = r["verify_run"], r["serve"]
    for lay in [*run["candidates"], *([run["layout"]] if run["layout"] else [])]:
        assert vllm_refuses(lay, config, gpus, offline=True) is None, lay
    for lay in [*serve["candidates"], *([serve["layout"]] if serve["layout"] else [])]:
        assert vllm_refuses(lay, config, gpus, offline=False) is None, lay
    if run["layout"]:
        assert "enforce_eager" not in run["llm_kwargs"]
    if serve["serve_command"]:
        argv = shlex.split(serve["serve_command"])
        assert "--enforce-eager" not in argv and "--nnodes" not in argv
        if path == KIMI:
            assert "--pipeline-parallel-size" not in argv
    assert r["vllm_rules"]["vllm_version"] == "0.33.0"
    assert r["vllm_rules"]["pp_with_eagle3"] == (path == LLAMA)
    assert schema_errors(r, "launch-plan") == []


@pytest.mark.parametrize(
    ("path", "gpus", "card", "nodes", "verify", "serve"),
    [
        (LLAMA, 1, "24", 1, (1, 1, 1, "uni"), (1, 1, 1, "uni")),
        (LLAMA, 8, "141", 1, (1, 1, 1, "uni"), (1, 1, 1, "uni")),
        (KIMI, 4, "186", 1, (4, 1, 1, "mp"), (4, 1, 1, "mp")),  # a GB200 tray
        (KIMI, 8, "141", 1, (8, 1, 1, "mp"), (8, 1, 1, "mp")),  # Moonshot: TP 8 on an H200 node
        (KIMI, 8, "80", 2, (16, 1, 1, "ray"), (1, 1, 16, "mp")),  # TP 16 over Ray; DP 16 + EP across the nodes
        (KIMI, 8, "141", 2, (8, 1, 1, "mp"), (1, 1, 16, "mp")),
    ],
)
def test_chosen_layouts(path, gpus, card, nodes, verify, serve):
    """With an EAGLE-3 drafter (its rules apply: Kimi gets no PP)."""
    r = plan(path, gpus, card, nodes, drafter=inputs.read_drafter(str(DRAFTER)))
    v, s = r["verify_run"]["layout"], r["serve"]["layout"]
    assert r["fits"] and (v["tp"], v["pp"], v["dp"], v["backend"]) == verify
    assert (s["tp"], s["pp"], s["dp"], s["backend"]) == serve
    assert r["verify_run"]["per_gpu"]["total_bytes"] <= read_gpu_memory(card).total_bytes * UTIL
    assert schema_errors(r, "launch-plan") == []


def test_kimi_across_nodes_is_served_as_its_publisher_documents():
    """Moonshot's Kimi-K2 vLLM guide: TP on a node, data + expert parallelism across nodes; vLLM 0.33 then
    switches a per-batch-size k schedule off (config/vllm.py L1110-1124), which the plan says."""
    r = plan(KIMI, 8, "141", 2, drafter=inputs.read_drafter(str(DRAFTER)), k=4)
    serve = r["serve"]
    argv = shlex.split(serve["serve_command"])
    flags = dict(itertools.pairwise(argv[3:]))
    assert flags["--data-parallel-size"] == "16" and flags["--data-parallel-size-local"] == "8"
    assert flags["--data-parallel-backend"] == "ray" and "--enable-expert-parallel" in argv
    assert flags["--tensor-parallel-size"] == "1" and flags["--max-model-len"] == "131072"
    assert "Moonshot" in serve["source"] and "Kimi-K2" in serve["source"]
    assert "DP 16" in serve["k_schedule"] and "k = 4 at every batch size" in serve["k_schedule"]
    assert json.loads(flags["--speculative-config"]) == speculative_config(DRAFTER, 4)
    one_node = plan(KIMI, 8, "141", drafter=inputs.read_drafter(str(DRAFTER)))["serve"]
    assert one_node["layout"]["tp"] == 8 and "one replica" in one_node["k_schedule"]
    # experts over the 16 ranks, the rest whole on each: less per GPU than TP 8 holds
    assert serve["per_gpu"]["weights_bytes"] < one_node["per_gpu"]["weights_bytes"]


def test_kimi_tp4_does_not_fit_an_h200():
    """TP 4 holds a quarter of the sharded weights plus the replicated ones: more than 0.92 x 139.81 GiB."""
    r = plan(KIMI, 8, "141")
    tp4 = next(c for c in r["verify_run"]["candidates"] if c["tp"] == 4)
    assert not tp4["fits"]
    assert tp4["per_gpu"]["weights_bytes"] / GIB > usable_gib("141") - OVERHEAD_BYTES / GIB
    assert "TP 4 needs 143.0 GiB" in r["verify_run"]["reason"]


# --- memory: the card's CUDA total, KV as vLLM pages it ------------------------------------------------

# Llama-3.1-70B (Meta's published shapes): H 8192, 80 layers, 64 heads of 128, 8 KV heads, I 28672, V 128256
L70 = dict(hidden_size=8192, num_hidden_layers=80, num_attention_heads=64, num_key_value_heads=8)
L70_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    **L70,
    "intermediate_size": 28672,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
L70_PARAMS = 2 * 128256 * 8192 + 80 * (2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192) + 8192


@pytest.mark.parametrize("memory", ["80", "80GB", "80 GB", "H100"])
def test_a_70b_bf16_target_fits_two_h100s_at_4k(tmp_path, memory):
    """141 GB of bf16 weights, 65.7 GiB a GPU at TP 2: with 0.6 GiB of KV for a 4096-token sequence and the
    overhead it is within 0.92 x 79.19 GiB; read as 80 x 10^9 bytes ("80GB" was) it was refused."""
    assert L70_PARAMS == 70_553_706_496  # the count published for Llama-3.1-70B
    (tmp_path / "config.json").write_text(json.dumps(L70_CONFIG))
    res = run(
        "--target", str(tmp_path), "--dry-run", "--gpus", "2", "--gpu-memory", memory, "--context", "4032", "--json"
    )
    assert res.exit_code == 0, res.output
    r = json.loads(res.output)
    v = r["verify_run"]
    assert v["max_model_len"] == 4096 and (v["layout"]["tp"], v["layout"]["pp"]) == (2, 1)
    g = v["per_gpu"]
    norms = 80 * 2 * 8192 + 8192  # every GPU holds the norms whole; the rest is halved
    assert g["weights_bytes"] == 2 * (L70_PARAMS - norms) // 2 + 2 * norms
    assert g["kv_cache_bytes"] == 4096 * 2 * 80 * 4 * 128 * 2  # 4 of the 8 KV heads a GPU, one sequence
    assert 80 * 10**9 * UTIL < g["total_bytes"] <= round(79.19 * GIB) * UTIL  # fits the card, not 80 x 10^9 bytes
    assert r["serve"]["layout"]["tp"] == 2 and r["serve"]["max_model_len"] == 4096
    argv = shlex.split(r["serve"]["serve_command"])
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"


def test_an_8b_target_at_128k_with_64_sequences_fits_one_80gb_card():
    """vLLM's KV cache is paged: it needs one max_model_len sequence (16 GiB here, v1/core/kv_cache_planning.py
    L151-186), and the 64 sequences share the token budget left, not 64 full-length caches (24 GPUs' worth)."""
    args = ["--target", str(LLAMA), "--dry-run", "--gpus", "1", "--gpu-memory", "80", "--context", "131008"]
    res = run(*args, "--max-num-seqs", "64", "--json")
    assert res.exit_code == 0, res.output
    r = json.loads(res.output)
    v, s = r["verify_run"], r["serve"]
    assert v["max_model_len"] == 131072 and v["max_num_seqs"] == 64 and v["layout"]["gpus"] == 1
    assert v["per_gpu"]["kv_cache_bytes"] == 131072 * 131072  # one sequence: 16 GiB
    usable = round(79.19 * GIB) * UTIL
    budget = int((usable - 2 * LLAMA_PARAMS - OVERHEAD_BYTES) // 131072)
    assert s["kv_tokens_capacity"] == v["kv_tokens_capacity"] == budget
    assert s["full_length_sequences"] == budget // 131072 == 3
    assert s["max_num_seqs"] == 64 and f"{budget // 64:,} tokens each" in " ".join(s["notes"])
    assert "--max-num-seqs 64" in s["serve_command"]
    kv = v["llm_kwargs"]["kv_cache_memory_bytes"]
    assert 131072 * 131072 <= kv <= budget * 131072 + 2**20  # at least one sequence, at most what fits


# --- layout options: used or refused -------------------------------------------------------------


def test_a_requested_layout_is_used():
    res = run(
        "--target",
        str(LLAMA),
        "--dry-run",
        "--gpus",
        "2",
        "--gpu-memory",
        "H100",
        "--tensor-parallel-size",
        "2",
        "--json",
    )
    assert res.exit_code == 0, res.output
    r = json.loads(res.output)
    assert r["requested"] == {"tp": 2}
    assert r["verify_run"]["layout"]["tp"] == 2 and r["verify_run"]["llm_kwargs"]["tensor_parallel_size"] == 2
    assert r["serve"]["layout"]["tp"] == 2 and "--tensor-parallel-size 2" in r["serve"]["serve_command"]


@pytest.mark.parametrize(
    ("path", "args", "message"),
    [
        (LLAMA, ["--gpus", "2", "--tensor-parallel-size", "4"], "TP 4 needs 4 GPUs; the machine has 2"),
        (LLAMA, ["--gpus", "8", "--enable-expert-parallel"], "expert parallelism needs a MoE target"),
        (LLAMA, ["--gpus", "4", "--tensor-parallel-size", "3"], "TP 3 does not divide the 32 attention heads"),
    ],
)
def test_a_requested_layout_vllm_refuses_is_refused_with_the_numbers(path, args, message):
    res = run("--target", str(path), "--dry-run", "--gpu-memory", "H100", *args, "--json")
    assert res.exit_code == 1, res.output
    r = json.loads(res.output)
    refused = [x["refusal"]["message"] for x in (r["verify_run"], r["serve"]) if x["refusal"]]
    assert refused and all("the requested layout is refused" in m for m in refused)
    assert any(message in m for m in refused), refused
    text = run("--target", str(path), "--dry-run", "--gpu-memory", "H100", *args)
    assert text.exit_code == 1 and message in flat(text.output)
    # the hint of a refused verify run is the dry run with the layout the plan chooses: it runs and fits
    hint = r["verify_run"]["refusal"]["hint"] if r["verify_run"]["refusal"] else None
    if hint is not None:
        argv = shlex.split(hint)
        assert argv[:2] == ["eaglehub", "verify"] and "--tensor-parallel-size" in argv, hint
        again = run(*argv[2:], "--json")
        assert again.exit_code == 0, again.output
        assert json.loads(again.output)["verify_run"]["layout"] is not None


def test_a_requested_layout_that_does_not_fit_is_refused_not_replaced():
    """TP 1 asked for a Kimi-class target on 8 H200s: refused with the layout's numbers, no other layout chosen."""
    res = run(
        "--target",
        str(KIMI),
        "--dry-run",
        "--gpus",
        "8",
        "--gpu-memory",
        "H200",
        "--tensor-parallel-size",
        "1",
        "--json",
    )
    assert res.exit_code == 1
    r = json.loads(res.output)
    assert [c["tp"] for c in r["verify_run"]["candidates"]] == [1] and r["verify_run"]["layout"] is None
    assert "at TP 1 each GPU needs weights 549.3 GiB" in r["verify_run"]["refusal"]["message"]


def test_layout_options_of_a_plan_need_dry_run():
    for args in (["--gpus", "2"], ["--data-parallel-size", "2"], ["--enable-expert-parallel"]):
        res = run("--target", str(LLAMA), *args)
        assert res.exit_code == 2 and "--dry-run" in flat(res.output), args


def test_the_dry_run_writes_its_report(tmp_path):
    out = tmp_path / "plan.json"
    res = run("--target", str(LLAMA), "--dry-run", "--gpus", "1", "--gpu-memory", "H100", "--report", str(out))
    assert res.exit_code == 0, res.output
    written = json.loads(out.read_text())
    assert schema_errors(written, "launch-plan") == [] and written["verify_run"]["layout"]["tp"] == 1
    assert f"report: {out}" in flat(res.output)


# --- the two lines: verify run and serve line ---------------------------------------------------------


def test_verify_run_and_serve_line_are_two_labelled_things():
    """The verify run keeps verify's test settings (2048 tokens, one sequence, the fewest GPUs); the serve line
    runs the target's own context on the machine, and is labelled as such in JSON and text."""
    res = run("--target", str(LLAMA), "--dry-run", "--gpus", "8", "--gpu-memory", "H200", "--json")
    r = json.loads(res.output)
    v, s = r["verify_run"], r["serve"]
    assert (v["max_model_len"], v["max_num_seqs"], v["layout"]["gpus"]) == (2048, 1, 1)
    assert v["llm_kwargs"]["max_model_len"] == 2048 and v["llm_kwargs"]["max_num_seqs"] == 1
    assert "verify run" in v["label"] and "serve line" in s["label"]
    argv = shlex.split(s["serve_command"])
    assert argv[argv.index("--max-model-len") + 1] == "131072" and "--max-num-seqs" not in argv
    text = flat(run("--target", str(LLAMA), "--dry-run", "--gpus", "8", "--gpu-memory", "H200").output)
    assert "verify run (LLM(...) as verify runs it: max_model_len 2048, 1 sequence(s)" in text
    assert "serve line (production: the whole machine at max_model_len 131072)" in text
    assert "vLLM 0.33.0 rules:" in text


def test_trust_remote_code_where_the_config_has_auto_map(tmp_path):
    config = {**cfg(LLAMA), "auto_map": {"AutoConfig": "configuration_x.XConfig"}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    r = plan(tmp_path, 1, "H100")
    assert r["vllm_rules"]["trust_remote_code"] and r["verify_run"]["llm_kwargs"]["trust_remote_code"] is True
    argv = shlex.split(r["serve"]["serve_command"])
    after = argv[argv.index("--trust-remote-code") + 1 :]
    assert not after or after[0].startswith("--")  # a bare flag: vllm serve takes no value for it
    assert "--trust-remote-code" not in plan(LLAMA, 1, "H100")["serve"]["serve_command"]


# --- refusals -------------------------------------------------------------------------------------


def test_kimi_on_one_80gb_gpu_is_refused_with_numbers():
    r = plan(KIMI, 1, "80", drafter=inputs.read_drafter(str(DRAFTER)))
    assert not r["fits"] and r["verify_run"]["layout"] is None
    weights = (sum(K_MLP) * 0.5625 + 2 * K_BF16) / GIB
    msg = r["verify_run"]["refusal"]["message"].replace(" + drafter 0.0 GiB", "")
    assert f"weights {weights:.1f} GiB" in msg and f"{usable_gib('80'):.1f} GiB usable" in msg
    # the fewest H100s: TP 16 across two nodes (no PP: DeepSeek-V3's decoder relays no aux states)
    assert r["verify_run"]["refusal"]["would_fit"] == {"tp": 16, "pp": 1, "gpus": 16, "nodes": 2}
    assert "--gpus 8 --gpu-memory h100 --nodes 2" in r["verify_run"]["refusal"]["hint"]
    assert schema_errors(r, "launch-plan") == []


def test_llama_at_131072_tokens_on_24gib_is_refused():
    r = plan(LLAMA, 1, "24", max_model_len=131072)
    kv = 131072 * 131072 / GIB
    assert kv == 16.0
    total = (2 * LLAMA_PARAMS + 131072 * 131072 + OVERHEAD_BYTES) / GIB
    msg = r["verify_run"]["refusal"]["message"]
    assert f"KV {kv:.1f} GiB" in msg and f"= {total:.1f} GiB > {usable_gib('24'):.1f} GiB usable" in msg
    longest = int((24 * GIB * UTIL - 2 * LLAMA_PARAMS - OVERHEAD_BYTES) // 131072)
    assert f"at most {longest} tokens of context fit there" in msg
    assert r["verify_run"]["refusal"]["would_fit"]["gpus"] == 2  # half the weights and half the KV heads per GPU
    assert plan(LLAMA, 2, "24", max_model_len=131072)["verify_run"]["layout"]["tp"] == 2


# --- serve line and LLM(...) arguments ------------------------------------------------------------


def test_serve_line_carries_the_engines_speculative_config():
    drafter = inputs.read_drafter(str(DRAFTER))
    r = plan(KIMI, 8, "80", 2, drafter=drafter, k=4)
    v = r["verify_run"]
    kwargs = v["llm_kwargs"]
    assert kwargs["speculative_config"] == speculative_config(DRAFTER, 4)
    assert (kwargs["tensor_parallel_size"], kwargs["pipeline_parallel_size"]) == (16, 1)
    assert kwargs["distributed_executor_backend"] == "ray"
    assert kwargs["kv_cache_memory_bytes"] >= v["per_gpu"]["kv_cache_bytes"] + v["per_gpu"]["drafter_kv_cache_bytes"]
    weights = sum(f.stat().st_size for f in DRAFTER.glob("*.safetensors"))
    assert v["per_gpu"]["drafter_bytes"] == round(weights / 16)  # the draft runs at the target's TP
    argv = shlex.split(r["serve"]["serve_command"])
    assert argv[:3] == ["vllm", "serve", str(KIMI.absolute())]
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == speculative_config(DRAFTER, 4)


def test_serve_line_writes_local_paths_absolute(make_drafter, make_target, monkeypatch):
    """Target and drafter given relative to the working directory: both absolute in the serve line (it pastes
    from any directory; a Hub id stays as given: test_cli_hub_id_reads_config_from_the_cache)."""
    target, drafter = make_target(8), make_drafter("rel-drafter")
    monkeypatch.chdir(target.parent)
    args = ["--target", target.name, "--drafter", drafter.name, "--dry-run", "--gpus", "1", "--gpu-memory", "24"]
    res = run(*args, "--json")
    assert res.exit_code == 0, res.output
    argv = shlex.split(json.loads(res.output)["serve"]["serve_command"])
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
    r = json.loads(res.output)
    served = shlex.split(r["serve"]["serve_command"])[2]
    assert served == r["verify_run"]["llm_kwargs"]["model"] and (Path(served) / "config.json").is_file()


def test_without_drafter_the_line_serves_the_target_alone():
    r = plan(LLAMA, 1, "80")
    assert "--speculative-config" not in r["serve"]["serve_command"] and not r["serve"]["serve_has_drafter"]
    assert r["verify_run"]["llm_kwargs"]["distributed_executor_backend"] == "uni"  # eaglehub's one-process run
    assert "speculative_config" not in r["verify_run"]["llm_kwargs"]


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
    assert schema_errors(report, "launch-plan") == [] and report["verify_run"]["layout"]["tp"] == 4
    res = run("--target", str(KIMI), "--dry-run", "--gpus", "4", "--gpu-memory", "186")
    assert res.exit_code == 0 and "plan: TP 4 = 4 GPU(s)" in flat(res.output) and "vllm serve" in flat(res.output)


def test_cli_refusal_exits_1():
    res = run("--target", str(LLAMA), "--dry-run", "--gpus", "1", "--gpu-memory", "24", "--context", "131008")
    assert res.exit_code == 1, res.output
    assert "refused" in flat(res.output) and "16.0 GiB" in flat(res.output)


def test_cli_context_sets_max_model_len():
    res = run("--target", str(LLAMA), "--dry-run", "--gpus", "1", "--gpu-memory", "80", "--context", "8192", "--json")
    # context + --max-tokens; the target alone drafts nothing, so no k (test_a_target_alone_is_not_held_to_eagle3)
    assert json.loads(res.output)["verify_run"]["max_model_len"] == 8192 + 64


def test_cli_without_gpus_on_a_machine_without_one(monkeypatch):
    monkeypatch.setattr(inputs, "local_gpus", lambda: (0, 0))
    res = run("--target", str(LLAMA), "--dry-run")
    assert res.exit_code == 2 and "--gpus N --gpu-memory CARD|GiB" in flat(res.output)
    monkeypatch.setattr(inputs, "local_gpus", lambda: (2, H100_BYTES))  # mem_get_info's total on an H100
    res = run("--target", str(LLAMA), "--dry-run", "--json")
    machine = json.loads(res.output)["machine"]
    assert machine["source"] == "machine" and machine["gpus_per_node"] == 2
    assert machine["gpu_memory_bytes"] == H100_BYTES and "79.19 GiB" in machine["read_as"]


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
    assert r["serve"]["serve_command"].startswith("vllm serve meta-llama/Llama-3.1-8B-Instruct ")
    assert r["verify_run"]["llm_kwargs"]["model"] == str(snap)


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
        p = plan(LLAMA, 1, 80, drafter=drafter, release=rel)["verify_run"]
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
    assert gpu["serve"]["serve_command"].startswith(f"vllm serve {LLAMA.absolute()} ")
    assert gpu["verify_run"]["llm_kwargs"]["per_request_spec_decode_metrics"] == "summary"
    v1 = plan(LLAMA, 1, 80, drafter=drafter, release=release("vllm-0.33-v1"))
    assert v1["profile"]["env"] == {"VLLM_USE_V2_MODEL_RUNNER": "0"}
    assert shlex.split(v1["serve"]["serve_command"])[:3] == ["VLLM_USE_V2_MODEL_RUNNER=0", "vllm", "serve"]
    old = plan(LLAMA, 1, 80, drafter=drafter, release=release("vllm-0.29"))
    assert old["profile"]["id"] == "vllm-0.29-v1" and old["profile"]["env"] == {}  # V1 was the only runner
    assert "per_request_spec_decode_metrics" not in old["verify_run"]["llm_kwargs"]
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


# --- a new user's trial of the dry run (#38 follow-up) -------------------------------------------


@pytest.mark.parametrize(
    ("extra", "layout"),
    [
        ([], (8, 1, False)),
        (["--data-parallel-size", "2"], (4, 2, False)),
        (["--data-parallel-size", "3"], (2, 3, False)),
    ],
)
def test_a_partial_layout_request_is_completed_by_the_planner(extra, layout):
    """--enable-expert-parallel alone (or with a DP) on 8 H200s was tried as TP 1 and refused with a one-GPU
    figure (561.9 GiB) while TP 8 serves at 83 GiB: the planner completes it (TP over what a replica has, DP x TP
    = the GPUs) and says so; the figures are those of the layout it tried."""
    args = ["--target", str(KIMI), "--dry-run", "--gpus", "8", "--gpu-memory", "H200", "--enable-expert-parallel"]
    res = run(*args, *extra, "--json")
    assert res.exit_code == 0, res.output
    serve = json.loads(res.output)["serve"]
    lay = serve["layout"]
    assert (lay["tp"], lay["dp"], lay["pp"] > 1) == layout and lay["ep"] is True
    assert "completed to" in serve["source"] and f"TP {lay['tp']} over the GPUs a replica has" in serve["source"]
    argv = shlex.split(serve["serve_command"])
    assert argv[argv.index("--tensor-parallel-size") + 1] == str(layout[0]) and "--enable-expert-parallel" in argv
    assert serve["per_gpu"]["total_bytes"] <= read_gpu_memory("H200").total_bytes * UTIL


def test_a_refused_serve_line_names_its_layout_and_hints_a_command_that_runs():
    """Kimi with --enable-expert-parallel on one node of 8 H100s cannot hold a 131072-token sequence: the
    message names the layout the numbers are for, and the hint is a dry run that plans (exit 0)."""
    args = ["--target", str(KIMI), "--dry-run", "--gpus", "8", "--gpu-memory", "80", "--enable-expert-parallel"]
    res = run(*args, "--context", "131000", "--json")
    assert res.exit_code == 1, res.output
    refusal = json.loads(res.output)["serve"]["refusal"]
    assert "the closest, TP 8 + EP, needs" in refusal["message"], refusal
    argv = shlex.split(refusal["hint"])
    assert argv[:2] == ["eaglehub", "verify"], refusal["hint"]
    again = run(*argv[2:], "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.output)["fits"]


def test_the_dry_run_refuses_a_context_the_real_run_refuses(tmp_path):
    """The real run refuses a prompt whose output passes max_position_embeddings (measure/padding.py's rule);
    the dry run clamped max_model_len with min() and planned it. Now it applies the same rule: the same message,
    exit 2; a k length (8k) is fitted as the run fits it; a hint never proposes a context the run refuses."""
    from eaglehub.measure.context import context_overflow

    (tmp_path / "config.json").write_text(json.dumps({**cfg(LLAMA), "max_position_embeddings": 8192}))
    base = ["--target", str(tmp_path), "--dry-run", "--gpus", "1", "--gpu-memory", "H100", "--max-tokens", "8"]
    res = run(*base, "--context", "8192")
    assert res.exit_code == 2, res.output
    assert f"--context 8192: {context_overflow(8192, 8, 8192)}" in flat(res.output)
    assert "8192 prompt + 8 output tokens exceed the target's max_position_embeddings 8192" in flat(res.output)
    fitted = json.loads(run(*base, "--context", "8k", "--json").output)
    assert fitted["verify_run"]["max_model_len"] == 8192 and fitted["serve"]["max_model_len"] == 8192
    # a refusal's hint: every --context it names the real run takes, and the hint plans
    res = run("--target", str(LLAMA), "--dry-run", "--gpus", "1", "--gpu-memory", "24", "--context", "131008", "--json")
    assert res.exit_code == 1, res.output
    for part in ("verify_run", "serve"):
        hint = json.loads(res.output)[part]["refusal"]["hint"]
        argv = shlex.split(hint)
        if "--context" in argv:
            assert context_overflow(int(argv[argv.index("--context") + 1]), 64, 131072) is None, hint
        again = run(*argv[2:], "--json")
        assert again.exit_code == 0, (hint, again.output)


def test_a_target_alone_is_not_held_to_eagle3():
    """No --drafter: vLLM 0.33 takes PP for Kimi's model class (kimi_k25.py L291-294, SupportsPP), so PP 2 is not
    refused with the EAGLE-3 relay rule; no k is printed, no k schedule, no k in the lengths. With a drafter
    the EAGLE-3 rule still refuses it."""
    args = ["--target", str(KIMI), "--dry-run", "--gpus", "8", "--gpu-memory", "H200", "--pipeline-parallel-size", "2"]
    res = run(*args, "--context", "4k", "--json")
    assert res.exit_code == 0, res.output
    r = json.loads(res.output)
    assert r["k"] is None and r["serve"]["k_schedule"] is None and "target alone" in r["vllm_rules"]["pp_rule"]
    assert r["verify_run"]["layout"]["pp"] == 2 and r["serve"]["layout"]["pp"] == 2
    assert r["verify_run"]["max_model_len"] == r["serve"]["max_model_len"] == 4096 + 64
    assert "--max-model-len 4160" in r["serve"]["serve_command"]
    text = flat(run(*args, "--context", "4k").output)
    assert "k 3" not in text and "k schedule" not in text and "drafts k" not in text
    drafted = plan(KIMI, 8, "141", requested={"pp": 2, "tp": 4}, drafter=inputs.read_drafter(str(DRAFTER)))
    assert "does not relay EAGLE-3 aux hidden states" in drafted["verify_run"]["refusal"]["message"]
    assert drafted["k"] == 3 and drafted["verify_run"]["max_model_len"] == 2048


def test_dense_data_parallel_is_a_serve_line():
    """vllm serve --data-parallel-size N runs a dense target's ranks as independent engines behind one API server
    (vLLM 0.33.0 v1/engine/core.py L1546-1554); nothing there refuses EAGLE-3; VllmConfig sees DP > 1 and drops
    a k schedule (config/vllm.py L1862, L1110-1124). The plan serves it, with both notes."""
    r = plan(LLAMA, 8, "H100", requested={"dp": 2}, drafter=inputs.read_drafter(str(DRAFTER)))
    serve = r["serve"]
    assert serve["refusal"] is None and (serve["layout"]["tp"], serve["layout"]["dp"]) == (4, 2)
    argv = shlex.split(serve["serve_command"])
    assert argv[argv.index("--data-parallel-size") + 1] == "2"
    assert "DP 2" in serve["k_schedule"] and "k = 3 at every batch size" in serve["k_schedule"]
    assert any("independent engines" in note and "core.py L1546-1554" in note for note in serve["notes"])
    assert r["verify_run"]["layout"]["dp"] == 1  # LLM(...) has one replica (config/parallel.py L1030-1034)


def test_the_plan_prints_layout_options_as_words():
    res = run("--target", str(KIMI), "--dry-run", "--gpus", "8", "--gpu-memory", "H200", "--enable-expert-parallel")
    text = flat(res.output)
    assert "layout asked for: expert parallel (used or refused)" in text and "ep True" not in text


def test_a_release_before_the_runner_variable_is_not_labelled_with_it():
    """VLLM_USE_V2_MODEL_RUNNER selects V1 only where Model Runner V2 is the default (0.32 on); vllm-0.20 was
    labelled 'with the V1 runner (VLLM_USE_V2_MODEL_RUNNER=0)', a variable that release does not have."""
    res = run("--target", str(LLAMA), "--dry-run", "--gpus", "1", "--gpu-memory", "H100", "--profile", "vllm-0.20")
    assert res.exit_code == 0, res.output
    text = flat(res.output)
    assert "vLLM 0.20.0 on GPU with the V1 runner" in text and "VLLM_USE_V2_MODEL_RUNNER" not in text
    v1 = flat(
        run(
            "--target", str(LLAMA), "--dry-run", "--gpus", "1", "--gpu-memory", "H100", "--profile", "vllm-0.33-v1"
        ).output
    )
    assert "VLLM_USE_V2_MODEL_RUNNER=0" in v1
