"""A target's memory footprint from its ``config.json``: parameters counted from the shapes the config
implies, bytes per parameter from its dtype and quantization, and KV-cache bytes per token.

Every weight is an entry ``(name, params, kind, bytes per param, split)``; ``split`` says how tensor
parallelism divides it (``tp``: by the TP size; ``kv``: by ``min(TP, kv heads)``, because a rank keeps
at least one KV head; ``none``: every rank holds a copy). The names are the checkpoint's module names
(``model.layers.3.self_attn.q_proj``), so a quantization config's exclude patterns apply to them.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from eaglehub.errors import InputError
from eaglehub.io.stformat import DTYPE_BY_TORCH

DTYPE_BYTES = {
    **{name: DTYPE_BY_TORCH[name].bits // 8 for name in ("float32", "float16", "bfloat16")},
    "float": 4,  # the aliases configs and vLLM accept for float32 / float16
    "half": 2,
}
NVFP4_GROUP = 16
"""ModelOpt NVFP4: one FP8 (E4M3) scale per 16 four-bit weights."""
MXFP4_GROUP = 32
"""MXFP4: one 8-bit exponent scale per 32 four-bit weights."""


@dataclass(frozen=True)
class Weight:
    name: str
    params: int
    kind: str  # "linear", "embedding", "norm", "router"
    layer: int | None  # None: outside the decoder layers (embeddings, final norm, lm_head)
    split: str  # "tp", "kv" or "none"
    bytes_per_param: float = 0.0


def text_config(config: dict) -> dict:
    """The language model's config: ``text_config`` of a multimodal wrapper (Kimi-K2.5/K2.6 ``kimi_k25``),
    with the wrapper's dtype and quantization when the inner config lacks them; else ``config``."""
    inner = config.get("text_config")
    if not isinstance(inner, dict):
        return config
    merged = dict(inner)
    for key in ("torch_dtype", "dtype", "quantization_config", "tie_word_embeddings"):
        if key not in merged and key in config:
            merged[key] = config[key]
    return merged


def config_dtype(cfg: dict) -> str:
    """The checkpoint's dtype name (``torch_dtype``, or ``dtype`` in newer configs); bfloat16 when unset."""
    value = cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"
    return str(value).removeprefix("torch.")


def _need(cfg: dict, *keys: str) -> int:
    for key in keys:
        if isinstance(cfg.get(key), int):
            return int(cfg[key])
    raise InputError(
        f"the target config has no {' or '.join(keys)}",
        hint="pass a decoder-only Hugging Face config.json (Llama-, Qwen- or DeepSeek-V3-style)",
    )


def is_mla(cfg: dict) -> bool:
    return isinstance(cfg.get("kv_lora_rank"), int)


def _attention(cfg: dict, i: int) -> list[Weight]:
    h, nh = _need(cfg, "hidden_size"), _need(cfg, "num_attention_heads")
    p = f"model.layers.{i}.self_attn."
    if is_mla(cfg):
        kv_lora, rope = cfg["kv_lora_rank"], _need(cfg, "qk_rope_head_dim")
        nope, v = _need(cfg, "qk_nope_head_dim"), _need(cfg, "v_head_dim")
        q_lora = cfg.get("q_lora_rank")
        if q_lora:
            q = [
                Weight(p + "q_a_proj", h * q_lora, "linear", i, "none"),  # replicated on every TP rank in vLLM
                Weight(p + "q_a_layernorm", q_lora, "norm", i, "none"),
                Weight(p + "q_b_proj", q_lora * nh * (nope + rope), "linear", i, "tp"),
            ]
        else:
            q = [Weight(p + "q_proj", h * nh * (nope + rope), "linear", i, "tp")]
        return q + [
            Weight(p + "kv_a_proj_with_mqa", h * (kv_lora + rope), "linear", i, "none"),
            Weight(p + "kv_a_layernorm", kv_lora, "norm", i, "none"),
            Weight(p + "kv_b_proj", kv_lora * nh * (nope + v), "linear", i, "tp"),
            Weight(p + "o_proj", nh * v * h, "linear", i, "tp"),
        ]
    nkv = cfg.get("num_key_value_heads") or nh
    hd = cfg.get("head_dim") or h // nh
    return [
        Weight(p + "q_proj", h * nh * hd, "linear", i, "tp"),
        Weight(p + "k_proj", h * nkv * hd, "linear", i, "kv"),
        Weight(p + "v_proj", h * nkv * hd, "linear", i, "kv"),
        Weight(p + "o_proj", nh * hd * h, "linear", i, "tp"),
    ]


def _mlp(prefix: str, h: int, inter: int, i: int) -> list[Weight]:
    return [Weight(prefix + n, h * inter, "linear", i, "tp") for n in ("gate_proj", "up_proj", "down_proj")]


