"""Tiny drafter checkpoints written the way each *producing tool* writes them (docs/formats.md §1, §2, §3, §5).

This module is an independent oracle: it never imports eaglehub. Every layout rule below is taken
from docs/formats.md and from the real configs in tests/data/real-configs/ (SOURCES.md there says where each
came from):

=============  ==========================  ===========  ====================  ==========================
format         architectures / marker      layer 0      aux ids               d2t / t2d
=============  ==========================  ===========  ====================  ==========================
vllm           LlamaForCausalLMEagle3 (or  ``midlayer``  top-level C-in +      ``d2t`` (+ ``t2d``) iff
               research LlamaForCausalLM)               ``num_aux_hidden_...`` ``Vd < V``
speculators    ``speculators_model_type``  ``layers.0``  top-level C-in        both iff ``Vd != V``
specforge      LlamaForCausalLMEagle3      ``midlayer``  nested C-out          always both
torchspec      ``_torchspec_version``      ``layers.0``  nested C-out          both iff ``Vd < V``
modelopt       ``eagle_config.next_..``    ``layers.0``  nested C-out          ``d2t`` only
=============  ==========================  ===========  ====================  ==========================

Tiny dimensions: H = Ht = 64, 4 heads / 2 KV heads, head_dim 16, I 128, V 256, Vd 32 when pruned;
MLA: q_lora 32, kv_lora 32, qk_nope 16, qk_rope 16, v_head 16. Weights look trained (std 0.05,
norms and ``fc_norm`` weights != 1), ``d2t`` offsets are non-zero.

Canonical tensor names (what every format reads into): ``fc.weight``, ``midlayer.*`` (layer 0),
``layers.{i}.*`` (i >= 1), ``norm.weight``, ``lm_head.weight``, ``embed_tokens.weight``, ``d2t``,
``t2d``, ``fc_norm.{i}.weight``, ``input_norm.weight``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from safetensors.torch import save_file

FORMATS = ("vllm", "speculators", "specforge", "torchspec", "modelopt")
REAL_DIR = Path(__file__).resolve().parent.parent / "data" / "real-configs"

LAYER0 = "midlayer."
EXPORTED0 = "layers.0."
AUX_KEY = "eagle_aux_hidden_state_layer_ids"
LEGACY_AUX_NORM = ("aux_norm_low.weight", "aux_norm_mid.weight", "aux_norm_high.weight")
MLA_ARCH = "Eagle3DeepseekV2ForCausalLM"
EAGLE3_ARCH = "LlamaForCausalLMEagle3"
RESEARCH_ARCH = "LlamaForCausalLM"
TORCHSPEC_VERSION = "0.2.0"
VERIFIER = {"name_or_path": "tiny-org/tiny-target-8l", "architectures": ["LlamaForCausalLM"]}

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


# --------------------------------------------------------------------------------------------
# the logical drafter
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dims:
    """Tiny sizes (docs/formats.md notation)."""

    H: int = 64
    Ht: int = 64
    nh: int = 4
    nkv: int = 2
    hd: int = 16
    I: int = 128
    V: int = 256
    Vd: int = 32
    A: int = 3
    layers: int = 1
    q_lora: int = 32
    kv_lora: int = 32
    qk_nope: int = 16
    qk_rope: int = 16
    v_head: int = 16


@dataclass(frozen=True)
class Spec:
    """What a drafter *is*, independent of any format."""

    layer_kind: str = "llama"  # "llama" | "mla"
    layers: int = 1
    fc_norm: bool = False
    norm_output: bool = False
    norm_before_fc: bool = False
    norm_before_residual: bool = False
    pruned: bool = True
    embed: bool = False
    aux_c_in: tuple[int, ...] | None = (2, 4, 5)
    dtype: str = "bfloat16"
    seed: int = 0
    target_hidden: int = 64

    @property
    def dims(self) -> Dims:
        A = len(self.aux_c_in) if self.aux_c_in else 3
        return Dims(
            Ht=self.target_hidden,
            Vd=32 if self.pruned else 256,
            A=A,
            layers=self.layers,
            nkv=4 if self.layer_kind == "mla" else 2,
        )

    @property
    def version(self) -> str:
        return "3.1" if (self.fc_norm or self.norm_output) else "3"


#: reasons no ``--force`` can get around: the written drafter could not work at all.
FATAL = frozenset({"mla", "embed_required"})


def cannot_express(fmt: str, spec: Spec) -> list[str]:
    """Why ``fmt`` cannot hold ``spec`` (empty list: it can). From the contract and docs/formats.md §4, §5."""
    why = []
    if spec.layer_kind == "mla" and fmt in ("speculators", "specforge"):
        why.append("mla")  # speculators: vLLM accepts llama/qwen3 layers only; SpecForge: Llama only
    if spec.layers > 1 and fmt in ("specforge", "torchspec"):
        why.append("layers")  # EAGLE, SpecForge and TorchSpec drafters are single-layer (§1)
    if spec.norm_before_fc and fmt == "specforge":
        why.append("norm_before_fc")
    if spec.embed and fmt == "modelopt":
        why.append("embed_tokens")
        if spec.target_hidden != 64:
            why.append("embed_required")  # H != Ht: the drafter cannot share the target's table (F9)
    if spec.norm_before_residual and fmt not in ("speculators", "vllm"):
        why.append("norm_before_residual")
    if spec.fc_norm and spec.target_hidden != 64 and fmt == "speculators":
        why.append("fc_norm_ht")  # speculators sizes fc_norm [H] (§4)
    if spec.fc_norm and spec.norm_before_fc and fmt == "speculators":
        why.append("both_norms")  # "speculators forbids both" (§4), "never both norms in speculators format" (§7)
    return why


# --------------------------------------------------------------------------------------------
# tensors
# --------------------------------------------------------------------------------------------


def vocab_maps(used, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``d2t`` offsets (int64 [Vd]) and ``t2d`` mask (bool [V]) for the used target ids (docs/formats.md §2)."""
    ids = torch.tensor(sorted(used), dtype=torch.int64)
    d2t = ids - torch.arange(len(ids), dtype=torch.int64)
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[ids] = True
    return d2t, t2d


