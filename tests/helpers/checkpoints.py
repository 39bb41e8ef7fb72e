"""Tiny checkpoints generated inside the tests (docs/failure-kinds.md "Fixtures": D, D31, T).

D: ``LlamaForCausalLMEagle3``, hidden = target hidden = 64, 1 layer, 4 heads / 2 KV heads,
head_dim 16, intermediate 128, vocab 256, draft vocab 32, bf16, top-level C-in aux ids [2, 4, 5]
(the defaults of the 8-layer T), ``midlayer.*`` names, valid ``d2t``/``t2d``.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import save_file

H, NH, NKV, HD, I, V, VD, A = 64, 4, 2, 16, 128, 256, 32, 3

BASE_CONFIG = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "model_type": "llama",
    "hidden_size": H,
    "target_hidden_size": H,
    "num_hidden_layers": 1,
    "num_attention_heads": NH,
    "num_key_value_heads": NKV,
    "head_dim": HD,
    "intermediate_size": I,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-5,
    "max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    "initializer_range": 0.02,
    "vocab_size": V,
    "draft_vocab_size": VD,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "eagle_aux_hidden_state_layer_ids": [2, 4, 5],
    "num_aux_hidden_states": A,
}


def vocab_maps(used: list[int], vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``d2t`` offsets and ``t2d`` mask for a set of used target ids (docs/formats.md §2)."""
    ids = torch.tensor(sorted(used), dtype=torch.int64)
    d2t = ids - torch.arange(len(ids), dtype=torch.int64)
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[ids] = True
    return d2t, t2d


def drafter_tensors(cfg: dict, seed: int = 0, dtype=torch.bfloat16) -> dict[str, torch.Tensor]:
    """Trained-looking weights (std 0.05, norms ≠ 1) matching ``cfg``, canonical ``midlayer.`` names."""
    g = torch.Generator().manual_seed(seed)
    h, ht = cfg["hidden_size"], cfg.get("target_hidden_size") or cfg["hidden_size"]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd, inter = cfg.get("head_dim") or h // nh, cfg["intermediate_size"]
    vd, a = cfg["draft_vocab_size"], cfg.get("num_aux_hidden_states", 3)

    def w(*shape):
        return (torch.randn(*shape, generator=g) * 0.05).to(dtype)

    def norm(n):
        return (1 + 0.1 * torch.randn(n, generator=g)).to(dtype)

    t = {
        "fc.weight": w(h, a * ht),
        "midlayer.self_attn.q_proj.weight": w(nh * hd, 2 * h),
        "midlayer.self_attn.k_proj.weight": w(nkv * hd, 2 * h),
        "midlayer.self_attn.v_proj.weight": w(nkv * hd, 2 * h),
        "midlayer.self_attn.o_proj.weight": w(h, nh * hd),
        "midlayer.mlp.gate_proj.weight": w(inter, h),
        "midlayer.mlp.up_proj.weight": w(inter, h),
        "midlayer.mlp.down_proj.weight": w(h, inter),
        "midlayer.hidden_norm.weight": norm(h),
        "midlayer.input_layernorm.weight": norm(h),
        "midlayer.post_attention_layernorm.weight": norm(h),
        "norm.weight": norm(h),
        "lm_head.weight": w(vd, h),
    }
    if vd < cfg["vocab_size"]:
        used = torch.randperm(cfg["vocab_size"], generator=g)[:vd].tolist()
        t["d2t"], t["t2d"] = vocab_maps(used, cfg["vocab_size"])
    return t


def add_fc_norm(cfg: dict, tensors: dict) -> None:
    """D → D31: ``fc_norm.{i}.weight [Ht]`` + ``fc_norm``/``norm_output`` flags."""
    ht = cfg.get("target_hidden_size") or cfg["hidden_size"]
    for i in range(cfg.get("num_aux_hidden_states", 3)):
        tensors[f"fc_norm.{i}.weight"] = (1 + 0.05 * torch.arange(ht) / ht).to(torch.bfloat16)
    cfg.update(fc_norm=True, norm_output=True)


