"""Engine profiles and their readings of a drafter (docs/profiles.md).

:func:`read` turns a drafter's stored files into what one profile's engine builds (a
:class:`~eaglehub.profiles.reading.Reading`); :mod:`.registry` lists the profiles; :mod:`.vllm` and
:mod:`.sglang` hold each engine's rules with the file and line of the engine code they follow.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eaglehub.profiles.registry import (
    DEFAULT_PROFILE,
    LOCAL_PROFILE,
    PROFILES,
    SGLANG,
    VLLM,
    Profile,
    resolve,
    resolve_all,
)

if TYPE_CHECKING:
    from eaglehub.profiles.checkpoint import ServedTarget, Stored
    from eaglehub.profiles.reading import FIELDS, Reading

    #: engine → reader (one per engine; the profile carries version and runner)
    READERS: dict[str, Callable[[Stored, Profile, ServedTarget | None], Reading]]

#: what loads on first use: the engines' readers import the canonical model and the engine tables, which the
#: profile names (``--profile``'s help, the registry) need none of, and a plain conversion's byte copy starts
#: before them (convert/early.py)
_LAZY = {
    "Stored": "eaglehub.profiles.checkpoint",
    "ServedTarget": "eaglehub.profiles.checkpoint",
    "FIELDS": "eaglehub.profiles.reading",
    "Reading": "eaglehub.profiles.reading",
}


def __getattr__(name: str) -> Any:
    import importlib

    if name == "READERS":
        from eaglehub.profiles import sglang, vllm

        readers = {VLLM: vllm.read, SGLANG: sglang.read}
        globals()["READERS"] = readers
        return readers
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def stored_of(drafter) -> Stored:
    """The stored facts of an already-read :class:`~eaglehub.drafter.canonical.Drafter`: its config as
    written and its tensors by their stored names."""
    from eaglehub.profiles.checkpoint import Stored

    return Stored(dict(drafter.raw_config), {i.source_name: tuple(i.shape) for i in drafter.index.tensors.values()})


def read(source, profile: str | Profile = DEFAULT_PROFILE, target: ServedTarget | None = None) -> Reading:
    """``profile``'s reading of ``source`` (a drafter directory, a read Drafter, or :class:`Stored`)."""
    from eaglehub.profiles.checkpoint import Stored

    p = profile if isinstance(profile, Profile) else resolve(profile)
    if isinstance(source, Stored):
        stored = source
    elif isinstance(source, (str, Path)):
        from eaglehub.formats.registry import read_drafter

        stored = stored_of(read_drafter(Path(source)))
    else:
        stored = stored_of(source)
    return __getattr__("READERS")[p.engine](stored, p, target)


__all__ = [
    "DEFAULT_PROFILE",
    "FIELDS",
    "LOCAL_PROFILE",
    "PROFILES",
    "Profile",
    "Reading",
    "ServedTarget",
    "Stored",
    "read",
    "resolve",
    "resolve_all",
    "stored_of",
]
