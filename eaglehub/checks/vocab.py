"""``d2t`` / ``t2d`` consistency (docs/formats.md §2; F6, F7; docs/vllm.md §4 for the ``Vd == V`` rule).

Works on numpy arrays (no torch): the maps are read with :func:`.context.drafter_array`.
"""

from __future__ import annotations

from eaglehub.checks.context import Context, drafter_array
from eaglehub.findings import Finding, finding

#: integer dtypes accepted for ``d2t`` (torch names; the ones torch always had, as before).
_INT_DTYPES = frozenset({"int64", "int32", "int16", "int8", "uint8"})


def _dtype_name(arr, given: str | None) -> str:
    import numpy as np

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
    import numpy as np

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
                    # no engine reads t2d: vLLM 0.33.0 llama_eagle3.py L426-427 and SGLang 0.5.23
                    # srt/models/llama_eagle3.py L355-356 skip it at load; tools that take the map from it need it
                    "pruned vocabulary with d2t but no t2d: the engines never read t2d (both skip it at load), "
                    "tools that take the map from t2d rather than d2t need it",
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
                f"{n} target id(s) named by d2t are not marked in t2d: the engines map draft ids with d2t only (both "
                "skip t2d at load), a tool that takes the map from t2d gets other ids",
                "rebuild both maps from one sorted id list",
            )
        )
    return out


def _maps_agree(d, V: int, Vd: int) -> bool:
    """Whether ``d2t`` (I64 ``[Vd]``) and ``t2d`` (BOOL ``[V]``) are both stored and :func:`check_vocab_maps` has
    nothing to say about them, decided on their raw bytes: a plain conversion's checks then need no numpy, whose
    import takes about as long as the rest of them. ``False`` leaves the verdict to :func:`check_vocab_maps`."""
    import operator
    import sys
    from array import array

    if "d2t" not in d.names or "t2d" not in d.names:
        return False
    infos = [d.index.tensors.get(d.names[n]) for n in ("d2t", "t2d")]
    if any(i is None for i in infos) or (infos[0].st_dtype, infos[1].st_dtype) != ("I64", "BOOL"):
        return False
    if tuple(infos[0].shape) != (Vd,) or tuple(infos[1].shape) != (V,):
        return False
    raw, mask = (d.index.load_bytes(d.names[n]) for n in ("d2t", "t2d"))
    if raw is None or mask is None or mask.translate(None, b"\x00\x01"):  # a mask byte other than 0 / 1
        return False
    offsets = array("q")
    offsets.frombytes(raw)
    if sys.byteorder != "little":
        offsets.byteswap()
    if Vd < V and not any(offsets):  # W-D2T-ZERO unless t2d confirms it: check_vocab_maps decides
        return False
    ids = list(map(operator.add, range(Vd), offsets))  # in C, as the rest: a few ms for 128k ids
    return (
        Vd > 0
        and len(set(ids)) == Vd
        and min(ids) >= 0
        and max(ids) < V
        and V - mask.count(0) == Vd
        and all(operator.itemgetter(*ids)(mask) if Vd > 1 else (mask[ids[0]],))
    )


def check(ctx: Context) -> list[Finding]:
    d = ctx.drafter
    if d.dims.V is None or d.dims.Vd is None:
        return []
    dims = ctx.settled_dims  # a wrong vocab_size / draft_vocab_size is E-CONFIG-DIM's, not the maps'
    V, Vd = dims.V or d.dims.V, dims.Vd or d.dims.Vd
    if _maps_agree(d, V, Vd):
        return []
    d2t, t2d = (drafter_array(d, n) if n in d.names else None for n in ("d2t", "t2d"))
    dtypes = {n: d.tensors[n].dtype for n in ("d2t", "t2d") if n in d.names}
    found = check_vocab_maps(d2t, t2d, V, Vd, dtypes.get("d2t"), dtypes.get("t2d"))
    if d.format == "modelopt":  # ModelOpt exports d2t only, by design (docs/formats.md §5)
        found = [f for f in found if f.code != "W-T2D-MISSING"]
    # d2t shipped unpruned (Vd == V) fails to load in vLLM >= 0.30: checks/profiles.py says so per engine
    return _rebuild_hints(ctx, found)


#: map findings that ``convert --rebuild-vocab-maps`` fixes wherever the checkpoint holds one usable map
REBUILDS = frozenset(
    {
        "E-D2T-MISSING",
        "E-D2T-DTYPE",
        "E-D2T-DUPLICATE",
        "E-D2T-RANGE",
        "W-T2D-MISSING",
        "E-T2D-DTYPE",
        "E-T2D-COUNT",
        "E-T2D-MISMATCH",
    }
)


def _rebuild_hints(ctx: Context, found: list[Finding]) -> list[Finding]:
    """The exact conversion that writes both maps afresh from the one the checkpoint holds usable (the d2t the
    engines serve with, else t2d's ids), for the findings it fixes."""
    from dataclasses import replace

    if not any(f.code in REBUILDS for f in found):
        return found
    hint = rebuild_hint(ctx)
    return [replace(f, hint=hint) if f.code in REBUILDS and hint else f for f in found]


