"""Which engine profiles ``verify`` judges a drafter for before running it, and the report's ``profiles``.

The preflight (:func:`eaglehub.checks.validate.preflight`) judges each drafter for the profile of every engine
the run uses (``VllmEngine.profile()``: the installed build, e.g. ``vllm-0.32-cpu`` for the CPU build, the
runner read from ``VLLM_USE_V2_MODEL_RUNNER`` on CUDA; the reference engine reads drafters as vLLM's V1
runner does) plus the profiles asked for with ``--profile``: a drafter an engine would misread is refused
before minutes of engine work, and a drafter that only another engine misreads is not refused for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from eaglehub.profiles import DEFAULT_PROFILE, Profile, resolve


def engine_profile(engine) -> Profile:
    """The profile ``engine`` runs (its ``profile()``); an engine that names none (a test's scripted engine)
    is taken for the default profile, what users serve."""
    named = getattr(engine, "profile", None)
    return resolve(named() if callable(named) else DEFAULT_PROFILE)


def judged_profiles(engines: Iterable, asked: Sequence[str] = ()) -> tuple[list[Profile], set[str]]:
    """``(profiles, engine ids)``: the engines' profiles first, then those ``asked`` (each once, in order),
    and the ids that are an engine's.

    Raises:
        EaglehubError: an unknown ``--profile`` (exit 2).
    """
    chosen: dict[str, Profile] = {}
    for e in engines:
        p = engine_profile(e)
        chosen.setdefault(p.id, p)
    ran = set(chosen)
    for spec in asked:
        p = resolve(spec)
        chosen.setdefault(p.id, p)
    return list(chosen.values()), ran


def profiles_section(engines: Iterable, asked: Sequence[str] = ()) -> list[dict]:
    """The report's ``profiles``: each judged profile, ``engine`` when an engine of this run is that profile,
    ``default`` when it was judged without being asked (the engines' own)."""
    profiles, ran = judged_profiles(engines, asked)
    wanted = {resolve(s).id for s in asked}
    return [{"id": p.id, "title": p.title, "default": p.id not in wanted, "engine": p.id in ran} for p in profiles]


def profiles_line(section: list[dict]) -> str:
    """One line for the text output: what the drafters were judged for, and why."""
    parts = []
    for p in section:
        why = "the engine run here" if p.get("engine") else "--profile"
        parts.append(f"{p['title']} ({why})")
    return "preflight judged the drafters for " + "; ".join(parts)
