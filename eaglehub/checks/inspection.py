"""``eaglehub inspect``: describe a checkpoint from headers only (no tensor data is read).

Report layout: ``schemas/inspect-report.schema.json``. Any layout is described, including
rejected ones (``layout`` then says ``not-a-drafter``, ``eagle1``, ``speculators`` ...).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from pathlib import Path

from eaglehub.drafter.canonical import MLA, Drafter, config_dtype
from eaglehub.drafter.shapes import quantization_tensors
from eaglehub.formats.registry import architecture, read_drafter
from eaglehub.io.source import resolve_source

REPORT_SCHEMA = "eaglehub.inspect-report/2"


def stored_dtype(d: Drafter) -> str | None:
    """The dtype the float weights are stored in (the most common one when they differ; quantized payloads
    and their scales left out), else the first tensor's: what the file holds, not what its config says."""
    quantized = quantization_tensors(d)
    floats = Counter(i.dtype for n, i in d.tensors.items() if i.is_float and n not in quantized)
    if floats:
        return floats.most_common(1)[0][0]
    return next((i.dtype for i in d.tensors.values()), None)


MLA_DIMS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


def mla_dims(d: Drafter) -> dict | None:
    """The latent-attention ranks and head widths of an MLA drafter (``None`` for other layer kinds): its
    attention is sized by these, and ``head_dim`` means nothing for it (vLLM 0.33.0
    vllm/model_executor/models/deepseek_v2.py:1000, ``DeepseekV2MLAAttention``)."""
    if d.layer_kind != MLA:
        return None
    out = {}
    for key in MLA_DIMS:
        value = d.config.get(key)
        out[key] = value if isinstance(value, int) and not isinstance(value, bool) else None
    return out


def inspect_drafter(src: str | Path, source_format: str | None = None, revision: str | None = None) -> dict:
    """Format (with the evidence that decided it), stored weight dtype and the config's, layer kind, dims (H, Ht, A, nh, nkv, head_dim, I, V, Vd), flags, aux ids (+ convention), vocabulary,
    tensor table (canonical name, stored name, shape, dtype, bytes), parameter count and size.

    Raises: EaglehubError (missing dir, bad config JSON, unreadable weights; exit 2).
    """
    path, source = resolve_source(str(src), revision)
    d = read_drafter(path, fmt=source_format)
    dims = d.dims
    tensors = [
        {
            "name": c,
            "stored_name": i.source_name,
            "file": i.file,
            "shape": list(i.shape),
            "dtype": i.dtype,
            "bytes": i.nbytes,
        }
        for c, i in sorted(d.tensors.items())
    ]
    pruned = dims.V is not None and dims.Vd is not None and dims.Vd < dims.V
    return {
        "schema": REPORT_SCHEMA,
        "path": str(d.path),
        "source": source,
        "format": d.format,
        "format_evidence": d.evidence,
        "layer_kind": d.layer_kind,
        "attention_windows": d.windows,
        "architecture": architecture(d.raw_config),
        "weights_format": d.index.format,
        "files": d.index.files,
        "stripped_prefix": d.index.stripped_prefix,
        "dtype": stored_dtype(d),
        "config_dtype": config_dtype(d.config),
        "eagle_version": d.version,
        "target": d.target,
        "provenance": d.provenance,
        "dims": asdict(dims),
        "mla": mla_dims(d),
        "flags": asdict(d.flags),
        "aux": asdict(d.aux),
        "vocab": {
            "V": dims.V,
            "Vd": dims.Vd,
            "pruned": pruned,
            "d2t": "d2t" in d.names,
            "t2d": "t2d" in d.names,
        },
        "parameters": d.index.numel,
        "bytes": d.index.nbytes,
        "tensors": tensors,
    }
