"""Config values as the engines read them: the transformers class defaults a flat config falls back on, and
the tolerant accessors both engines' readers share (values in a config are untrusted)."""

from __future__ import annotations

from eaglehub.drafter.canonical import LLAMA, MLA, QWEN3

#: transformers config-class defaults vLLM gets when a flat config omits a key (transformers 5.19:
#: ``LlamaConfig()``, ``Qwen3Config()``, ``DeepseekV3Config()``)
CLASS_DEFAULTS: dict[str, dict] = {
    LLAMA: {
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "max_position_embeddings": 2048,
        "rope_theta": 10000.0,
    },
    QWEN3: {
        "vocab_size": 151936,
        "hidden_size": 4096,
        "intermediate_size": 22016,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "head_dim": 128,
        "max_position_embeddings": 32768,
        "rope_theta": 10000.0,
    },
    MLA: {
        "vocab_size": 129280,
        "hidden_size": 7168,
        "intermediate_size": 18432,
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "max_position_embeddings": 4096,
        "rope_theta": 10000.0,
    },
}


def block(cfg: dict, key: str) -> dict:
    """``cfg[key]`` when it is a JSON object, else ``{}`` (the engines test ``isinstance(..., dict)``)."""
    v = cfg.get(key)
    return v if isinstance(v, dict) else {}


def rope(cfg: dict, kind: str) -> tuple[str, float | None]:
    """``(rope_type, rope_theta)`` of the drafter's config (transformers 5 folds ``rope_theta`` and
    ``rope_scaling`` into ``rope_parameters``)."""
    src = block(cfg, "rope_parameters") or block(cfg, "rope_scaling")
    rtype = src.get("rope_type", src.get("type", "default"))
    theta = cfg.get("rope_theta", src.get("rope_theta"))
    if theta is None:
        theta = CLASS_DEFAULTS[kind].get("rope_theta")
    return (rtype if isinstance(rtype, str) else "default"), (float(theta) if isinstance(theta, (int, float)) else None)


def int_value(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def id_list(v) -> tuple[int, ...] | None:
    """A non-empty list/tuple as the runners test it (``if layer_ids and isinstance(..., (list, tuple))``)."""
    return tuple(v) if v and isinstance(v, (list, tuple)) else None
