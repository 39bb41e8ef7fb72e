"""``verify --baseline-drafter D``: each drafter's acceptance next to a baseline drafter's on the same prompts
and runs (typically a quantized drafter against its unquantized source), and the size on disk of both.

The baseline runs as one more drafter of the same verify run (same target-alone run, prompt ids, batches,
settings), so its section in ``drafters`` carries its own lossless check; this adds the comparison.
"""

from __future__ import annotations

from pathlib import Path

DEFINITION = (
    "acceptance lengths (AL) of each drafter and of the baseline drafter on the same prompts and runs; "
    "al_ratio = AL / baseline AL; al_relative_change = al_ratio - 1; weight_bytes = size on disk of the "
    "drafter's weight files (*.safetensors, the index and pytorch_model.bin), size_ratio = weight_bytes / "
    "baseline weight_bytes"
)


def weight_bytes(drafter: Path) -> int:
    """Bytes on disk of a drafter directory's weight files (the files :func:`eaglehub.io.tensorio.find_weight_files`
    reads, plus the shard index).

    Raises: EaglehubError when the directory holds no weights (:func:`find_weight_files`)."""
    from eaglehub.io.streaming import INDEX_FILE
    from eaglehub.io.tensorio import find_weight_files

    _, files = find_weight_files(Path(drafter))
    index = Path(drafter) / INDEX_FILE
    return sum((Path(drafter) / f).stat().st_size for f in files) + (index.stat().st_size if index.is_file() else 0)


def _al(section: dict) -> float | None:
    return section["acceptance"]["overall"]["acceptance_length"]


def attach_baseline(report: dict, baseline: Path) -> None:
    """Add ``report["baseline_drafter"]`` (``schemas/verify-report.schema.json``): the baseline's AL and size, and
    per other drafter its AL, size, ``al_ratio``, ``al_relative_change`` and ``size_ratio`` (``None`` where an AL is
    undefined: no drafts)."""
    by_path = {Path(d["drafter"]).resolve(): d for d in report["drafters"]}
    base = by_path[Path(baseline).resolve()]
    base_al, base_bytes = _al(base), weight_bytes(baseline)
    rows = []
    for path, d in by_path.items():
        if path == Path(baseline).resolve():
            continue
        al, size = _al(d), weight_bytes(path)
        ratio = al / base_al if al is not None and base_al else None
        rows.append(
            {
                "drafter": d["drafter"],
                "acceptance_length": al,
                "weight_bytes": size,
                "al_ratio": None if ratio is None else round(ratio, 4),
                "al_relative_change": None if ratio is None else round(ratio - 1, 4),
                "size_ratio": round(size / base_bytes, 4) if base_bytes else None,
                "lossless": d["lossless"],
            }
        )
    report["baseline_drafter"] = {
        "drafter": base["drafter"],
        "acceptance_length": base_al,
        "weight_bytes": base_bytes,
        "definition": DEFINITION,
        "comparisons": rows,
    }
