"""A config that names an MLA drafter over tensors of Llama attention (``q_proj`` / ``k_proj`` / ``v_proj``, none of
MLA's ``kv_a_proj_with_mqa`` / ``kv_b_proj``): a target's ``model_type`` / class copied into a Llama-style drafter's
config (a Kimi-K2 or DeepSeek-V3 target's ``kimi_k2`` / ``deepseek_v3``, its MLA ranks). The engines pick the
attention by class (vLLM 0.33.0 model_executor/models/registry.py maps ``Eagle3DeepseekV2ForCausalLM`` to
deepseek_eagle3.py, ``LlamaForCausalLMEagle3`` to llama_eagle3.py; SGLang 0.5.23 likewise by
``architectures``), so such a drafter builds MLA attention and none of its trained attention weights load.

The tensors are as trained; the fix is the config: the Llama (or, with q/k norms, Qwen3) class and type, a null
``kv_lora_rank`` (eaglehub's MLA marker; neither engine's Llama class reads it) and whatever dimensions the tensors
then imply. The
finding (E-CONFIG-ARCH) carries that exact ``eaglehub convert`` command; the findings that follow from the
wrong class (MLA tensors missing, Llama ones unexpected, MLA ranks) point to it instead of to their own
symptoms (``--set v_head_dim=…``, "store it under midlayer.*").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from eaglehub.checks.dims import dimension_fixes, llama_attention_under_mla
from eaglehub.drafter.canonical import Drafter, derive_dims, read_flags
from eaglehub.findings import Finding, finding


@dataclass(frozen=True)
class ForeignAttention:
    """The stored attention tensors of another layer kind than the config names, and the config edits (key →
    value, in order) that name the kind they are."""

    tensors: tuple[str, ...]
    kind: str
    settings: dict


def foreign_attention(d: Drafter) -> ForeignAttention | None:
    """The Llama / Qwen3 attention under an MLA config (module doc), or ``None``."""
    llama = llama_attention_under_mla(d)
    if not llama:
        return None
    held = set(d.names)
    qk_norm = any(n.endswith(("self_attn.q_norm.weight", "self_attn.k_norm.weight")) for n in held)
    kind = "Qwen3" if qk_norm else "Llama"
    settings: dict = {
        "architectures": ["Eagle3Qwen3ForCausalLM" if qk_norm else "LlamaForCausalLMEagle3"],
        "model_type": "qwen3" if qk_norm else "llama",
    }
    if "kv_lora_rank" in d.config:  # eaglehub reads an MLA drafter by it, whatever the class (docs/formats.md §6.2)
        settings["kv_lora_rank"] = None
    cfg = {**d.config, **settings}
    as_kind = dataclasses.replace(d, config=cfg, dims=derive_dims(cfg), flags=read_flags(cfg))
    for fix in dimension_fixes(as_kind):  # what the tensors imply once read as the layer they are
        settings[fix.key] = fix.implied
    return ForeignAttention(llama, kind, settings)


def fix_command(ctx, foreign: ForeignAttention) -> str:
    """The exact ``eaglehub convert`` that writes the copy with the class the tensors are."""
    from eaglehub.checks.context import convert_command
    from eaglehub.drafter.settings import setting_arg

    args: list[str] = []
    for key, value in foreign.settings.items():
        args += ["--set", setting_arg(key, value)]
    return convert_command(ctx, *args)


def fix_hint(ctx, foreign: ForeignAttention) -> str:
    """The hint every finding the wrong class causes carries."""
    return (
        f"the tensors are {foreign.kind} attention, as trained; name that class in the config: "
        f"{fix_command(ctx, foreign)}"
    )


def foreign_attention_finding(ctx, foreign: ForeignAttention) -> Finding:
    """E-CONFIG-ARCH for an MLA config over another kind's attention tensors: the class is the cause, named with
    the exact edit, instead of the ranks, tensors and types that follow."""
    cfg = ctx.drafter.config
    said = [f"architectures {cfg.get('architectures')!r}", f"model_type {cfg.get('model_type')!r}"]
    if cfg.get("kv_lora_rank") is not None:
        said.append(f"kv_lora_rank {cfg['kv_lora_rank']!r}")
    names = ", ".join(n.rsplit(".", 2)[-2] for n in foreign.tensors)
    return finding(
        "E-CONFIG-ARCH",
        "architectures",
        f"the config names an MLA drafter ({', '.join(said)}), but the attention tensors are {foreign.kind}'s "
        f"(midlayer.self_attn {names}; no kv_a_proj_with_mqa / kv_b_proj): vLLM and SGLang pick the attention by "
        "class, so they build MLA attention and none of these trained weights load",
        fix_hint(ctx, foreign),
    )


def mla_model_type_hint(ctx) -> str:
    """The exact edit of an MLA drafter's model_type: kimi_k2 for a Kimi-K2 target, else deepseek_v2 (both load the
    same MLA drafter class; the type only picks the config class)."""
    mt = ctx.drafter.config.get("model_type")
    kimi = isinstance(mt, str) and "kimi" in mt.lower()
    from eaglehub.checks.context import set_command as _set_command

    value = "kimi_k2" if kimi else "deepseek_v2"
    other = "deepseek_v2 for other targets" if kimi else "kimi_k2 for a Kimi-K2 target"
    return f"an MLA drafter config loads as {value} ({other}): {_set_command(ctx, 'model_type', value)}"
