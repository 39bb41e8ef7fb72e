"""Write fixtures/producers/specforge/ with SpecForge 0.2.0's own code (run with its venv's python).

What a SpecForge user does is `specforge train --config run.yaml` (an output_dir holding
`{run_id}-step{N}/training_state.pt` and a `{run_id}-latest` link) and then
`specforge export --to sglang|hf --checkpoint ... --draft-config ... --output-dir ...`.
Training itself needs SGLang and a GPU, so this script runs SpecForge's training code up to the
checkpoint: its Config schema, draft-config generation (resolve_draft_config), vocab mapping
(generate_vocab_mapping_file), build_eagle3_draft / build_eagle3_model, Eagle3TrainStrategy,
FSDPTrainingBackend (unwrapped: one CPU process), BF16Optimizer, TrainerCore and
TrainerController.save_checkpoint with its CheckpointManager. The only substitution: the one
optimizer step runs on fixed pseudo-random gradients instead of gradients from a forward pass
over captured target features (training.learning_rate 2e-2, so that one bf16 step moves every
weight off its init). Export then runs the real `specforge export` console script.

Targets are random transformers Llama models written under .work/ (never committed); they stand
in for a hub model (no downloads here) and supply the config and the frozen embedding.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the scripts' shared common.py
from common import SMOLLM2, TINY

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
WORK = REPO / ".work" / "producers" / "specforge" / "work"
BIN = Path(sys.executable).parent


def log(*a):
    print("[specforge-fixtures]", *a, flush=True)


def make_target(name: str, dims: dict, seed: int) -> Path:
    """A random Llama target (config + weights) standing in for a hub model."""
    from transformers import LlamaConfig, LlamaForCausalLM

    out = WORK / "targets" / name
    if (out / "config.json").exists():
        return out
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        **{k: v for k, v in dims.items() if k not in ("rope_theta", "special_ids")},
        rope_parameters={"rope_type": "default", "rope_theta": dims["rope_theta"]},
        tie_word_embeddings=False,
        **{"bos_token_id": 1, "eos_token_id": 2, **dims.get("special_ids", {})},
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    # Sharded with an index, like hub checkpoints: SpecForge's TargetHead reads the index.
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    model.save_pretrained(out, max_shard_size=f"{size // 2 // 1000 + 1}KB")
    return out


def token_dataset(vocab: int, n_tokens: int, seed: int) -> dict:
    """Deterministic Zipf-like token stream over a shuffled vocabulary (the "training data")."""
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(vocab, generator=g)
    ranks = torch.arange(1, vocab + 1, dtype=torch.float64)
    probs = 1.0 / ranks
    idx = torch.multinomial(probs / probs.sum(), n_tokens, replacement=True, generator=g)
    ids = perm[idx]
    rows = ids.view(-1, 256)
    return {"input_ids": list(rows), "loss_mask": [torch.ones_like(r) for r in rows]}


def vocab_mapping(name: str, vocab: int, draft_vocab: int, seed: int) -> Path:
    from specforge.data.preprocessing import generate_vocab_mapping_file

    ds = token_dataset(vocab, 256 * max(64, draft_vocab // 8), seed)
    path = generate_vocab_mapping_file(
        ds,
        target_vocab_size=vocab,
        draft_vocab_size=draft_vocab,
        cache_dir=str(WORK / "vocab_mapping"),
        cache_key=name,
    )
    return Path(path)


def run_config(*, target: Path, draft_config: Path, mapping: Path, output_dir: Path, run_id: str):
    from specforge.config.schema import Config

    return Config.model_validate(
        {
            "model": {
                "target_model_path": str(target),
                "draft_model_config": str(draft_config),
                "vocab_mapping_path": str(mapping),
                "torch_dtype": "bfloat16",
            },
            # offline mode (precomputed target features): the colocated topology SpecForge
            # accepts without an SGLang capture server.
            "data": {"hidden_states_path": str(WORK / "features-unused")},
            # learning_rate: large enough that the one bf16 step moves every weight (an Adam step
            # of 1e-4 rounds away against bf16's 2^-7 spacing near 1.0, leaving norms at exactly 1).
            "training": {"seed": 0, "attention_backend": "sdpa", "learning_rate": 2e-2},
            "run_id": run_id,
            "output_dir": str(output_dir),
        }
    )


def write_draft_config(path: Path, *, target: Path, draft_vocab: int, aux_ids, extra: dict) -> dict:
    """The draft config JSON a user passes as model.draft_model_config and to export.

    Starts from what SpecForge generates from the target (resolve_draft_config with no
    draft_model_config), then sets what a user edits: draft_vocab_size, the EAGLE capture layers
    (eagle_config.eagle_aux_hidden_state_layer_ids, which SpecForge reads in
    resolve_eagle_capture_layers), and the head options (norm_output, fc_norm).
    """
    from specforge.algorithms.eagle3.providers import algorithm_providers
    from specforge.training.model_loading import resolve_draft_config

    probe = run_config(target=target, draft_config=Path(""), mapping=Path(""), output_dir=WORK, run_id="probe")
    probe.model.draft_model_config = None
    generated = resolve_draft_config(probe, provider=algorithm_providers().model.draft_config)
    payload = generated.to_dict()
    payload.pop("transformers_version", None)
    payload["draft_vocab_size"] = draft_vocab
    payload["eagle_config"] = {
        "eagle_aux_hidden_state_layer_ids": list(aux_ids),
        "use_aux_hidden_state": True,
    }
    payload.update(extra)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    return payload


def train_checkpoint(cfg, steps=(1,)) -> Path:
    """Build the draft/training model with SpecForge's builders and save its checkpoint."""
    from specforge.algorithms.eagle3.providers import (
        algorithm_providers,
        resume_contract,
    )
    from specforge.algorithms.model_providers import (
        build_eagle3_draft,
        build_eagle3_model,
    )
    from specforge.modeling.target.target_utils import load_target_config
    from specforge.optimizer import BF16Optimizer
    from specforge.training.backend import FSDPTrainingBackend, ParallelConfig
    from specforge.training.checkpoint import CheckpointManager
    from specforge.training.controller import TrainerController, TrainerCore
    from specforge.training.model_loading import resolve_draft_config
    from specforge.training.strategies.base import Eagle3TrainStrategy

    torch.manual_seed(cfg.training.seed)
    provider = algorithm_providers().model.draft_config
    draft_config = resolve_draft_config(cfg, provider=provider)
    draft_model = build_eagle3_draft(cfg, draft_config)
    target_config = load_target_config(cfg.model.target_model_path)
    parts = build_eagle3_model(cfg, draft_model, draft_config, target_config, None)
    strategy = Eagle3TrainStrategy(parts.model, target_head=parts.target_head)
    backend = FSDPTrainingBackend(
        ParallelConfig(),
        optimizer_factory=lambda target: BF16Optimizer(
            target,
            lr=cfg.training.learning_rate,
            max_grad_norm=cfg.training.max_grad_norm,
            total_steps=100,
            warmup_ratio=0.0,
        ),
    )
    backend.prepare_model(parts.model, wrap=False, optimizer_target=draft_model)
    core = TrainerCore(strategy, backend)
    extra = {
        "dataset_size": 8,
        "batch_size": 1,
        "accumulation_steps": 1,
        "num_epochs": 1,
        "effective_total_steps": max(steps),
        "tp_size": 1,
        "sp_ulysses_size": 1,
        "sp_ring_size": 1,
        **resume_contract(cfg, draft_model, parts.model),
    }
    controller = TrainerController(
        core,
        run_id=cfg.run_id,
        output_dir=cfg.output_dir,
        checkpoint_manager=CheckpointManager(cfg.output_dir, cfg.run_id),
        checkpoint_extra=extra,
        max_steps=max(steps),
    )
    g = torch.Generator().manual_seed(1234)
    for step in range(1, max(steps) + 1):
        # Substitution: fixed pseudo-random gradients instead of a TTT forward/backward.
        for p in draft_model.parameters():
            if p.requires_grad:
                p.grad = (torch.randn(p.shape, generator=g) * 1e-2).to(p.dtype)
        backend.step()
        controller.global_step = step
        controller._epoch_batch = step
        controller._epoch_samples = step
        if step in steps:
            controller.save_checkpoint(step)
    return Path(cfg.output_dir)