def rebuild_hint(ctx: Context) -> str | None:
    """``convert --rebuild-vocab-maps`` as the exact command, where the checkpoint holds a map to rebuild from."""
    from eaglehub.checks.context import convert_command
    from eaglehub.vocab.maps import rebuildable

    rebuilt = rebuildable(ctx.drafter)
    if rebuilt is None:
        return None
    return f"write the maps afresh from {rebuilt.source}: {convert_command(ctx, '--rebuild-vocab-maps')}"


#: rows of lm_head read per step by :func:`check_lm_head_rows` (bounded memory on a large head)
ROWS_BYTES = 16 << 20


def _row_digests(d, name: str) -> list[bytes]:
    """One digest per row of tensor ``name`` (equal rows, equal digests), read in blocks of about 16 MiB."""
    import hashlib

    import numpy as np

    info = d.tensors[name]
    rows = info.shape[0]
    step = max(1, ROWS_BYTES // max(1, info.nbytes // max(1, rows)))
    out: list[bytes] = []
    for start in range(0, rows, step):
        block = np.ascontiguousarray(d.index.load_numpy(d.names[name], max_rows=step, start_row=start))
        out += [hashlib.blake2b(row.tobytes(), digest_size=16).digest() for row in block.reshape(len(block), -1)]
    return out


def check_lm_head_rows(ctx: Context) -> list[Finding]:
    """``--deep``: ``lm_head`` rows cut from a full-vocabulary head by the offsets ``d2t[i]`` instead of the
    target ids ``i + d2t[i]`` (E-LMHEAD-OFFSET).

    TorchSpec's ``tools/convert_to_hf.py --prune-vocab`` does this (``tensors["lm_head.weight"][d2t]`` in
    ``_save_with_vocab_pruning``): row ``i`` then holds the full head's row ``d2t[i]``, the logit of another
    token, and the engines propose token ``i + d2t[i]`` with it. The cut leaves a fingerprint in the file itself:
    draft rows whose offsets are equal (consecutive target ids, in a sorted map) are copies of one full-head row,
    so rows are identical exactly where offsets are. A trained or initialised head never has that pattern; the
    check needs at least one repeated offset to see it (the full-vocabulary head, when it is at hand, shows the
    same directly: see tests/test_producer_findings.py)."""
    import numpy as np

    d = ctx.drafter
    V, Vd = d.dims.V, d.dims.Vd
    head = d.tensors.get("lm_head.weight")
    if V is None or Vd is None or Vd >= V or "d2t" not in d.names or head is None or not head.is_float:
        return []
    if len(head.shape) != 2 or head.shape[0] != Vd:
        return []  # a wrong shape is E-TENSOR-SHAPE's
    d2t = np.asarray(drafter_array(d, "d2t")).reshape(-1)
    if d2t.dtype.kind not in "iu" or len(d2t) != Vd:
        return []  # E-D2T-DTYPE / the shape check
    d2t = d2t.astype(np.int64)
    if len(np.unique(d2t)) == Vd:
        return []  # no repeated offset: no fingerprint to read
    digests = _row_digests(d, "lm_head.weight")
    by_offset: dict[int, bytes] = {}
    by_digest: dict[bytes, int] = {}
    for off, dig in zip(d2t.tolist(), digests):
        if by_offset.setdefault(off, dig) != dig or by_digest.setdefault(dig, off) != off:
            return []  # rows differ where offsets repeat, or repeat where offsets differ: not the offset cut
    if len(by_digest) == 1 and not bool(np.asarray(drafter_array(d, "lm_head.weight", max_rows=1)).any()):
        return []  # one all-zero row everywhere: an untrained head (W-TENSOR-INIT), not a cut
    ids = np.arange(Vd, dtype=np.int64) + d2t
    i = int(np.flatnonzero(d2t[1:] == d2t[:-1])[0]) if bool((d2t[1:] == d2t[:-1]).any()) else 0
    return [
        finding(
            "E-LMHEAD-OFFSET",
            "lm_head.weight",
            f"lm_head has {len(by_digest)} distinct row(s) for {Vd} draft ids, identical exactly where d2t repeats an "
            f"offset (rows {i} and {i + 1}, offset {int(d2t[i])}, target ids {int(ids[i])} and {int(ids[i + 1])}): "
            "the rows were cut from the full-vocabulary head by the offsets d2t[i], not by the target ids i + d2t[i] "
            "(TorchSpec convert_to_hf.py --prune-vocab), so each draft id is scored with another token's row and "
            "the engines propose tokens the drafter did not predict",
            "re-export the training checkpoint without --prune-vocab (the full-vocabulary head, rows intact): "
            "python tools/convert_to_hf.py --input-dir ITER_DIR --config DRAFT_CONFIG.json",
        )
    ]
