"""The safetensors file format, read without the safetensors library, torch or numpy.

Layout (safetensors ``docs/``, checked against the library in ``tests/test_stformat.py``): an 8-byte
little-endian unsigned header length ``n``; ``n`` bytes of UTF-8 JSON
``{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}`` (writers pad
it with spaces to a multiple of 8); then the data region, whose byte ``i`` is file byte ``8 + n + i``.
Buffers are raw little-endian, C order.

Validation mirrors what ``safetensors.safe_open`` (0.8) refuses: a header over 100 MB, a file shorter
than its header, bad UTF-8 or JSON, a non-object header, non-string metadata values, an unknown
dtype code, a shape or offset that is not a list of non-negative integers, a duplicate name, a
buffer size other than ``numel × bits / 8`` (sub-byte types must end on a byte boundary), buffers
that do not tile the data region exactly (sorted by offset they start at 0, each begins where the
previous ends, the last ends at the end of the file). Every failure is one :class:`EaglehubError`
line with a fix hint (exit code 2), never a traceback.

Public API: :data:`DTYPES` (and :data:`DTYPE_BY_TORCH`), :class:`DType`, :class:`TensorEntry`,
:class:`Header`, :func:`read_header`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard

from eaglehub.errors import EaglehubError
from eaglehub.io import jsonio

#: Largest header the library accepts (``MAX_HEADER_SIZE`` in safetensors ``lib.rs``).
MAX_HEADER_SIZE = 100_000_000
METADATA_KEY = "__metadata__"
BAD_FILE_HINT = "the file is truncated or not a safetensors file; re-download or re-export it"


@dataclass(frozen=True)
class DType:
    """One safetensors dtype.

    ``code``: the header spelling (``"BF16"``). ``torch``: the ``torch.dtype`` name without
    ``torch.`` (``"bfloat16"``), ``None`` where torch has none (the 6-bit MX types). ``bits``: bits
    per element as the header's shape counts them (``F4`` shapes count 4-bit values, while torch's
    ``float4_e2m1fn_x2`` counts packed pairs). ``numpy``: the little-endian numpy dtype string a
    buffer can be viewed as directly, ``None`` for types numpy lacks (bf16, fp8, fp4/6).
    """

    code: str
    torch: str | None
    bits: int
    numpy: str | None = None

    @property
    def itemsize(self) -> float:
        """Bytes per element (0.5 for ``F4``, 0.75 for ``F6_*``)."""
        return self.bits / 8

    def nbytes(self, numel: int) -> int | None:
        """Buffer bytes for ``numel`` elements; ``None`` when a sub-byte buffer would not end on a byte."""
        total_bits = numel * self.bits
        return total_bits // 8 if total_bits % 8 == 0 else None


_TABLE = [
    DType("BOOL", "bool", 8, "|b1"),
    DType("U8", "uint8", 8, "|u1"),
    DType("I8", "int8", 8, "|i1"),
    DType("U16", "uint16", 16, "<u2"),
    DType("I16", "int16", 16, "<i2"),
    DType("U32", "uint32", 32, "<u4"),
    DType("I32", "int32", 32, "<i4"),
    DType("U64", "uint64", 64, "<u8"),
    DType("I64", "int64", 64, "<i8"),
    DType("F16", "float16", 16, "<f2"),
    DType("BF16", "bfloat16", 16),
    DType("F32", "float32", 32, "<f4"),
    DType("F64", "float64", 64, "<f8"),
    DType("C64", "complex64", 64, "<c8"),
    DType("F8_E4M3", "float8_e4m3fn", 8),
    DType("F8_E5M2", "float8_e5m2", 8),
    DType("F8_E4M3FNUZ", "float8_e4m3fnuz", 8),
    DType("F8_E5M2FNUZ", "float8_e5m2fnuz", 8),
    DType("F8_E8M0", "float8_e8m0fnu", 8),
    DType("F4", "float4_e2m1fn_x2", 4),
    DType("F6_E2M3", None, 6),
    DType("F6_E3M2", None, 6),
]
#: safetensors code → :class:`DType` (every code safetensors 0.8 knows).
DTYPES: dict[str, DType] = {d.code: d for d in _TABLE}
#: torch dtype name (``"bfloat16"``) → :class:`DType`.
DTYPE_BY_TORCH: dict[str, DType] = {d.torch: d for d in _TABLE if d.torch}


@dataclass(frozen=True)
class TensorEntry:
    """One tensor of a header. ``dtype`` is the safetensors code; ``start``/``end`` are ABSOLUTE
    byte offsets of its buffer in the file (``end - start`` bytes, little-endian, C order)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    start: int
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.start

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def dtype_info(self) -> DType:
        return DTYPES[self.dtype]


@dataclass(frozen=True)
class Header:
    """A parsed safetensors header.

    ``header_len``: the JSON length ``n`` in bytes; ``data_start`` = ``8 + n``, the absolute offset
    of the data region; ``file_size`` in bytes; ``metadata``: ``__metadata__`` (``{}`` if absent or
    null); ``tensors``: name → :class:`TensorEntry`, in file (offset) order.
    """

    path: Path
    header_len: int
    data_start: int
    file_size: int
    metadata: dict[str, str]
    tensors: dict[str, TensorEntry]


