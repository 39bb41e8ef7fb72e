"""The stored facts a profile reads: the config as written and the tensor names and shapes as stored, plus
what the engine takes from the target it serves the drafter with."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Stored:
    """A drafter's files as stored: ``config`` verbatim, ``tensors`` stored name → shape."""

    config: dict
    tensors: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def has(self, fragment: str) -> bool:
        """Some stored name contains ``fragment`` (the engines' loaders match names by substring)."""
        return any(fragment in n for n in self.tensors)


@dataclass(frozen=True)
class ServedTarget:
    """What the engine reads from the target: its vocabulary size (``get_vocab_size()``), layer count,
    the context it is served with (``max_model_len``) and its class (``architectures[0]``). ``None``
    where not known: a reading without a target takes the drafter's own ``vocab_size`` as the target's."""

    vocab_size: int | None = None
    num_layers: int | None = None
    max_model_len: int | None = None
    architecture: str | None = None
    model_type: str | None = None