def qwen3_layers(cfg: dict, tensors: dict, window: int | None = None) -> None:
    """D → a Qwen3-style drafter (``Eagle3Qwen3ForCausalLM``): trained-looking ``q_norm`` / ``k_norm
    [head_dim]`` in every layer; with ``window``, every layer slides over that many positions."""
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    layers = sorted({n.split("self_attn.")[0] for n in tensors if "self_attn.q_proj.weight" in n})
    dtype = tensors["fc.weight"].dtype
    for i, prefix in enumerate(layers):
        for j, n in enumerate(("q", "k")):
            tensors[f"{prefix}self_attn.{n}_norm.weight"] = (0.8 + 0.4 * torch.arange(hd) / hd + 0.1 * (i + j)).to(
                dtype
            )
    cfg.update(architectures=["Eagle3Qwen3ForCausalLM"], model_type="qwen3")
    if window is not None:
        cfg.update(
            use_sliding_window=True,
            sliding_window=window,
            layer_types=["sliding_attention"] * cfg.get("num_hidden_layers", 1),
        )


def write_checkpoint(path: Path, cfg: dict | None, tensors: dict, fmt: str = "safetensors", shards: int = 2) -> Path:
    """Write ``config.json`` + weights as ``safetensors`` | ``sharded`` | ``bin``."""
    path.mkdir(parents=True, exist_ok=True)
    if cfg is not None:
        (path / "config.json").write_text(json.dumps(cfg, indent=2))
    if fmt == "safetensors":
        save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    elif fmt == "bin":
        torch.save(tensors, path / "pytorch_model.bin")
    elif fmt == "sharded":
        names = list(tensors)
        weight_map = {}
        for s in range(shards):
            file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            part = {n: tensors[n] for n in names[s::shards]}
            save_file(part, str(path / file), metadata={"format": "pt"})
            weight_map.update(dict.fromkeys(part, file))
        (path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    else:
        raise ValueError(fmt)
    return path


Mutator = Callable[[dict, dict], None]


def target_config(n_layers: int = 8, hidden: int = H, vocab: int = V, **over) -> dict:
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "num_hidden_layers": n_layers,
        "num_attention_heads": NH,
        "num_key_value_heads": NKV,
        "head_dim": HD,
        "intermediate_size": I,
        "vocab_size": vocab,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }
    cfg.update(over)
    return cfg


def target_tensors(cfg: dict, seed: int = 1) -> dict[str, torch.Tensor]:
    """A tiny Llama state dict with HF names (``model.layers.{i}.…``)."""
    g = torch.Generator().manual_seed(seed)
    h, v, n = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    q, kv = NH * HD, NKV * HD

    def w(*shape):
        return (torch.randn(*shape, generator=g) * 0.05).to(torch.bfloat16)

    t = {"model.embed_tokens.weight": w(v, h), "model.norm.weight": w(h), "lm_head.weight": w(v, h)}
    for i in range(n):
        p = f"model.layers.{i}."
        t.update(
            {
                p + "self_attn.q_proj.weight": w(q, h),
                p + "self_attn.k_proj.weight": w(kv, h),
                p + "self_attn.v_proj.weight": w(kv, h),
                p + "self_attn.o_proj.weight": w(h, q),
                p + "mlp.gate_proj.weight": w(I, h),
                p + "mlp.up_proj.weight": w(I, h),
                p + "mlp.down_proj.weight": w(h, I),
                p + "input_layernorm.weight": w(h),
                p + "post_attention_layernorm.weight": w(h),
            }
        )
    return t


def tree_hash(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (to prove a directory was not modified)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


RECIPE_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "smollm2-eagle3-recipe"


def load_recipe(name: str):
    """Import a script of the fixture drafter's recipe (``fixtures/smollm2-eagle3-recipe/NAME.py``)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"recipe_{name}", RECIPE_DIR / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def make_drafter_in(
    root: Path,
    name: str = "drafter",
    mutate: Mutator | None = None,
    v31: bool = False,
    fmt: str = "safetensors",
    seed: int = 0,
) -> Path:
    """D (or D31 with ``v31``) under ``root / name``; ``mutate(cfg, tensors)`` edits it before writing."""
    cfg = copy.deepcopy(BASE_CONFIG)
    tensors = drafter_tensors(cfg, seed=seed)
    if v31:
        add_fc_norm(cfg, tensors)
    if mutate:
        mutate(cfg, tensors)
    return write_checkpoint(root / name, cfg, tensors, fmt)


def make_target_in(root: Path, n_layers: int = 8, weights: bool = False, name: str | None = None, **over) -> Path:
    """T (``n_layers`` layers, config overrides ``over``) under ``root``; config only unless ``weights``."""
    cfg = target_config(n_layers, **over)
    path = root / (name or f"target{n_layers}")
    if weights:
        return write_checkpoint(path, cfg, target_tensors(cfg))
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(cfg, indent=2))
    return path
