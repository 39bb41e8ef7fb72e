"""Read a checkpoint directory's tensors from headers only; load tensor data only on request.

Supported files (docs/formats.md §6.7): ``model.safetensors``; ``*.safetensors.index.json`` + shards;
``pytorch_model.bin`` (``torch.load(weights_only=True, mmap=True)``, so only the zip directory and
pickled metadata are read). A leading ``model.`` is stripped from names (docs/formats.md §1, NeMo
PR #2322) and recorded in :attr:`TensorIndex.stripped_prefix`.

Safetensors headers are parsed by :mod:`eaglehub.io.stformat` and :meth:`TensorIndex.load_numpy` reads
only a tensor's byte range, so indexing and numpy loading never import torch (``inspect`` and
``validate`` stay fast). Only ``pytorch_model.bin`` inputs and the torch loaders
(:meth:`TensorIndex.load`, :meth:`TensorIndex.load_all`) need torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from eaglehub.errors import EaglehubError
from eaglehub.io import jsonio
from eaglehub.io.decode import decode_buffer
from eaglehub.io.stformat import DTYPE_BY_TORCH, DTYPES, read_header

SINGLE_SAFETENSORS = "model.safetensors"
PYTORCH_BIN = "pytorch_model.bin"
STRIP_PREFIX = "model."

#: Bytes read per call when comparing or streaming big tensors: bounds memory, stays I/O bound.
READ_CHUNK = 16 << 20


@dataclass(frozen=True)
class TensorInfo:
    """Header facts for one tensor: ``name`` is un-prefixed, ``source_name`` as stored in ``file``.

    ``dtype`` is the torch dtype name (``"bfloat16"``; the lower-cased safetensors code where torch
    has none). ``st_dtype`` is the safetensors code (``"BF16"``) and ``offset`` the ABSOLUTE byte
    offset of the buffer in ``file``; both ``None`` for ``pytorch_model.bin``.
    """

    name: str
    source_name: str
    shape: tuple[int, ...]
    dtype: str
    file: str
    offset: int | None = None
    st_dtype: str | None = None

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Buffer size in bytes (0 for a dtype this module does not know)."""
        dt = DTYPES.get(self.st_dtype) if self.st_dtype else DTYPE_BY_TORCH.get(self.dtype)
        if dt is None:
            return 0
        if self.st_dtype is None and dt.bits < 8:  # torch's float4_e2m1fn_x2 counts packed bytes
            return self.numel
        return dt.nbytes(self.numel) or 0

    @property
    def is_float(self) -> bool:
        return self.dtype.startswith(("float", "bfloat"))


