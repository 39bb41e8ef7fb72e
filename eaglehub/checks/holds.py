"""Findings about engine behaviour, per judged profile: what one profile's check states (:class:`Said`), merged
into one finding per statement that names the profiles it holds for and the judged ones it does not hold for
(docs/profiles.md). checks/profiles.py makes its findings so, and so does every other check whose statement
depends on what an engine does (aux-id capture, the config keys an engine reads, ...)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from eaglehub.checks.context import Context
from eaglehub.findings import Finding, finding
from eaglehub.profiles.reading import Reading
from eaglehub.profiles.registry import PROFILES, resolve


@dataclass(frozen=True)
class Said:
    """One profile's finding before profiles are merged: the same (code, subject, message, hint) from
    several profiles becomes one finding naming all of them."""

    code: str
    subject: str
    message: str
    hint: str | None = None


def title(profile_id: str) -> str:
    p = PROFILES.get(profile_id) or resolve(profile_id)
    return p.title


def merge(said: dict[str, list[Said]], judged: list[str]) -> list[Finding]:
    """One finding per distinct statement, naming the profiles it holds for and those judged here it does
    not hold for."""
    order: list[Said] = []
    holds: dict[Said, list[str]] = {}
    for pid in judged:
        for s in said.get(pid, []):
            if s not in holds:
                order.append(s)
                holds[s] = []
            holds[s].append(pid)
    out = []
    for s in order:
        on = holds[s]
        others = [p for p in judged if p not in on]
        where = "; ".join(title(p) for p in on)
        tail = f" (not on {'; '.join(title(p) for p in others)})" if others else ""
        out.append(finding(s.code, s.subject, f"{where}: {s.message}{tail}", s.hint, profiles=tuple(on)))
    return out


def per_profile(ctx: Context, say: Callable[[Reading], list[Said]]) -> list[Finding]:
    """:func:`merge` of what ``say`` states for each judged profile's reading: every check whose statement
    depends on what an engine does uses it, so its findings name the profiles too."""
    return merge({pid: say(r) for pid, r in ctx.readings.items()}, list(ctx.readings))


def captures(r: Reading, key: str) -> bool:
    """The profile's runner passes the id list stored at ``key`` to the target (``origin`` of its capture)."""
    return r.aux_layer_ids is not None and r.origin.get("aux_layer_ids") == key


def holding(
    ctx: Context, said: list[Said], holds: Callable[[Reading], bool], alone: str | None = None
) -> list[Finding]:
    """``said`` for the judged profiles ``holds`` is true of (:func:`per_profile`); with none of them
    judged, ``alone`` (a message true of every engine) makes a finding about the files, ``None`` none."""
    if any(holds(r) for r in ctx.readings.values()):
        return per_profile(ctx, lambda r: said if holds(r) else [])
    return [finding(s.code, s.subject, alone, s.hint) for s in said] if alone is not None else []