def _llama_attn(p: str, d: Dims, width: int, w) -> dict:
    return {
        p + "self_attn.q_proj.weight": w(d.nh * d.hd, width),
        p + "self_attn.k_proj.weight": w(d.nkv * d.hd, width),
        p + "self_attn.v_proj.weight": w(d.nkv * d.hd, width),
        p + "self_attn.o_proj.weight": w(d.H, d.nh * d.hd),
    }


def _mla_attn(p: str, d: Dims, width: int, w, norm) -> dict:
    qk = d.qk_nope + d.qk_rope
    return {
        p + "self_attn.q_a_proj.weight": w(d.q_lora, width),
        p + "self_attn.q_a_layernorm.weight": norm(d.q_lora),
        p + "self_attn.q_b_proj.weight": w(d.nh * qk, d.q_lora),
        p + "self_attn.kv_a_proj_with_mqa.weight": w(d.kv_lora + d.qk_rope, width),
        p + "self_attn.kv_a_layernorm.weight": norm(d.kv_lora),
        p + "self_attn.kv_b_proj.weight": w(d.nh * (d.qk_nope + d.v_head), d.kv_lora),
        p + "self_attn.o_proj.weight": w(d.H, d.nh * d.v_head),
    }


def canonical_tensors(
    d: Dims,
    *,
    layer_kind: str = "llama",
    fc_norm: bool = False,
    norm_before_fc: bool = False,
    embed: bool = False,
    dtype: str = "bfloat16",
    seed: int = 0,
) -> dict[str, torch.Tensor]:
    """Trained-looking weights by canonical name. ``d2t``/``t2d`` are added when ``Vd < V``."""
    g = torch.Generator().manual_seed(seed)
    dt = DTYPES[dtype]

    def w(*shape):
        return (torch.randn(*shape, generator=g) * 0.05).to(dt)

    def norm(n):
        return (1 + 0.1 * torch.randn(n, generator=g)).to(dt)

    t = {"fc.weight": w(d.H, d.A * d.Ht)}
    for i in range(d.layers):
        p = LAYER0 if i == 0 else f"layers.{i}."
        width = 2 * d.H if i == 0 else d.H
        t.update(_mla_attn(p, d, width, w, norm) if layer_kind == "mla" else _llama_attn(p, d, width, w))
        t.update(
            {
                p + "mlp.gate_proj.weight": w(d.I, d.H),
                p + "mlp.up_proj.weight": w(d.I, d.H),
                p + "mlp.down_proj.weight": w(d.H, d.I),
                p + "input_layernorm.weight": norm(d.H),
                p + "post_attention_layernorm.weight": norm(d.H),
            }
        )
        if i == 0:
            t[p + "hidden_norm.weight"] = norm(d.H)
    t["norm.weight"] = norm(d.H)
    t["lm_head.weight"] = w(d.Vd, d.H)
    if embed:
        t["embed_tokens.weight"] = w(d.V, d.H)
    if fc_norm:
        for i in range(d.A):
            t[f"fc_norm.{i}.weight"] = norm(d.Ht)
    if norm_before_fc:
        t["input_norm.weight"] = norm(d.A * d.Ht)
    if d.Vd < d.V:
        # used ids never include 0, so every offset is > 0 (docs/formats.md §8: test non-zero offsets)
        used = (torch.randperm(d.V - 1, generator=g)[: d.Vd] + 1).tolist()
        t["d2t"], t["t2d"] = vocab_maps(used, d.V)
    return t