@dataclass
class TensorIndex:
    """All tensors of one checkpoint directory, by un-prefixed name. Loading is lazy."""

    root: Path
    format: str  # "safetensors" | "safetensors-sharded" | "pytorch"
    files: list[str]
    tensors: dict[str, TensorInfo]
    stripped_prefix: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)

    def __contains__(self, name: str) -> bool:
        return name in self.tensors

    def names(self) -> list[str]:
        return list(self.tensors)

    def load(self, name: str, max_rows: int | None = None):
        """Load tensor ``name`` (un-prefixed) as a CPU ``torch.Tensor``; ``max_rows`` loads ``t[:max_rows]``.

        Raises:
            KeyError: unknown name. EaglehubError: the file cannot be read.
        """
        info = self.tensors[name]
        if self.format == "pytorch":
            t = self._bin()[info.source_name]
            return t[:max_rows] if max_rows is not None and t.dim() else t
        from safetensors import safe_open

        with _reading(self.root / info.file):
            with safe_open(str(self.root / info.file), framework="pt") as f:
                if max_rows is not None and info.shape:
                    return f.get_slice(info.source_name)[:max_rows]
                return f.get_tensor(info.source_name)

    def load_numpy(self, name: str, max_rows: int | None = None, start_row: int = 0):
        """Load tensor ``name`` (un-prefixed) as a numpy array, reading only its byte range.

        ``max_rows``/``start_row`` select rows ``[start_row : start_row + max_rows]`` of the first
        dimension (like ``t[a:b]``; ignored for 0-d tensors), so a sample of a big matrix costs only
        its bytes. dtypes: bool, int*, uint*, float16/32/64, complex64 as stored; bfloat16 and the
        8-bit floats are decoded exactly to float32 (:func:`decode_buffer`). Safetensors files are read
        with plain file I/O (no torch); ``pytorch_model.bin`` goes through torch (a .bin needs it anyway).

        Raises:
            KeyError: unknown name. EaglehubError: the file is shorter than its header says (changed
                or truncated since indexing), or a dtype numpy cannot hold (``F4``, ``F6_*``).
        """
        import numpy as np

        info = self.tensors[name]
        lo = hi = 0
        if info.shape:  # python slice semantics, so negative or oversized bounds behave like t[a:b]
            stop = info.shape[0] if max_rows is None else start_row + max_rows
            lo, hi, _ = slice(start_row, stop).indices(info.shape[0])
            hi = max(lo, hi)
        shape = (hi - lo, *info.shape[1:]) if info.shape else ()
        if self.format == "pytorch":
            t = self._bin()[info.source_name]
            t = t[lo:hi] if info.shape else t
            return _torch_to_numpy(t)
        assert info.st_dtype is not None and info.offset is not None  # set for every safetensors entry
        row_bytes = DTYPES[info.st_dtype].nbytes(math.prod(info.shape[1:])) if info.shape else 0
        if row_bytes is None:
            raise EaglehubError(
                f"cannot decode {info.st_dtype} tensors to numpy",
                hint="only byte-sized dtypes are read",
                code="E-INPUT-WEIGHTS",
            )
        begin = info.offset + lo * row_bytes
        size = (hi - lo) * row_bytes if info.shape else info.nbytes
        buf = bytearray(size)  # writable, so the returned array is too
        path = self.root / info.file
        with _reading(path, begin, begin + size), open(path, "rb") as f:
            f.seek(begin)
            got = f.readinto(buf)
        if got != size:
            raise EaglehubError(
                f"cannot read {path}: {name} needs bytes {begin}..{begin + size}, the file ends at {begin + got}",
                hint="the file is truncated or changed since it was indexed; re-download or re-export it",
                code="E-INPUT-WEIGHTS",
            )
        return decode_buffer(buf, info.st_dtype, shape) if size else np.zeros(shape, dtype=_empty_dtype(info.st_dtype))

    def load_bytes(self, name: str) -> bytes | None:
        """The stored bytes of tensor ``name`` of a safetensors checkpoint (``None`` for a ``.bin``), read as
        :meth:`load_numpy` reads them, without numpy.

        Raises:
            KeyError: unknown name. EaglehubError: the file is shorter than its header says.
        """
        info = self.tensors[name]
        if self.format == "pytorch" or info.offset is None:
            return None
        path = self.root / info.file
        with _reading(path, info.offset, info.offset + info.nbytes), open(path, "rb") as f:
            f.seek(info.offset)
            data = f.read(info.nbytes)
        if len(data) != info.nbytes:
            raise EaglehubError(
                f"cannot read {path}: {name} needs bytes {info.offset}..{info.offset + info.nbytes}, the file ends "
                f"at {info.offset + len(data)}",
                hint="the file is truncated or changed since it was indexed; re-download or re-export it",
                code="E-INPUT-WEIGHTS",
            )
        return data

    def load_all(self) -> dict:
        """All tensors as ``{un-prefixed name: tensor}``, in index order. Raises EaglehubError."""
        if self.format == "pytorch":
            sd = self._bin()
            return {n: sd[i.source_name] for n, i in self.tensors.items()}
        from safetensors import safe_open

        out = {}
        for file in self.files:
            with _reading(self.root / file), safe_open(str(self.root / file), framework="pt") as f:
                for n, i in self.tensors.items():
                    if i.file == file:
                        out[n] = f.get_tensor(i.source_name)
        return {n: out[n] for n in self.tensors}

    def _bin(self) -> dict:
        if not hasattr(self, "_bin_cache"):
            self._bin_cache = _torch_load(self.root / self.files[0])
        return self._bin_cache

    @property
    def nbytes(self) -> int:
        return sum(i.nbytes for i in self.tensors.values())

    @property
    def numel(self) -> int:
        return sum(i.numel for i in self.tensors.values())


