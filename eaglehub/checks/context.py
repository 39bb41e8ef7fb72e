"""What every check sees: the drafter and, with ``--target``, facts about the target model.

Checks read tensor data only through :func:`drafter_array` / :meth:`TensorIndex.load_numpy` (numpy),
so ``validate`` never imports torch for safetensors checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..drafter import Drafter, config_dtype, read_config
from ..tensorio import TensorIndex, read_index


@dataclass
class TargetInfo:
    """A target (verifier) model directory: its config and the few fields the checks compare."""

    path: Path
    config: dict
    layers: int | None
    hidden: int | None
    vocab: int | None
    dtype: str | None
    _index: TensorIndex | None = field(default=None, repr=False)

    def index(self) -> TensorIndex:
        """Header index of the target's weights (read on first use). Raises EaglehubError."""
        if self._index is None:
            self._index = read_index(self.path)
        return self._index


def read_target(spec: str | Path) -> TargetInfo:
    """Resolve ``spec`` with :func:`eaglehub.target.resolve_target` and read its config.

    Multimodal configs are read through their ``text_config``. Raises: EaglehubError (exit 2).
    """
    from ..target import resolve_target

    path = resolve_target(str(spec))
    cfg = read_config(path)
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg

    def get(key):
        v = text.get(key, cfg.get(key))
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    return TargetInfo(path, cfg, get("num_hidden_layers"), get("hidden_size"), get("vocab_size"),
                      config_dtype(text) or config_dtype(cfg))


@dataclass
class Context:
    drafter: Drafter
    target: TargetInfo | None = None


def drafter_array(drafter: Drafter, canonical: str, max_rows: int | None = None):
    """Tensor ``canonical`` of ``drafter`` as a numpy array (:meth:`TensorIndex.load_numpy`: only its
    bytes are read, bf16/fp8 come back as float32, no torch for safetensors files).

    Raises: KeyError (unknown name), EaglehubError (unreadable file).
    """
    return drafter.index.load_numpy(drafter.names[canonical], max_rows=max_rows)
