"""Make EAGLE-3 drafters with speculators' own code and write them as test fixtures.

Run with the environment that setup.sh builds (speculators 0.9.0, CPU torch):

    .work/producers/speculators/venv/bin/python scripts/producer_fixtures/speculators/make.py \
        --out fixtures/producers/speculators

Every case directory under --out is speculators' output exactly as written (copied byte for byte
from the scratch area, nothing added or edited); MANIFEST.json beside them says how each was made.
The inputs (a tiny random Llama target with a word-level tokenizer, research-layout EAGLE-3
checkpoints, training data) are made here, deterministically, under a scratch directory next to
the venv (DIR/work) and are not part of the fixtures.

Paths: commands run with the scratch directory as working directory and name the target by a
relative path (``tiny-llama-target``) or, for the SmolLM2-sized case, by its Hub id
``HuggingFaceTB/SmolLM2-135M-Instruct`` resolved from a local Hugging Face cache that holds only
its config.json (HF_HUB_OFFLINE=1), so the configs speculators writes carry those names rather
than a path on this machine.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata as md
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the scripts' shared common.py
from common import TINY_SHORT, llama_fields, observed

SEED = 0
HERE = Path(__file__).resolve().parent
SMOLLM2_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"

# Tiny dimensions (most cases).
TINY = TINY_SHORT
# SmolLM2-135M-Instruct's dimensions (its published config.json).
SMOLLM2_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "hidden_act": "silu",
    "hidden_size": 576,
    "initializer_range": 0.041666666666666664,
    "intermediate_size": 1536,
    "is_llama_config": True,
    "max_position_embeddings": 8192,
    "mlp_bias": False,
    "model_type": "llama",
    "num_attention_heads": 9,
    "num_hidden_layers": 30,
    "num_key_value_heads": 3,
    "pad_token_id": 2,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_interleaved": False,
    "rope_scaling": None,
    "rope_theta": 100000,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.42.3",
    "use_cache": True,
    "vocab_size": 49152,
}
SMOL_DRAFT = 2048

# `speculators train` moves the model and every batch to `self.local_rank` (device index 0), which
# is an accelerator, and its step timer calls torch.accelerator.synchronize(); on a CPU-only machine
# both raise "Cannot access accelerator device when none is available". The trainer is otherwise
# device-agnostic, so the real CLI entry point is run with that index pointed at the CPU and the
# synchronize made a no-op (there is nothing to synchronise on a CPU). Third: the trainer's
# provenance record (train_command.txt's "Git SHA", speculators.patch) comes from the nearest
# directory holding .git above speculators' installed files; this venv lives inside eaglehub's own
# checkout, so speculators would record eaglehub's HEAD and `git diff HEAD` (other people's
# uncommitted work) as its own. The lookup is made to find no repository, which is what a
# speculators installed from the package index outside a git checkout writes ("Git SHA: unknown",
# no speculators.patch). Nothing else is changed.
TRAIN_SHIM = (
    "import sys, torch; import speculators.train.trainer as _t; _t.get_local_rank = lambda: 'cpu'; "
    "torch.accelerator.synchronize = lambda *a, **k: None; "
    "import speculators.train.utils as _u; _u.find_repo_root = lambda start: None; "
    "from speculators.__main__ import app; sys.argv[0] = 'speculators'; app()"
)


def log(msg: str) -> None:
    print(f"[speculators fixtures] {msg}", flush=True)


def run(cmd: list[str], cwd: Path, env: dict | None = None) -> None:
    log("$ " + " ".join(cmd))
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run(cmd, cwd=cwd, env=full_env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-6000:] + "\n" + proc.stderr[-12000:] + "\n")
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}")
    return proc


def shell_join(args: list[str]) -> str:
    import shlex

    return " ".join(shlex.quote(a) for a in args)


# ----------------------------------------------------------------------------- inputs


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


def make_tiny_target(root: Path) -> Path:
    """tiny-llama-target: random LlamaForCausalLM (8 layers, hidden 64) + tokenizer."""
    from transformers import LlamaConfig, LlamaForCausalLM

    out = root / "tiny-llama-target"
    if (out / "model.safetensors").is_file():
        return out
    torch.manual_seed(SEED)
    cfg = LlamaConfig(
        **llama_fields(TINY),
        max_position_embeddings=2048,
        rms_norm_eps=1e-5,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(cfg).to(torch.float32).eval()
    model.save_pretrained(out)
    make_tokenizer(TINY["vocab"], out)
    return out


def make_smollm2_hub_cache(root: Path) -> Path:
    """A Hugging Face cache holding only SmolLM2-135M-Instruct's config.json (no weights)."""
    hf_home = root / "hf-home"
    repo = hf_home / "hub" / ("models--" + SMOLLM2_ID.replace("/", "--"))
    commit = hashlib.sha1(b"eaglehub-smollm2-config").hexdigest()
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True, exist_ok=True)
    (snap / "config.json").write_text(json.dumps(SMOLLM2_CONFIG, indent=2) + "\n")
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    return hf_home