class _reading:
    """Context manager turning low-level read failures into one-line EaglehubErrors (exit 2). Bytes
    ``[begin, end)`` (the whole file without ``end``) that a background copy still writes
    (:func:`eaglehub.io.copying.wait_copied`: convert checks its output meanwhile) are waited for."""

    def __init__(self, path: Path, begin: int = 0, end: int | None = None):
        self.path = path
        self.begin, self.end = begin, end

    def __enter__(self):
        from eaglehub.io.copying import wait_copied

        wait_copied(self.path, self.begin, self.end)
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is None or isinstance(exc, (EaglehubError, KeyError)):
            return False
        raise EaglehubError(
            f"cannot read {self.path}: {str(exc).splitlines()[0] if str(exc) else exc_type.__name__}",
            hint="the file is truncated or not a checkpoint; re-download or re-export it",
            code="E-INPUT-WEIGHTS",
        ) from exc


def _empty_dtype(st_dtype: str):
    dt = DTYPES[st_dtype]
    return dt.numpy or "<f4"


def _torch_to_numpy(t):
    """A CPU torch tensor as numpy, with the same decoding rules as :func:`decode_buffer`."""
    import torch

    if t.dtype == torch.bfloat16 or (t.dtype.is_floating_point and t.element_size() == 1):
        return t.float().numpy()
    return t.numpy()


def _torch_load(path: Path) -> dict:
    import torch

    try:
        with _reading(path):
            sd = torch.load(str(path), weights_only=True, mmap=True, map_location="cpu")
    except EaglehubError as exc:
        with open(path, "rb") as f:
            legacy = f.read(1) == b"\x80"  # a bare pickle stream (protocol 2+), not a zip archive
        if legacy:
            raise EaglehubError(
                f"{path} is in torch's legacy (non-zip) format, which cannot be memory-mapped",
                hint="re-save it with a current torch.save, or convert it to safetensors",
                code="E-INPUT-WEIGHTS",
            ) from exc
        raise
    if not isinstance(sd, dict) or not all(isinstance(v, torch.Tensor) for v in sd.values()):
        raise EaglehubError(
            f"{path} is not a flat state dict of tensors",
            hint="save it with torch.save(model.state_dict())",
            code="E-INPUT-WEIGHTS",
        )
    return sd


def find_weight_files(root: Path) -> tuple[str, list[str]]:
    """Return ``(format, files)`` for the weights in ``root`` (docs/formats.md §6.7).

    Raises:
        EaglehubError: no weights, an unreadable index, or a producer's raw training checkpoint
            (:mod:`eaglehub.drafter.training`: export first).
    """
    root = Path(root)
    if not root.is_dir():
        raise EaglehubError(
            f"{root} is not a directory", hint="pass a local checkpoint directory", code="E-INPUT-MISSING"
        )
    indexes = sorted(root.glob("*.safetensors.index.json"))
    if indexes:  # as vLLM: an index names the files that load, even next to a model.safetensors
        return "safetensors-sharded", sorted(set(read_weight_map(indexes[0]).values()))
    if (root / SINGLE_SAFETENSORS).is_file():
        return "safetensors", [SINGLE_SAFETENSORS]
    if (root / PYTORCH_BIN).is_file():
        return "pytorch", [PYTORCH_BIN]
    singles = sorted(p.name for p in root.glob("*.safetensors"))
    if len(singles) == 1:
        return "safetensors", singles
    if singles:
        raise EaglehubError(
            f"{root} holds {len(singles)} safetensors files ({', '.join(singles[:3])}{', …' if len(singles) > 3 else ''}) "
            "but no model.safetensors.index.json: which tensors form the drafter is undefined (vLLM would load every file)",
            hint="write the index that maps each tensor to its shard, or merge the files into model.safetensors",
            code="E-INPUT-WEIGHTS",
        )
    from eaglehub.drafter.training import raise_if_training_checkpoint

    raise_if_training_checkpoint(root, "weight files")  # a config.json next to a raw checkpoint makes no drafter
    raise EaglehubError(
        f"no weights in {root}",
        hint="expected model.safetensors, *.safetensors.index.json + shards, or pytorch_model.bin",
        code="E-INPUT-MISSING",
    )