def identity_maps(V: int) -> tuple[torch.Tensor, torch.Tensor]:
    """SpecForge's maps when ``Vd == V``: zero ``d2t``, all-true ``t2d`` (docs/formats.md §2)."""
    return torch.zeros(V, dtype=torch.int64), torch.ones(V, dtype=torch.bool)


def format_tensors(
    fmt: str,
    canonical: dict[str, torch.Tensor],
    V: int,
    *,
    keep_t2d: bool = True,
    legacy_aux_norm: bool = False,
) -> dict[str, torch.Tensor]:
    """The canonical tensors a producer of ``fmt`` ships (still canonical names; see :func:`stored_name`)."""
    t = dict(canonical)
    pruned = "d2t" in t
    if fmt == "specforge" and not pruned:
        t["d2t"], t["t2d"] = identity_maps(V)
    if fmt == "modelopt":
        t.pop("t2d", None)
    if fmt == "vllm" and not keep_t2d:
        t.pop("t2d", None)
    if legacy_aux_norm:
        assert fmt == "torchspec"
    return t


def stored_name(fmt: str, canonical: str, legacy_aux_norm: bool = False) -> str:
    """How ``fmt`` spells a canonical tensor name on disk."""
    if canonical.startswith(LAYER0) and fmt in ("speculators", "torchspec", "modelopt"):
        return EXPORTED0 + canonical[len(LAYER0) :]
    if legacy_aux_norm and canonical.startswith("fc_norm."):
        return LEGACY_AUX_NORM[int(canonical.split(".")[1])]
    return canonical


def canonical_name(fmt: str, stored: str) -> str:
    """Inverse of :func:`stored_name` (``model.`` prefix stripped)."""
    if stored.startswith("model."):
        stored = stored[len("model.") :]
    if stored in LEGACY_AUX_NORM:
        return f"fc_norm.{LEGACY_AUX_NORM.index(stored)}.weight"
    if stored.startswith(EXPORTED0):
        return LAYER0 + stored[len(EXPORTED0) :]
    return stored


# --------------------------------------------------------------------------------------------
# configs
# --------------------------------------------------------------------------------------------

LLAMA3_ROPE = {
    "factor": 8.0,
    "high_freq_factor": 4.0,
    "low_freq_factor": 1.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3",
}
YARN_ROPE = {
    "beta_fast": 1.0,
    "beta_slow": 1.0,
    "factor": 64.0,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
    "original_max_position_embeddings": 4096,
    "type": "yarn",
}


def _layer_keys(spec: Spec, d: Dims) -> dict:
    """Llama (or MLA) layer keys, in the order HF writes them."""
    cfg = {
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 1,
        "eos_token_id": [2, 7],
        "hidden_act": "silu",
        "hidden_size": d.H,
        "initializer_range": 0.02,
        "intermediate_size": d.I,
        "max_position_embeddings": 131072,
        "num_attention_heads": d.nh,
        "num_hidden_layers": d.layers,
        "num_key_value_heads": d.nkv,
        "rms_norm_eps": 1e-05,
        "use_cache": True,
        "vocab_size": d.V,
    }
    if spec.layer_kind == "mla":
        cfg.update(
            q_lora_rank=d.q_lora,
            kv_lora_rank=d.kv_lora,
            qk_nope_head_dim=d.qk_nope,
            qk_rope_head_dim=d.qk_rope,
            v_head_dim=d.v_head,
            rope_theta=50000.0,
            rope_scaling=dict(YARN_ROPE),
        )
    else:
        cfg.update(head_dim=d.hd, rope_theta=500000.0, rope_scaling=dict(LLAMA3_ROPE))
    return cfg


