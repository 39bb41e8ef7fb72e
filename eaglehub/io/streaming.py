"""Streaming safetensors writer: tensor bytes are copied file-to-file, never decoded.

The safetensors format is an 8-byte little-endian header length, a JSON header
(``{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}``, padded with
spaces to a multiple of 8) and the raw little-endian buffers (safetensors ``docs/``; the library
has no streaming writer). Every file written here is read back by the safetensors library in the
tests. Bytes move with ``os.copy_file_range`` (in-kernel, like ``cp``), falling back to chunked
``pread``/``write``; consecutive source ranges are copied in one call, so memory stays flat.
:func:`start_checkpoint` leaves the big tensors' bytes copying in a background thread (the kernel copy
releases the GIL), so the caller's checks of the output run meanwhile; a read of a range still being
copied waits for it (:func:`wait_copied`, called by :mod:`eaglehub.io.tensorio`).
Sharding uses huggingface_hub's ``split_state_dict_into_shards_factory`` and writes the usual
``model.safetensors.index.json``.
"""

from __future__ import annotations

import errno
import json
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

INDEX_FILE = "model.safetensors.index.json"
CHUNK = 16 << 20  # fallback copy chunk: 16 MiB bounds memory, big enough to stay I/O bound
KERNEL_CHUNK = 1 << 30  # per copy_file_range call (the kernel may copy less; the loop goes on)
BACKGROUND_CHUNK = 64 << 20  # per call in the background copy: a cancelled write stops within one
#: copied tensors from this size up are copied in the background by start_checkpoint; smaller ones (norms,
#: d2t/t2d: what checks without --deep read) are in place when it returns
SMALL = 4 << 20
ALIGN = 8  # safetensors pads the header so buffers start 8-byte aligned
PAGE = 4096
#: big copies keep the source's offset modulo this, not just modulo PAGE: the page cache holds a big file in
#: large folios, and a copy shifted by a multiple of 4 KiB only ran at 2/3 of the speed of one shifted by a
#: multiple of 64 KiB (0.85 GB, ext4, kernel copy: 0.32-0.34 s shifted by 4 or 12 KiB, 0.29 s by 16 KiB,
#: 0.24-0.25 s by 64 KiB to 2 MiB, as unshifted and as cp; 2026-12-06)
FOLIO = 64 << 10
#: from this many copied bytes the header is padded to FOLIO rather than PAGE (up to 64 KiB of spaces)
FOLIO_BYTES = 64 << 20


