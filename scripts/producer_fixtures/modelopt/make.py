"""Make EAGLE-3 drafters with nvidia-modelopt's own code and write them as test fixtures.

Run with the environment that setup.sh builds (nvidia-modelopt 0.47.0, CPU torch):

    .work/producers/modelopt/venv/bin/python scripts/producer_fixtures/modelopt/make.py \
        --out fixtures/producers/modelopt

Each case follows ModelOpt's own EAGLE-3 flow, step for step as its speculative-decoding example
runs it (examples/speculative_decoding in the ModelOpt repository; those scripts are not part of
the wheel, so their few calls into the library are made here):

1. draft vocabulary (pruned cases only): ``calibrate_frequent_vocab(tokenizer, conversations,
   draft_vocab_size)`` saved as ``draft_vocab_cache/<model>/d2t.pt`` (scripts/calibrate_draft_vocab.py);
2. ``main.py --config general/speculative_decoding/eagle3 --dry_run`` : ``load_recipe`` of the
   built-in EAGLE-3 recipe with dotlist overrides, ``load_vlm_or_llm(base, dtype="auto",
   device_map="cpu")``, ``mtsp.convert(model, [("eagle", recipe.eagle.model_dump())])``,
   ``HFEagleModel.load_draft_vocab_cache``, then ``model.save_pretrained`` +
   ``tokenizer.save_pretrained`` with ModelOpt's HF checkpointing enabled. The dry run is ModelOpt's
   documented plumbing test: the draft head is saved untrained (training needs its HF Trainer
   subclass and a GPU-oriented data pipeline; nothing of the exported format depends on it);
3. ``scripts/export_hf_checkpoint.py``: ``load_vlm_or_llm(ckpt, dtype="auto")`` (ModelOpt restores
   the EAGLE conversion from modelopt_state.pth) and ``export_speculative_decoding(model,
   export_dir=...)`` under ``torch.inference_mode()``.

The export directory is the case directory, copied byte for byte. Base (target) models are tiny
random ``LlamaForCausalLM`` checkpoints built here with a word-level tokenizer (no Hub downloads);
they and the intermediate ModelOpt checkpoints stay in the scratch directory DIR/work.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import os
import platform
import shutil
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the scripts' shared common.py
from common import TINY_SHORT, llama_fields, observed

SEED = 0
TINY = TINY_SHORT
SMOL = dict(hidden=576, heads=9, kv=3, head_dim=64, inter=1536, layers=30, vocab=49152, draft=2048)


def log(msg: str) -> None:
    print(f"[modelopt fixtures] {msg}", flush=True)


def make_tokenizer(vocab_size: int, out: Path) -> None:
    """A word-level tokenizer: ids 0-3 are <unk>, <s>, </s>, <|turn|>, id i >= 4 is the word
    "w{i}" (special tokens are never substrings of words); a plain chat template."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<unk>", "<s>", "</s>", "<|turn|>"]
    vocab = {t: i for i, t in enumerate(specials)}
    vocab.update({f"w{i}": i for i in range(len(specials), vocab_size)})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="</s>"
    )
    fast.add_special_tokens({"additional_special_tokens": ["<|turn|>"]})
    fast.chat_template = (
        "{% for m in messages %}<|turn|> {{ m['content'] }} </s> {% endfor %}"
        "{% if add_generation_prompt %}<|turn|> {% endif %}"
    )
    fast.save_pretrained(out)


