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

    Rules: ``ids = arange(Vd) + d2t`` distinct and in ``[0, V)`` (in any order: the engines scatter by
    id); all-zero ``d2t`` with
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
        # Order is free: vLLM scatters draft logits with ``logits_new[:, arange(Vd) + d2t] = logits``
        # (vllm 0.33.0 model_executor/models/llama_eagle3.py L385-394) and SGLang indexes
        # ``hot_token_id[topk_index]`` (sglang 0.5.23 srt/speculative/eagle_worker_v2.py L757-758), so a
        # frequency-ordered map (ModelOpt's) serves as well as a sorted one. A target id named twice is not:
        # vLLM's scatter keeps one of the two rows' logits and the other draft row is never proposed.
        uniq, counts = np.unique(ids, return_counts=True)
        if bool((counts > 1).any()):
            dup = int(uniq[counts > 1][0])
            rows = [int(i) for i in np.flatnonzero(ids == dup)[:2]]
            out.append(
                finding(
                    "E-D2T-DUPLICATE",
                    "d2t",
                    f"{int((counts - 1).sum())} draft row(s) map to a target id another row already has "
                    f"(rows {rows[0]} and {rows[1]} both map to {dup})",
                    "d2t[i] = target_id[i] - i over a list of distinct target ids (one lm_head row per id)",
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