def _flags(spec: Spec, fmt: str, legacy_aux_norm: bool) -> dict:
    out = {}
    if spec.fc_norm:
        out["use_aux_norm" if legacy_aux_norm else "fc_norm"] = True
    if spec.norm_output:
        out["norm_output"] = True
    if spec.norm_before_fc:
        out["norm_before_fc"] = True
    if spec.norm_before_residual:
        out["norm_before_residual"] = True
    return out


def format_config(fmt: str, spec: Spec, *, research: bool = False, legacy_aux_norm: bool = False) -> dict:
    """``config.json`` as the producer of ``fmt`` writes it for ``spec``."""
    d = spec.dims
    layer = _layer_keys(spec, d)
    mla = spec.layer_kind == "mla"
    c_in = list(spec.aux_c_in) if spec.aux_c_in else None
    c_out = [i - 1 for i in c_in] if c_in else None
    if fmt == "speculators":
        assert not mla
        return {
            "architectures": ["Eagle3Speculator"],
            "draft_vocab_size": d.Vd,
            **({AUX_KEY: c_in} if c_in else {}),
            "fc_norm": spec.fc_norm,
            "has_no_defaults_at_init": False,
            "norm_before_fc": spec.norm_before_fc,
            "norm_before_residual": spec.norm_before_residual,
            "norm_output": spec.norm_output,
            "speculators_config": {
                "algorithm": "eagle3",
                "default_proposal_method": "greedy",
                "proposal_methods": [
                    {
                        "accept_tolerance": 0.0,
                        "proposal_type": "greedy",
                        "speculative_tokens": 3,
                        "verifier_accept_k": 1,
                    }
                ],
                "verifier": copy.deepcopy(VERIFIER),
            },
            "speculators_model_type": "eagle3",
            "speculators_version": "0.3.0",
            "target_hidden_size": d.Ht,
            "torch_dtype": spec.dtype,
            "transformer_layer_config": {
                **layer,
                "model_type": "llama",
                "torch_dtype": spec.dtype,
                "mlp_bias": False,
                "pretraining_tp": 1,
            },
            "transformers_version": "4.56.2",
        }
    arch = MLA_ARCH if mla else (RESEARCH_ARCH if research else EAGLE3_ARCH)
    cfg = {
        "architectures": [arch],
        "model_type": "kimi_k2" if mla else "llama",
        **layer,
        "draft_vocab_size": d.Vd,
        "tie_word_embeddings": False,
        "torch_dtype": spec.dtype,
        "transformers_version": "4.51.0",
    }
    if d.Ht != d.H:
        cfg["target_hidden_size"] = d.Ht
    cfg.update(_flags(spec, fmt, legacy_aux_norm))
    if fmt == "vllm":
        if c_in:
            cfg[AUX_KEY] = c_in
            cfg["num_aux_hidden_states"] = d.A
    elif fmt == "specforge":
        if c_out:
            cfg["eagle_config"] = {AUX_KEY: c_out, "use_aux_hidden_state": True}
    elif fmt == "torchspec":
        if c_out:
            cfg["eagle_config"] = {AUX_KEY: c_out, "use_aux_hidden_state": True}
        cfg["_torchspec_version"] = TORCHSPEC_VERSION
    elif fmt == "modelopt":
        cfg["eagle_config"] = {
            **({AUX_KEY: c_out} if c_out else {}),
            "use_aux_hidden_state": True,
            "use_input_layernorm_in_first_layer": True,
            "use_last_layernorm": True,
            "use_mtp_layernorm": False,
            "next_layer_regular": True,
            "parallel_draft_step": 1,
            "parallel_draft_heads_num_layers": 1,
        }
    else:
        raise ValueError(fmt)
    return cfg


# --------------------------------------------------------------------------------------------
# files
# --------------------------------------------------------------------------------------------