def vocab_maps(vocab: int, draft: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """d2t offsets and t2d mask for a draft vocabulary of sorted random ids (< vocab)."""
    ids = torch.randperm(vocab, generator=gen)[:draft].sort().values
    d2t = ids - torch.arange(draft)
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[ids] = True
    return d2t.to(torch.int64), t2d


def make_research_checkpoint(
    out: Path,
    *,
    hidden: int,
    heads: int,
    kv: int,
    head_dim: int,
    inter: int,
    vocab: int,
    draft: int,
    rope_theta: float,
    max_pos: int,
    rms_eps: float,
    dtype: torch.dtype,
    embed: bool = False,
    eagle31: bool = False,
    seed: int = SEED,
) -> dict:
    """A research-layout EAGLE-3 checkpoint as the EAGLE repository (and vLLM's native loader)
    stores it: config.json with LlamaForCausalLMEagle3, one ``midlayer``, ``fc`` (3H -> H),
    ``norm``, ``lm_head`` over the draft vocabulary, ``d2t`` offsets and ``t2d`` mask; no
    ``embed_tokens`` unless ``embed`` (the target's are shared). ``eagle31`` adds the EAGLE-3.1
    config flags and per-aux ``fc_norm.{i}.weight`` gains."""
    from safetensors.torch import save_file

    gen = torch.Generator().manual_seed(seed)

    def w(*shape, std=0.02):
        return (torch.randn(*shape, generator=gen) * std).to(dtype)

    def gain(n):
        return (1.0 + 0.05 * torch.randn(n, generator=gen)).to(dtype)

    q, k = heads * head_dim, kv * head_dim
    sd = {
        "fc.weight": w(hidden, 3 * hidden),
        "midlayer.input_layernorm.weight": gain(hidden),
        "midlayer.hidden_norm.weight": gain(hidden),
        "midlayer.post_attention_layernorm.weight": gain(hidden),
        "midlayer.self_attn.q_proj.weight": w(q, 2 * hidden),
        "midlayer.self_attn.k_proj.weight": w(k, 2 * hidden),
        "midlayer.self_attn.v_proj.weight": w(k, 2 * hidden),
        "midlayer.self_attn.o_proj.weight": w(hidden, q),
        "midlayer.mlp.gate_proj.weight": w(inter, hidden),
        "midlayer.mlp.up_proj.weight": w(inter, hidden),
        "midlayer.mlp.down_proj.weight": w(hidden, inter),
        "norm.weight": gain(hidden),
        "lm_head.weight": w(draft, hidden),
    }
    d2t, t2d = vocab_maps(vocab, draft, gen)
    sd["d2t"], sd["t2d"] = d2t, t2d
    if embed:
        sd["embed_tokens.weight"] = w(vocab, hidden)
    if eagle31:
        for i in range(3):
            sd[f"fc_norm.{i}.weight"] = gain(hidden)
    cfg = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "bos_token_id": 1,
        "eos_token_id": 2,
        "hidden_act": "silu",
        "hidden_size": hidden,
        "head_dim": head_dim,
        "initializer_range": 0.02,
        "intermediate_size": inter,
        "max_position_embeddings": max_pos,
        "model_type": "llama",
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "num_hidden_layers": 1,
        "pad_token_id": 0,
        "rms_norm_eps": rms_eps,
        "rope_theta": rope_theta,
        "tie_word_embeddings": False,
        "torch_dtype": str(dtype).replace("torch.", ""),
        "transformers_version": "4.51.0",
        "use_cache": True,
        "vocab_size": vocab,
        "draft_vocab_size": draft,
    }
    if eagle31:
        cfg["fc_norm"] = True
        cfg["norm_output"] = True
    out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in sd.items()}, str(out / "model.safetensors"))
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return cfg


