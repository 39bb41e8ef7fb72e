"""The vocabulary maps rebuilt from what a checkpoint holds (``convert --rebuild-vocab-maps``, docs/convert.md).

The engines map draft row ``i`` to target id ``i + d2t[i]`` and never read ``t2d`` (vLLM 0.33.0
llama_eagle3.py L385-394 and L426-427, SGLang 0.5.23 srt/models/llama_eagle3.py L355-356), so a valid ``d2t`` is
what the drafter serves with and is kept; ``t2d`` is derived from it. Where ``d2t`` is missing or unusable, the
target ids ``t2d`` marks are taken in ascending order, the order SpecForge and TorchSpec write both maps and the
``lm_head`` rows in (docs/formats.md §2). A full vocabulary (``Vd == V``) with neither usable is the identity.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eaglehub.drafter.canonical import Drafter
from eaglehub.errors import CheckFailed


@dataclass(frozen=True)
class Rebuilt:
    """The target id of each draft row (``ids[i] = i + d2t[i]``) and what they were taken from."""

    ids: np.ndarray
    source: str

    def d2t(self) -> np.ndarray:
        return self.ids - np.arange(len(self.ids), dtype=np.int64)

    def t2d(self, V: int) -> np.ndarray:
        mask = np.zeros(V, dtype=np.bool_)
        mask[self.ids] = True
        return mask


def _array(d: Drafter, name: str) -> np.ndarray | None:
    if name not in d.names:
        return None
    return np.asarray(d.index.load_numpy(d.names[name])).reshape(-1)


def _d2t_ids(d2t: np.ndarray | None, V: int, Vd: int) -> tuple[np.ndarray | None, str]:
    if d2t is None:
        return None, "there is no d2t"
    if d2t.dtype.kind not in "iu":
        return None, f"d2t is {d2t.dtype.name}, not integer offsets"
    if len(d2t) != Vd:
        return None, f"d2t has {len(d2t)} entries for draft_vocab_size {Vd}"
    ids = np.arange(Vd, dtype=np.int64) + d2t.astype(np.int64)
    if bool(((ids < 0) | (ids >= V)).any()):
        return None, f"d2t maps outside [0, {V})"
    if len(np.unique(ids)) != Vd:
        return None, "d2t names a target id twice"
    return ids, ""


def rebuild_ids(d: Drafter) -> Rebuilt:
    """The draft vocabulary ``d`` holds, from its valid ``d2t``, else the ids its ``t2d`` marks, else (``Vd ==
    V``) the identity.

    Raises:
        CheckFailed: neither map names ``draft_vocab_size`` distinct target ids of a pruned vocabulary (exit 1).
    """
    V, Vd = d.dims.V, d.dims.Vd
    if V is None or Vd is None or Vd > V:
        raise CheckFailed(
            f"{d.path}: the vocabulary maps cannot be rebuilt without vocab_size >= draft_vocab_size "
            f"(vocab_size {V}, draft_vocab_size {Vd})",
            hint=f"run `eaglehub validate {d.path}` and fix the config first",
        )
    ids, why_not = _d2t_ids(_array(d, "d2t"), V, Vd)
    if ids is not None:
        return Rebuilt(ids, "d2t (the map the engines serve with)")
    t2d = _array(d, "t2d")
    if t2d is not None and len(t2d) == V and t2d.dtype.kind in "biu" and set(np.unique(t2d).tolist()) <= {0, 1}:
        marked = np.flatnonzero(t2d).astype(np.int64)
        if len(marked) == Vd:
            return Rebuilt(marked, f"t2d's {Vd} target ids in ascending order ({why_not})")
    if Vd == V:
        return Rebuilt(np.arange(V, dtype=np.int64), f"the identity: the vocabulary is full ({why_not})")
    raise CheckFailed(
        f"{d.path}: the vocabulary maps cannot be rebuilt: {why_not}, and t2d does not mark {Vd} target ids",
        hint="export d2t from the training run's vocabulary (d2t[i] = target_id[i] - i over its sorted ids)",
    )


def valid_d2t(d: Drafter) -> bool:
    """``d`` holds a ``d2t`` the engines serve as a map (integer, distinct ids in range)."""
    V, Vd = d.dims.V, d.dims.Vd
    return V is not None and Vd is not None and _d2t_ids(_array(d, "d2t"), V, Vd)[0] is not None


def rebuildable(d: Drafter) -> Rebuilt | None:
    """:func:`rebuild_ids`, or ``None`` where the maps cannot be rebuilt (for hints that propose it)."""
    try:
        return rebuild_ids(d)
    except CheckFailed:
        return None
    except (OSError, ValueError):  # an unreadable map is the tensor checks' to report
        return None
