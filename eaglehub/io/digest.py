"""Content identity of a checkpoint: the sha256 of the files that decide what an engine loads.

A verify report records it per drafter (``files_sha256``) and ``eaglehub publish`` accepts a report
only for the checkpoint whose files still hash the same, wherever the directory lies now (a CI
artifact is verified on one machine and published from another): path or modification times
would not survive that, content does.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from eaglehub.io.tensorio import find_weight_files

CHUNK = 1 << 20


def identity_files(root: Path) -> list[str]:
    """``config.json``, the weights index (when sharded) and the weight files vLLM loads from ``root``.

    Raises: EaglehubError (E-INPUT-*): no weights (:func:`eaglehub.io.tensorio.find_weight_files`).
    """
    root = Path(root)
    kind, weights = find_weight_files(root)
    index = sorted(p.name for p in root.glob("*.safetensors.index.json")) if kind == "safetensors-sharded" else []
    return ["config.json", *index[:1], *weights]


def sha256_file(path: Path) -> str:
    """Hex sha256 of one file, read in 1 MiB chunks (memory stays flat for multi-GB shards)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def files_sha256(root: Path) -> dict[str, str]:
    """``{file name: hex sha256}`` of :func:`identity_files` of ``root``."""
    return {name: sha256_file(Path(root) / name) for name in identity_files(root)}
