"""Generate tiny EAGLE-3 drafters (research / vLLM-native layout) for the real SmolLM2 target.

Layout (shared/reference/vllm.md §3, §4, §14): ``LlamaForCausalLMEagle3``, ``model_type llama``,
hidden 576 (= target hidden), 9 heads / 3 KV heads, ``head_dim`` 64 (the vLLM CPU attention kernel
rejects 16), one decoder layer under ``midlayer.``, a pruned draft vocabulary with ``d2t`` (int64
offsets: target_id = i + d2t[i], ascending target ids) and ``t2d`` (bool over the target vocab),
explicit ``eagle_aux_hidden_state_layer_ids`` (2, 15, 27).

``constant_token``: when given, that target id becomes the smallest id of the draft vocabulary and
``norm.weight`` is zero, so every draft logit is exactly 0 and the greedy draft is always draft id 0,
i.e. ``constant_token``. The drafter then gets position-0 acceptance exactly when the target's next
token is that token — a deterministic, non-zero acceptance signal without any training.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

TARGET_HIDDEN = 576
TARGET_VOCAB = 49152
HEADS, KV_HEADS, HEAD_DIM = 9, 3, 64
AUX_LAYERS = [2, 15, 27]


def draft_vocab(size: int, seed: int, constant_token: int | None = None) -> torch.Tensor:
    """Ascending target ids of a draft vocabulary of ``size`` ids (``constant_token`` first, if given)."""
    g = torch.Generator().manual_seed(seed)
    low = 0 if constant_token is None else constant_token + 1
    rest = low + torch.randperm(TARGET_VOCAB - low, generator=g)[: size - (constant_token is not None)]
    ids = rest if constant_token is None else torch.cat([torch.tensor([constant_token]), rest])
    return torch.sort(ids).values


def make_tiny_drafter(dst: Path, draft_vocab_size: int = 1024, intermediate: int = 256, seed: int = 0,
                      constant_token: int | None = None) -> Path:
    """Write ``config.json`` + ``model.safetensors`` of a randomly initialised 1-layer drafter to ``dst``."""
    dst = Path(dst)
    dst.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(seed)
    h, a = TARGET_HIDDEN, len(AUX_LAYERS)

    def rnd(*shape):
        return (torch.randn(*shape, generator=g) * 0.02).contiguous()

    ids = draft_vocab(draft_vocab_size, seed, constant_token)
    t2d = torch.zeros(TARGET_VOCAB, dtype=torch.bool)
    t2d[ids] = True
    tensors = {
        "fc.weight": rnd(h, a * h),
        "midlayer.self_attn.q_proj.weight": rnd(HEADS * HEAD_DIM, 2 * h),
        "midlayer.self_attn.k_proj.weight": rnd(KV_HEADS * HEAD_DIM, 2 * h),
        "midlayer.self_attn.v_proj.weight": rnd(KV_HEADS * HEAD_DIM, 2 * h),
        "midlayer.self_attn.o_proj.weight": rnd(h, HEADS * HEAD_DIM),
        "midlayer.mlp.gate_proj.weight": rnd(intermediate, h),
        "midlayer.mlp.up_proj.weight": rnd(intermediate, h),
        "midlayer.mlp.down_proj.weight": rnd(h, intermediate),
        "midlayer.hidden_norm.weight": torch.ones(h),
        "midlayer.input_layernorm.weight": torch.ones(h),
        "midlayer.post_attention_layernorm.weight": torch.ones(h),
        "norm.weight": torch.zeros(h) if constant_token is not None else torch.ones(h),
        "lm_head.weight": rnd(draft_vocab_size, h),
        "d2t": (ids - torch.arange(draft_vocab_size)).to(torch.int64),
        "t2d": t2d,
    }
    save_file(tensors, str(dst / "model.safetensors"))
    config = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": h,
        "target_hidden_size": h,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "intermediate_size": intermediate,
        "num_hidden_layers": 1,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "max_position_embeddings": 8192,
        "rope_theta": 100000.0,
        "vocab_size": TARGET_VOCAB,
        "draft_vocab_size": draft_vocab_size,
        "eagle_aux_hidden_state_layer_ids": AUX_LAYERS,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
    }
    (dst / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return dst
