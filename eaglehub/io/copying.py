"""Tensor bytes copied in a background thread while a conversion checks its source and writes the rest.

The big tensors' bytes go file to file in the kernel (``copy_file_range``) so a conversion costs about what
``cp`` does; a reader of bytes still being copied waits for them (:func:`wait_copied`), and a failed copy is the
error reported. :class:`EarlyCopy` starts that copy before the conversion is planned (docs/benchmarks.md §11).
"""

from __future__ import annotations

import errno
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

CHUNK = 16 << 20  # fallback copy chunk: 16 MiB bounds memory, big enough to stay I/O bound
KERNEL_CHUNK = 1 << 30  # per copy_file_range call (the kernel may copy less; the loop goes on)
BACKGROUND_CHUNK = 64 << 20  # per call in the background copy: a cancelled write stops within one
#: copied tensors from this size up are copied in the background by start_checkpoint; smaller ones (norms,
#: d2t/t2d: what checks without --deep read) are in place when it returns
SMALL = 4 << 20
#: big copies keep the source's offset modulo this, not just modulo PAGE: the page cache holds a big file in
#: large folios, and a copy shifted by a multiple of 4 KiB only ran at 2/3 of the speed of one shifted by a
#: multiple of 64 KiB (0.85 GB, ext4, kernel copy: 0.32-0.34 s shifted by 4 or 12 KiB, 0.29 s by 16 KiB,
#: 0.24-0.25 s by 64 KiB to 2 MiB, as unshifted and as cp; 2026-12-06)
FOLIO = 64 << 10


def copy_range(
    src_fd: int,
    dst_fd: int,
    offset: int,
    dst_offset: int,
    count: int,
    advance: Callable[[int], None],
    chunk: int = KERNEL_CHUNK,
    cancelled: threading.Event | None = None,
) -> None:
    use_kernel = hasattr(os, "copy_file_range")
    while count > 0:
        if cancelled is not None and cancelled.is_set():
            return
        if use_kernel:
            try:
                n = os.copy_file_range(src_fd, dst_fd, min(count, chunk), offset, dst_offset)
            except OSError as exc:  # other file systems / kernels: fall back to plain reads
                if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM):
                    raise
                use_kernel = False
                continue
            if n == 0:
                raise OSError(errno.EIO, "source file ended early")
        else:
            data = os.pread(src_fd, min(count, CHUNK), offset)
            if not data:
                raise OSError(errno.EIO, "source file ended early")
            n = os.pwrite(dst_fd, data, dst_offset)
        offset += n
        dst_offset += n
        count -= n
        advance(n)


@dataclass(frozen=True)
class Range:
    """``count`` bytes from ``src`` at ``src_offset`` to ``dst`` at ``dst_offset``."""

    src: Path
    dst: Path
    src_offset: int
    dst_offset: int
    count: int


# The ranges of files being written that are not copied yet, and the copies that failed (by real path): a
# reader of such a file waits for the bytes it needs, or gets the copy's error.
_state = threading.Condition()
_pending: dict[str, list[Range]] = {}
_failed: dict[str, OSError] = {}


def wait_copied(path: Path, begin: int = 0, end: int | None = None) -> None:
    """Return once bytes ``[begin, end)`` of ``path`` (all of it without ``end``) are written, if a
    background copy (:func:`start_checkpoint`) still writes them.

    Raises: OSError: the copy of those bytes failed."""
    if not _pending and not _failed:  # nothing copies in the background (every read but convert's checks)
        return
    key = os.path.realpath(path)
    with _state:
        while True:
            if key in _failed:
                raise _failed[key]
            if not any(
                r.dst_offset < (end if end is not None else r.dst_offset + r.count) and begin < r.dst_offset + r.count
                for r in _pending.get(key, ())
            ):
                return
            _state.wait()


