"""Read a checkpoint directory's tensors from headers only; load tensor data only on request.

Supported files (formats.md §6.7): ``model.safetensors``; ``*.safetensors.index.json`` + shards;
``pytorch_model.bin`` (``torch.load(weights_only=True, mmap=True)``, so only the zip directory and
pickled metadata are read). A leading ``model.`` is stripped from names (formats.md §1, NeMo
PR #2322) and recorded in :attr:`TensorIndex.stripped_prefix`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from .errors import EaglehubError

SINGLE_SAFETENSORS = "model.safetensors"
PYTORCH_BIN = "pytorch_model.bin"
STRIP_PREFIX = "model."

# safetensors header dtype -> torch dtype name
_ST_DTYPES = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16", "I32": "int32",
    "U32": "uint32", "I64": "int64", "U64": "uint64", "F16": "float16", "BF16": "bfloat16",
    "F32": "float32", "F64": "float64", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
}
_ITEMSIZE = {"bool": 1, "uint8": 1, "int8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "int16": 2,
             "uint16": 2, "float16": 2, "bfloat16": 2, "int32": 4, "uint32": 4, "float32": 4,
             "int64": 8, "uint64": 8, "float64": 8}


@dataclass(frozen=True)
class TensorInfo:
    """Header facts for one tensor: ``name`` is un-prefixed, ``source_name`` as stored in ``file``."""

    name: str
    source_name: str
    shape: tuple[int, ...]
    dtype: str
    file: str

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * _ITEMSIZE.get(self.dtype, 0)

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
    """Context manager turning low-level read failures into one-line EaglehubErrors (exit 2)."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is None or isinstance(exc, (EaglehubError, KeyError)):
            return False
        raise EaglehubError(
            f"cannot read {self.path}: {str(exc).splitlines()[0] if str(exc) else exc_type.__name__}",
            hint="the file is truncated or not a checkpoint; re-download or re-export it",
        ) from exc


def _torch_load(path: Path) -> dict:
    import torch

    with _reading(path):
        sd = torch.load(str(path), weights_only=True, mmap=True, map_location="cpu")
    if not isinstance(sd, dict) or not all(isinstance(v, torch.Tensor) for v in sd.values()):
        raise EaglehubError(f"{path} is not a flat state dict of tensors", hint="save it with torch.save(model.state_dict())")
    return sd


def find_weight_files(root: Path) -> tuple[str, list[str]]:
    """Return ``(format, files)`` for the weights in ``root`` (formats.md §6.7).

    Raises:
        EaglehubError: no weights, an unreadable index, or a raw training checkpoint
            (``.metadata`` ⇒ TorchSpec FSDP, ``training_state.pt`` ⇒ SpecForge: export first).
    """
    root = Path(root)
    if not root.is_dir():
        raise EaglehubError(f"{root} is not a directory", hint="pass a local checkpoint directory")
    if (root / SINGLE_SAFETENSORS).is_file():
        return "safetensors", [SINGLE_SAFETENSORS]
    indexes = sorted(root.glob("*.safetensors.index.json"))
    if indexes:
        with _reading(indexes[0]):
            weight_map = json.loads(indexes[0].read_text())["weight_map"]
        return "safetensors-sharded", sorted(set(weight_map.values()))
    if (root / PYTORCH_BIN).is_file():
        return "pytorch", [PYTORCH_BIN]
    singles = sorted(p.name for p in root.glob("*.safetensors"))
    if len(singles) == 1:
        return "safetensors", singles
    if (root / ".metadata").exists() or any(root.glob("*/model/.metadata")):
        raise EaglehubError(f"{root} is a raw TorchSpec FSDP checkpoint", hint="export it with TorchSpec tools/convert_to_hf.py first")
    if (root / "training_state.pt").exists():
        raise EaglehubError(f"{root} is a raw SpecForge training state", hint="run `specforge export` first")
    raise EaglehubError(f"no weights in {root}", hint="expected model.safetensors, *.safetensors.index.json + shards, or pytorch_model.bin")


def _strip(name: str) -> str:
    return name[len(STRIP_PREFIX):] if name.startswith(STRIP_PREFIX) else name


def read_index(root: Path) -> TensorIndex:
    """Build the :class:`TensorIndex` of ``root`` from headers only (nothing is loaded).

    Raises:
        EaglehubError: see :func:`find_weight_files`; unreadable/truncated files; a name present both
            with and without the ``model.`` prefix.
    """
    root = Path(root)
    fmt, files = find_weight_files(root)
    raw: list[tuple[str, tuple[int, ...], str, str]] = []
    metadata: dict[str, str] = {}
    if fmt == "pytorch":
        for name, t in _torch_load(root / files[0]).items():
            raw.append((name, tuple(t.shape), str(t.dtype).removeprefix("torch."), files[0]))
    else:
        from safetensors import safe_open

        for file in files:
            path = root / file
            if not path.is_file():
                raise EaglehubError(f"shard {path} is missing", hint="download every shard listed in the index")
            with _reading(path), safe_open(str(path), framework="pt") as f:
                metadata.update(f.metadata() or {})
                for name in f.keys():
                    sl = f.get_slice(name)
                    dtype = sl.get_dtype()
                    raw.append((name, tuple(sl.get_shape()), _ST_DTYPES.get(dtype, dtype.lower()), file))
    tensors: dict[str, TensorInfo] = {}
    stripped = False
    for name, shape, dtype, file in raw:
        key = _strip(name)
        stripped |= key != name
        if key in tensors:
            raise EaglehubError(
                f"tensor {key} is stored twice ({tensors[key].source_name!r} and {name!r})",
                hint="keep one copy, without the model. prefix",
            )
        tensors[key] = TensorInfo(key, name, shape, dtype, file)
    return TensorIndex(root, fmt, files, tensors, STRIP_PREFIX if stripped else None, metadata)
