"""Generate tiny EAGLE-3 drafters (research / vLLM-native layout) for the real SmolLM2 target.

Layout (docs/vllm.md §3, §4, §14): ``LlamaForCausalLMEagle3``, ``model_type llama``,
hidden 576 (= target hidden), 9 heads / 3 KV heads, ``head_dim`` 64 (the vLLM CPU attention kernel
rejects 16), one decoder layer under ``midlayer.``, intermediate 256, a pruned draft vocabulary with
``d2t`` (int64 offsets: target_id = i + d2t[i], ascending target ids) and ``t2d`` (bool over the
target vocab), explicit ``eagle_aux_hidden_state_layer_ids`` (2, 15, 27). Weights are random
(tests/helpers/checkpoints.py ``drafter_tensors``), float32.

``constant_token``: when given, the draft vocabulary is that one target id (``draft_vocab_size`` 1, ``d2t`` and
``t2d`` naming it), so every greedy draft is ``constant_token`` whatever the random weights compute (the engine
maps the one draft logit into the target vocabulary, every other id at -inf). The drafter then gets position-0
acceptance exactly when the target's next token is that token: a deterministic, non-zero acceptance signal
without any training, from weights that are all in use (an all-zero final norm would do the same and is what
``validate --deep`` and verify's preflight refuse as E-TENSOR-ZERO).
"""

from __future__ import annotations

from pathlib import Path

import torch

from helpers.checkpoints import drafter_tensors, vocab_maps, write_checkpoint

TARGET_VOCAB = 49152
SMOLLM2_DRAFTER_CONFIG = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "model_type": "llama",
    "hidden_size": 576,
    "target_hidden_size": 576,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "head_dim": 64,
    "intermediate_size": 256,
    "num_hidden_layers": 1,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-5,
    "max_position_embeddings": 8192,
    "rope_theta": 100000.0,
    "vocab_size": TARGET_VOCAB,
    "draft_vocab_size": 1024,
    "eagle_aux_hidden_state_layer_ids": [2, 15, 27],
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
}


def make_tiny_drafter(dst: Path, seed: int = 0, constant_token: int | None = None) -> Path:
    """Write ``config.json`` + ``model.safetensors`` of a random 1-layer SmolLM2 drafter to ``dst``."""
    cfg = dict(SMOLLM2_DRAFTER_CONFIG)
    if constant_token is not None:
        cfg["draft_vocab_size"] = 1
    tensors = drafter_tensors(cfg, seed=seed, dtype=torch.float32)
    if constant_token is not None:
        tensors["d2t"], tensors["t2d"] = vocab_maps([constant_token], TARGET_VOCAB)
    return write_checkpoint(Path(dst), cfg, tensors)