def make_training_data(root: Path, target: Path, n: int = 24) -> Path:
    """Pre-tokenized rows for `speculators prepare-data`, then the verifier's hidden states.

    speculators' own hidden-state generation (`speculators generate-offline-data`) needs a vLLM
    server; here the same files (``hidden_states/hs_{i}.safetensors`` with ``hidden_states``
    [seq, 3 aux + last, H] and ``token_ids``) are written from the target with transformers
    (output_hidden_states: entry i is the input of decoder layer i, the last is the final layer's
    output), for the target layers speculators uses by default ([2, n//2, n-3] = [2, 4, 5]).
    """
    from datasets import load_from_disk
    from safetensors.torch import save_file
    from transformers import LlamaForCausalLM

    data = root / "data" / "tiny"
    if (data / "hidden_states" / f"hs_{n - 1}.safetensors").is_file():
        return data
    gen = torch.Generator().manual_seed(SEED)
    # Zipf-like token distribution so the frequency-built draft vocabulary is not trivial.
    probs = 1.0 / torch.arange(1, TINY["vocab"] + 1, dtype=torch.float64)
    perm = torch.randperm(TINY["vocab"], generator=gen)
    rows = []
    for _ in range(n):
        length = int(torch.randint(24, 48, (1,), generator=gen))
        ids = perm[torch.multinomial(probs, length, replacement=True, generator=gen)]
        prompt = int(torch.randint(4, 10, (1,), generator=gen))
        rows.append({"input_ids": ids.tolist(), "loss_mask": [0] * prompt + [1] * (length - prompt)})
    raw = root / "data" / "tiny-rows.jsonl"
    raw.parent.mkdir(parents=True, exist_ok=True)
    raw.write_text("".join(json.dumps(r) + "\n" for r in rows))
    if data.exists():
        shutil.rmtree(data)
    run(
        [
            str(Path(sys.executable).parent / "speculators"),
            "prepare-data",
            "--model",
            "tiny-llama-target",
            "--data",
            "data/tiny-rows.jsonl",
            "--output",
            "data/tiny",
            "--seq-length",
            "64",
            "--num-preprocessing-workers",
            "1",
            "--no-skip-token-freq",
            "--seed",
            str(SEED),
        ],
        cwd=root,
    )
    ds = load_from_disk(str(data))
    model = LlamaForCausalLM.from_pretrained(target, dtype=torch.float32).eval()
    layers = [2, TINY["layers"] // 2, TINY["layers"] - 3]
    hs_dir = data / "hidden_states"
    hs_dir.mkdir(exist_ok=True)
    with torch.no_grad():
        for i in range(len(ds)):
            ids = torch.as_tensor(ds[i]["input_ids"]).long()
            out = model(ids[None], output_hidden_states=True)
            hs = torch.stack([out.hidden_states[j][0] for j in layers] + [out.hidden_states[-1][0]], 1)
            save_file(
                {"hidden_states": hs.to(torch.bfloat16).contiguous(), "token_ids": ids.contiguous()},
                str(hs_dir / f"hs_{i}.safetensors"),
            )
    return data


# ----------------------------------------------------------------------------- cases


def copy_case(src: Path, out: Path, name: str) -> Path:
    dst = out / name
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, symlinks=True)
    return dst