def _fail(path: Path, reason: str) -> EaglehubError:
    return EaglehubError(f"cannot read {path}: {reason}", hint=BAD_FILE_HINT, code="E-INPUT-WEIGHTS")


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict:
    # json.loads keeps the last of repeated keys; the library refuses the file instead
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"name {key!r} appears twice in the header")
        out[key] = value
    return out


def _has_surrogate(obj: object) -> bool:
    """Any string (key or value) in ``obj`` holding a lone surrogate; iterative, as headers may nest deeply."""
    stack = [obj]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            if any("\ud800" <= c <= "\udfff" for c in x):
                return True
        elif isinstance(x, dict):
            stack += [*x.keys(), *x.values()]
        elif isinstance(x, list):
            stack += x
    return False


def _uints(value: object) -> TypeGuard[list[int]]:
    return isinstance(value, list) and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in value)


def _read_prefix(path: Path) -> tuple[int, bytes]:
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            if len(head) < 8:
                raise _fail(path, f"{size} bytes, too short for the 8-byte header length")
            n = int.from_bytes(head, "little")
            if n > MAX_HEADER_SIZE:
                raise _fail(
                    path,
                    f"header length {n} exceeds the {MAX_HEADER_SIZE}-byte limit (not a safetensors file?)",
                )
            if 8 + n > size:
                raise _fail(path, f"header length {n} runs past the end of the {size}-byte file")
            return size, f.read(n)
    except OSError as exc:
        raise EaglehubError(
            f"cannot read {path}: {exc.strerror or exc}",
            hint="check the path and its permissions",
            code="E-INPUT-MISSING" if isinstance(exc, FileNotFoundError) else "E-INPUT-WEIGHTS",
        ) from exc


def read_header(path: str | Path) -> Header:
    """Parse and validate the header of the safetensors file ``path`` (reads ``8 + n`` bytes only).

    Raises:
        EaglehubError: unreadable file, or a header the safetensors library would refuse (see the
            module docstring); one line naming the file and the first problem, with a hint (exit 2).
    """
    path = Path(path)
    size, raw = _read_prefix(path)
    try:
        header = jsonio.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except UnicodeDecodeError as exc:
        raise _fail(path, f"header is not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    except ValueError as exc:  # malformed JSON (jsonio.loads) and _no_duplicates
        raise _fail(path, f"header is not valid JSON ({str(exc).splitlines()[0]})") from exc
    if _has_surrogate(header):  # serde_json, which the library parses with, refuses lone surrogate escapes
        raise _fail(path, "header holds a lone UTF-16 surrogate escape (not valid Unicode)")
    if not isinstance(header, dict):
        raise _fail(path, f"header is a JSON {type(header).__name__}, not an object")
    metadata = header.pop(METADATA_KEY, None)
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise _fail(path, f"{METADATA_KEY} must map strings to strings")
    data_start, data_len = 8 + len(raw), size - 8 - len(raw)
    entries: list[tuple[int, int, str, str, tuple[int, ...]]] = []
    for name, spec in header.items():
        if not isinstance(spec, dict):
            raise _fail(path, f"entry for tensor {name!r} is not an object")
        dtype, shape, offsets = spec.get("dtype"), spec.get("shape"), spec.get("data_offsets")
        if dtype not in DTYPES:
            raise _fail(path, f"tensor {name!r} has unknown dtype {dtype!r}")
        if not _uints(shape):
            raise _fail(path, f"tensor {name!r} has shape {shape!r}, not a list of non-negative integers")
        if not _uints(offsets) or len(offsets) != 2:
            raise _fail(path, f"tensor {name!r} has data_offsets {offsets!r}, not [begin, end]")
        begin, end = offsets
        want = DTYPES[dtype].nbytes(math.prod(shape))
        if want is None or end - begin != want:
            raise _fail(
                path,
                f"tensor {name!r} ({dtype} {shape}) spans {end - begin} bytes, its shape needs "
                + (f"{want}" if want is not None else "a whole number of bytes"),
            )
        entries.append((begin, end, name, dtype, tuple(shape)))
    entries.sort(key=lambda e: (e[0], e[1]))
    pos = 0
    for begin, end, name, _, _ in entries:
        if begin != pos:
            what = "overlaps the previous tensor" if begin < pos else f"leaves a gap of {begin - pos} bytes before it"
            raise _fail(path, f"tensor {name!r} starts at data byte {begin}, which {what}")
        pos = end
    if pos != data_len:
        raise _fail(
            path,
            f"tensors cover {pos} data bytes but the file holds {data_len} after the header"
            + (" (truncated?)" if pos > data_len else ""),
        )
    tensors = {
        name: TensorEntry(name, dtype, shape, data_start + begin, data_start + end)
        for begin, end, name, dtype, shape in entries
    }
    return Header(path, len(raw), data_start, size, dict(metadata), tensors)