def make_base(root: Path, name: str, dims: dict, dtype: torch.dtype, smollm2: bool = False) -> Path:
    """A random LlamaForCausalLM with ``dims`` saved in ``dtype`` plus a tokenizer."""
    from transformers import LlamaConfig, LlamaForCausalLM

    out = root / name
    if (out / "config.json").is_file() and (out / "tokenizer.json").is_file():
        return out
    torch.manual_seed(SEED)
    extra = (
        dict(
            rope_theta=100000.0,
            max_position_embeddings=8192,
            tie_word_embeddings=True,
            initializer_range=0.041666666666666664,
            pad_token_id=2,
        )
        if smollm2
        else dict(rope_theta=10000.0, max_position_embeddings=2048, tie_word_embeddings=False, pad_token_id=2)
    )
    cfg = LlamaConfig(
        **llama_fields(dims),
        rms_norm_eps=1e-5,
        bos_token_id=1,
        eos_token_id=2,
        hidden_act="silu",
        **extra,
    )
    model = LlamaForCausalLM(cfg).to(dtype).eval()
    model.save_pretrained(out)
    make_tokenizer(dims["vocab"], out)
    del model
    return out


def make_conversations(root: Path, name: str, vocab: int, n: int, seed: int) -> Path:
    """Chat data in the example's input format ({"conversations": [{"role", "content"}, ...]}),
    words drawn from a Zipf-like law over a shuffled vocabulary (the chat template adds the
    <|turn|> and </s> tokens, so those two are the most frequent)."""
    path = root / "data" / f"{name}.jsonl"
    if path.is_file():
        return path
    gen = torch.Generator().manual_seed(seed)
    probs = 1.0 / torch.arange(1, vocab - 4 + 1, dtype=torch.float64)
    perm = torch.randperm(vocab - 4, generator=gen) + 4  # words only (ids 0-3 are special)
    lines = []
    for _ in range(n):
        turns = []
        for role in ("user", "assistant"):
            k = int(torch.randint(40, 120, (1,), generator=gen))
            ids = perm[torch.multinomial(probs, k, replacement=True, generator=gen)]
            turns.append({"role": role, "content": " ".join(f"w{i}" for i in ids.tolist())})
        lines.append(json.dumps({"conversations": turns}))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def calibrate(root: Path, base: Path, data: Path, draft_vocab_size: int) -> Path:
    """scripts/calibrate_draft_vocab.py --model BASE --data DATA --draft_vocab_size N."""
    from modelopt.torch.speculative.utils import calibrate_frequent_vocab
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(base))
    with open(data) as f:
        conversations = [json.loads(line)["conversations"] for line in f]
        conversations = [item for sublist in conversations for item in sublist]
    d2t = calibrate_frequent_vocab(tokenizer, conversations, draft_vocab_size)
    path = root / "draft_vocab_cache" / base.name / "d2t.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(d2t, path)
    return path


def dry_run_convert(root: Path, base: Path, ckpt: Path, overrides: list[str]) -> dict:
    """main.py --config general/speculative_decoding/eagle3 --dry_run <overrides>."""
    import modelopt.torch.speculative as mtsp
    import transformers
    from modelopt.recipe import load_recipe
    from modelopt.torch.speculative.utils import load_vlm_or_llm

    torch.manual_seed(SEED)  # main.py seeds torch with 0 at import; here once per case
    recipe = load_recipe("general/speculative_decoding/eagle3", overrides=overrides)
    model = load_vlm_or_llm(
        recipe.model.model_name_or_path,
        use_fake_base=recipe.model.use_fake_base_for_offline,
        use_offline_training=recipe.data.mode != "online",
        dtype="auto",
        device_map="cpu",
        trust_remote_code=recipe.model.trust_remote_code,
    )
    tokenizer = transformers.AutoTokenizer.from_pretrained(
        recipe.model.model_name_or_path,
        model_max_length=recipe.training.training_seq_len,
        trust_remote_code=recipe.model.trust_remote_code,
    )
    eagle_cfg: dict = recipe.eagle.model_dump()
    mtsp.convert(model, [("eagle", eagle_cfg)])
    mtsp.plugins.HFEagleModel.load_draft_vocab_cache(model, recipe.data.draft_vocab_cache)
    if ckpt.exists():
        shutil.rmtree(ckpt)
    ckpt.mkdir(parents=True)
    model.save_pretrained(str(ckpt))
    tokenizer.save_pretrained(str(ckpt))
    info = {
        "base_dtype": str(next(model.parameters()).dtype).replace("torch.", ""),
        "eagle_module_dtype": str(model.eagle_module.fc.weight.dtype).replace("torch.", ""),
        "aux_layer_ids": list(model.eagle_config.eagle_aux_hidden_state_layer_ids),
    }
    del model
    return info