@dataclass(frozen=True)
class OutTensor:
    """One tensor of an output file.

    ``dtype`` is the safetensors code (``"BF16"``, ``"I64"``, ...), ``nbytes`` the buffer size in
    bytes. Exactly one source: ``src_file`` + ``src_offset`` (absolute byte offset, copied through),
    ``data`` (small new tensors), or ``buffer`` (a callable returning a C-contiguous buffer, for
    ``pytorch_model.bin`` tensors loaded one at a time with ``mmap``).
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    src_file: Path | None = None
    src_offset: int = 0
    data: bytes | None = None
    buffer: Callable[[], memoryview] | None = None


def header_bytes(
    tensors: list[OutTensor],
    metadata: dict[str, str] | None,
    page_phase: int | None = None,
    data_start: int | None = None,
) -> bytes:
    """The length prefix + JSON header for ``tensors`` laid out in the given order.

    ``page_phase``: pad the header with spaces (the library pads the same way) so the data region
    starts at that offset modulo :data:`PAGE` (:data:`FOLIO` for big copies); copies whose source and
    destination share the phase run faster in the kernel (:data:`FOLIO`). ``data_start``: pad it so the data region starts
    exactly there (where an :class:`EarlyCopy` put the bytes), if the header fits.
    """
    header: dict = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    pos = 0
    for t in tensors:
        header[t.name] = {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": [pos, pos + t.nbytes]}
        pos += t.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % ALIGN)
    if data_start is not None and data_start % ALIGN == 0 and 8 + len(raw) <= data_start:
        raw += b" " * (data_start - 8 - len(raw))
    elif page_phase is not None and page_phase % ALIGN == 0:
        raw += b" " * ((page_phase - 8 - len(raw)) % _period(tensors))
    return len(raw).to_bytes(8, "little") + raw


def _period(tensors: list[OutTensor]) -> int:
    """:data:`FOLIO` where the copied bytes are many (:data:`FOLIO_BYTES`), else :data:`PAGE`."""
    return FOLIO if sum(t.nbytes for t in tensors if t.src_file is not None) >= FOLIO_BYTES else PAGE


def _page_phase(tensors: list[OutTensor]) -> int | None:
    """Data-start phase that lines the first copied tensor up with its source bytes (mod :func:`_period`)."""
    pos = 0
    for t in tensors:
        if t.src_file is not None:
            return (t.src_offset - pos) % _period(tensors)
        pos += t.nbytes
    return None


def _copy_range(
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
class _Range:
    """``count`` bytes from ``src`` at ``src_offset`` to ``dst`` at ``dst_offset``."""

    src: Path
    dst: Path
    src_offset: int
    dst_offset: int
    count: int


# The ranges of files being written that are not copied yet, and the copies that failed (by real path): a
# reader of such a file waits for the bytes it needs, or gets the copy's error.
_state = threading.Condition()
_pending: dict[str, list[_Range]] = {}
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

    def __init__(self, ranges: list[_Range], advance: Callable[[int], None]):
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
                _copy_range(
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


def _runs(tensors: list[OutTensor], split: int | None = None) -> Iterable[tuple[OutTensor, int, int]]:
    """Group tensors into (first tensor, its index, total bytes) runs that are contiguous in one source
    file; with ``split``, tensors under that size and the others never share a run."""
    i = 0
    while i < len(tensors):
        first, total = tensors[i], tensors[i].nbytes
        big = split is not None and first.nbytes >= split
        j = i + 1
        while (
            first.src_file is not None
            and j < len(tensors)
            and tensors[j].src_file == first.src_file
            and tensors[j].src_offset == first.src_offset + total
            and (split is None or (tensors[j].nbytes >= split) == big)
        ):
            total += tensors[j].nbytes
            j += 1
        yield first, i, total
        i = j


def write_file(
    path: Path,
    tensors: list[OutTensor],
    metadata: dict[str, str] | None = None,
    advance: Callable[[int], None] = lambda n: None,
    background: list[_Range] | None = None,
    early: EarlyCopy | None = None,
) -> int:
    """Write one safetensors file; returns its size in bytes.

    ``advance(n)`` is called with the number of tensor bytes written (progress bars). ``background``:
    copied tensors of :data:`SMALL` bytes and up are not copied but appended to it as ranges to copy
    (the file has its full size, with those bytes still zero). ``early``: an :class:`EarlyCopy` already
    copies those ranges into ``path``; the file is completed around them (header, small tensors) when its
    layout is the one planned here, else :class:`NotAdopted` is raised before anything is written.
    Raises: OSError on I/O failure (callers write into a temporary directory).
    """
    handles: dict[Path, int] = {}
    if early is not None:
        head = header_bytes(tensors, metadata, data_start=early.data_start)
    else:
        head = header_bytes(tensors, metadata, _page_phase(tensors))
    starts = [len(head)]
    for t in tensors:
        starts.append(starts[-1] + t.nbytes)
    runs = list(_runs(tensors, SMALL if background is not None else None))
    later = [
        _Range(first.src_file, Path(path), first.src_offset, starts[i], total)
        for first, i, total in runs
        if first.src_file is not None and background is not None and first.nbytes >= SMALL
    ]
    if early is not None and (len(head) != early.data_start or not early.covers(Path(path), later)):
        raise NotAdopted(path)
    if background is not None and early is None:
        background.extend(later)
    # the early copy is writing into the file: it keeps its bytes (no O_TRUNC), it only grows
    flags = os.O_WRONLY | os.O_CREAT | (0 if early is not None else os.O_TRUNC)
    fd = os.open(path, flags, 0o644)
    try:
        os.ftruncate(fd, starts[-1])  # full size first: the header reads as valid while ranges are copied
        os.pwrite(fd, head, 0)
        for first, i, total in runs:
            if first.src_file is not None:
                if background is not None and first.nbytes >= SMALL:
                    continue
                if first.src_file not in handles:
                    handles[first.src_file] = os.open(first.src_file, os.O_RDONLY)
                _copy_range(handles[first.src_file], fd, first.src_offset, starts[i], total, advance)
                continue
            if first.data is not None:
                buf = memoryview(first.data).cast("B")
            else:
                assert first.buffer is not None  # exactly one source per OutTensor
                buf = memoryview(first.buffer()).cast("B")
            if len(buf) != first.nbytes:
                raise ValueError(f"{first.name}: {len(buf)} bytes, header says {first.nbytes}")
            written = 0
            while written < len(buf):
                written += os.pwrite(fd, buf[written : written + CHUNK], starts[i] + written)
            advance(len(buf))
        return os.fstat(fd).st_size
    finally:
        os.close(fd)
        for h in handles.values():
            os.close(h)


def plan_shards(tensors: list[OutTensor], max_shard_size: int | str | None) -> dict[str, list[OutTensor]]:
    """``{filename: tensors}``: one ``model.safetensors``, or shards of at most ``max_shard_size``
    bytes (int or ``"5GB"``-style string; a tensor bigger than that gets a shard of its own) named
    ``model-0000i-of-0000n.safetensors`` by huggingface_hub's splitter, tensor order kept."""
    if max_shard_size is None:
        return {"model.safetensors": list(tensors)}
    from huggingface_hub import split_state_dict_into_shards_factory

    by_name = {t.name: t for t in tensors}
    split = split_state_dict_into_shards_factory(
        by_name,
        get_storage_size=lambda t: t.nbytes,
        filename_pattern="model{suffix}.safetensors",
        max_shard_size=max_shard_size,
    )
    order = {t.name: i for i, t in enumerate(tensors)}
    return {
        f: sorted((by_name[n] for n in names), key=lambda t: order[t.name])
        for f, names in split.filename_to_tensors.items()
    }


