"""A plain conversion's byte copy, started before the conversion is planned (docs/benchmarks.md §11).

Planning a conversion imports the formats, the engine profiles and the checks and reads the source; on a
drafter of a GB the tensor bytes copy takes about as long as all of that. A plain ``--to 3.1`` writes the
source's tensors in the source's order and appends the fc_norm gains, so the copy can start as soon as the
source's safetensors header is read, into the atomic write's temporary directory. What decides the output is
unchanged: the conversion plans it as before, and the copy is kept only where the plan lays the file out the
same way (:class:`eaglehub.io.copying.EarlyCopy`), else discarded. Only light modules are imported here.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eaglehub.errors import EaglehubError

WEIGHTS = "model.safetensors"
#: below this many tensor bytes the conversion's own copy is over before an early start would gain anything
MIN_BYTES = 64 << 20


def destination(src: Path, dst: Path, overwrite: bool) -> Path:
    """``dst`` made absolute, refusing every place whose write (or ``--overwrite``) would touch the
    source: ``src`` itself, a directory inside it, or one of its ancestors."""
    if not dst.name or dst.name in (".", ".."):
        dst = dst.resolve()
    src_r, dst_r = src.resolve(), dst.resolve()
    if dst_r == src_r or src_r in dst_r.parents:
        raise EaglehubError(
            f"DST {dst} is {'the source directory' if dst_r == src_r else 'inside the source directory'}",
            hint="the source is never modified; choose a DST outside it",
        )
    cwd = Path.cwd().resolve()
    if dst_r in src_r.parents or dst_r == cwd or dst_r in cwd.parents:
        raise EaglehubError(
            f"DST {dst} contains the source or the working directory",
            hint="choose a new directory for the output",
        )
    if dst.exists() and not overwrite:
        raise EaglehubError(f"{dst} already exists", hint="pass --overwrite or choose another output path")
    return dst


class Early:
    """The atomic write of ``dst`` opened early, with the source's big tensors copying into it."""

    def __init__(self, dst: Path, opened: Any, tmp: Path, copy: Any):
        self.dst = dst
        self.tmp = tmp
        self.copy = copy  # eaglehub.io.copying.EarlyCopy
        self._opened = opened  # the atomic_dir context, entered
        self._closed = False

    @contextlib.contextmanager
    def directory(self) -> Iterator[Path]:
        """The temporary directory, as :func:`eaglehub.io.atomic.atomic_dir` yields it: renamed to ``dst`` on
        success, removed on an exception."""
        self._closed = True
        try:
            yield self.tmp
        except BaseException:
            if not self._opened.__exit__(*sys.exc_info()):
                raise
        else:
            self._opened.__exit__(None, None, None)

    def abandon(self) -> None:
        """Stop the copy and remove the temporary directory (the conversion failed before writing)."""
        if self._closed:
            return
        self._closed = True
        self.copy.copying.stop()
        with contextlib.suppress(_Abandoned):
            self._opened.__exit__(_Abandoned, _Abandoned(), None)


class _Abandoned(Exception):
    pass


def start_early(src: str, dst: str, overwrite: bool) -> Early | None:
    """Open the atomic write of ``dst`` and start copying the big tensors of local directory ``src``'s one
    ``model.safetensors`` into it; ``None`` (nothing written, nothing created) where that does not apply or
    anything is off, the conversion then finding and reporting it as ever."""
    source = Path(src)
    weights = source / WEIGHTS
    try:
        if not weights.is_file() or (source / f"{WEIGHTS}.index.json").exists():
            return None
        if weights.stat().st_size < MIN_BYTES:
            return None
        out = destination(source, Path(dst), overwrite)
        if not out.parent.is_dir():  # a failed conversion must not leave the directories it created
            return None
    except (OSError, EaglehubError):
        return None
    from eaglehub.io.atomic import atomic_dir
    from eaglehub.io.copying import EarlyCopy

    opened = atomic_dir(out, overwrite=overwrite)
    try:
        tmp = opened.__enter__()
    except (OSError, EaglehubError):
        return None
    try:
        copy = EarlyCopy.start(weights, tmp / WEIGHTS)
    except BaseException:
        with contextlib.suppress(_Abandoned):
            opened.__exit__(_Abandoned, _Abandoned(), None)
        raise
    if copy is None or not copy.ranges:
        if copy is not None:
            copy.discard()
        with contextlib.suppress(_Abandoned):
            opened.__exit__(_Abandoned, _Abandoned(), None)
        return None
    return Early(out, opened, tmp, copy)
