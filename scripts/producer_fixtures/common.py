"""What the four producer scripts share (each runs in its producer's own environment, which has torch and
safetensors): the target dimensions the fixtures are made at and the read-back of a written checkpoint that
each MANIFEST.json records. Imported as ``common`` from the directory above each make.py."""

from __future__ import annotations

import json
from pathlib import Path

# The tiny target (most cases) and SmolLM2-135M-Instruct's dimensions in transformers' names (SpecForge, TorchSpec).
TINY = dict(
    hidden_size=64,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    intermediate_size=128,
    vocab_size=512,
    rms_norm_eps=1e-5,
    rope_theta=10000.0,
    max_position_embeddings=2048,
    num_hidden_layers=8,
)
# The short names the speculators and ModelOpt scripts build configs and MANIFEST records from, and the
# transformers field each stands for (one mapping both ways: TINY_SHORT from TINY, llama_fields back).
SHORT_NAMES = dict(
    hidden="hidden_size",
    heads="num_attention_heads",
    kv="num_key_value_heads",
    head_dim="head_dim",
    inter="intermediate_size",
    layers="num_hidden_layers",
    vocab="vocab_size",
)
# The tiny target in those short names (one source of the numbers: TINY), plus the draft vocabulary most cases
# prune to.
TINY_SHORT = {short: TINY[field] for short, field in SHORT_NAMES.items()} | {"draft": 128}


def llama_fields(dims: dict, **override) -> dict:
    """The transformers config fields of short-named ``dims`` (:data:`SHORT_NAMES`), with ``override``."""
    return {field: dims[short] for short, field in SHORT_NAMES.items()} | override


SMOLLM2 = dict(
    hidden_size=576,
    num_attention_heads=9,
    num_key_value_heads=3,
    head_dim=64,
    intermediate_size=1536,
    vocab_size=49152,
    rms_norm_eps=1e-5,
    rope_theta=100000.0,
    max_position_embeddings=8192,
    num_hidden_layers=30,
    # SmolLM2's own special-token ids, so the drafter's config matches the real target's.
    special_ids={"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2},
)


def observed(dst: Path) -> str:
    """What the written files say, read back (so the manifest states facts, not intentions)."""
    import torch
    from safetensors import safe_open

    cfg = json.loads((dst / "config.json").read_text())
    nulls = sorted(k for k, v in cfg.items() if v is None)
    tl = cfg.get("transformer_layer_config") or {}
    nulls += sorted(f"transformer_layer_config.{k}" for k, v in tl.items() if v is None)
    dtypes: dict = {}
    with safe_open(str(dst / "model.safetensors"), "pt") as f:
        keys = list(f.keys())
        for k in keys:
            dtypes.setdefault(str(f.get_slice(k).get_dtype()), 0)
            dtypes[str(f.get_slice(k).get_dtype())] += 1
        order = "none"
        if "d2t" in keys:
            d2t = f.get_tensor("d2t")
            ids = d2t + torch.arange(d2t.numel())
            order = "sorted" if bool((ids[1:] > ids[:-1]).all()) else f"not sorted (first ids {ids[:4].tolist()})"
    declared = cfg.get("torch_dtype", cfg.get("dtype"))
    parts = [
        f"config nulls: {nulls or 'none'}",
        f"config dtype: {declared}",
        f"tensor dtypes: {dtypes}",
        f"embed_tokens stored: {'embed_tokens.weight' in keys}",
        f"d2t: {order}",
        f"t2d stored: {'t2d' in keys}",
    ]
    if "eagle_config" in cfg:
        parts.append(f"eagle_config (nested): {sorted(cfg['eagle_config'])}")
    if tl.get("layer_types"):
        parts.append(f"layer_types {tl['layer_types']}, sliding_window {tl.get('sliding_window')}")
    if cfg.get("rope_scaling"):
        parts.append(f"rope_scaling {cfg['rope_scaling']}")
    return "Observed: " + "; ".join(parts) + "."