def write_checkpoint(
    dst: Path,
    tensors: list[OutTensor],
    metadata: dict[str, str] | None = None,
    max_shard_size: int | str | None = None,
    advance: Callable[[int], None] = lambda n: None,
) -> list[str]:
    """Write ``tensors`` into the existing directory ``dst`` (one file or shards + index).

    Returns the weight file names written (the index included). Callers provide atomicity
    (:func:`eaglehub.io.atomic.atomic_dir`).
    """
    files, copying = start_checkpoint(dst, tensors, metadata, max_shard_size, advance)
    copying.finish()
    return files


def start_checkpoint(
    dst: Path,
    tensors: list[OutTensor],
    metadata: dict[str, str] | None = None,
    max_shard_size: int | str | None = None,
    advance: Callable[[int], None] = lambda n: None,
    early: EarlyCopy | None = None,
) -> tuple[list[str], Copying]:
    """:func:`write_checkpoint`, except that the bytes of copied tensors of :data:`SMALL` bytes and up
    are still being copied when it returns: the caller checks the output meanwhile (reads through
    :mod:`eaglehub.io.tensorio` wait for the bytes they need) and must call :meth:`Copying.finish`
    (or :meth:`Copying.stop` when it abandons the write) before the directory is used. ``advance`` is
    called from the copying thread too. ``early``: the copy an :class:`EarlyCopy` started into
    ``dst/model.safetensors`` before the tensors were planned; it is kept when the plan lays that file out as
    it guessed (one file, the source's big tensors in the source's order), else stopped and its file removed.
    """
    dst = Path(dst)
    plan = plan_shards(tensors, max_shard_size)
    if early is not None:
        if list(plan) == ["model.safetensors"] and early.file == dst / "model.safetensors":
            try:
                write_file(early.file, plan["model.safetensors"], metadata, advance, [], early)
            except NotAdopted:
                early.discard()
            except BaseException:
                early.copying.stop()
                raise
            else:
                early.connect(advance)
                return ["model.safetensors"], early.copying
        else:
            early.discard()
    ranges: list[_Range] = []
    for file, part in plan.items():
        write_file(dst / file, part, metadata, advance, ranges)
    copying = Copying(ranges, advance)
    if len(plan) == 1 and "model.safetensors" in plan:
        return ["model.safetensors"], copying
    try:
        index = {
            "metadata": {"total_size": sum(t.nbytes for t in tensors), **(metadata or {})},
            "weight_map": {t.name: f for f, part in plan.items() for t in part},
        }
        (dst / INDEX_FILE).write_text(json.dumps(index, indent=2) + "\n")
    except BaseException:
        copying.stop()
        raise
    return [*plan, INDEX_FILE], copying


class NotAdopted(Exception):
    """The planned file is not laid out as an :class:`EarlyCopy` guessed."""


class EarlyCopy:
    """The big tensors of one source safetensors file, copying into ``file`` before the output is planned.

    A plain conversion writes the source's tensors in the source's order and appends what it adds (3.1's
    fc_norm gains), so the bytes can start copying as soon as the source's header is read, at
    ``data_start`` (room for a larger header, same offset modulo :data:`FOLIO` as the source's data);
    :func:`start_checkpoint` completes the file around them when the plan agrees, else the copy is
    discarded and the file written as usual."""

    def __init__(self, source: Path, file: Path, data_start: int, ranges: list[_Range]):
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

    def covers(self, path: Path, ranges: list[_Range]) -> bool:
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
        ranges: list[_Range] = []
        for begin, end in spans:
            if end - begin < SMALL:
                continue
            last = ranges[-1] if ranges else None
            if last is not None and last.src_offset + last.count == src_start + begin:
                ranges[-1] = _Range(source, file, last.src_offset, last.dst_offset, last.count + end - begin)
            else:
                ranges.append(_Range(source, file, src_start + begin, data_start + begin, end - begin))
        return cls(source, file, data_start, ranges)
