"""Where a drafter comes from: a local directory, or a Hugging Face Hub repo id (+ revision).

Hub ids are resolved through huggingface_hub's cache with ``hf_hub_download``, which honours
``HF_HUB_OFFLINE``, ``HF_HUB_CACHE``/``HF_HOME`` and stored tokens. Only ``config.json``, the
weight files (index + the shards it names, or ``model.safetensors``, or ``pytorch_model.bin``),
eaglehub's own ``eaglehub.json`` and the two small side files ``validate`` compares with the target
(:data:`SIDE_FILES`: the training record and the tokenizer) are fetched — never the rest of the repository.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, overload

from eaglehub.errors import EaglehubError

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
WEIGHT_CANDIDATES = ("model.safetensors.index.json", "model.safetensors", "pytorch_model.bin")
#: optional files validate reads from a drafter: eaglehub.json (provenance), training.json (chat-template
#: hash, training length: F13, F25), tokenizer.json (compared with the target's)
SIDE_FILES = ("eaglehub.json", "training.json", "tokenizer.json")


def resolve_source(spec: str, revision: str | None = None, endpoint: str | None = None) -> tuple[Path, dict]:
    """``(directory, source record)`` for a drafter given as a path or a hub repo id (from ``endpoint``,
    default huggingface_hub's configured Hub).

    The record is ``{"path": ...}`` or ``{"repo_id", "revision"}`` (the resolved commit hash).
    Raises: EaglehubError (exit 2): neither a directory nor a repo id; repo, revision or file not
    found (offline: not in the cache); ``--revision`` given for a local directory.
    """
    if not spec.strip():  # Path("") is the current directory: an empty argument (an unset variable) names nothing
        raise EaglehubError(
            "an empty path names no drafter", hint="pass a checkpoint directory (`.` for the current one) or org/name"
        )
    path = Path(spec).expanduser()
    if path.exists():
        if revision:
            raise EaglehubError(f"--revision applies to hub repo ids, {spec} is a local path", hint="drop --revision")
        return path, {"path": str(path)}
    if not REPO_ID.match(spec):
        raise EaglehubError(
            f"{spec} is neither a directory nor a hub repo id", hint="pass a checkpoint directory or org/name"
        )
    config = fetch(spec, "config.json", revision, required=True, endpoint=endpoint)
    for name in WEIGHT_CANDIDATES:
        found = fetch(spec, name, revision, endpoint=endpoint)
        if found is None:
            continue
        if name.endswith(".index.json"):
            from eaglehub.io.tensorio import read_weight_map

            shards = sorted(set(read_weight_map(Path(found)).values()))
            for shard in shards:
                fetch(spec, shard, revision, required=True, endpoint=endpoint)
        break
    else:
        raise EaglehubError(
            f"{spec} has no weights ({', '.join(WEIGHT_CANDIDATES)})",
            hint="check the repo id and revision (offline: download the files into the cache first)",
        )
    for name in SIDE_FILES:
        fetch(spec, name, revision, endpoint=endpoint)
    snapshot = Path(config).parent
    return snapshot, {"repo_id": spec, "revision": snapshot.name}


@overload
def fetch(
    repo_id: str, filename: str, revision: str | None, required: Literal[True], endpoint: str | None = None
) -> str: ...


@overload
def fetch(
    repo_id: str, filename: str, revision: str | None, required: bool = False, endpoint: str | None = None
) -> str | None: ...


def fetch(
    repo_id: str, filename: str, revision: str | None, required: bool = False, endpoint: str | None = None
) -> str | None:
    """Local path of ``filename`` of hub repo ``repo_id`` (``hf_hub_download``), or ``None`` when the
    repo lacks it and it is not ``required``.

    Raises: EaglehubError (exit 2): repo not accessible, revision unknown, a required file missing
    (offline: not in the cache).
    """
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        return hf_hub_download(repo_id, filename, revision=revision, endpoint=endpoint)
    except (RepositoryNotFoundError, GatedRepoError) as exc:
        raise EaglehubError(
            f"hub repo {repo_id} is not accessible: {type(exc).__name__}",
            hint="check the id, and log in (`hf auth login`) for private or gated repos",
        ) from exc
    except RevisionNotFoundError as exc:
        raise EaglehubError(
            f"revision {revision} of {repo_id} does not exist", hint="pass a branch, tag or commit hash"
        ) from exc
    except (EntryNotFoundError, LocalEntryNotFoundError) as exc:
        if not required:
            return None
        offline = isinstance(exc, LocalEntryNotFoundError)
        raise EaglehubError(
            f"{repo_id} is not a local directory, and in the hub repo {repo_id}{'@' + revision if revision else ''} {filename} is "
            + ("not in the local cache (offline or unreachable hub)" if offline else "missing"),
            hint="download it once with network access, or point HF_HUB_CACHE at a cache that has it"
            if offline
            else "check the repo id and revision",
        ) from exc
