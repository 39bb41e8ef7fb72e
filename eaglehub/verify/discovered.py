"""``verify --target T`` without ``--drafter`` or a manifest: every drafter discovery finds for T, as pairs.

The drafters :func:`eaglehub.discovery.discover.discover` lists are downloaded into the Hugging Face
cache (config, weights and the small side files only, :func:`eaglehub.io.source.resolve_source`) and
become the pairs of one target, exactly as a manifest registering them would give; each pair keeps
the acceptance its drafter claims, which the run is then held to (:mod:`eaglehub.verify.claims`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from eaglehub.discovery.discover import DiscoverOptions, discover
from eaglehub.errors import CheckFailed, EaglehubError
from eaglehub.target import resolve_target
from eaglehub.verify.manifest import Pair, Target


@dataclass(frozen=True)
class Discovered:
    """The pairs found for a target, the drafters report, and each pair's claim by its ``where``."""

    pairs: list[Pair]
    report: dict
    claims: dict[str, dict] = field(default_factory=dict)


def target_name(spec: str) -> str:
    """A file-name-safe name for the target (its last path or repo-id part)."""
    return re.sub(r"[^\w.-]+", "-", spec.rstrip("/").split("/")[-1]) or "target"


def discovered_pairs(
    target: str, names: list[str], limit: int | None, endpoint: str | None, console=None
) -> Discovered:
    """The pairs of ``target`` with every drafter discovery finds (narrowed to ``names``, at most ``limit``).

    Raises:
        CheckFailed: (exit 1) no drafter was found; the message says where discovery looked.
        EaglehubError: (exit 2) discovery's own errors, or a drafter that cannot be downloaded.
    """
    from eaglehub.io.source import resolve_source

    report = discover(DiscoverOptions(target=target, endpoint=endpoint, limit=limit, names=names, manifest=""))
    if not report["drafters"]:
        where = "the local cache (offline)" if report["offline"] else report["endpoint"] or "nowhere (no Hub id)"
        tags = ", ".join(report["searched_tags"]) or "none"
        raise CheckFailed(
            f"no drafter for {target} on {where} (model-tree tags searched: {tags})"
            + (f"; {'; '.join(report['notes'])}" if report["notes"] else ""),
            hint=f"list what is there with `eaglehub drafters --target {target}`, or pass --drafter DIR / --manifest FILE",
        )
    try:  # before any download: a target that is not here makes the drafters' downloads useless
        resolve_target(target)
    except EaglehubError as exc:
        found = ", ".join(r["repo_id"] or r["name"] for r in report["drafters"])
        raise EaglehubError(
            f"{exc.message}; found {len(report['drafters'])} drafter(s) for it: {found}",
            hint=f"download the target first (`hf download {target}`) or pass its directory; "
            "`eaglehub verify --target T --dry-run` plans the run from its config alone",
        ) from None
    spec = target
    t = Target(name=target_name(target), spec=spec, spec_written=target, engine={}, is_path=Path(target).is_dir())
    pairs, claims = [], {}
    for i, row in enumerate(report["drafters"]):
        if row["path"]:
            path = Path(row["path"])
        else:
            if console is not None:
                console.print(f"downloading {row['repo_id']}@{(row['revision'] or 'main')[:12]}", highlight=False)
            path, _ = resolve_source(row["repo_id"], revision=row["revision"], endpoint=report["endpoint"])
            row["path"] = str(path)
        where = f"drafters[{i}]"
        pairs.append(Pair(target=t, drafter=path.resolve(), name=row["name"], settings={}, where=where))
        if row["claim"]:
            claims[where] = row["claim"]
    return Discovered(pairs, report, claims)
