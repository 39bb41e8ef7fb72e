"""JSON from untrusted files (checkpoint configs, indexes, side files, reports).

``json.loads`` fails in more ways than ``JSONDecodeError`` on hostile input: ``RecursionError`` on
deeply nested arrays, ``ValueError`` on integers longer than Python's digit limit, ``UnicodeDecodeError``
on bytes that are not UTF-8. :func:`loads` turns all of them into ``ValueError``, so a caller catching
``ValueError`` (and ``OSError`` for the read) has caught everything.
"""

from __future__ import annotations

import json
from pathlib import Path


def loads(text: str | bytes, **kwargs):
    """``json.loads(text, **kwargs)``. Raises: ValueError for any malformed document."""
    try:
        return json.loads(text, **kwargs)
    except RecursionError as exc:
        raise ValueError("JSON nested too deeply") from exc


def read(path: str | Path, **kwargs):
    """The JSON document in ``path`` (UTF-8). Raises: OSError (unreadable), ValueError (malformed)."""
    return loads(Path(path).read_bytes().decode("utf-8"), **kwargs)


def read_object(path: str | Path | None) -> dict | None:
    """``path`` as a JSON object, or ``None`` when it is absent, unreadable or not an object: for
    optional side files, where a broken one only skips the checks that read it."""
    if path is None:
        return None
    try:
        data = read(path)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