def n_experts(cfg: dict) -> int:
    return int(cfg.get("n_routed_experts") or cfg.get("num_experts") or cfg.get("num_local_experts") or 0)


def is_moe_layer(cfg: dict, i: int) -> bool:
    """DeepSeek-V3's rule: layers from ``first_k_dense_replace`` on, every ``moe_layer_freq``-th, are MoE."""
    if not n_experts(cfg):
        return False
    return i >= int(cfg.get("first_k_dense_replace") or 0) and i % int(cfg.get("moe_layer_freq") or 1) == 0


def _feed_forward(cfg: dict, i: int) -> list[Weight]:
    h = _need(cfg, "hidden_size")
    p = f"model.layers.{i}.mlp."
    if not is_moe_layer(cfg, i):
        return _mlp(p, h, _need(cfg, "intermediate_size"), i)
    experts, inter = n_experts(cfg), _need(cfg, "moe_intermediate_size", "intermediate_size")
    # all routed experts of a layer as one entry per projection: they share names up to the expert index
    out = [
        Weight(w.name.replace("mlp.", "mlp.experts.0.", 1), w.params * experts, "linear", i, "tp")
        for w in _mlp(p, h, inter, i)
    ]
    shared = int(cfg.get("n_shared_experts") or 0) * inter or int(cfg.get("shared_expert_intermediate_size") or 0)
    if shared:
        out += _mlp(p + "shared_experts.", h, shared, i)
    # the router stays unquantized and replicated (vLLM builds it without a quantization config)
    out.append(
        Weight(p + "gate", experts * h + (experts if cfg.get("topk_method") == "noaux_tc" else 0), "router", i, "none")
    )
    return out


def weights(cfg: dict) -> list[Weight]:
    """Every weight of the language model, unpriced (``bytes_per_param`` 0; :func:`price` sets it)."""
    h, layers, vocab = _need(cfg, "hidden_size"), _need(cfg, "num_hidden_layers"), _need(cfg, "vocab_size")
    out = [Weight("model.embed_tokens", vocab * h, "embedding", None, "tp")]
    for i in range(layers):
        norms = [
            Weight(f"model.layers.{i}.{n}", h, "norm", i, "none")
            for n in ("input_layernorm", "post_attention_layernorm")
        ]
        out += norms + _attention(cfg, i) + _feed_forward(cfg, i)
    out.append(Weight("model.norm", h, "norm", None, "none"))
    if not cfg.get("tie_word_embeddings", False):  # counted unless tied: the larger, safer reading
        # vLLM builds lm_head as a vocabulary-parallel embedding, which these quantization methods leave
        # at the compute dtype
        out.append(Weight("lm_head", vocab * h, "embedding", None, "tp"))
    return out


@dataclass(frozen=True)
class Quantization:
    """How the config's quantized linear layers are stored: ``scheme`` (``none``, ``fp8``, ``nvfp4``,
    ``mxfp4``), bytes per quantized parameter (scales included) and the exclude patterns."""

    scheme: str
    bytes_per_param: float
    exclude: tuple[str, ...]


def quantization(cfg: dict) -> Quantization:
    """Read ``quantization_config`` (ModelOpt NVFP4, FP8 with or without blocks, compressed-tensors
    float 8-bit, MXFP4).

    Raises:
        InputError: a quantization method eaglehub does not size (exit 2).
    """
    q = cfg.get("quantization_config")
    if not isinstance(q, dict) or not q:
        return Quantization("none", 0.0, ())
    if isinstance(q.get("quantization"), dict):  # the legacy hf_quant_config.json layout
        q = {**q, **q["quantization"]}
    method = str(q.get("quant_method", "")).lower()
    algo = str(q.get("quant_algo", "")).upper()
    exclude = tuple(
        str(x)
        for key in ("ignore", "exclude_modules", "ignored_layers", "modules_to_not_convert")
        for x in (q.get(key) or [])
    )
    if method == "modelopt" and algo.startswith("NVFP4"):
        group = int(q.get("group_size") or NVFP4_GROUP)
        scheme, per_param = "nvfp4", 0.5 + 1 / group
    elif (method == "modelopt" and algo == "FP8") or method in ("fp8", "fbgemm_fp8"):
        block = q.get("weight_block_size")
        # one float32 scale per block (DeepSeek-V3 / Kimi-K2: 128 x 128); per-channel scales are negligible
        scheme, per_param = "fp8", 1 + (4 / (block[0] * block[1]) if block else 0.0)
    elif method == "compressed-tensors" and _ct_bits(q) == 8:
        scheme, per_param = "fp8", 1.0
    elif method == "mxfp4":
        scheme, per_param = "mxfp4", 0.5 + 1 / MXFP4_GROUP
    else:
        raise InputError(
            f"eaglehub cannot size quantization {method or '?'} {algo}".rstrip(),
            hint="plan from a directory that has model.safetensors.index.json, or from the unquantized config",
        )
    return Quantization(scheme, per_param, exclude)