def export(ckpt: Path, export_dir: Path) -> None:
    """scripts/export_hf_checkpoint.py --model_path CKPT --export_path EXPORT_DIR."""
    from modelopt.torch.export import export_speculative_decoding
    from modelopt.torch.speculative.utils import load_vlm_or_llm

    model = load_vlm_or_llm(str(ckpt), dtype="auto", trust_remote_code=False)
    model.eval()
    if export_dir.exists():
        shutil.rmtree(export_dir)
    with torch.inference_mode():
        export_speculative_decoding(model, export_dir=str(export_dir))
    del model


def case_record(dst: Path, how: str, dims: dict, notes: str) -> dict:
    cfg = json.loads((dst / "config.json").read_text())
    size = sum(p.stat().st_size for p in dst.rglob("*") if p.is_file())
    return {
        "dir": dst.name,
        "how": how,
        "algorithm": "eagle3",
        "hidden_size": cfg.get("hidden_size", dims["hidden"]),
        "draft_vocab_size": cfg.get("draft_vocab_size", dims["draft"]),
        "vocab_size": cfg.get("vocab_size", dims["vocab"]),
        "bytes": size,
        "files": sorted(p.relative_to(dst).as_posix() for p in dst.rglob("*") if p.is_file()),
        "notes": notes + " " + observed(dst),
    }