def convert_cases(root: Path, out: Path, cases: list) -> None:
    spec = str(Path(sys.executable).parent / "speculators")
    tiny = dict(
        hidden=TINY["hidden"],
        heads=TINY["heads"],
        kv=TINY["kv"],
        head_dim=TINY["head_dim"],
        inter=TINY["inter"],
        vocab=TINY["vocab"],
        draft=TINY["draft"],
        rope_theta=10000.0,
        max_pos=2048,
        rms_eps=1e-5,
        dtype=torch.bfloat16,
    )
    research = root / "research"
    make_research_checkpoint(research / "tiny-eagle3", **tiny)
    make_research_checkpoint(research / "tiny-eagle3-embed", embed=True, seed=1, **tiny)
    make_research_checkpoint(research / "tiny-eagle31", eagle31=True, seed=2, **tiny)
    make_research_checkpoint(
        research / "smollm2-eagle3",
        hidden=576,
        heads=9,
        kv=3,
        head_dim=64,
        inter=1536,
        vocab=49152,
        draft=SMOL_DRAFT,
        rope_theta=100000.0,
        max_pos=8192,
        rms_eps=1e-5,
        dtype=torch.bfloat16,
        seed=3,
    )
    hf_home = make_smollm2_hub_cache(root)

    plans = [
        (
            "convert-eagle3",
            "research/tiny-eagle3",
            "tiny-llama-target",
            None,
            "eagle3",
            TINY,
            "speculators convert of a research-layout EAGLE-3 checkpoint (no embed_tokens), default flags.",
        ),
        (
            "convert-eagle3-embed",
            "research/tiny-eagle3-embed",
            "tiny-llama-target",
            None,
            "eagle3",
            TINY,
            "as convert-eagle3, but the research checkpoint also stores embed_tokens.weight.",
        ),
        (
            "convert-eagle3.1-flags",
            "research/tiny-eagle3",
            "tiny-llama-target",
            {"fc_norm": True, "norm_output": True},
            "eagle3.1",
            TINY,
            "EAGLE-3.1 flags passed to convert on a plain EAGLE-3 research checkpoint (no fc_norm weights).",
        ),
        (
            "convert-eagle3.1-research",
            "research/tiny-eagle31",
            "tiny-llama-target",
            None,
            "eagle3.1",
            TINY,
            "research checkpoint whose config has fc_norm/norm_output true and stores fc_norm.{0,1,2}.weight; "
            "converted without flags (convert reads fc_norm/norm_output from the research config).",
        ),
        (
            "convert-smollm2-eagle3",
            "research/smollm2-eagle3",
            SMOLLM2_ID,
            None,
            "eagle3",
            dict(hidden=576, vocab=49152, draft=SMOL_DRAFT),
            "SmolLM2-135M-Instruct dimensions (hidden 576, 9/3 heads, head_dim 64, MLP 1536, vocab 49152, "
            "draft vocab 2048, rope_theta 1e5, bf16, no embed_tokens); the verifier is named by its Hub id, "
            "resolved offline from a cache holding only its config.json.",
        ),
    ]
    for name, src, verifier, kwargs, algo, dims, notes in plans:
        args = ["convert", src, "--algorithm", "eagle3", "--verifier", verifier, "--output-path", f"out/{name}"]
        if kwargs:
            args += ["--algorithm-kwargs", json.dumps(kwargs, separators=(",", ":"))]
        if (root / "out" / name).exists():
            shutil.rmtree(root / "out" / name)
        proc = run(
            [spec] + args, cwd=root, env={"HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        )
        warn = [
            l.strip()
            for l in (proc.stdout + proc.stderr).splitlines()
            if "WARNING" in l and ("Missing keys" in l or "Unexpected keys" in l)
        ]
        dst = copy_case(root / "out" / name, out, name)
        extra = (" speculators logged: " + " | ".join(w.split("|")[-1].strip() for w in warn)) if warn else ""
        cases.append(
            case_record(
                dst,
                "speculators " + shell_join(args),
                algo,
                dims,
                notes + " Input made by make.py (make_research_checkpoint)." + extra,
            )
        )


def train_cases(root: Path, out: Path, cases: list) -> None:
    target = make_tiny_target(root)
    make_training_data(root, target)
    common = [
        "--verifier-name-or-path",
        "tiny-llama-target",
        "--data-path",
        "data/tiny",
        "--draft-vocab-size",
        str(TINY["draft"]),
        "--total-seq-len",
        "128",
        "--num-workers",
        "0",
        "--draft-attn-impl",
        "sdpa",
        "--loss-implementation",
        "eager",
        "--hidden-states-dtype",
        "float32",
        "--epochs",
        "1",
        "--max-steps",
        "2",
        "--log-dir",
        "logs",
        "--seed",
        str(SEED),
        "--on-missing",
        "raise",
    ]
    plans = [
        (
            "train-eagle3-defaults",
            [],
            "eagle3.1",
            "speculators train with its eagle3 defaults (norm_before_fc and norm_output default to true "
            "for eagle3; fc_norm false), 2 optimizer steps.",
        ),
        (
            "train-eagle3.1-fc-norm",
            ["--fc-norm", "--no-norm-before-fc"],
            "eagle3.1",
            "speculators train with per-aux fc_norm (EAGLE-3.1) instead of norm_before_fc; norm_output default true.",
        ),
        (
            "train-eagle3-plain",
            ["--no-norm-before-fc", "--no-norm-output"],
            "eagle3",
            "speculators train with both EAGLE-3.1-era defaults switched off (plain EAGLE-3).",
        ),
        (
            "train-qwen3-layer",
            ["--draft-arch", "qwen3"],
            "eagle3.1",
            "speculators train with --draft-arch qwen3 (transformer_layer_config model_type qwen3, q/k norms).",
        ),
        (
            "train-dry-run",
            ["--dry-run"],
            "eagle3.1",
            "speculators train --dry-run with default dtype settings: builds and initialises the draft "
            "(verifier embeddings/lm_head rows, vocab maps from token_freq.pt) and saves it in "
            "hidden_states_dtype (bfloat16) without training, beside run.yaml and train_command.txt "
            "(its help suggests validating this in vLLM before a run).",
        ),
    ]
    for name, extra, algo, notes in plans:
        save = root / "train" / name
        if save.exists():
            shutil.rmtree(save)
        if "--dry-run" in extra:  # no training happens: only what building the draft needs
            args = [
                "train",
                "--verifier-name-or-path",
                "tiny-llama-target",
                "--data-path",
                "data/tiny",
                "--draft-vocab-size",
                str(TINY["draft"]),
                "--seed",
                str(SEED),
                "--save-path",
                f"train/{name}",
            ] + extra
        else:
            args = ["train"] + common + ["--save-path", f"train/{name}"] + extra
        run([sys.executable, "-c", TRAIN_SHIM] + args, cwd=root)
        ckpt = save if "--dry-run" in extra else save / "0"
        dst = copy_case(ckpt, out, name)
        parent_files = sorted(p.name for p in save.iterdir() if p.name != "0") if ckpt != save else []
        how = "speculators " + shell_join(args)
        note = notes + (
            " Run through speculators' own CLI entry point (speculators.__main__.app) on CPU with three "
            "shims (make.py TRAIN_SHIM): speculators.train.trainer.get_local_rank returns 'cpu' (the "
            "trainer moves the model and batches to device index 0, an accelerator); "
            "torch.accelerator.synchronize is a no-op (its step timer calls it); and "
            "speculators.train.utils.find_repo_root finds no git repository (the venv sits inside "
            "eaglehub's checkout, whose HEAD and diff speculators would otherwise record), so "
            "train_command.txt says 'Git SHA: unknown' and no speculators.patch is written, as for a "
            "package-index install outside a git checkout. train_command.txt's first line is the "
            "wall-clock time of the run (the one non-deterministic file). Data: `speculators prepare-data` "
            "of 24 pre-tokenized rows (token_freq.pt -> frequency-built d2t/t2d), hidden states written "
            "with transformers from tiny-llama-target (generate-offline-data needs a vLLM server)."
        )
        if ckpt != save:
            note += (
                f" The case dir is the epoch checkpoint {name}/0/ exactly as the trainer wrote it; beside "
                f"it in the save path the trainer also wrote: {', '.join(parent_files)}."
            )
        cases.append(case_record(dst, how, algo, TINY, note))


def api_cases(root: Path, out: Path, cases: list) -> None:
    """The Python API: Eagle3SpeculatorConfig + Eagle3DraftModel + save_pretrained."""
    from speculators.config import SpeculatorsConfig, VerifierConfig
    from speculators.models.eagle3 import Eagle3DraftModel, Eagle3SpeculatorConfig
    from speculators.proposals.greedy import GreedyTokenProposalConfig
    from transformers import LlamaConfig
    from transformers.models.qwen3.configuration_qwen3 import Qwen3Config

    make_tiny_target(root)
    os.chdir(root)  # the verifier is named by its relative path, as in the CLI cases

    def layer_config(kind: str):
        common = llama_fields(
            TINY,
            num_hidden_layers=1,
            max_position_embeddings=2048,
            rms_norm_eps=1e-5,
            tie_word_embeddings=False,
        )
        return LlamaConfig(**common) if kind == "llama" else Qwen3Config(**common)

    plans = [
        (
            "api-eagle3",
            "llama",
            {},
            "eagle3",
            "Eagle3SpeculatorConfig (LlamaConfig layer, default flags) -> Eagle3DraftModel -> save_pretrained.",
        ),
        (
            "api-eagle3.1",
            "llama",
            {"fc_norm": True, "norm_output": True},
            "eagle3.1",
            "as api-eagle3 with fc_norm=True, norm_output=True (EAGLE-3.1).",
        ),
        (
            "api-qwen3-layer",
            "qwen3",
            {},
            "eagle3",
            "as api-eagle3 with a Qwen3Config transformer_layer_config (model_type qwen3).",
        ),
    ]
    gen = torch.Generator().manual_seed(SEED)
    d2t, t2d = vocab_maps(TINY["vocab"], TINY["draft"], gen)
    for name, kind, flags, algo, notes in plans:
        torch.manual_seed(SEED)
        config = Eagle3SpeculatorConfig(
            transformer_layer_config=layer_config(kind),
            draft_vocab_size=TINY["draft"],
            eagle_aux_hidden_state_layer_ids=[2, 4, 5],
            speculators_config=SpeculatorsConfig(
                algorithm="eagle3",
                proposal_methods=[GreedyTokenProposalConfig(speculative_tokens=3)],
                default_proposal_method="greedy",
                verifier=VerifierConfig.from_pretrained("tiny-llama-target"),
            ),
            **flags,
        )
        model = Eagle3DraftModel(config)
        model.load_vocab_mappings(t2d, d2t)
        model.load_verifier_weights()
        model = model.to(torch.bfloat16)
        dst_tmp = root / "out" / name
        if dst_tmp.exists():
            shutil.rmtree(dst_tmp)
        model.save_pretrained(str(dst_tmp))
        dst = copy_case(dst_tmp, out, name)
        flag_src = ", ".join(f"{k}={v}" for k, v in flags.items())
        how = (
            "config = Eagle3SpeculatorConfig(transformer_layer_config="
            f"{'LlamaConfig' if kind == 'llama' else 'Qwen3Config'}(vocab_size=512, hidden_size=64, "
            "intermediate_size=128, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2, "
            "head_dim=16, max_position_embeddings=2048, rms_norm_eps=1e-5, tie_word_embeddings=False), "
            "draft_vocab_size=128, eagle_aux_hidden_state_layer_ids=[2, 4, 5], "
            "speculators_config=SpeculatorsConfig(algorithm='eagle3', proposal_methods="
            "[GreedyTokenProposalConfig(speculative_tokens=3)], default_proposal_method='greedy', "
            "verifier=VerifierConfig.from_pretrained('tiny-llama-target'))"
            + (f", {flag_src}" if flag_src else "")
            + "); model = Eagle3DraftModel(config); model.load_vocab_mappings(t2d, d2t); "
            "model.load_verifier_weights(); model.to(torch.bfloat16).save_pretrained(DIR)"
        )
        cases.append(case_record(dst, how, algo, TINY, notes + " d2t/t2d: 128 sorted random ids < 512 (seed 0)."))


# ----------------------------------------------------------------------------- manifest


def case_record(dst: Path, how: str, algo: str, dims: dict, notes: str) -> dict:
    cfg = json.loads((dst / "config.json").read_text())
    tl = cfg.get("transformer_layer_config") or cfg
    size = sum(p.stat().st_size for p in dst.rglob("*") if p.is_file() and not p.is_symlink())
    return {
        "dir": dst.name,
        "how": how,
        "algorithm": algo,
        "hidden_size": tl.get("hidden_size", dims.get("hidden")),
        "draft_vocab_size": cfg.get("draft_vocab_size", dims.get("draft")),
        "vocab_size": tl.get("vocab_size", dims.get("vocab")),
        "bytes": size,
        "files": sorted(p.relative_to(dst).as_posix() for p in dst.rglob("*") if p.is_file()),
        "notes": notes + " " + observed(dst),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument(
        "--work",
        type=Path,
        default=Path(sys.prefix).resolve().parent / "work",
        help="scratch directory for inputs and raw outputs (default: DIR/work beside the venv)",
    )
    ap.add_argument("--only", choices=["convert", "train", "api"], action="append")
    args = ap.parse_args()
    out = args.out.resolve()
    root = args.work.resolve()
    root.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(SEED)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    make_tiny_target(root)

    manifest_path = out / "MANIFEST.json"
    old = json.loads(manifest_path.read_text())["cases"] if manifest_path.is_file() else []
    cases: list = []
    only = set(args.only or ["convert", "train", "api"])
    if "convert" in only:
        convert_cases(root, out, cases)
    if "train" in only:
        train_cases(root, out, cases)
    if "api" in only:
        api_cases(root, out, cases)
    made = {c["dir"] for c in cases}
    cases += [c for c in old if c["dir"] not in made and (out / c["dir"]).is_dir()]
    order = ["convert", "train", "api"]
    cases.sort(key=lambda c: (order.index(c["dir"].split("-")[0]), c["dir"]))

    import transformers

    manifest = {
        "producer": "speculators",
        "producer_version": md.version("speculators"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "seed": SEED,
        "made_by": "scripts/producer_fixtures/speculators/make.py (environment: setup.sh)",
        "cases": cases,
    }
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    log(f"wrote {len(cases)} cases to {out}")


if __name__ == "__main__":
    main()