class Copying:
    """The big tensors' bytes :func:`start_checkpoint` left copying in a background thread."""

    def __init__(self, ranges: list[Range], advance: Callable[[int], None]):
        self._ranges = ranges
        self._advance = advance
        self._cancelled = threading.Event()
        self.error: OSError | None = None
        self._keys = {os.path.realpath(r.dst): r.dst for r in ranges}
        with _state:
            for r in ranges:
                _pending.setdefault(os.path.realpath(r.dst), []).append(r)
        self._thread = threading.Thread(target=self._run, name="eaglehub-copy", daemon=True) if ranges else None
        if self._thread is not None:
            self._thread.start()

    def _run(self) -> None:
        fds: dict[Path, int] = {}
        try:
            for r in self._ranges:
                for p, flags in ((r.src, os.O_RDONLY), (r.dst, os.O_WRONLY)):
                    if p not in fds:
                        fds[p] = os.open(p, flags)
                copy_range(
                    fds[r.src], fds[r.dst], r.src_offset, r.dst_offset, r.count, self._advance,
                    BACKGROUND_CHUNK, self._cancelled,
                )  # fmt: skip
                if self._cancelled.is_set():
                    break
                with _state:
                    _pending[os.path.realpath(r.dst)].remove(r)
                    _state.notify_all()
        except OSError as exc:
            self.error = exc
            with _state:
                for key in self._keys:
                    _failed[key] = exc
                _state.notify_all()
        finally:
            for fd in fds.values():
                os.close(fd)

    def _forget(self) -> None:
        with _state:
            for key in self._keys:
                _pending.pop(key, None)
                _failed.pop(key, None)
            _state.notify_all()

    def finish(self) -> None:
        """Wait for the copy. Raises: OSError: it failed."""
        if self._thread is not None:
            self._thread.join()
        self._forget()
        if self.error is not None:
            raise self.error

    def stop(self) -> OSError | None:
        """Cancel the copy (the write is abandoned) and wait for it; return its error, if it failed."""
        self._cancelled.set()
        if self._thread is not None:
            self._thread.join()
        self._forget()
        return self.error


class NotAdopted(Exception):
    """The planned file is not laid out as an :class:`EarlyCopy` guessed."""


class EarlyCopy:
    """The big tensors of one source safetensors file, copying into ``file`` before the output is planned.

    A plain conversion writes the source's tensors in the source's order and appends what it adds (3.1's
    fc_norm gains), so the bytes can start copying as soon as the source's header is read, at
    ``data_start`` (room for a larger header, same offset modulo :data:`FOLIO` as the source's data);
    :func:`start_checkpoint` completes the file around them when the plan agrees, else the copy is
    discarded and the file written as usual."""

    def __init__(self, source: Path, file: Path, data_start: int, ranges: list[Range]):
        self.source = source
        self.file = file
        self.data_start = data_start
        self.ranges = ranges
        self._lock = threading.Lock()
        self._target: Callable[[int], None] | None = None
        self._done = 0
        with open(file, "wb") as handle:  # sized up front: a reader of the copied ranges sees the file's length
            handle.truncate(max((r.dst_offset + r.count for r in ranges), default=data_start))
        self.copying = Copying(ranges, self._advance)

    def _advance(self, n: int) -> None:
        with self._lock:
            if self._target is None:
                self._done += n
                return
        self._target(n)

    def connect(self, advance: Callable[[int], None]) -> None:
        """Report the bytes copied so far, and from now on each further chunk, to ``advance``."""
        with self._lock:
            advance(self._done)
            self._target = advance

    def covers(self, path: Path, ranges: list[Range]) -> bool:
        """Whether ``ranges`` (what the plan copies into ``path``) are exactly what is being copied."""
        key = lambda r: (os.path.realpath(r.src), r.src_offset, r.dst_offset, r.count)  # noqa: E731
        return path == self.file and sorted(map(key, ranges)) == sorted(map(key, self.ranges))

    def discard(self) -> None:
        """Stop the copy and remove its file (the directory it is in is the caller's)."""
        self.copying.stop()
        self.file.unlink(missing_ok=True)

    @classmethod
    def start(cls, source: Path, file: Path, reserve: int = 8 << 10) -> EarlyCopy | None:
        """Start copying the big tensors of safetensors file ``source`` into ``file`` (created), laid out as
        the source's data region from ``data_start``; ``None`` when the header cannot be read (the conversion
        then reports that itself)."""
        try:
            with open(source, "rb") as handle:
                n = int.from_bytes(handle.read(8), "little")
                if not 2 <= n <= 100 << 20:
                    return None
                header = json.loads(handle.read(n))
            size = os.path.getsize(source)
        except (OSError, ValueError):
            return None
        if not isinstance(header, dict):
            return None
        spans = []
        for name, entry in header.items():
            if name == "__metadata__":
                continue
            try:
                begin, end = (int(x) for x in entry["data_offsets"])
            except (TypeError, KeyError, ValueError):
                return None
            spans.append((begin, end))
        spans.sort()
        src_start = 8 + n
        if not spans or spans[-1][1] + src_start > size:
            return None
        # room for the output's header: the source's twice over (renamed entries, provenance metadata) plus the
        # entries a conversion adds; the data keeps the source's offset modulo FOLIO (the kernel copies faster)
        data_start = 8 + 2 * n + reserve
        data_start += (src_start - data_start) % FOLIO
        ranges: list[Range] = []
        for begin, end in spans:
            if end - begin < SMALL:
                continue
            last = ranges[-1] if ranges else None
            if last is not None and last.src_offset + last.count == src_start + begin:
                ranges[-1] = Range(source, file, last.src_offset, last.dst_offset, last.count + end - begin)
            else:
                ranges.append(Range(source, file, src_start + begin, data_start + begin, end - begin))
        return cls(source, file, data_start, ranges)