def _ct_bits(q: dict) -> int | None:
    for group in (q.get("config_groups") or {}).values():
        w = group.get("weights") or {}
        if w.get("type") == "float":
            return int(w.get("num_bits") or 0)
    return None


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    """A module name against exclude patterns: globs (``*self_attn*``), ``re:`` regexes (compressed-tensors)
    or a plain prefix (``lm_head``, ``model.layers.0.mlp``)."""
    import re

    for pat in patterns:
        if pat.startswith("re:"):
            if re.match(pat[3:], name):
                return True
        elif fnmatch.fnmatchcase(name, pat) or name == pat or name.startswith(pat + "."):
            return True
    return False


def price(ws: list[Weight], quant: Quantization, dtype_bytes: float) -> list[Weight]:
    """Set each weight's bytes per parameter: quantized linear layers at the scheme's size, everything
    else (embeddings, norms, routers, excluded layers) at the compute dtype."""
    from dataclasses import replace

    def size(w: Weight) -> float:
        if quant.scheme == "none" or w.kind != "linear":
            return dtype_bytes
        return dtype_bytes if _matches(w.name, quant.exclude) else quant.bytes_per_param

    return [replace(w, bytes_per_param=size(w)) for w in ws]


def kv_bytes_per_token(cfg: dict, dtype_bytes: float, tp: int) -> float:
    """KV-cache bytes one token takes on one TP rank, over all layers.

    MLA (DeepSeek-V3, Kimi): vLLM caches the compressed latent plus the rope key, one head that every
    rank holds whole: ``layers x (kv_lora_rank + qk_rope_head_dim) x bytes``, not divided by TP. GQA:
    ``2 x layers x kv heads per rank x head_dim x bytes``, a rank holding ``kv_heads / TP`` heads and at
    least one (past ``TP = kv_heads`` the heads are replicated).
    """
    layers = _need(cfg, "num_hidden_layers")
    if is_mla(cfg):
        return layers * (cfg["kv_lora_rank"] + _need(cfg, "qk_rope_head_dim")) * dtype_bytes
    nh, h = _need(cfg, "num_attention_heads"), _need(cfg, "hidden_size")
    nkv = cfg.get("num_key_value_heads") or nh
    hd = cfg.get("head_dim") or h // nh
    return 2 * layers * max(nkv // tp, 1) * hd * dtype_bytes


def tp_allowed(cfg: dict, tp: int) -> bool:
    """TP must divide the attention heads; for GQA, TP divides the KV heads or the KV heads divide TP."""
    nh = _need(cfg, "num_attention_heads")
    if nh % tp:
        return False
    if is_mla(cfg):
        return True
    nkv = cfg.get("num_key_value_heads") or nh
    return nkv % tp == 0 or tp % nkv == 0


def stage_layers(layers: int, pp: int) -> list[int]:
    """Decoder layers per pipeline stage as vLLM splits them: evenly, the remainder going one each to the
    stages before the last."""
    parts = [layers // pp] * pp
    for i in range(2, layers % pp + 2):
        parts[-i] += 1
    return parts


def rank_bytes(ws: list[Weight], cfg: dict, tp: int, pp: int, ep: int = 0) -> float:
    """Weight bytes on the fullest GPU of a TP x PP layout: each stage's layers (the first stage also
    holds the embeddings, the last the final norm and ``lm_head``), each weight divided as its split says.
    ``ep`` > 0: expert parallelism over that many ranks (TP x DP): the routed experts are divided among
    them instead of by TP, everything else stays as TP divides it."""
    nkv = 1 if is_mla(cfg) else int(cfg.get("num_key_value_heads") or cfg["num_attention_heads"])
    divisor = {"tp": tp, "kv": min(tp, nkv), "none": 1, "ep": ep or tp}
    parts = stage_layers(_need(cfg, "num_hidden_layers"), pp)
    bounds = [sum(parts[:s]) for s in range(pp + 1)]
    stages = [0.0] * pp
    for w in ws:
        if w.layer is None:
            stage = 0 if w.name == "model.embed_tokens" else pp - 1
        else:
            stage = next(s for s in range(pp) if bounds[s] <= w.layer < bounds[s + 1])
        split = "ep" if ".mlp.experts." in w.name else w.split
        stages[stage] += w.params * w.bytes_per_param / divisor[split]
    return max(stages)
