"""Atomic directory writes: build everything in a temporary sibling, then rename it into place.

A writer holds an exclusive lock on ``.NAME.lock`` beside ``NAME`` while it writes, so a
temporary sibling (``.NAME.tmp-*``, ``.NAME.old-*``) found by the next writer that gets the lock
belongs to a run that was killed (SIGKILL, power loss) and is removed before the new one starts.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from eaglehub.errors import EaglehubError


@contextlib.contextmanager
def atomic_dir(dst: Path, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary directory next to ``dst``; on success it replaces ``dst`` by rename.

    The temporary directory lives in ``dst``'s parent so the final ``rename`` stays on one file
    system (atomic on POSIX). On any exception the temporary directory is removed and ``dst`` is
    left as it was. Temporary siblings of ``dst`` left by a killed earlier run are removed first.

    Raises:
        EaglehubError: ``dst`` exists and ``overwrite`` is false, or another run is writing ``dst``.
    """
    dst = Path(dst)
    if dst.exists() and not overwrite:
        raise EaglehubError(f"{dst} already exists", hint="pass --overwrite or choose another output path")
    _raise_problem(dst, "dst")
    dst.parent.mkdir(parents=True, exist_ok=True)
    with _writer_lock(dst):
        remove_stale(dst)
        with _replace_dir(dst) as tmp:
            yield tmp


def stale_siblings(dst: Path) -> list[Path]:
    """Temporary siblings of ``dst`` left by earlier writers (only stale while the caller holds the lock)."""
    dst = Path(dst)
    if not dst.parent.is_dir():
        return []
    prefixes = (f".{dst.name}.tmp-", f".{dst.name}.old-")
    return sorted(p for p in dst.parent.iterdir() if p.name.startswith(prefixes))


def remove_stale(dst: Path) -> list[Path]:
    """Remove the temporary siblings a killed run left next to ``dst``; returns what was removed."""
    removed = stale_siblings(dst)
    for p in removed:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
    return removed


@contextlib.contextmanager
def _writer_lock(dst: Path) -> Iterator[None]:
    lock = dst.with_name(f".{dst.name}.lock")
    with open(lock, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise EaglehubError(
                f"{dst} is being written by another eaglehub run",
                hint="wait for it to finish, or choose another output path",
            ) from None
        try:
            yield
        finally:
            # removed while held: a writer that opened the old file in the meantime got LOCK_NB's refusal
            lock.unlink(missing_ok=True)


@contextlib.contextmanager
def _replace_dir(dst: Path) -> Iterator[Path]:
    tmp = Path(tempfile.mkdtemp(prefix=f".{dst.name}.tmp-", dir=dst.parent))
    tmp.chmod(0o755)  # mkdtemp makes 0700; the result should read like any other model directory
    try:
        yield tmp
        if dst.exists() or dst.is_symlink():
            old = dst.with_name(f".{dst.name}.old-{tmp.name}")
            dst.rename(old)
            tmp.rename(dst)
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.unlink()  # a file or a link in DST's place: rmtree would leave it behind
        else:
            tmp.rename(dst)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextlib.contextmanager
def atomic_file(dst: Path) -> Iterator[Path]:
    """Yield a temporary path next to ``dst``; on success it replaces ``dst`` by rename.

    Raises:
        OSError: ``dst`` cannot be written; where the cause is known before writing (a parent that is a file,
            a directory in ``dst``'s place, a directory that cannot be written) ``strerror`` says it.
    """
    dst = Path(dst)
    _raise_problem(dst, "file")
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{dst.name}.", dir=dst.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        tmp.chmod(0o644)
        os.replace(tmp, dst)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def output_problem(path: str | Path, kind: str = "file") -> str | None:
    """Why ``path`` cannot be written as an output, or ``None`` when nothing known before writing stops it.

    ``kind``: ``"file"`` (a file written by :func:`atomic_file`), ``"dir"`` (a directory files are written
    in, created when missing), ``"dst"`` (a directory :func:`atomic_dir` puts in ``path``'s place). Checked:
    a directory in a file's place or a file in a directory's; the nearest existing ancestor (the directories
    missing below it are created by the writers) is a directory this process may create entries in.
    """
    p = Path(path)
    if str(path) == "":
        return "the path is empty"
    try:
        if kind == "file" and p.is_dir():
            return f"{p} is a directory"
        if kind == "dir" and p.exists() and not p.is_dir():
            return f"{p} is a file, not a directory"
        start = p if kind == "dir" and p.is_dir() else p.parent
        # the nearest ancestor that exists: a regular file there is the usual "parent is a file" mistake
        # (mkdir's own error would say "File exists" about the path given)
        existing = start
        while not os.path.lexists(existing) and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            return f"parent {existing} is {'a file' if existing.is_file() else 'not a directory'}"
        if not os.access(existing, os.W_OK | os.X_OK):
            return f"cannot write in {existing}: permission denied"
    except OSError as exc:  # an ancestor that cannot even be looked at (no search permission, a link loop)
        return f"cannot reach {p}: {exc.strerror or exc}"
    return None


def _raise_problem(dst: Path, kind: str) -> None:
    problem = output_problem(dst, kind)
    if problem is not None:
        if "permission" in problem:
            code = errno.EACCES
        else:
            code = errno.EISDIR if problem.endswith(" is a directory") else errno.ENOTDIR
        raise OSError(code, problem, str(dst))
