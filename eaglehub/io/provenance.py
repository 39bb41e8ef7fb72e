"""Provenance of converted drafters: ``eaglehub.json`` next to the weights, plus safetensors metadata.

``eaglehub.json`` (``schemas/provenance.schema.json``) records where the checkpoint came from (path
or hub repo id + revision, format, EAGLE version), what the conversion did (output format and
version, tensors added and dropped, aux-id translation), the target identity when known, and the
format-private keys of every format the drafter passed through (``carried``), so that converting
back restores them: nothing is lost on a round trip. Earlier conversions stay in ``history``.
"""

from __future__ import annotations

import json
from pathlib import Path

from eaglehub import __version__
from eaglehub.errors import EaglehubError
from eaglehub.io import jsonio
from eaglehub.io.schemas import schema_errors

PROVENANCE_FILE = "eaglehub.json"
SCHEMA = "eaglehub.provenance/1"
METADATA_PREFIX = "eaglehub."


def read_provenance(root: Path) -> dict | None:
    """``root/eaglehub.json`` as a dict, or ``None`` when absent.

    Raises: EaglehubError (exit 2) if it exists but is not valid JSON or violates the schema.
    """
    path = Path(root) / PROVENANCE_FILE
    if not path.is_file():
        return None
    try:
        obj = jsonio.read(path)
    except (OSError, ValueError) as exc:
        raise EaglehubError(
            f"cannot parse {path}: {exc}",
            hint=f"fix or delete {PROVENANCE_FILE}",
            code="E-INPUT-CONFIG",
            subject=PROVENANCE_FILE,
        ) from exc
    errors = schema_errors(obj, "provenance")
    if errors:
        where, msg = errors[0]
        raise EaglehubError(
            f"{path}: {where}: {msg}",
            hint=f"fix or delete {PROVENANCE_FILE}",
            code="E-INPUT-CONFIG",
            subject=PROVENANCE_FILE,
        )
    return obj


def make_provenance(
    source: dict, conversion: dict, carried: dict, target: dict | None, original: dict, previous: dict | None
) -> dict:
    """The ``eaglehub.json`` document for one conversion (``previous``: the source's own, if any).

    ``producer`` is the layout of the checkpoint eaglehub first read, i.e. the tool that wrote the trained
    drafter: a rule about what that producer meant by a switch (``W-PRODUCER-FLAG``) follows the drafter
    through conversions, and :func:`written_by_eaglehub` tells the switches eaglehub set itself."""
    history = list((previous or {}).get("history") or [])
    if previous:
        history.append({k: previous[k] for k in ("eaglehub_version", "source", "conversion")})
    return {
        "schema": SCHEMA,
        "eaglehub_version": __version__,
        "producer": producer(previous, source["format"]),
        "source": source,
        "conversion": conversion,
        "target": target,
        "original": original,
        "carried": carried,
        "history": history,
    }


def producer(prov: dict | None, layout: str) -> str:
    """Who wrote the drafter's trained weights and config: the producer ``prov`` records, else ``layout`` (a
    checkpoint eaglehub did not write is its producer's own layout)."""
    recorded = (prov or {}).get("producer")
    return recorded if isinstance(recorded, str) else layout


def written_by_eaglehub(prov: dict | None, key: str, value) -> bool:
    """Whether config ``key`` holds ``value`` because an eaglehub conversion wrote it (``--to 3.1``, ``--set``,
    a repair, a calibration's choice, ``probe --write``): the latest conversion that wrote ``key``, this one
    or one in ``history``, wrote ``value``."""
    if not prov:
        return False
    for conversion in [prov.get("conversion"), *reversed([h.get("conversion") for h in prov.get("history") or []])]:
        if not isinstance(conversion, dict):
            continue
        for change in reversed([*(conversion.get("config_set") or []), *(conversion.get("config_changes") or [])]):
            if isinstance(change, dict) and change.get("key") == key:
                return change.get("new") == value
    return False


def safetensors_metadata(prov: dict, keep: dict[str, str]) -> dict[str, str]:
    """Metadata for written weight files: ``keep`` (the source's own keys) plus ``eaglehub.*`` keys."""
    src = prov["source"]
    where = src.get("repo_id") or src.get("path")
    if src.get("revision"):
        where += f"@{src['revision']}"
    conv = prov["conversion"]
    return {
        **keep,
        "format": "pt",
        f"{METADATA_PREFIX}version": __version__,
        f"{METADATA_PREFIX}source": f"{where} ({src['format']}, EAGLE-{src['version']})",
        f"{METADATA_PREFIX}conversion": f"{src['format']} -> {conv['format']}, EAGLE-{conv['version']}",
    }


def write_provenance(dst: Path, prov: dict) -> None:
    (Path(dst) / PROVENANCE_FILE).write_text(json.dumps(prov, indent=2) + "\n")