def arch_overrides(dims: dict, draft_vocab: int | None, rope_theta: float | None) -> list[str]:
    prefix = "eagle.eagle_architecture_config."
    ov = [
        f"{prefix}num_attention_heads={dims['heads']}",
        f"{prefix}num_key_value_heads={dims['kv']}",
        f"{prefix}head_dim={dims['head_dim']}",
        f"{prefix}intermediate_size={dims['inter']}",
    ]
    if draft_vocab is not None:
        ov.append(f"{prefix}draft_vocab_size={draft_vocab}")
    if rope_theta is not None:
        ov += [
            f"{prefix}rope_theta={rope_theta}",
            f"{prefix}rope_scaling={{rope_type: default, rope_theta: {rope_theta}}}",
        ]
    return ov


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument(
        "--work",
        type=Path,
        default=Path(sys.prefix).resolve().parent / "work",
        help="scratch directory (default: DIR/work beside the venv)",
    )
    args = ap.parse_args()
    out = args.out.resolve()
    root = args.work.resolve()
    root.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    os.chdir(root)  # bases are named by relative path, as a user in their work directory would

    import modelopt.torch.opt as mto

    mto.enable_huggingface_checkpointing()  # main.py and export_hf_checkpoint.py do this at import

    base_bf16 = make_base(root, "tiny-llama-bf16", TINY, torch.bfloat16)
    base_fp32 = make_base(root, "tiny-llama-fp32", TINY, torch.float32)
    base_smol = make_base(root, "smollm2-135m-random-bf16", SMOL, torch.bfloat16, smollm2=True)
    tiny_data = make_conversations(root, "tiny-conversations", TINY["vocab"], 64, seed=1)
    smol_data = make_conversations(root, "smollm2-conversations", SMOL["vocab"], 600, seed=2)

    plans = [
        (
            "bf16-base",
            base_bf16,
            TINY,
            None,
            None,
            None,
            "tiny random LlamaForCausalLM base saved in bfloat16, full draft vocabulary "
            "(draft_vocab_size = vocab_size: no d2t; the export stores the base model's lm_head).",
        ),
        (
            "fp32-base",
            base_fp32,
            TINY,
            None,
            None,
            None,
            "as bf16-base with the base saved in float32: ModelOpt casts the EAGLE module to the base "
            "model's dtype, so the exported tensors are float32, while config.json's torch_dtype comes "
            "from the recipe's eagle_architecture_config default ('bfloat16').",
        ),
        (
            "pruned-vocab",
            base_bf16,
            TINY,
            TINY["draft"],
            tiny_data,
            None,
            "bf16 base, draft_vocab_size 128 from calibrate_frequent_vocab on 64 conversations: d2t "
            "is stored in frequency order (most frequent token first), not sorted by target id; no t2d.",
        ),
        (
            "smollm2-pruned",
            base_smol,
            SMOL,
            SMOL["draft"],
            smol_data,
            100000.0,
            "SmolLM2-135M-Instruct dimensions: random-weight base (30 layers, hidden 576, 9/3 heads, "
            "head_dim 64, MLP 1536, vocab 49152, tied embeddings, rope_theta 1e5, bf16) built here; "
            "draft vocab 2048 calibrated on 600 conversations (frequency-ordered d2t), drafter "
            "rope_theta set to the target's 1e5 (the recipe default is 1e4); no embed_tokens.",
        ),
    ]
    cases = []
    for name, base, dims, draft, data, rope_theta, notes in plans:
        log(f"case {name}")
        steps = []
        overrides = [f"model.model_name_or_path={base.name}", f"training.output_dir=ckpt/{name}"]
        if draft is not None:
            d2t_path = calibrate(root, base, data, draft)
            rel = d2t_path.relative_to(root).as_posix()
            overrides.append(f"data.draft_vocab_cache={rel}")
            steps.append(
                f"calibrate_draft_vocab.py --model {base.name} --data {data.relative_to(root).as_posix()} "
                f"--draft_vocab_size {draft}  [= torch.save(calibrate_frequent_vocab(AutoTokenizer"
                f".from_pretrained('{base.name}'), conversations, {draft}), '{rel}')]"
            )
        overrides += arch_overrides(dims, draft, rope_theta)
        ckpt = root / "ckpt" / name
        info = dry_run_convert(root, base, ckpt, overrides)
        steps.append(
            "main.py --config general/speculative_decoding/eagle3 --dry_run "
            + " ".join(overrides)
            + "  [= load_recipe(...); model = load_vlm_or_llm(base, dtype='auto', device_map='cpu'); "
            "mtsp.convert(model, [('eagle', recipe.eagle.model_dump())]); "
            "HFEagleModel.load_draft_vocab_cache(model, recipe.data.draft_vocab_cache); "
            "model.save_pretrained(output_dir); tokenizer.save_pretrained(output_dir)]"
        )
        export_dir = root / "export" / name
        export(ckpt, export_dir)
        steps.append(
            f"export_hf_checkpoint.py --model_path ckpt/{name} --export_path export/{name}  "
            "[= export_speculative_decoding(load_vlm_or_llm(model_path, dtype='auto'), export_dir=...)]"
        )
        dst = out / name
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(export_dir, dst)
        note = (
            notes + f" Base dtype {info['base_dtype']}, EAGLE module dtype {info['eagle_module_dtype']}, "
            f"aux layer ids {info['aux_layer_ids']} (ModelOpt's default_eagle_aux_layer_ids, hooked on "
            "the outputs of those 0-based base layers). Draft head untrained (main.py --dry_run)."
        )
        cases.append(case_record(dst, " && ".join(steps), dims, note))

    import transformers

    manifest = {
        "producer": "nvidia-modelopt",
        "producer_version": md.version("nvidia-modelopt"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "seed": SEED,
        "made_by": "scripts/producer_fixtures/modelopt/make.py (environment: setup.sh)",
        "cases": cases,
    }
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n")
    log(f"wrote {len(cases)} cases to {out}")


if __name__ == "__main__":
    main()
