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

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from eaglehub.io.copying import (
    CHUNK,
    FOLIO,
    SMALL,
    Copying,
    EarlyCopy,
    NotAdopted,
    Range,
    copy_range,
)

INDEX_FILE = "model.safetensors.index.json"
ALIGN = 8  # safetensors pads the header so buffers start 8-byte aligned
PAGE = 4096
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
    background: list[Range] | None = None,
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
        Range(first.src_file, Path(path), first.src_offset, starts[i], total)
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
                copy_range(handles[first.src_file], fd, first.src_offset, starts[i], total, advance)
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
    ranges: list[Range] = []
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
