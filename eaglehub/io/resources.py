"""Where eaglehub keeps derived files (the converted target cache) and finds the data it ships.

The JSON Schemas, the default prompt sets and the rule catalogue live inside the package
(``eaglehub/data/``) and are read through :mod:`importlib.resources`, so an installed wheel finds
them exactly as a checkout does.
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path


def cache_dir() -> Path:
    """The cache root: ``$EAGLEHUB_CACHE`` if set, else ``~/.cache/eaglehub``."""
    env = os.environ.get("EAGLEHUB_CACHE")
    return Path(env).expanduser().resolve() if env else Path.home() / ".cache" / "eaglehub"


def data_path(*parts: str) -> Path:
    """A file or folder of the package data (``eaglehub/data/...``) as a filesystem path.

    eaglehub is installed as files (wheel or editable), never imported from a zip, so the
    traversable importlib.resources returns is a real directory."""
    return Path(str(files("eaglehub").joinpath("data", *parts)))


def schemas_dir() -> Path:
    """The packaged JSON Schemas (the repository's top-level ``schemas/`` is their published copy)."""
    return data_path("schemas")


def default_prompts() -> Path:
    """The bundled evaluation prompt set (48 prompts, 6 categories × 8)."""
    return data_path("prompts", "eval.jsonl")


def calibration_prompts() -> Path:
    """The bundled calibration prompt set (hand-written chat prompts)."""
    return data_path("prompts", "calibration.jsonl")
