"""Streaming safetensors writer: tensor bytes are copied file-to-file, never decoded.

The safetensors format is an 8-byte little-endian header length, a JSON header
(``{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}``, padded with
spaces to a multiple of 8) and the raw little-endian buffers (safetensors ``docs/``; the library
has no streaming writer). Every file written here is read back by the safetensors library in the
tests. Bytes move with ``os.copy_file_range`` (in-kernel, like ``cp``), falling back to chunked
``pread``/``write``; consecutive source ranges are copied in one call, so memory stays flat.
Sharding uses huggingface_hub's ``split_state_dict_into_shards_factory`` and writes the usual
``model.safetensors.index.json``.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

INDEX_FILE = "model.safetensors.index.json"
CHUNK = 16 << 20  # fallback copy chunk: 16 MiB bounds memory, big enough to stay I/O bound
KERNEL_CHUNK = 1 << 30  # per copy_file_range call (the kernel may copy less; the loop goes on)
ALIGN = 8  # safetensors pads the header so buffers start 8-byte aligned
PAGE = 4096


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


def header_bytes(tensors: list[OutTensor], metadata: dict[str, str] | None, page_phase: int | None = None) -> bytes:
    """The length prefix + JSON header for ``tensors`` laid out in the given order.

    ``page_phase``: pad the header with spaces (the library pads the same way) so the data region
    starts at that offset modulo :data:`PAGE`; copies whose source and destination share the phase
    run faster in the kernel (measured ≈ 10 % on ext4).
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
    if page_phase is not None and page_phase % ALIGN == 0:
        raw += b" " * ((page_phase - 8 - len(raw)) % PAGE)
    return len(raw).to_bytes(8, "little") + raw


def _page_phase(tensors: list[OutTensor]) -> int | None:
    """Data-start phase that lines the first copied tensor up with its source bytes (mod PAGE)."""
    pos = 0
    for t in tensors:
        if t.src_file is not None:
            return (t.src_offset - pos) % PAGE
        pos += t.nbytes
    return None


def _copy_range(src_fd: int, dst_fd: int, offset: int, count: int, advance: Callable[[int], None]) -> None:
    use_kernel = hasattr(os, "copy_file_range")
    while count > 0:
        if use_kernel:
            try:
                n = os.copy_file_range(src_fd, dst_fd, min(count, KERNEL_CHUNK), offset)
            except OSError as exc:  # other file systems / kernels: fall back to plain reads
                if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM):
                    raise
                use_kernel = False
                continue
            if n == 0:
                raise OSError(errno.EIO, "source file ended early")
        else:
            chunk = os.pread(src_fd, min(count, CHUNK), offset)
            if not chunk:
                raise OSError(errno.EIO, "source file ended early")
            n = os.write(dst_fd, chunk)
        offset += n
        count -= n
        advance(n)


def _runs(tensors: list[OutTensor]) -> Iterable[tuple[OutTensor, int]]:
    """Group tensors into (first tensor, total bytes) runs that are contiguous in one source file."""
    i = 0
    while i < len(tensors):
        first, total = tensors[i], tensors[i].nbytes
        j = i + 1
        while (
            first.src_file is not None
            and j < len(tensors)
            and tensors[j].src_file == first.src_file
            and tensors[j].src_offset == first.src_offset + total
        ):
            total += tensors[j].nbytes
            j += 1
        yield first, total
        i = j


def write_file(
    path: Path,
    tensors: list[OutTensor],
    metadata: dict[str, str] | None = None,
    advance: Callable[[int], None] = lambda n: None,
) -> int:
    """Write one safetensors file; returns its size in bytes.

    ``advance(n)`` is called with the number of tensor bytes written (progress bars).
    Raises: OSError on I/O failure (callers write into a temporary directory).
    """
    handles: dict[Path, int] = {}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, header_bytes(tensors, metadata, _page_phase(tensors)))
        for first, total in _runs(tensors):
            if first.src_file is not None:
                if first.src_file not in handles:
                    handles[first.src_file] = os.open(first.src_file, os.O_RDONLY)
                _copy_range(handles[first.src_file], fd, first.src_offset, total, advance)
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
                written += os.write(fd, buf[written : written + CHUNK])
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
    dst = Path(dst)
    plan = plan_shards(tensors, max_shard_size)
    for file, part in plan.items():
        write_file(dst / file, part, metadata, advance)
    if len(plan) == 1 and "model.safetensors" in plan:
        return ["model.safetensors"]
    index = {
        "metadata": {"total_size": sum(t.nbytes for t in tensors), **(metadata or {})},
        "weight_map": {t.name: f for f, part in plan.items() for t in part},
    }
    (dst / INDEX_FILE).write_text(json.dumps(index, indent=2) + "\n")
    return [*plan, INDEX_FILE]
