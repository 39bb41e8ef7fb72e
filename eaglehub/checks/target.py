"""Drafter ↔ target checks (``--target``): hidden size, vocabulary, dtype, embedding sharing, RoPE
(vllm.md §6, §14; F9, F14, F18). The aux-id range against the target's layers is in :mod:`.aux`."""

from __future__ import annotations

import numpy as np

from ..findings import Finding, finding
from ..tensorio import READ_CHUNK, TensorIndex
from .context import Context

EMBED = "embed_tokens.weight"


def tensors_equal(a: TensorIndex, a_name: str, b: TensorIndex, b_name: str) -> bool:
    """Element-wise equality of two same-shape tensors, like ``torch.equal`` (NaN != NaN, -0 == +0),
    compared in row blocks of about :data:`READ_CHUNK` bytes so two big embedding tables
    ([V, H], often > 1 GB) are never in memory at once. Reads with numpy only (safetensors inputs)."""
    info = a.tensors[a_name]
    if not info.shape:
        return bool(np.array_equal(a.load_numpy(a_name), b.load_numpy(b_name)))
    rows = max(1, READ_CHUNK // max(1, info.nbytes // max(1, info.shape[0])))
    for start in range(0, info.shape[0], rows):
        if not np.array_equal(a.load_numpy(a_name, max_rows=rows, start_row=start),
                              b.load_numpy(b_name, max_rows=rows, start_row=start)):
            return False
    return True


def _embedding(ctx: Context) -> list[Finding]:
    d, t = ctx.drafter, ctx.target
    if EMBED not in d.names:
        if d.dims.H == d.dims.Ht and d.dims.H != t.hidden:  # not already required by shapes.py
            return [finding("E-EMBED-MISSING", EMBED, f"drafter hidden {d.dims.H} != target hidden {t.hidden}: vLLM can only share the target embedding when they match",
                            "ship embed_tokens.weight [V, H] trained with the drafter")]
        return []
    info = d.tensors[EMBED]
    tidx = t.index()
    tinfo = tidx.tensors.get(EMBED)
    if tinfo is None or tinfo.shape != info.shape:
        return [finding("I-EMBED-TRAINED", EMBED, f"drafter ships its own embed_tokens {list(info.shape)} (target's: {list(tinfo.shape) if tinfo else 'absent'}); vLLM keeps it",
                        "")]
    same = tinfo.dtype == info.dtype and tensors_equal(d.index, d.names[EMBED], tidx, EMBED)
    if same:
        return [finding("I-EMBED-SHARED", EMBED, "embed_tokens equals the target's; vLLM shares the target's table", "the tensor can be dropped to save space")]
    return [finding("I-EMBED-TRAINED", EMBED, "embed_tokens differs from the target's; vLLM keeps the drafter's own table", "")]


def rope_settings(cfg: dict) -> tuple[float, dict | None]:
    """``(theta, scaling)`` from ``rope_theta``/``rope_scaling`` or transformers-5 ``rope_parameters``;
    ``type`` is read as ``rope_type`` and a plain ``default`` schedule counts as no scaling."""
    params = cfg.get("rope_parameters") if isinstance(cfg.get("rope_parameters"), dict) else {}
    theta = cfg.get("rope_theta", params.get("rope_theta", 10000.0))
    raw = cfg.get("rope_scaling") if isinstance(cfg.get("rope_scaling"), dict) else None
    scaling = dict(raw or {k: v for k, v in params.items() if k != "rope_theta"})
    if "type" in scaling:
        scaling.setdefault("rope_type", scaling.pop("type"))
    if scaling.get("rope_type", "default") == "default" and set(scaling) <= {"rope_type"}:
        scaling = {}
    return float(theta) if isinstance(theta, (int, float)) else theta, scaling or None


def check(ctx: Context) -> list[Finding]:
    t = ctx.target
    if t is None:
        return []
    d, out = ctx.drafter, []
    if t.hidden is not None and d.dims.Ht is not None and d.dims.Ht != t.hidden:
        out.append(finding("E-HIDDEN-MISMATCH", "target_hidden_size", f"drafter expects aux states of width {d.dims.Ht}, target hidden_size is {t.hidden}",
                           "pair the drafter with the target it was trained on, or fix target_hidden_size"))
    if t.vocab is not None and d.dims.V is not None and d.dims.V != t.vocab:
        out.append(finding("E-VOCAB-MISMATCH", "vocab_size", f"drafter vocab_size {d.dims.V} != target vocab_size {t.vocab}",
                           "vocab_size must be the target's; draft_vocab_size is the pruned size"))
    if t.dtype and d.dtype and t.dtype != d.dtype:
        out.append(finding("W-DTYPE-MISMATCH", "torch_dtype", f"drafter is {d.dtype}, target is {t.dtype}; both meet in one op (embeddings, aux states)",
                           "serve both in one dtype (vLLM casts the drafter to the model dtype)"))
    if t.hidden is not None:
        out += _embedding(ctx)
    mine, theirs = rope_settings(d.config), rope_settings(t.config)
    if mine != theirs:
        out.append(finding("W-ROPE-MISMATCH", "rope_scaling", f"drafter RoPE (theta, scaling) {mine} differs from the target's {theirs}",
                           "keep RoPE fields as trained; if a converter dropped them, copy them from the training config"))
    return out
