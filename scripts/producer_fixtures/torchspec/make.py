"""Write fixtures/producers/torchspec/ with TorchSpec's own code (run with its venv's python).

A TorchSpec user trains (Ray + SGLang/vLLM + Mooncake on GPUs), which leaves
`<output_dir>/config.yaml` and `<output_dir>/checkpoints/iter_NNNNNNN/{model,optimizer,lr_scheduler}/`
(torch.distributed.checkpoint) + rng.pt + meta.json + latest_checkpointed_iteration.txt, and then
runs `python tools/convert_to_hf.py --input-dir <iter dir> ...` to get a servable drafter.

None of the GPU services can run here, so this script runs the trainer's own pieces that produce
those files, in one CPU process (gloo, world size 1): torchspec.config.train_config.load_config
(save_snapshot=True writes config.yaml), torchspec.config.utils.generate_draft_model_config,
AutoDraftModelConfig / AutoEagle3DraftModel, load_embedding + freeze_embedding, Eagle3Model,
apply_fsdp2 (its default REPLICATE strategy) on a CPU device mesh, BF16Optimizer, and
torchspec.training.checkpoint.save. Substitutions: the one optimizer step runs on fixed
pseudo-random gradients (no target hidden states without an inference engine);
torch.cuda.synchronize is a no-op (CPU torch); the clock that checkpoint.save stamps into
meta.json is fixed and the uuid4 save_id torch.distributed.checkpoint writes into each .metadata is
drawn from a seeded generator (deterministic output). Export runs TorchSpec's tools/convert_to_hf.py as a
subprocess, unmodified.

The TorchSpec source is the checkout setup.sh recorded (DIR/source.json); nothing of it is copied
into this repository. Targets (a random transformers Llama + a byte-level BPE tokenizer trained on
TorchSpec's examples/data/sample_conversations.jsonl) live in a scratch directory.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the scripts' shared common.py
from common import SMOLLM2, TINY

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
ENV_DIR = REPO / ".work" / "producers" / "torchspec"
# A fixed absolute scratch path: TorchSpec writes absolute paths into config.yaml.
WORK = Path("/tmp/eaglehub-producer-fixtures/torchspec")
BIN = Path(sys.executable).parent

LLAMA3_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] + '<|eot_id|>' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]


def log(*a):
    print("[torchspec-fixtures]", *a, flush=True)


def source() -> dict:
    return json.loads((ENV_DIR / "source.json").read_text())


def sample_texts(dataset: Path):
    for line in dataset.read_text().splitlines():
        for m in json.loads(line)["conversations"]:
            yield m["content"]


def make_tokenizer(out: Path, dataset: Path, vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(sample_texts(dataset)), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|begin_of_text|>",
        eos_token="<|eot_id|>",
        pad_token="<|end_of_text|>",
    )
    fast.chat_template = LLAMA3_CHAT_TEMPLATE
    fast.save_pretrained(out)


def make_target(name: str, dims: dict, dataset: Path, seed: int, tok_vocab: int) -> Path:
    """A random Llama target (config, sharded weights, tokenizer) standing in for a hub model."""
    from transformers import LlamaConfig, LlamaForCausalLM

    out = WORK / "targets" / name
    torch.manual_seed(seed)
    ids = {"bos_token_id": 0, "eos_token_id": 4, **dims.get("special_ids", {})}
    cfg = LlamaConfig(
        **{k: v for k, v in dims.items() if k != "special_ids"},
        **ids,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    model.save_pretrained(out, max_shard_size=f"{size // 2 // 1000 + 1}KB")
    make_tokenizer(out, dataset, tok_vocab)
    return out


def init_dist():
    import torch.distributed as dist

    if dist.is_initialized():
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    dist.init_process_group("gloo", rank=0, world_size=1)


def train_run(run_root: Path, target: Path, draft_config: Path, dataset: Path, seed=0) -> Path:
    """What the trainer writes: config.yaml and checkpoints/iter_0000001/..."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torchspec import AutoDraftModelConfig, AutoEagle3DraftModel, Eagle3Model
    from torchspec.config.train_config import config_to_flat_args, load_config
    from torchspec.training import checkpoint
    from torchspec.training.fsdp import apply_fsdp2
    from torchspec.training.optimizer import BF16Optimizer

    init_dist()
    config = load_config(
        cli_args=[
            f"output_dir={run_root}",
            f"cache_dir={WORK / 'cache'}",
            f"model.target_model_path={target}",
            f"model.draft_model_config={draft_config}",
            f"dataset.train_data_path={dataset}",
            "dataset.chat_template=llama3",
            "training.distributed_backend=gloo",
            "training.num_train_steps=1",
            "training.save_interval=1",
            # large enough that the one bf16 step moves every weight (1e-4 rounds away near 1.0)
            "training.learning_rate=0.02",
            "training.warmup_ratio=0.0",
            f"training.seed={seed}",
        ],
        save_snapshot=True,
    )
    args = config_to_flat_args(config)
    torch.manual_seed(args.seed)
    draft_cfg = AutoDraftModelConfig.from_file(str(draft_config))
    draft = AutoEagle3DraftModel.from_config(
        draft_cfg, attention_backend=args.attention_backend, torch_dtype=torch.bfloat16
    )
    draft.load_embedding(str(target), embedding_key=args.embedding_key)
    draft.freeze_embedding()
    model = Eagle3Model(
        draft_model=draft,
        length=args.ttt_length,
        attention_backend=args.attention_backend,
        gradient_checkpointing=args.gradient_checkpointing,
    )
    mesh = init_device_mesh("cpu", (1,))
    model = apply_fsdp2(model, mesh=mesh, cpu_offload=False, args=args)
    optimizer = BF16Optimizer(
        draft,
        lr=args.learning_rate,
        weight_decay=args.weight_decay,
        max_grad_norm=args.max_grad_norm,
        warmup_ratio=args.warmup_ratio,
        total_steps=100,
        decay_style=args.lr_decay_style,
        min_lr=args.min_lr,
    )
    g = torch.Generator().manual_seed(1234)
    for p in draft.parameters():
        if p.requires_grad:
            # Substitution: fixed pseudo-random gradients instead of a TTT forward/backward.
            p.grad = (torch.randn(p.shape, generator=g) * 1e-2).to(p.dtype)
    optimizer.step()
    actor = SimpleNamespace(
        args=args,
        model=model,
        optimizer=optimizer,
        lr_scheduler=optimizer.lr_scheduler,
        global_step=1,
    )
    # CPU torch: checkpoint.save calls torch.cuda.synchronize(); a fixed clock for meta.json.
    torch.cuda.synchronize = lambda *a, **k: None
    checkpoint.time = SimpleNamespace(time=lambda: 1767225600.0)  # 2026-01-01T00:00:00Z
    # torch.distributed.checkpoint stamps a random uuid4 save_id into each .metadata: seeded here.
    import random
    import uuid

    import torch.distributed.checkpoint.filesystem as dcp_fs

    rng = random.Random(f"{run_root}")
    dcp_fs._generate_uuid = lambda: str(uuid.UUID(int=rng.getrandbits(128), version=4))
    checkpoint.save(actor, step=0)
    dist.barrier()
    return Path(args.checkpoint_dir) / "iter_0000001"


