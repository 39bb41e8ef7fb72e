"""What ``publish`` uploads names no local path: the card, the ``eaglehub.json`` and the verify report it
carries are read on other machines, where ``/home/me/runs/...`` means nothing and tells what it should
not. A local path becomes what names it anywhere: a Hugging Face cache snapshot its repo id, eaglehub's
built SmolLM2 SmolLM2's repo id, anything else its last component (the directory or file name, which is
also what ``verify --reference-report`` matches a drafter by when the paths differ).
"""

from __future__ import annotations

import re
from pathlib import Path

#: an absolute path inside text: ``/`` or ``~/`` not glued to a word, a URL or another slash (``tokens/s``,
#: ``https://…``, ``N//2`` and ``0.7 / 0.3`` are not paths), up to a space, quote or bracket
ABS_PATH = re.compile(r"(?<![\w.:/~\-])(?:~/|/)(?=[^\s/])[^\s'\"`,;()\[\]{}<>|*]*")
SNAPSHOT = re.compile(r"models--([^/]+)--([^/]+)/snapshots/[^/]+(?:/(.+))?$")
#: report keys whose value is a local path when it is not ``served`` / a hub id that exists nowhere here
PATH_KEYS = frozenset({"path", "file", "drafter", "drafter_path", "report", "target", "spec"})


def shown_path(path: str) -> str:
    """``path`` (a local path) as uploaded files name it (module doc)."""
    from eaglehub.target import SMOLLM2_REPO, smollm2_cache_path

    m = SNAPSHOT.search(path)
    if m:
        return f"{m[1]}/{m[2]}" + (f"/{m[3]}" if m[3] else "")
    p = Path(path.rstrip("/")).expanduser()
    built = smollm2_cache_path()
    if p == built or built in p.parents:
        return SMOLLM2_REPO + ("/" + p.relative_to(built).as_posix() if p != built else "")
    return p.name or path


def _trail(match: re.Match) -> str:
    """A path's replacement, keeping the punctuation that ends its sentence outside it."""
    text = match[0]
    core = text.rstrip(".:")
    return shown_path(core) + text[len(core) :] if core else text


def scrub_text(text: str) -> str:
    """``text`` with every absolute local path in it replaced by :func:`shown_path`."""
    return ABS_PATH.sub(_trail, text)


def _is_local(value: str, key: str | None) -> bool:
    if key not in PATH_KEYS or value == "served" or "/" not in value.replace("\\", "/"):
        return False
    if key in ("target", "spec"):  # a hub id too: a path only when it names something here
        return value.startswith(("/", "~", "./", "../")) or Path(value).expanduser().exists()
    return True


def scrub(obj, key: str | None = None):
    """A copy of the JSON value ``obj`` whose strings name no local path: a path-valued field (``path``,
    ``file``, ``drafter``, a local ``target`` / ``spec``…) by :func:`shown_path`, an absolute path inside
    other text (a finding's message) likewise."""
    if isinstance(obj, dict):
        return {k: scrub(v, k) for k, v in obj.items()}
    if isinstance(obj, list):
        return [scrub(v, key) for v in obj]
    if isinstance(obj, str):
        return shown_path(obj) if _is_local(obj, key) else scrub_text(obj)
    return obj


def uploaded_report(report: dict, repo_id: str) -> dict:
    """The copy of a one-drafter verify report ``publish`` uploads: the drafter's ``speculative_config`` and
    ``serve_command`` name it by ``repo_id`` (where it is served from once published), every other local path
    as :func:`scrub` names it."""
    drafters = []
    for entry in report["drafters"]:
        spec = entry.get("speculative_config")
        if spec:
            local = spec["model"]
            entry = {**entry, "speculative_config": {**spec, "model": repo_id}}
            if entry.get("serve_command"):
                entry["serve_command"] = entry["serve_command"].replace(local, repo_id)
        drafters.append(entry)
    return scrub({**report, "drafters": drafters})
