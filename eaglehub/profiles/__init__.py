"""Engine profiles and their readings of a drafter (docs/profiles.md).

:func:`read` turns a drafter's stored files into what one profile's engine builds (a
:class:`~eaglehub.profiles.reading.Reading`); :mod:`.registry` lists the profiles; :mod:`.vllm` and
:mod:`.sglang` hold each engine's rules with the file and line of the engine code they follow.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from eaglehub.profiles import sglang, vllm
from eaglehub.profiles.checkpoint import ServedTarget, Stored
from eaglehub.profiles.reading import FIELDS, Reading
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

#: engine → reader (one per engine; the profile carries version and runner)
READERS: dict[str, Callable[[Stored, Profile, ServedTarget | None], Reading]] = {
    VLLM: vllm.read,
    SGLANG: sglang.read,
}


def stored_of(drafter) -> Stored:
    """The stored facts of an already-read :class:`~eaglehub.drafter.canonical.Drafter`: its config as
    written and its tensors by their stored names."""
    return Stored(dict(drafter.raw_config), {i.source_name: tuple(i.shape) for i in drafter.index.tensors.values()})


def read(source, profile: str | Profile = DEFAULT_PROFILE, target: ServedTarget | None = None) -> Reading:
    """``profile``'s reading of ``source`` (a drafter directory, a read Drafter, or :class:`Stored`)."""
    p = profile if isinstance(profile, Profile) else resolve(profile)
    if isinstance(source, Stored):
        stored = source
    elif isinstance(source, (str, Path)):
        from eaglehub.formats.registry import read_drafter

        stored = stored_of(read_drafter(Path(source)))
    else:
        stored = stored_of(source)
    return READERS[p.engine](stored, p, target)


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
