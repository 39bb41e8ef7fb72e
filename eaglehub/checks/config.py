"""Config-level checks: JSON Schema, drafter class, RoPE type, tie/alias/vocab fields."""

from __future__ import annotations

from ..findings import Finding, finding
from ..layouts import LLAMA_EAGLE3_ARCHS, RESEARCH_ARCH, architecture
from ..schemas import schema_errors
from .context import Context

#: rope types vLLM's ``get_rope`` and transformers' ``ROPE_INIT_FUNCTIONS`` know (F14).
KNOWN_ROPE_TYPES = frozenset({"default", "linear", "dynamic", "yarn", "longrope", "llama3", "mrope", "deepseek_yarn", "su"})
DRAFTER_MODEL_TYPES = frozenset({"llama"})


def check_schema(ctx: Context) -> list[Finding]:
    """Every violation of ``schemas/drafter-config.schema.json`` → E-CONFIG-SCHEMA."""
    return [
        finding("E-CONFIG-SCHEMA", path, f"config.json: {msg}", "fix config.json (see schemas/drafter-config.schema.json)")
        for path, msg in schema_errors(ctx.drafter.config, "drafter-config")
    ]


def _evidence(ctx: Context) -> str:
    d, t = ctx.drafter.dims, ctx.drafter.tensors
    bits = []
    if "fc.weight" in t:
        bits.append(f"fc.weight {list(t['fc.weight'].shape)} = [H, {d.A}·Ht]")
    if "d2t" in t:
        bits.append("d2t present")
    bits.append(f"{d.layers} decoder layer(s)")
    return ", ".join(bits)


def check_architecture(ctx: Context) -> list[Finding]:
    """``architectures[0]`` must be a class vLLM builds a Llama EAGLE-3 drafter from and
    ``model_type`` must be ``llama`` (F1; vllm.md §1, §14)."""
    cfg = ctx.drafter.config
    arch = architecture(cfg)
    out = []
    if arch == RESEARCH_ARCH:
        out.append(finding("W-CONFIG-ARCH", "architectures", "research class LlamaForCausalLM: vLLM renames it, SGLang needs LlamaForCausalLMEagle3",
                           'set "architectures": ["LlamaForCausalLMEagle3"]'))
    elif arch is not None and arch not in LLAMA_EAGLE3_ARCHS:
        out.append(finding("E-CONFIG-ARCH", "architectures",
                           f"{arch} is not a drafter class, yet the checkpoint is a drafter ({_evidence(ctx)}); engines would build a full {arch}",
                           f'set "architectures": ["LlamaForCausalLMEagle3"] (registered: {", ".join(sorted(LLAMA_EAGLE3_ARCHS))})'))
    mt = cfg.get("model_type")
    if not isinstance(mt, str) or mt not in DRAFTER_MODEL_TYPES:
        out.append(finding("E-CONFIG-ARCH", "model_type", f"model_type {mt!r}: vLLM parses a Llama-style drafter config as 'llama'",
                           'set "model_type": "llama"'))
    return out


def check_rope(ctx: Context) -> list[Finding]:
    """``rope_scaling``/``rope_parameters`` must name a known ``rope_type`` (F14)."""
    out = []
    for key in ("rope_scaling", "rope_parameters"):
        rope = ctx.drafter.config.get(key)
        if isinstance(rope, dict):
            rtype = rope.get("rope_type", rope.get("type"))
            if rtype is not None and rtype not in KNOWN_ROPE_TYPES:
                out.append(finding("E-ROPE-TYPE", f"{key}.rope_type", f"unknown rope_type {rtype!r}",
                                   f"use one of {', '.join(sorted(KNOWN_ROPE_TYPES))}, copied verbatim from the training config"))
    return out


def check_misc(ctx: Context) -> list[Finding]:
    """``tie_word_embeddings`` (not read by vLLM), ``use_aux_norm`` alias, ``Vd <= V``."""
    cfg, d, out = ctx.drafter.config, ctx.drafter.dims, []
    if cfg.get("tie_word_embeddings") is True:
        out.append(finding("W-CONFIG-TIE", "tie_word_embeddings", "tie_word_embeddings is true but vLLM does not read it; the drafter's lm_head is used as stored",
                           'set "tie_word_embeddings": false and ship lm_head.weight'))
    if ctx.drafter.flags.use_aux_norm and not ctx.drafter.flags.fc_norm:
        out.append(finding("W-FCNORM-ALIAS", "use_aux_norm", "use_aux_norm (SGLang alias) is true but fc_norm, which vLLM reads, is not",
                           'add "fc_norm": true'))
    if d.Vd and d.V and d.Vd > d.V:
        out.append(finding("E-VOCAB-DRAFT", "draft_vocab_size", f"draft_vocab_size {d.Vd} > vocab_size {d.V}",
                           "draft_vocab_size counts a subset of the target vocabulary"))
    return out
