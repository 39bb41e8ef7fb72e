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

from eaglehub.drafter.canonical import LAYER0, MLA, Drafter, derive_dims, layer_kind, read_flags

_LLAMA_ATTENTION = tuple(f"{LAYER0}self_attn.{p}_proj.weight" for p in ("q", "k", "v"))
_MLA_ATTENTION = tuple(f"{LAYER0}self_attn.{p}.weight" for p in ("kv_a_proj_with_mqa", "kv_b_proj"))


@dataclass(frozen=True)
class ForeignAttention:
    """The stored attention tensors of another layer kind than the config names, and the config edits (key →
    value, in order) that name the kind they are."""

    tensors: tuple[str, ...]
    kind: str
    settings: dict


def foreign_attention(d: Drafter) -> ForeignAttention | None:
    """The Llama / Qwen3 attention under an MLA config (module doc), or ``None``."""
    if layer_kind(d.config) != MLA:
        return None
    held = set(d.names)
    llama = tuple(n for n in _LLAMA_ATTENTION if n in held)
    if not llama or any(n in held for n in _MLA_ATTENTION):
        return None
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
    from eaglehub.checks.dims import dimension_fixes

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