def _strip(name: str) -> str:
    return name[len(STRIP_PREFIX) :] if name.startswith(STRIP_PREFIX) else name


def read_index(root: Path) -> TensorIndex:
    """Build the :class:`TensorIndex` of ``root`` from headers only (nothing is loaded).

    Raises:
        EaglehubError: see :func:`find_weight_files`; unreadable/truncated files; a name present both
            with and without the ``model.`` prefix.
    """
    root = Path(root)
    fmt, files = find_weight_files(root)
    raw: list[tuple[str, tuple[int, ...], str, str, int | None, str | None]] = []
    metadata: dict[str, str] = {}
    if fmt == "pytorch":
        for name, t in _torch_load(root / files[0]).items():
            raw.append((name, tuple(t.shape), str(t.dtype).removeprefix("torch."), files[0], None, None))
    else:
        for file in files:
            path = root / file
            if not path.is_file():
                raise EaglehubError(
                    f"shard {path} is missing",
                    hint="download every shard listed in the index",
                    code="E-INPUT-MISSING",
                )
            header = read_header(path)
            metadata.update(header.metadata)
            for name in sorted(header.tensors):  # name order, as safe_open(...).keys() gave it
                e = header.tensors[name]
                raw.append((name, e.shape, DTYPES[e.dtype].torch or e.dtype.lower(), file, e.start, e.dtype))
    tensors: dict[str, TensorInfo] = {}
    stripped = False
    for name, shape, dtype, file, offset, st_dtype in raw:
        key = _strip(name)
        stripped |= key != name
        if key in tensors:
            first = tensors[key]
            raise EaglehubError(
                f"tensor {key} is stored twice ({first.source_name!r} in {first.file}, {name!r} in {file})",
                hint="keep one copy" + (", without the model. prefix" if first.source_name != name else ""),
                code="E-INPUT-WEIGHTS",
            )
        tensors[key] = TensorInfo(key, name, shape, dtype, file, offset, st_dtype)
    if fmt == "safetensors-sharded":
        _check_weight_map(root, {i.source_name: i.file for i in tensors.values()})
    return TensorIndex(root, fmt, files, tensors, STRIP_PREFIX if stripped else None, metadata)


def read_weight_map(index: Path) -> dict[str, str]:
    """``weight_map`` of a sharded-checkpoint index: tensor name → shard file name, every shard a plain
    file name inside the index's directory (vLLM refuses references it cannot find there).

    Raises: EaglehubError (E-INPUT-WEIGHTS): unreadable JSON, no ``weight_map`` object, a non-string
    entry, or a shard outside the directory.
    """

    def bad(why: str) -> EaglehubError:
        return EaglehubError(
            f"cannot read {index}: {why}", hint="rebuild the index from the shards", code="E-INPUT-WEIGHTS"
        )

    try:
        doc = jsonio.read(index)
    except (OSError, ValueError) as exc:
        raise bad(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from exc
    weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise bad("no weight_map object (tensor name -> shard file)")
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or not shard or Path(shard).name != shard or shard in (".", ".."):
            raise bad(f"tensor {name!r} maps to {shard!r}, not a file name in the checkpoint directory")
    return weight_map


def _check_weight_map(root: Path, found: dict[str, str]) -> None:
    """The index must list exactly the tensors the shards hold, each in its shard (loaders trust it)."""
    index = sorted(root.glob("*.safetensors.index.json"))[0]
    listed = read_weight_map(index)
    wrong = sorted(n for n in set(listed) | set(found) if listed.get(n) != found.get(n))
    if wrong:
        n = wrong[0]
        raise EaglehubError(
            f"{index.name} disagrees with the shards on {len(wrong)} tensor(s), e.g. {n}: "
            f"index says {listed.get(n) or 'absent'}, shards say {found.get(n) or 'absent'}",
            hint="rebuild the index from the shards (or restore the missing shard)",
            code="E-INPUT-WEIGHTS",
        )
