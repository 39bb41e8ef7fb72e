"""``d2t`` / ``t2d`` consistency (formats.md §2; F6, F7; vllm.md §4 for the ``Vd == V`` rule)."""

from __future__ import annotations

from ..findings import Finding, finding
from .context import Context

_INT_DTYPES = {"torch.int64", "torch.int32", "torch.int16", "torch.int8", "torch.uint8"}


def check_vocab_maps(d2t, t2d, V: int, Vd: int) -> list[Finding]:
    """Check ``d2t`` (int ``[Vd]`` offsets, or ``None``) and ``t2d`` (bool ``[V]``, or ``None``).

    Rules: ``ids = arange(Vd) + d2t`` strictly increasing in ``[0, V)``; all-zero ``d2t`` with
    ``Vd < V`` is suspicious unless ``t2d`` confirms the first ``Vd`` ids; ``d2t`` with ``Vd == V``
    breaks vLLM >= 0.30; ``t2d.sum() == Vd`` and ``t2d[ids]`` all true. Length mismatches are left to the shape check.
    """
    import torch

    out: list[Finding] = []
    ids = None
    if d2t is not None and d2t.dim() == 1 and len(d2t) == Vd:
        if str(d2t.dtype) not in _INT_DTYPES:
            return [finding("E-D2T-DTYPE", "d2t", f"d2t is {str(d2t.dtype).removeprefix('torch.')}, must be an integer tensor (int64)",
                            "store d2t as int64 offsets: d2t[i] = target_id[i] - i")]
        ids = torch.arange(Vd, dtype=torch.int64) + d2t.to(torch.int64)
        if Vd > 1 and not bool((ids[1:] > ids[:-1]).all()):
            i = int((ids[1:] <= ids[:-1]).nonzero()[0, 0])
            out.append(finding("E-D2T-ORDER", "d2t", f"target ids arange(Vd)+d2t are not strictly increasing (ids[{i}]={int(ids[i])}, ids[{i + 1}]={int(ids[i + 1])})",
                               "lm_head rows must be in ascending target-id order with d2t[i] = id[i] - i"))
        bad = (ids < 0) | (ids >= V)
        if bool(bad.any()):
            out.append(finding("E-D2T-RANGE", "d2t", f"{int(bad.sum())} mapped id(s) outside [0, {V}), e.g. {int(ids[bad][0])}",
                               "d2t holds offsets (id - i), not absolute ids; rebuild it from the sorted id list"))
            ids = None
        confirmed = t2d is not None and t2d.shape == (V,) and int(t2d.sum()) == Vd and bool(t2d[:Vd].all())
        if Vd < V and not bool(d2t.any()) and not confirmed:
            out.append(finding("W-D2T-ZERO", "d2t", "d2t is all zeros: draft id i maps to target id i although the vocabulary is pruned",
                               "rebuild d2t from the training vocabulary"))
        if Vd == V:
            out.append(finding("W-D2T-UNPRUNED", "d2t", f"d2t shipped with draft_vocab_size == vocab_size ({V}); vLLM >= 0.30 has no parameter for it",
                               "drop d2t and t2d when the vocabulary is not pruned"))
    if t2d is None:
        if d2t is not None and Vd < V:
            out.append(finding("W-T2D-MISSING", "t2d", "pruned vocabulary with d2t but no t2d (SGLang export and tools need it)",
                               "add t2d = bool[V] marking arange(Vd) + d2t"))
        return out
    if t2d.dim() != 1 or len(t2d) != V:
        return out
    if t2d.dtype != torch.bool:
        return out + [finding("E-T2D-DTYPE", "t2d", f"t2d is {str(t2d.dtype).removeprefix('torch.')}, must be bool", "store t2d as a bool mask")]
    marked = int(t2d.sum())
    if marked != Vd:
        out.append(finding("E-T2D-COUNT", "t2d", f"t2d marks {marked} target ids but draft_vocab_size is {Vd}",
                           "rebuild t2d from d2t (t2d[arange(Vd) + d2t] = True)"))
    if ids is not None and not bool(t2d[ids].all()):
        n = int((~t2d[ids]).sum())
        out.append(finding("E-T2D-MISMATCH", "t2d", f"{n} target id(s) named by d2t are not marked in t2d (vLLM uses d2t, SGLang tooling t2d)",
                           "rebuild both maps from one sorted id list"))
    return out


def check(ctx: Context) -> list[Finding]:
    d = ctx.drafter
    if d.dims.V is None or d.dims.Vd is None:
        return []
    d2t = d.load("d2t") if "d2t" in d.names else None
    t2d = d.load("t2d") if "t2d" in d.names else None
    return check_vocab_maps(d2t, t2d, d.dims.V, d.dims.Vd)
