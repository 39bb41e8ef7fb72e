"""``d2t`` / ``t2d`` consistency (docs/formats.md §2; F6, F7; docs/vllm.md §4 for the ``Vd == V`` rule).

Works on numpy arrays (no torch): the maps are read with :func:`.context.drafter_array`.
"""

from __future__ import annotations

import numpy as np

from eaglehub.checks.context import Context, drafter_array
from eaglehub.findings import Finding, finding

#: integer dtypes accepted for ``d2t`` (torch names; the ones torch always had, as before).
_INT_DTYPES = frozenset({"int64", "int32", "int16", "int8", "uint8"})


def _dtype_name(arr, given: str | None) -> str:
    return given or np.asarray(arr).dtype.name


def check_vocab_maps(
    d2t, t2d, V: int, Vd: int, d2t_dtype: str | None = None, t2d_dtype: str | None = None
) -> list[Finding]:
    """Check ``d2t`` (int ``[Vd]`` offsets, or ``None``) and ``t2d`` (bool ``[V]``, or ``None``).

    ``d2t``/``t2d`` are numpy arrays (anything ``np.asarray`` takes). ``d2t_dtype``/``t2d_dtype``:
    the stored dtype names (torch spelling, e.g. ``"bfloat16"``) when the arrays were widened on
    loading; by default the arrays' own dtype names are used.

    Rules: ``ids = arange(Vd) + d2t`` strictly increasing in ``[0, V)``; all-zero ``d2t`` with
    ``Vd < V`` is suspicious unless ``t2d`` confirms the first ``Vd`` ids; ``d2t`` with ``Vd == V``
    breaks vLLM >= 0.30; ``t2d.sum() == Vd`` and ``t2d[ids]`` all true. Length mismatches are left to the shape check.
    """
    out: list[Finding] = []
    ids = None
    d2t = None if d2t is None else np.asarray(d2t)
    t2d = None if t2d is None else np.asarray(t2d)
    if d2t is not None and d2t.ndim == 1 and len(d2t) == Vd:
        dname = _dtype_name(d2t, d2t_dtype)
        if dname not in _INT_DTYPES:
            return [
                finding(
                    "E-D2T-DTYPE",
                    "d2t",
                    f"d2t is {dname}, must be an integer tensor (int64)",
                    "store d2t as int64 offsets: d2t[i] = target_id[i] - i",
                )
            ]
        ids = np.arange(Vd, dtype=np.int64) + d2t.astype(np.int64)
        if Vd > 1 and not bool((ids[1:] > ids[:-1]).all()):
            i = int(np.flatnonzero(ids[1:] <= ids[:-1])[0])
            out.append(
                finding(
                    "E-D2T-ORDER",
                    "d2t",
                    f"target ids arange(Vd)+d2t are not strictly increasing (ids[{i}]={int(ids[i])}, ids[{i + 1}]={int(ids[i + 1])})",
                    "lm_head rows must be in ascending target-id order with d2t[i] = id[i] - i",
                )
            )
        bad = (ids < 0) | (ids >= V)
        if bool(bad.any()):
            out.append(
                finding(
                    "E-D2T-RANGE",
                    "d2t",
                    f"{int(bad.sum())} mapped id(s) outside [0, {V}), e.g. {int(ids[bad][0])}",
                    "d2t holds offsets (id - i), not absolute ids; rebuild it from the sorted id list",
                )
            )
            ids = None
        confirmed = t2d is not None and t2d.shape == (V,) and int(t2d.sum()) == Vd and bool(t2d[:Vd].all())
        if Vd < V and not bool(d2t.any()) and not confirmed:
            out.append(
                finding(
                    "W-D2T-ZERO",
                    "d2t",
                    "d2t is all zeros: draft id i maps to target id i although the vocabulary is pruned",
                    "rebuild d2t from the training vocabulary",
                )
            )
    if t2d is None:
        if d2t is not None and Vd < V:
            out.append(
                finding(
                    "W-T2D-MISSING",
                    "t2d",
                    "pruned vocabulary with d2t but no t2d (SGLang export and tools need it)",
                    "add t2d = bool[V] marking arange(Vd) + d2t",
                )
            )
        return out
    if t2d.ndim != 1 or len(t2d) != V:
        return out
    tname = _dtype_name(t2d, t2d_dtype)
    if tname != "bool":
        return out + [finding("E-T2D-DTYPE", "t2d", f"t2d is {tname}, must be bool", "store t2d as a bool mask")]
    marked = int(t2d.sum())
    if marked != Vd:
        out.append(
            finding(
                "E-T2D-COUNT",
                "t2d",
                f"t2d marks {marked} target ids but draft_vocab_size is {Vd}",
                "rebuild t2d from d2t (t2d[arange(Vd) + d2t] = True)",
            )
        )
    if ids is not None and not bool(t2d[ids].all()):
        n = int((~t2d[ids]).sum())
        out.append(
            finding(
                "E-T2D-MISMATCH",
                "t2d",
                f"{n} target id(s) named by d2t are not marked in t2d (vLLM uses d2t, SGLang tooling t2d)",
                "rebuild both maps from one sorted id list",
            )
        )
    return out


def check(ctx: Context) -> list[Finding]:
    d = ctx.drafter
    if d.dims.V is None or d.dims.Vd is None:
        return []
    d2t, t2d = (drafter_array(d, n) if n in d.names else None for n in ("d2t", "t2d"))
    dtypes = {n: d.tensors[n].dtype for n in ("d2t", "t2d") if n in d.names}
    dims = ctx.settled_dims  # a wrong vocab_size / draft_vocab_size is E-CONFIG-DIM's, not the maps'
    V, Vd = dims.V or d.dims.V, dims.Vd or d.dims.Vd
    found = check_vocab_maps(d2t, t2d, V, Vd, dtypes.get("d2t"), dtypes.get("t2d"))
    if d.format == "modelopt":  # ModelOpt exports d2t only, by design (docs/formats.md §5)
        found = [f for f in found if f.code != "W-T2D-MISSING"]
    # d2t shipped unpruned (Vd == V) fails to load in vLLM >= 0.30: checks/profiles.py says so per engine
    return found
