"""Where a drafter comes from: a local directory, or a Hugging Face Hub repo id (+ revision).

Hub ids are resolved through huggingface_hub's cache with ``hf_hub_download``, which honours
``HF_HUB_OFFLINE``, ``HF_HUB_CACHE``/``HF_HOME`` and stored tokens. Only ``config.json``, the
weight files (index + the shards it names, or ``model.safetensors``, or ``pytorch_model.bin``),
eaglehub's own ``eaglehub.json`` and the two small side files ``validate`` compares with the target
(:data:`SIDE_FILES`: the training record and the tokenizer) are fetched — never the rest of the repository.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
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
    if looks_like_path(spec):
        raise no_such_directory(spec)
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


def looks_like_path(spec: str) -> bool:
    """Whether ``spec`` is meant as a local path, so that it is never looked up on the Hub (a typo in
    ``./runs/drafter`` must not cost the Hub's retries): it starts with ``./``, ``../``, ``/`` or ``~``, has
    more than one ``/`` (a Hub id has exactly one), or its first component exists here (``fixtures/nope``)."""
    s = spec.replace("\\", "/")
    if s in (".", "..") or s.startswith(("./", "../", "/", "~")) or s.count("/") > 1:
        return True
    return "/" in s and Path(s.split("/", 1)[0]).exists()


def no_such_directory(spec: str, what: str = "") -> EaglehubError:
    """The error for a local path that does not exist (exit 2), with the nearest names that do."""
    import difflib

    path = Path(spec).expanduser()
    parent = next((p for p in path.parents if p.is_dir()), Path("."))
    try:
        names = [p.name for p in parent.iterdir() if p.is_dir() and not p.name.startswith(".")]
    except OSError:
        names = []
    # the first component under the deepest existing directory is where the path went wrong
    wrong = path.relative_to(parent).parts[0] if path.is_relative_to(parent) and path != parent else path.name
    close = difflib.get_close_matches(wrong, names, n=2, cutoff=0.6)
    shown = str(parent) if str(parent) != "." else "the current directory"
    if close:
        alike = " or ".join(str(parent / c) for c in close)
        hint = f"did you mean {alike}?"
    else:
        held = ", ".join(sorted(names)[:6]) + (", …" if len(names) > 6 else "")
        hint = f"{shown} holds no {wrong}" + (f" (it holds {held})" if held else "") + ": pass an existing directory"
    return EaglehubError(f"{what}{spec}: no such directory", hint=hint)


@contextlib.contextmanager
def quiet_hub() -> Iterator[None]:
    """huggingface_hub's own log lines (a retry per failed request, each with its URL) kept from the user:
    the outcome is reported as one line by the caller."""
    import logging

    logger = logging.getLogger("huggingface_hub")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


_REACHABLE: dict[str, bool] = {}
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def hub_reachable(endpoint: str | None) -> bool:
    """Whether a connection to the Hub's host opens within 3 s (asked once per endpoint and process).

    huggingface_hub retries a request that cannot connect five times, with a backoff (about 24 s), before
    it falls back to its cache; without a network eaglehub reads the cache at once instead. Behind a proxy
    the host is not dialled directly, so it is taken as reachable."""
    import os
    import socket
    from urllib.parse import urlsplit

    from huggingface_hub import constants

    url = urlsplit(endpoint or constants.ENDPOINT)
    key = f"{url.scheme}://{url.netloc}"
    if key not in _REACHABLE:
        if any(os.environ.get(v) for v in PROXY_VARIABLES) or not url.hostname:
            _REACHABLE[key] = True
        else:
            port = url.port or (443 if url.scheme == "https" else 80)
            try:
                with socket.create_connection((url.hostname, port), timeout=3):
                    _REACHABLE[key] = True
            except OSError:
                _REACHABLE[key] = False
    return _REACHABLE[key]


def hub_offline() -> bool:
    """huggingface_hub's offline switch (``HF_HUB_OFFLINE``, read when it was imported)."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


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

    # no network: the cache now, not after huggingface_hub's retries (what it falls back to anyway)
    cache_only = not hub_offline() and not hub_reachable(endpoint)
    try:
        with quiet_hub():
            return hf_hub_download(repo_id, filename, revision=revision, endpoint=endpoint, local_files_only=cache_only)
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
        where = f"{repo_id}{'@' + revision if revision else ''}"
        if not isinstance(exc, LocalEntryNotFoundError):
            raise EaglehubError(
                f"{repo_id} is not a local directory, and the hub repo {where} has no {filename}",
                hint="check the repo id and revision",
            ) from exc
        if hub_offline():
            raise EaglehubError(
                f"{repo_id} is not a local directory, and HF_HUB_OFFLINE=1 keeps to the local Hugging Face cache, "
                f"where {where} has no {filename}",
                hint=f"download it where the Hub can be reached (`hf download {repo_id}`) and point HF_HUB_CACHE at "
                "that cache, or pass a local directory",
            ) from exc
        raise EaglehubError(
            f"{repo_id} is not a local directory, and the Hub cannot be reached for {where} ({filename} is not in "
            "the local cache either)",
            hint="check the network; without one, set HF_HUB_OFFLINE=1 (the local cache only) and pass a local "
            "directory or a repo the cache holds",
        ) from exc