def write_weights(
    path: Path,
    stored: dict[str, torch.Tensor],
    file_kind: str = "safetensors",
    metadata: dict | None = None,
    shards: int = 2,
) -> None:
    """``safetensors`` | ``bin`` (``pytorch_model.bin``) | ``sharded`` (HF index + shards)."""
    meta = {"format": "pt", **(metadata or {})}
    if file_kind == "safetensors":
        save_file(stored, str(path / "model.safetensors"), metadata=meta)
    elif file_kind == "bin":
        torch.save(stored, path / "pytorch_model.bin")
    elif file_kind == "sharded":
        names = list(stored)
        weight_map, total = {}, 0
        for s in range(shards):
            file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            part = {n: stored[n] for n in names[s::shards]}
            save_file(part, str(path / file), metadata=meta)
            weight_map.update(dict.fromkeys(part, file))
            total += sum(t.numel() * t.element_size() for t in part.values())
        (path / "model.safetensors.index.json").write_text(
            json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2)
        )
    else:
        raise ValueError(file_kind)


def write_dir(
    path: Path,
    config: dict,
    stored: dict[str, torch.Tensor],
    file_kind: str = "safetensors",
    metadata: dict | None = None,
) -> Path:
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    write_weights(path, stored, file_kind, metadata)
    return path


@dataclass
class Written:
    """What :func:`write_format` wrote: the directory, config, and tensors by canonical and stored name."""

    path: Path
    fmt: str
    spec: Spec
    config: dict
    canonical: dict[str, torch.Tensor]
    stored: dict[str, torch.Tensor] = field(repr=False, default_factory=dict)


def write_format(
    path,
    fmt: str,
    *,
    layer_kind: str = "llama",
    layers: int = 1,
    fc_norm: bool = False,
    norm_output: bool = False,
    norm_before_fc: bool = False,
    norm_before_residual: bool = False,
    pruned: bool = True,
    embed: bool = False,
    aux_c_in=(2, 4, 5),
    dtype: str = "bfloat16",
    seed: int = 0,
    target_hidden: int = 64,
    base_config: dict | None = None,
    file_kind: str = "safetensors",
    research: bool = False,
    legacy_aux_norm: bool = False,
    keep_t2d: bool = True,
    spec: Spec | None = None,
) -> Written:
    """Write a tiny drafter directory the way the producer of ``fmt`` writes it.

    ``base_config``: keys merged over the generated config (e.g. extra non-structural keys).
    ``research``: vllm only — EAGLE research class ``LlamaForCausalLM``. ``legacy_aux_norm``:
    torchspec only — ``use_aux_norm`` + ``aux_norm_{low,mid,high}.weight``. ``keep_t2d``: vllm only —
    ship ``t2d`` next to ``d2t`` (EAGLE research does).
    """
    if spec is None:
        spec = Spec(
            layer_kind=layer_kind,
            layers=layers,
            fc_norm=fc_norm,
            norm_output=norm_output,
            norm_before_fc=norm_before_fc,
            norm_before_residual=norm_before_residual,
            pruned=pruned,
            embed=embed,
            aux_c_in=tuple(aux_c_in) if aux_c_in else None,
            dtype=dtype,
            seed=seed,
            target_hidden=target_hidden,
        )
    if spec.target_hidden != 64 and not spec.embed:
        raise ValueError("Ht != H needs embed_tokens (docs/formats.md §5)")
    assert not cannot_express(fmt, spec), (fmt, cannot_express(fmt, spec))
    d = spec.dims
    canon = canonical_tensors(
        d,
        layer_kind=spec.layer_kind,
        fc_norm=spec.fc_norm,
        norm_before_fc=spec.norm_before_fc,
        embed=spec.embed,
        dtype=spec.dtype,
        seed=spec.seed,
    )
    canon = format_tensors(fmt, canon, d.V, keep_t2d=keep_t2d, legacy_aux_norm=legacy_aux_norm)
    cfg = format_config(fmt, spec, research=research, legacy_aux_norm=legacy_aux_norm)
    if base_config:
        cfg.update(copy.deepcopy(base_config))
    stored = {stored_name(fmt, n, legacy_aux_norm): t for n, t in canon.items()}
    write_dir(Path(path), cfg, stored, file_kind)
    return Written(Path(path), fmt, spec, cfg, canon, stored)


# --------------------------------------------------------------------------------------------
# real configs
# --------------------------------------------------------------------------------------------

