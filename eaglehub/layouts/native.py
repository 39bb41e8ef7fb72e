"""Llama-style EAGLE-3 drafters with a flat config: ``midlayer.*`` (EAGLE research, SpecForge,
TorchSpec-native, vLLM research layout) or ``layers.0.*`` (exported: vLLM, ModelOpt, TorchSpec export).

Naming rules: formats.md §1 table; vLLM ``llama_eagle3.py`` maps ``midlayer.`` → ``layers.0.``
(vllm.md §4.4), so both spellings load. Canonical layer 0 is ``midlayer.``.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..drafter import LAYER0
from ..tensorio import SINGLE_SAFETENSORS

EXPORTED_LAYER0 = "layers.0."


def layer0_prefix(names: list[str]) -> str:
    """The stored spelling of decoder layer 0: ``midlayer.`` unless only ``layers.0.*`` is present."""
    if any(n.startswith(LAYER0) for n in names):
        return LAYER0
    return EXPORTED_LAYER0 if any(n.startswith(EXPORTED_LAYER0) for n in names) else LAYER0


def canonical_names(names: list[str]) -> dict[str, str]:
    """Map stored (un-prefixed) names to canonical ones: ``{canonical: stored}``.

    ``layers.0.*`` becomes ``midlayer.*`` when no ``midlayer.*`` tensor exists; everything else keeps
    its name (unknown names are then reported as unexpected by validation).
    """
    prefix = layer0_prefix(names)
    out = {}
    for n in names:
        canon = LAYER0 + n[len(prefix):] if prefix != LAYER0 and n.startswith(prefix) else n
        out.setdefault(canon, n)
    return out


def stored_name(canonical: str, prefix: str) -> str:
    """Inverse of :func:`canonical_names` for layer-0 spelling ``prefix``."""
    return prefix + canonical[len(LAYER0):] if canonical.startswith(LAYER0) else canonical


def write(dst: Path, config: dict, tensors: dict, prefix: str = LAYER0, metadata: dict | None = None) -> int:
    """Write ``config.json`` and one ``model.safetensors`` into the existing directory ``dst``.

    ``tensors`` is ``{canonical name: torch.Tensor}``; layer 0 is spelled ``prefix``. Tensors are
    written as given (no cast), so data is bit-exact. Returns the bytes written. Callers provide
    atomicity (:func:`eaglehub.atomic.atomic_dir`).
    """
    from safetensors.torch import save_file

    dst = Path(dst)
    (dst / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    out = {stored_name(n, prefix): t.contiguous() for n, t in tensors.items()}
    seen: set[int] = set()
    for n, t in out.items():  # tensors sharing storage (tied weights from .bin) need their own copy
        ptr = t.untyped_storage().data_ptr()
        if ptr in seen and t.numel():
            out[n] = t.clone()
        seen.add(ptr)
    save_file(out, str(dst / SINGLE_SAFETENSORS), metadata={"format": "pt", **(metadata or {})})
    return (dst / "config.json").stat().st_size + (dst / SINGLE_SAFETENSORS).stat().st_size
