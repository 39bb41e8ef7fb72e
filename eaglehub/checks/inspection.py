"""``eaglehub inspect``: describe a checkpoint from headers only (no tensor data is read).

Report layout: ``schemas/inspect-report.schema.json``. Any layout is described, including
rejected ones (``layout`` then says ``not-a-drafter``, ``eagle1``, ``speculators`` ...).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from eaglehub.formats.registry import architecture, read_drafter
from eaglehub.io.source import resolve_source

REPORT_SCHEMA = "eaglehub.inspect-report/2"


def inspect_drafter(src: str | Path, source_format: str | None = None, revision: str | None = None) -> dict:
    """Format (with the evidence that decided it), layer kind, dims (H, Ht, A, nh, nkv, head_dim, I, V, Vd), flags, aux ids (+ convention), vocabulary,
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
        "dtype": d.dtype,
        "eagle_version": d.version,
        "target": d.target,
        "provenance": d.provenance,
        "dims": asdict(dims),
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