TINY = Dims()
MLA_KEYS = {
    "q_lora_rank": TINY.q_lora,
    "kv_lora_rank": TINY.kv_lora,
    "qk_nope_head_dim": TINY.qk_nope,
    "qk_rope_head_dim": TINY.qk_rope,
    "v_head_dim": TINY.v_head,
}


def _shrink_layer(cfg: dict) -> dict:
    out = dict(cfg)
    nh, nkv = cfg.get("num_attention_heads"), cfg.get("num_key_value_heads")
    if "hidden_size" in out:
        out["hidden_size"] = TINY.H
    if "intermediate_size" in out:
        out["intermediate_size"] = TINY.I
    if nh is not None:
        out["num_attention_heads"] = TINY.nh
    if nkv is not None:
        out["num_key_value_heads"] = TINY.nh if nkv == nh else (1 if nkv == 1 else TINY.nkv)
    if out.get("head_dim") is not None:
        out["head_dim"] = TINY.hd
    V = cfg.get("vocab_size")
    if V is not None:
        out["vocab_size"] = TINY.V
    for k, v in MLA_KEYS.items():
        if out.get(k) is not None:
            out[k] = v
    return out


def shrink(real: dict) -> dict:
    """Tiny version of a real drafter config: only size fields change, every other key (RoPE, bos/eos,
    sliding window, ``eagle_config`` extras, ``speculators_config``, aux ids...) is kept verbatim.

    Sizes: H 64, I 128, 4 heads (KV heads 4 if the real config has nkv == nh, 1 if it has 1, else 2),
    head_dim 16 (if present), V 256, Vd 32 if the real Vd < V else 256 (``null`` kept),
    ``target_hidden_size`` 64 if set, MLA ranks 32/32 and head dims 16.
    """
    out = copy.deepcopy(real)
    vocab_src = real.get("transformer_layer_config", real)
    V = vocab_src.get("vocab_size")
    if "transformer_layer_config" in out:
        out["transformer_layer_config"] = _shrink_layer(out["transformer_layer_config"])
    out = _shrink_layer(out)
    if out.get("draft_vocab_size") is not None:
        out["draft_vocab_size"] = TINY.Vd if (V is None or real["draft_vocab_size"] < V) else TINY.V
    if out.get("target_hidden_size") is not None:
        out["target_hidden_size"] = TINY.H
    return out


def load_real(name: str) -> dict:
    return json.loads((REAL_DIR / name).read_text())


def _real_dims(cfg: dict, mla: bool, A: int) -> Dims:
    layer = cfg.get("transformer_layer_config", cfg)
    nh = layer["num_attention_heads"]
    H = layer["hidden_size"]
    V = layer["vocab_size"]
    Vd = cfg.get("draft_vocab_size") or V
    return Dims(
        H=H,
        Ht=cfg.get("target_hidden_size") or H,
        nh=nh,
        nkv=layer.get("num_key_value_heads") or nh,
        hd=layer.get("head_dim") or H // nh,
        I=layer["intermediate_size"],
        V=V,
        Vd=Vd,
        A=A,
        layers=layer.get("num_hidden_layers", 1),
        q_lora=cfg.get("q_lora_rank") or 0,
        kv_lora=cfg.get("kv_lora_rank") or 0,
        qk_nope=cfg.get("qk_nope_head_dim") or 0,
        qk_rope=cfg.get("qk_rope_head_dim") or 0,
        v_head=cfg.get("v_head_dim") or 0,
    )


@dataclass
class RealCase:
    """One real public config turned into a tiny checkpoint by its producer's rules."""

    file: str
    fmt: str  # the format the producer writes (expected detection)
    layer_kind: str = "llama"
    embed: bool = False
    file_kind: str = "safetensors"
    extra: dict = field(default_factory=dict)  # keys the producer adds on export (markers)
    A: int | None = None  # aux states (None: len of the id list, else 3)
    label: str = ""  # tells apart two cases built from one file

    @property
    def id(self) -> str:
        return self.file.removesuffix(".json") + (f"[{self.label}]" if self.label else "")