def sh(cmd: list[str], cwd: Path) -> str:
    """Run a command; return it as a user would type it (paths relative to the repository)."""
    log("$", " ".join(cmd))
    env = dict(os.environ, PYTHONHASHSEED="0")
    subprocess.run(cmd, cwd=cwd, check=True, env=env)
    words = ["specforge" if c == str(BIN / "specforge") else c for c in cmd]
    return " ".join(os.path.relpath(c, REPO) if c.startswith(str(REPO)) else c for c in words)


def rel(p: Path, base: Path) -> str:
    return os.path.relpath(p, base)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = Path(args.out).resolve()
    if WORK.exists():
        shutil.rmtree(WORK)
    WORK.mkdir(parents=True)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)

    from importlib.metadata import version

    import specforge  # noqa: F401
    import transformers

    cases = []
    tiny_target = make_target("tiny-llama-8l", TINY, seed=0)
    smol_target = make_target("smollm2-135m-dims-30l", SMOLLM2, seed=0)
    tiny_map = vocab_mapping("tiny-512-128", 512, 128, seed=0)
    smol_map = vocab_mapping("smollm2-49152-2048", 49152, 2048, seed=0)
    # SpecForge's default capture layers for an 8-layer target: [1, n//2-1, n-4] (output-of-layer ids).
    tiny_aux = [1, 3, 4]
    smol_aux = [1, 30 // 2 - 1, 30 - 4]

    variants = [
        # dir, extra draft-config keys, notes
        (
            "eagle3-sglang",
            {},
            "norm_output absent from the draft config: SpecForge 0.2.0's LlamaForCausalLMEagle3 "
            "defaults it to True, which in 0.2.0 only means compute_logits applies self.norm before "
            "lm_head; the state fed back to the next TTT step is always the un-normed backbone "
            "output (OnlineEagle3Model), i.e. plain EAGLE-3 feedback.",
        ),
        (
            "eagle3-sglang-no-norm-output",
            {"norm_output": False},
            "norm_output=false: in 0.2.0 compute_logits feeds lm_head the UN-normed hidden state "
            "(feedback un-normed as always); vLLM/SGLang always norm before lm_head, so no engine "
            "serves this head as trained.",
        ),
        (
            "eagle3.1-sglang-fc-norm",
            {"fc_norm": True, "norm_output": True},
            "fc_norm=true (EAGLE-3.1): three RMSNorms over the three captured hidden-state chunks "
            "before fc, saved as fc_norm.0/1/2.weight; norm_output=true explicit, which in 0.2.0 "
            "(before SpecForge PR #879) still means EAGLE-3 pre-norm feedback + normed lm_head, not "
            "EAGLE-3.1 post-norm feedback.",
        ),
    ]
    for name, extra, notes in variants:
        dcfg = WORK / name / "draft_config.json"
        write_draft_config(dcfg, target=tiny_target, draft_vocab=128, aux_ids=tiny_aux, extra=extra)
        run_dir = WORK / name / "run"
        cfg = run_config(
            target=tiny_target,
            draft_config=dcfg,
            mapping=tiny_map,
            output_dir=run_dir,
            run_id="tiny",
        )
        train_checkpoint(cfg)
        case = out / name
        cmd = [
            str(BIN / "specforge"),
            "export",
            "--to",
            "sglang",
            "--checkpoint",
            str(run_dir),
            "--draft-config",
            str(dcfg),
            "--output-dir",
            str(case),
            "--vocab-mapping",
            str(tiny_map),
        ]
        how = sh(cmd, REPO)
        cases.append(
            dict(
                dir=name,
                how=how,
                algorithm="eagle3.1" if extra.get("fc_norm") else "eagle3",
                hidden_size=64,
                draft_vocab_size=128,
                vocab_size=512,
                target_num_hidden_layers=8,
                eagle_aux_hidden_state_layer_ids=tiny_aux,
                notes=notes + " Keys are SpecForge's own module names (midlayer.*, fc, norm, lm_head, "
                "t2d, d2t); embeddings dropped by the sglang exporter. d2t holds offsets "
                "(target_id - draft_index) over the used token ids sorted ascending; t2d is bool.",
            )
        )
        if name == "eagle3-sglang":
            # Same checkpoint, HF export: ships the target's embedding.
            hf = out / "eagle3-hf"
            how = sh(
                [
                    str(BIN / "specforge"),
                    "export",
                    "--to",
                    "hf",
                    "--checkpoint",
                    str(run_dir),
                    "--draft-config",
                    str(dcfg),
                    "--output-dir",
                    str(hf),
                    "--vocab-mapping",
                    str(tiny_map),
                    "--embedding-source",
                    str(tiny_target),
                ],
                REPO,
            )
            cases.append(
                dict(
                    dir="eagle3-hf",
                    how=how,
                    algorithm="eagle3",
                    hidden_size=64,
                    draft_vocab_size=128,
                    vocab_size=512,
                    target_num_hidden_layers=8,
                    eagle_aux_hidden_state_layer_ids=tiny_aux,
                    notes="The HF exporter (for reloading/finetuning) writes the full state dict "
                    "including embed_tokens.weight copied from --embedding-source; otherwise "
                    "identical to eagle3-sglang.",
                )
            )
            # The training run directory itself, as SpecForge's CheckpointManager lays it out.
            shutil.copytree(run_dir, out / "train-run", symlinks=True)
            cases.append(
                dict(
                    dir="train-run",
                    servable=False,  # a training run, not a drafter an engine loads (tests/test_producer_convert.py)
                    how="SpecForge TrainerController.save_checkpoint(1) -> CheckpointManager.save "
                    "(the code `specforge train` runs at training.save_interval), one CPU process",
                    algorithm="eagle3",
                    hidden_size=64,
                    draft_vocab_size=128,
                    vocab_size=512,
                    target_num_hidden_layers=8,
                    eagle_aux_hidden_state_layer_ids=tiny_aux,
                    notes="A training checkpoint, not a servable drafter: tiny-step1/"
                    "training_state.pt (torch pickle: draft_state_dict without the frozen "
                    "embedding, global_step, epoch, strategy='eagle3', run_id, world_size, "
                    "resume contract), tiny-step1/training_state_rank0.pt (optimizer + RNG), "
                    "and the symlink tiny-latest -> tiny-step1. No config.json: export needs "
                    "--draft-config. Gradients for the one optimizer step are fixed "
                    "pseudo-random tensors (no GPU/SGLang target capture here).",
                )
            )

    # SmolLM2-135M dimensions, bf16, draft vocab 2048, no embedding (sglang export drops it).
    name = "smollm2-eagle3-sglang"
    dcfg = WORK / name / "draft_config.json"
    write_draft_config(dcfg, target=smol_target, draft_vocab=2048, aux_ids=smol_aux, extra={})
    run_dir = WORK / name / "run"
    cfg = run_config(
        target=smol_target,
        draft_config=dcfg,
        mapping=smol_map,
        output_dir=run_dir,
        run_id="smollm2",
    )
    train_checkpoint(cfg)
    case = out / name
    how = sh(
        [
            str(BIN / "specforge"),
            "export",
            "--to",
            "sglang",
            "--checkpoint",
            str(run_dir),
            "--draft-config",
            str(dcfg),
            "--output-dir",
            str(case),
            "--vocab-mapping",
            str(smol_map),
        ],
        REPO,
    )
    cases.append(
        dict(
            dir=name,
            how=how,
            algorithm="eagle3",
            hidden_size=576,
            draft_vocab_size=2048,
            vocab_size=49152,
            target_num_hidden_layers=30,
            eagle_aux_hidden_state_layer_ids=smol_aux,
            notes="SmolLM2-135M dimensions (576/9 heads/3 kv/head_dim 64/1536, rope_theta 1e5, "
            "rms 1e-5, 8192 positions); random weights (not trained on SmolLM2), d2t/t2d from a "
            "synthetic token stream over ids < 49152; bf16; no embed_tokens. aux ids are "
            "SpecForge's default for a 30-layer target [1, n//2-1, n-4], output-of-layer "
            "convention (SGLang adds 1).",
        )
    )

    manifest = {
        "producer": "specforge",
        "producer_version": version("specforge"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "notes": "Made by scripts/producer_fixtures/specforge/make.py with SpecForge's own code "
        "(see that file's docstring for the one substitution: synthetic gradients for the "
        "single optimizer step; everything written to disk is written by SpecForge). Targets "
        "are random transformers LlamaForCausalLM models (not committed). Seeds fixed.",
        "cases": cases,
    }
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n")
    log("wrote", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
