"""Where eaglehub keeps derived files (the converted target cache) and finds its JSON Schemas."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """The cache root: ``$EAGLEHUB_CACHE`` if set, else ``~/.cache/eaglehub``."""
    env = os.environ.get("EAGLEHUB_CACHE")
    return Path(env).expanduser().resolve() if env else Path.home() / ".cache" / "eaglehub"


def schemas_dir() -> Path:
    """The repository's ``schemas/`` folder (the package is installed editable from the checkout)."""
    return Path(__file__).resolve().parent.parent / "schemas"