def modelopt_megatron_config() -> dict:
    """ModelOpt HF export of the Megatron Eagle-3.1 MLA drafter (docs/formats.md §5 ModelOpt row + the
    Megatron arch config ``eagle31_mla_config.json``): Kimi MLA dims from the Kimi-K2 target and the
    TorchSpec Kimi MLA template, ``eagle_config`` = the Megatron arch keys + ``next_layer_regular``,
    3.1 flags at the top level where vLLM reads them."""
    arch = load_real("modelopt-megatron_eagle31-mla_eagle-arch-config.NOT-HF-CONFIG.json")
    kimi = load_real("targets/moonshotai_Kimi-K2-Instruct.json")
    eagle_config = {k: v for k, v in arch.items() if k not in ("num_hidden_layers", "fc_norm", "norm_output")}
    eagle_config["next_layer_regular"] = True
    cfg = {
        "architectures": [MLA_ARCH],
        "model_type": "kimi_k2",
        "hidden_size": kimi["hidden_size"],
        "intermediate_size": 18432,
        "num_hidden_layers": arch["num_hidden_layers"],
        "num_attention_heads": kimi["num_attention_heads"],
        "num_key_value_heads": kimi["num_key_value_heads"],
        "q_lora_rank": kimi["q_lora_rank"],
        "kv_lora_rank": kimi["kv_lora_rank"],
        "qk_nope_head_dim": kimi["qk_nope_head_dim"],
        "qk_rope_head_dim": kimi["qk_rope_head_dim"],
        "v_head_dim": kimi["v_head_dim"],
        "hidden_act": "silu",
        "rms_norm_eps": kimi["rms_norm_eps"],
        "vocab_size": kimi["vocab_size"],
        "max_position_embeddings": kimi["max_position_embeddings"],
        "rope_theta": kimi["rope_theta"],
        "rope_scaling": kimi["rope_scaling"],
        "bos_token_id": kimi["bos_token_id"],
        "eos_token_id": kimi["eos_token_id"],
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "fc_norm": arch["fc_norm"],
        "norm_output": arch["norm_output"],
        "eagle_config": eagle_config,
    }
    return cfg


def write_real(path, case: RealCase, seed: int = 0) -> Written:
    """Write the tiny checkpoint of ``case``: shrunk real config (+ the producer's export keys) and
    generated weights with the producer's names, maps and files."""
    real = modelopt_megatron_config() if case.file == "modelopt-megatron" else load_real(case.file)
    cfg = shrink(real)
    cfg.update(copy.deepcopy(case.extra))
    mla = case.layer_kind == "mla"
    ids = cfg.get(AUX_KEY)
    if ids is None and isinstance(cfg.get("eagle_config"), dict):
        ids = cfg["eagle_config"].get(AUX_KEY)
    A = case.A or (len(ids) if ids else 3)
    d = _real_dims(cfg, mla, A)
    if d.layers != 1 or case.fmt == "peagle":
        d = replace(d, layers=cfg.get("num_hidden_layers", 1))
    fc_norm = bool(cfg.get("fc_norm") or cfg.get("use_aux_norm"))
    nested = cfg.get("eagle_config") if isinstance(cfg.get("eagle_config"), dict) else {}
    nbf = bool(nested.get("norm_before_fc", cfg.get("norm_before_fc", False)))
    dtype = (cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16").removeprefix("torch.")
    canon = canonical_tensors(
        d,
        layer_kind=case.layer_kind,
        fc_norm=fc_norm,
        norm_before_fc=nbf,
        embed=case.embed,
        dtype=dtype,
        seed=seed,
    )
    fmt = case.fmt if case.fmt in FORMATS else "specforge"
    canon = format_tensors(fmt, canon, d.V)
    stored = {stored_name(fmt, n): t for n, t in canon.items()}
    write_dir(Path(path), cfg, stored, case.file_kind)
    spec = Spec(
        layer_kind=case.layer_kind,
        layers=d.layers,
        fc_norm=fc_norm,
        norm_output=bool(cfg.get("norm_output")),
        norm_before_fc=nbf,
        pruned=d.Vd < d.V,
        embed=case.embed,
        dtype=dtype,
        seed=seed,
    )
    return Written(Path(path), fmt, spec, cfg, canon, stored)


def write_eagle1(path, seed: int = 0) -> Path:
    """EAGLE-1 checkpoint from the EAGLE-1 config: ``fc [H, 2H]`` + bias, ``layers.0.*`` without
    ``hidden_norm`` (docs/formats.md §5: reject)."""
    cfg = shrink(load_real("eagle1-repo_llama3-instruct-8b.NOT-EAGLE3.json"))
    d = _real_dims(cfg, False, 3)
    g = torch.Generator().manual_seed(seed)

    def w(*shape):
        return (torch.randn(*shape, generator=g) * 0.05).to(torch.float16)

    t = {"fc.weight": w(d.H, 2 * d.H), "fc.bias": w(d.H)}
    p = "layers.0."
    t.update(_llama_attn(p, d, d.H, w))
    t.update(
        {
            p + "mlp.gate_proj.weight": w(d.I, d.H),
            p + "mlp.up_proj.weight": w(d.I, d.H),
            p + "mlp.down_proj.weight": w(d.H, d.I),
            p + "post_attention_layernorm.weight": 1 + w(d.H),
        }
    )
    write_dir(Path(path), cfg, t, "bin")
    return Path(path)


# --------------------------------------------------------------------------------------------
# helpers for the tests
# --------------------------------------------------------------------------------------------


ST_ITEMSIZE = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
}


