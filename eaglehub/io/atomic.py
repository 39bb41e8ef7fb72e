"""Atomic directory writes: build everything in a temporary sibling, then rename it into place."""

from __future__ import annotations

import contextlib
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
    left as it was.

    Raises:
        EaglehubError: ``dst`` exists and ``overwrite`` is false.
    """
    dst = Path(dst)
    if dst.exists() and not overwrite:
        raise EaglehubError(f"{dst} already exists", hint="pass --overwrite or choose another output path")
    dst.parent.mkdir(parents=True, exist_ok=True)
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
    """Yield a temporary path next to ``dst``; on success it replaces ``dst`` by rename."""
    dst = Path(dst)
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
