"""Layout detection (formats.md §6) and reading any drafter directory into :class:`eaglehub.drafter.Drafter`.

One module per layout family; :data:`READERS` says which layouts can be mapped to canonical names
today. Add a layout by adding a module with ``canonical_names(names)`` and ``write(...)`` and an
entry in :data:`READERS`.
"""

from __future__ import annotations

from pathlib import Path

from ..drafter import Drafter, derive_dims, nested_config, read_aux, read_config, read_flags
from ..tensorio import TensorIndex, read_index
from . import native

#: ``architectures[0]`` values vLLM maps to ``llama_eagle3.Eagle3LlamaForCausalLM`` (vllm.md §1).
LLAMA_EAGLE3_ARCHS = frozenset({
    "Eagle3LlamaForCausalLM", "LlamaForCausalLMEagle3", "Eagle3MiniMaxM2ForCausalLM",
    "Eagle3Qwen2_5vlForCausalLM", "Eagle3Qwen3vlForCausalLM", "PEagleDraftModel", "PeagleLlamaForCausalLM",
})
#: EAGLE research class; vLLM rewrites it to ``Eagle3LlamaForCausalLM`` (vllm.md §1).
RESEARCH_ARCH = "LlamaForCausalLM"
MLA_ARCHS = frozenset({"Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM"})
QWEN3_EAGLE3_ARCH = "Eagle3Qwen3ForCausalLM"

#: layout -> module that maps its names to canonical ones and writes it.
READERS = {
    "eagle3-native": native,  # LlamaForCausalLMEagle3 + midlayer.* (SpecForge, TorchSpec-native, vLLM research)
    "eagle3-research": native,  # LlamaForCausalLM + midlayer.* (SafeAILab/EAGLE)
    "eagle3-exported": native,  # layers.0.* (vLLM-exported)
    "modelopt": native,  # layers.0.* + eagle_config.next_layer_regular, no t2d
    "torchspec": native,  # TorchSpec export (layers.0.* since PR #134)
}
#: layouts recognised but not mapped yet, and layouts that are not EAGLE-3 drafters at all.
UNSUPPORTED = ("speculators", "mla", "eagle3-qwen3")
REJECTED = ("eagle1", "not-a-drafter")


def architecture(cfg: dict) -> str | None:
    archs = cfg.get("architectures")
    return archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None


def detect_layout(cfg: dict, index: TensorIndex) -> str:
    """Classify a checkpoint (formats.md §6: config first, then tensors).

    Returns one of :data:`READERS`, :data:`UNSUPPORTED` or :data:`REJECTED`.
    """
    names = index.names()
    arch = architecture(cfg)
    if "speculators_model_type" in cfg:
        return "speculators"
    if arch in MLA_ARCHS or "kv_lora_rank" in cfg:
        return "mla"
    if arch == QWEN3_EAGLE3_ARCH:
        return "eagle3-qwen3"
    evidence = (
        "fc.weight" in names or "d2t" in names or "draft_vocab_size" in cfg or arch in LLAMA_EAGLE3_ARCHS
        or any(n.startswith(native.LAYER0) for n in names)
    )
    if not evidence:
        return "not-a-drafter"
    fc, H = index.tensors.get("fc.weight"), cfg.get("hidden_size")
    if fc is not None and len(fc.shape) == 2 and fc.shape[1] == 2 * (H or -1) and not any("hidden_norm" in n for n in names):
        return "eagle1"
    prefix = native.layer0_prefix(names)
    if "_torchspec_version" in cfg or "torchspec_version" in index.metadata:
        return "torchspec"
    if prefix == native.EXPORTED_LAYER0 and "t2d" not in names and "next_layer_regular" in nested_config(cfg):
        return "modelopt"
    if prefix == native.LAYER0:
        return "eagle3-research" if arch == RESEARCH_ARCH else "eagle3-native"
    return "eagle3-exported"


def read_drafter(path: Path, index: TensorIndex | None = None) -> Drafter:
    """Read a drafter directory from headers only into the canonical :class:`Drafter`.

    Works for every layout: unsupported or rejected layouts keep their stored names (``layout`` says
    which). Raises: EaglehubError (missing/unreadable config or weights; exit 2).
    """
    path = Path(path)
    cfg = read_config(path)
    index = index or read_index(path)
    layout = detect_layout(cfg, index)
    reader = READERS.get(layout)
    names = reader.canonical_names(index.names()) if reader else {n: n for n in index.names()}
    return Drafter(path, layout, cfg, derive_dims(cfg), read_aux(cfg), read_flags(cfg), index, names)


def stored_prefix(drafter: Drafter) -> str:
    """How the drafter spells decoder layer 0 on disk (``midlayer.`` or ``layers.0.``)."""
    return native.layer0_prefix(drafter.index.names())