def check_safetensors_file(file) -> dict:
    """Validate one file against the safetensors format by hand (independent of any writer): 8-byte
    little-endian header length, a JSON object header (trailing spaces allowed), ``__metadata__`` of
    strings, every tensor's byte range ``prod(shape) * itemsize`` long, ranges contiguous from 0 with no
    hole or overlap, and the file ending exactly at the last byte. Returns the header."""
    import math
    import struct

    raw = Path(file).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    head = raw[8 : 8 + n]
    assert head[:1] == b"{", "header must start with '{'"
    header = json.loads(head.decode("utf-8").rstrip(" "))
    meta = header.pop("__metadata__", {})
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items())
    spans = []
    for name, info in header.items():
        begin, end = info["data_offsets"]
        assert end - begin == math.prod(info["shape"]) * ST_ITEMSIZE[info["dtype"]], name
        spans.append((begin, end, name))
    pos = 0
    for begin, end, name in sorted(spans):
        assert begin == pos, f"hole or overlap before {name} in {file}"
        pos = end
    assert 8 + n + pos == len(raw), f"{file}: {len(raw) - 8 - n - pos} bytes after the last tensor"
    return header


def read_safetensors_dir(path) -> dict[str, torch.Tensor]:
    """Every tensor of a safetensors directory (single file or index + shards), read with the
    safetensors library only, by stored name."""
    from safetensors import safe_open

    path = Path(path)
    index = path / "model.safetensors.index.json"
    files = (
        sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.is_file() else ["model.safetensors"]
    )
    out = {}
    for f in files:
        check_safetensors_file(path / f)
        with safe_open(str(path / f), framework="pt") as fh:
            for k in fh.keys():
                assert k not in out, f"{k} stored twice"
                out[k] = fh.get_tensor(k)
    return out


def safetensors_metadata(path) -> dict[str, str]:
    from safetensors import safe_open

    path = Path(path)
    out = {}
    for f in sorted(path.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as fh:
            out.update(fh.metadata() or {})
    return out


def tensor_bytes(t: torch.Tensor) -> bytes:
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape) and tensor_bytes(a) == tensor_bytes(b)


def tree_state(root) -> dict[str, tuple]:
    """(sha256, size, mtime_ns) of every file and (mtime_ns) of every directory under ``root``
    (symlinks are followed for content, and their own lstat mtime recorded)."""
    root = Path(root)
    out: dict[str, tuple] = {".": ("dir", os.stat(root).st_mtime_ns)}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        st = os.lstat(p)
        if p.is_symlink():
            out[rel] = ("link", os.readlink(p), st.st_mtime_ns)
        elif p.is_dir():
            out[rel] = ("dir", st.st_mtime_ns)
        else:
            out[rel] = ("file", hashlib.sha256(p.read_bytes()).hexdigest(), st.st_size, st.st_mtime_ns)
    return out


def source_guarded(convert_fn):
    """Wrap a ``convert(src, dst, ...)`` function so that every call, successful or not, proves that a
    local source directory kept its bytes and mtimes (files and directories)."""
    import functools

    @functools.wraps(convert_fn)
    def wrapper(src, dst, *args, **kwargs):
        local = Path(str(src)).is_dir()
        before = tree_state(src) if local else None
        try:
            return convert_fn(src, dst, *args, **kwargs)
        finally:
            if local:
                assert tree_state(src) == before, f"convert modified its source {src}"

    return wrapper
