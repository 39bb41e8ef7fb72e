"""The engine registry: every engine eaglehub can run a target + drafter pair in, by name."""

from __future__ import annotations

from pathlib import Path

from eaglehub.engines.base import Engine
from eaglehub.errors import EaglehubError

ENGINE_NAMES = ("auto", "vllm", "reference")


def make_engines(names: list[str], log_dir: Path | None = None, device: str = "cpu") -> list[Engine]:
    """Engines by name: ``vllm``, ``reference``, or ``auto`` (vLLM when installed, else the reference
    engine). Repeated names collapse to one engine.

    Raises:
        EaglehubError: an unknown name (exit 2).
    """
    import importlib.util

    from eaglehub.engines.reference import ReferenceEngine
    from eaglehub.engines.vllm_engine import VllmEngine

    out: list[Engine] = []
    seen: set[str] = set()
    for name in names or ["auto"]:
        if name not in ENGINE_NAMES:
            raise EaglehubError(f"unknown engine {name!r}", hint=f"choose from {', '.join(ENGINE_NAMES)}")
        if name == "auto":
            name = "vllm" if importlib.util.find_spec("vllm") is not None else "reference"
        if name not in seen:
            seen.add(name)
            out.append(VllmEngine(log_dir=log_dir) if name == "vllm" else ReferenceEngine(device=device))
    return out