def convert(src: Path, iter_dir: Path, out: Path, draft_config: Path, target: Path, extra: list[str]):
    cmd = [
        sys.executable,
        str(src / "tools" / "convert_to_hf.py"),
        "--input-dir",
        str(iter_dir),
        "--output-dir",
        str(out),
        "--config",
        str(draft_config),
        "--target-model-path",
        str(target),
        *extra,
    ]
    log("$", " ".join(cmd))
    env = dict(os.environ, PYTHONHASHSEED="0", TOKENIZERS_PARALLELISM="false")
    subprocess.run(cmd, cwd=WORK, check=True, env=env)
    # The command as a user would type it, paths relative to the scratch dir.
    return " ".join(
        ["python", "tools/convert_to_hf.py"]
        + [os.path.relpath(c, WORK) if c.startswith(str(WORK)) else c for c in cmd[2:]]
    ).replace(str(out), "<case>")


def draft_config_llama(path: Path, target: Path, draft_vocab=None) -> dict:
    from torchspec.config.utils import generate_draft_model_config

    cfg = generate_draft_model_config(target_model_path=str(target))
    if draft_vocab:
        cfg["draft_vocab_size"] = draft_vocab
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cfg, indent=2) + "\n")
    return cfg


def draft_config_mla(path: Path, src: Path, target: Path) -> dict:
    """TorchSpec's MLA template (configs/draft_models/qwen3_8b_eagle3_mla.json) shrunk to the tiny
    target, as a user adapts it; passed as model.draft_model_config."""
    from transformers import AutoConfig

    cfg = json.loads((src / "configs" / "draft_models" / "qwen3_8b_eagle3_mla.json").read_text())
    t = AutoConfig.from_pretrained(target)
    cfg.update(
        hidden_size=t.hidden_size,
        num_attention_heads=t.num_attention_heads,
        num_key_value_heads=t.num_attention_heads,
        intermediate_size=t.intermediate_size,
        rms_norm_eps=t.rms_norm_eps,
        vocab_size=t.vocab_size,
        max_position_embeddings=4096,
        q_lora_rank=32,
        kv_lora_rank=32,
        qk_nope_head_dim=16,
        qk_rope_head_dim=8,
        v_head_dim=16,
        rope_theta=t.rope_theta,
        bos_token_id=t.bos_token_id,
        eos_token_id=t.eos_token_id,
    )
    cfg["rope_scaling"]["original_max_position_embeddings"] = 64
    cfg["rope_scaling"]["factor"] = 64.0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cfg, indent=2) + "\n")
    return cfg


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--skip-smollm2", action="store_true", help="tiny cases only")
    args = ap.parse_args()
    out = Path(args.out).resolve()
    src = Path(source()["src"])
    if WORK.exists():
        shutil.rmtree(WORK)
    WORK.mkdir(parents=True)
    keep = {".gitignore"}
    if out.exists():
        for child in out.iterdir():
            if child.name not in keep:
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    out.mkdir(parents=True, exist_ok=True)

    import transformers

    dataset = WORK / "data" / "sample_conversations.jsonl"
    dataset.parent.mkdir(parents=True)
    shutil.copyfile(src / "examples" / "data" / "sample_conversations.jsonl", dataset)

    tiny_target = make_target("tiny-llama-8l", TINY, dataset, seed=0, tok_vocab=512)
    cases = []
    common = dict(hidden_size=64, vocab_size=512, target_num_hidden_layers=8)

    # -- tiny Llama EAGLE-3: one training run, three exports -------------------------------------
    dcfg = WORK / "tiny" / "draft_config.json"
    draft_config_llama(dcfg, tiny_target)
    run_root = WORK / "tiny" / "run"
    iter_dir = train_run(run_root, tiny_target, dcfg, dataset)
    shutil.copytree(run_root, out / "train-run", symlinks=True)
    cases.append(
        dict(
            dir="train-run",
            servable=False,  # a training run, not a drafter an engine loads (tests/test_producer_convert.py)
            algorithm="eagle3",
            draft_vocab_size=512,
            **common,
            how="torchspec.training.checkpoint.save(actor, step=0) after load_config(save_snapshot=True), "
            "Eagle3Model + apply_fsdp2(REPLICATE, CPU mesh) + BF16Optimizer (one CPU process, gloo)",
            notes="A TorchSpec training run root, not a servable drafter: config.yaml (resolved "
            "OmegaConf snapshot, absolute paths under the scratch dir), checkpoints/"
            "latest_checkpointed_iteration.txt, checkpoints/iter_0000001/{model,optimizer,"
            "lr_scheduler}/ (torch.distributed.checkpoint: .metadata + __0_0.distcp; model keys "
            "'model_state.model.draft_model.*'), rng.pt, meta.json. No config.json anywhere: "
            "convert_to_hf.py needs --config or --target-model-path. Gradients for the one step are "
            "fixed pseudo-random tensors; meta.json's timestamp is a fixed clock; the DCP .metadata "
            "save_id uuids are seeded.",
        )
    )
    h = convert(src, iter_dir, out / "eagle3", dcfg, tiny_target, [])
    cases.append(
        dict(
            dir="eagle3",
            algorithm="eagle3",
            draft_vocab_size=512,
            **common,
            how=h,
            notes="Default export (native keys for SGLang: midlayer.*). Full vocabulary "
            "(draft_vocab_size == vocab_size): no d2t/t2d; embed_tokens.weight included (loaded "
            "from --target-model-path). Config is the draft config TorchSpec generated from the "
            "target (generate_draft_model_config) + _torchspec_version + torch_dtype; no "
            "eagle_aux_hidden_state_layer_ids (TorchSpec keeps them out of the draft config).",
        )
    )
    h = convert(src, iter_dir, out / "eagle3-vllm", dcfg, tiny_target, ["--vllm"])
    cases.append(
        dict(
            dir="eagle3-vllm",
            algorithm="eagle3",
            draft_vocab_size=512,
            **common,
            how=h,
            notes="--vllm: midlayer.* renamed to layers.0.*; otherwise as eagle3.",
        )
    )
    prune = [
        "--prune-vocab",
        "--draft-vocab-size",
        "128",
        "--dataset-path",
        str(dataset),
        "--tokenizer",
        str(tiny_target),
        "--chat-template",
        "llama3",
        "--prompt-key",
        "conversations",
        "--max-seq-length",
        "2048",
        "--cache-dir",
        str(WORK / "cache"),
    ]
    h = convert(src, iter_dir, out / "eagle3-prune-vocab", dcfg, tiny_target, prune)
    cases.append(
        dict(
            dir="eagle3-prune-vocab",
            algorithm="eagle3",
            draft_vocab_size=128,
            **common,
            how=h,
            notes="--prune-vocab after full-vocab training: d2t (int64 offsets target_id - i over "
            "the used ids sorted ascending) and t2d (bool) are added, and lm_head is cut with "
            "lm_head[d2t] -- i.e. indexed by the OFFSETS, not by the target ids d2t[i] + i, so the "
            "rows kept are not the rows of the kept tokens (except where the offset happens to "
            "equal the id). config.json: draft_vocab_size 128.",
        )
    )

    # -- tiny MLA drafter (Eagle3DeepseekV2ForCausalLM) ------------------------------------------
    mcfg = WORK / "mla" / "draft_config.json"
    draft_config_mla(mcfg, src, tiny_target)
    mla_iter = train_run(WORK / "mla" / "run", tiny_target, mcfg, dataset)
    h = convert(src, mla_iter, out / "mla-eagle3", mcfg, tiny_target, [])
    cases.append(
        dict(
            dir="mla-eagle3",
            algorithm="eagle3",
            draft_vocab_size=512,
            **common,
            how=h,
            notes="MLA drafter (architectures Eagle3DeepseekV2ForCausalLM, model_type deepseek_v3; "
            "TorchSpec's MLA template with tiny LoRA ranks/head dims: q_lora_rank 32, kv_lora_rank "
            "32, qk_nope 16, qk_rope 8, v_head 16, yarn rope_scaling kept from the template). "
            "Keys midlayer.self_attn.{q_a_proj,q_a_layernorm,q_b_proj,kv_a_proj_with_mqa,"
            "kv_a_layernorm,kv_b_proj,o_proj}. Native keys; full vocab; embed_tokens included.",
        )
    )

    # -- SmolLM2-135M dimensions -------------------------------------------------------------------
    if not args.skip_smollm2:
        smol_target = make_target("smollm2-135m-dims-30l", SMOLLM2, dataset, seed=0, tok_vocab=4096)
        scfg = WORK / "smollm2" / "draft_config.json"
        draft_config_llama(scfg, smol_target)
        s_iter = train_run(WORK / "smollm2" / "run", smol_target, scfg, dataset)
        sprune = [
            "--vllm",
            "--dtype",
            "bfloat16",
            "--prune-vocab",
            "--draft-vocab-size",
            "2048",
            "--dataset-path",
            str(dataset),
            "--tokenizer",
            str(smol_target),
            "--chat-template",
            "llama3",
            "--prompt-key",
            "conversations",
            "--max-seq-length",
            "2048",
            "--cache-dir",
            str(WORK / "cache"),
        ]
        name = "smollm2-eagle3-vllm-prune-vocab"
        h = convert(src, s_iter, out / name, scfg, smol_target, sprune)
        cases.append(
            dict(
                dir=name,
                algorithm="eagle3",
                hidden_size=576,
                draft_vocab_size=2048,
                vocab_size=49152,
                target_num_hidden_layers=30,
                how=h,
                committed=False,
                notes="SmolLM2-135M dimensions, bf16, --vllm keys, --prune-vocab to 2048 (d2t/t2d from "
                "TorchSpec's sample conversations through a 4096-token BPE tokenizer, ids < 49152). "
                "TorchSpec's exporter always writes embed_tokens.weight (49152x576 bf16 = 56.6 MB), so "
                "this case is ~69 MB and is NOT committed (fixtures/producers/torchspec/.gitignore); "
                "regenerate with scripts/make_producer_fixtures.sh torchspec. Random weights; the "
                "lm_head rows are cut with the same offset-indexing as eagle3-prune-vocab.",
            )
        )

    s = source()
    manifest = {
        "producer": "torchspec",
        "producer_version": s["commit"],
        "producer_version_txt": s["version_txt"],
        "producer_repository": "github.com/lightseekorg/TorchSpec",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "notes": "Made by scripts/producer_fixtures/torchspec/make.py (substitutions listed in its "
        "docstring: synthetic gradients, no-op torch.cuda.synchronize, fixed meta.json clock, "
        "seeded DCP save_id). "
        "Every exported model.safetensors carries header metadata {'torchspec_version': "
        "<version.txt>} and config.json gets '_torchspec_version' and 'torch_dtype'. TorchSpec "
        "at this commit has no EAGLE-3.1 (fc_norm) drafter and no norm_output option, so no such "
        "case exists. A model trained with draft_vocab_size < vocab_size cannot be exported by "
        "convert_to_hf.py at this commit (without --prune-vocab it demands --prune-vocab; with it, "
        "it refuses an lm_head already at draft size), so every pruned case is post-training "
        "pruning of a full-vocab run.",
        "cases": cases,
    }
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n")
    log("wrote", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
