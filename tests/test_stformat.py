"""eaglehub.io.stformat against the safetensors library: what the library writes, read_header reads
back (names, dtype codes, shapes, absolute byte ranges, metadata); what the library refuses,
read_header refuses with a one-line EaglehubError (exit 2)."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors import SafetensorError, safe_open
from safetensors.numpy import save_file as np_save_file
from safetensors.torch import save_file as pt_save_file

from eaglehub.errors import EaglehubError
from eaglehub.io.stformat import DTYPE_BY_TORCH, DTYPES, MAX_HEADER_SIZE, read_header

TORCH_DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.float8_e4m3fn,
    torch.float8_e5m2,
    torch.float8_e4m3fnuz,
    torch.float8_e5m2fnuz,
    torch.float8_e8m0fnu,
]
NUMPY_DTYPES = [
    np.bool_,
    np.uint8,
    np.int8,
    np.int16,
    np.uint16,
    np.int32,
    np.uint32,
    np.int64,
    np.uint64,
    np.float16,
    np.float32,
    np.float64,
    np.complex64,
]

names = st.text(alphabet="abcdefgh._0123", min_size=1, max_size=12).filter(lambda s: s != "__metadata__")
shapes = st.lists(st.integers(0, 5), min_size=0, max_size=3).map(tuple)
metadata = st.none() | st.dictionaries(st.text(max_size=8), st.text(max_size=16), max_size=4)


def _random_bytes(nbytes: int, seed: int) -> torch.Tensor:
    return torch.randint(0, 256, (nbytes,), dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))


def _torch_tensor(dtype: torch.dtype, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """Arbitrary bit patterns of ``dtype`` (every byte value, NaNs included), built without casting."""
    numel = int(np.prod(shape)) if shape else 1
    raw = _random_bytes(numel * dtype.itemsize, seed)
    if dtype == torch.bool:
        raw = raw % 2
    return raw.view(dtype).reshape(shape)


def _file_bytes(path: Path, start: int, end: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(end - start)


def _assert_matches_library(path: Path, expected: dict[str, bytes], meta: dict | None) -> None:
    try:
        safe_open(str(path), framework="np")
    except SafetensorError:
        # safetensors 0.8 writes `{},"__metadata__":{}}` for no tensors + empty metadata and then
        # refuses its own file; read_header must refuse it as well
        assert not expected and meta == {}
        _assert_one_line_error(path)
        return
    h = read_header(path)
    assert h.data_start == 8 + h.header_len
    assert h.file_size == path.stat().st_size
    assert h.metadata == (meta or {})
    with safe_open(str(path), framework="np") as f:
        assert sorted(h.tensors) == sorted(f.keys())
        assert (f.metadata() or {}) == h.metadata
        for name, e in h.tensors.items():
            sl = f.get_slice(name)
            assert e.dtype == sl.get_dtype() and list(e.shape) == sl.get_shape(), name
            assert _file_bytes(path, e.start, e.end) == expected[name], name
    ends = sorted((e.start, e.end) for e in h.tensors.values())
    assert [s for s, _ in ends] == ([h.data_start] + [e for _, e in ends[:-1]] if ends else [])  # tiles the data region
    assert (ends[-1][1] if ends else h.data_start) == h.file_size


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.dictionaries(names, st.tuples(st.sampled_from(TORCH_DTYPES), shapes), max_size=6),
    metadata,
    st.integers(0, 2**16),
)
def test_torch_written_files_read_back(tmp_path, spec, meta, seed):
    tensors = {n: _torch_tensor(dt, shape, seed + i) for i, (n, (dt, shape)) in enumerate(spec.items())}
    path = tmp_path / "t.safetensors"
    pt_save_file(tensors, str(path), metadata=meta)
    _assert_matches_library(
        path,
        {
            n: t.contiguous().view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
            for n, t in tensors.items()
        },
        meta,
    )
    for n, t in tensors.items():
        assert read_header(path).tensors[n].dtype_info.torch == str(t.dtype).removeprefix("torch.")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.dictionaries(names, st.tuples(st.sampled_from(NUMPY_DTYPES), shapes), max_size=6),
    metadata,
    st.integers(0, 2**16),
)
def test_numpy_written_files_read_back(tmp_path, spec, meta, seed):
    rng = np.random.default_rng(seed)
    tensors = {
        n: rng.integers(0, 256, size=int(np.prod(shape)) * np.dtype(dt).itemsize, dtype=np.uint8)
        .view(np.uint8 if dt is np.bool_ else dt)
        .reshape(shape)
        for n, (dt, shape) in spec.items()
    }
    tensors = {n: np.asarray((a % 2).astype(np.bool_)) if spec[n][0] is np.bool_ else a for n, a in tensors.items()}
    path = tmp_path / "n.safetensors"
    np_save_file(tensors, str(path), metadata=meta)
    _assert_matches_library(path, {n: a.tobytes() for n, a in tensors.items()}, meta)


def test_offsets_are_absolute_and_metadata_kept(tmp_path):
    path = tmp_path / "x.safetensors"
    pt_save_file(
        {"b": torch.arange(3, dtype=torch.int64), "a": torch.ones(2, 2, dtype=torch.bfloat16)},
        str(path),
        metadata={"format": "pt", "note": "é"},
    )
    h = read_header(path)
    n = struct.unpack("<Q", path.read_bytes()[:8])[0]
    assert h.header_len == n and h.data_start == 8 + n
    assert h.metadata == {"format": "pt", "note": "é"}
    assert list(h.tensors) == sorted(h.tensors, key=lambda k: h.tensors[k].start)  # file order
    a, b = h.tensors["a"], h.tensors["b"]
    assert (a.dtype, a.shape, a.nbytes, a.numel) == ("BF16", (2, 2), 8, 4)
    assert (b.dtype, b.shape, b.nbytes) == ("I64", (3,), 24)
    assert np.frombuffer(_file_bytes(path, b.start, b.end), "<i8").tolist() == [0, 1, 2]
    assert _file_bytes(path, a.start, a.end) == torch.ones(4, dtype=torch.bfloat16).view(torch.uint8).numpy().tobytes()


def test_dtype_table_matches_torch_and_the_library(tmp_path):
    for code, dt in DTYPES.items():
        assert dt.code == code
        if dt.torch is not None:
            tdt = getattr(torch, dt.torch)
            # F4 shapes count 4-bit values; torch's packed dtype counts bytes
            assert dt.bits == (4 if code == "F4" else 8 * tdt.itemsize), code
            assert DTYPE_BY_TORCH[dt.torch] is dt
        if dt.numpy is not None:
            assert np.dtype(dt.numpy).itemsize * 8 == dt.bits, code
        # the library accepts every code we know, with numel·bits/8 bytes
        path = tmp_path / f"{code}.safetensors"
        _write_raw(path, {"x": {"dtype": code, "shape": [8], "data_offsets": [0, dt.bits]}}, b"\0" * dt.bits)
        with safe_open(str(path), framework="np") as f:
            assert f.get_slice("x").get_dtype() == code
        assert read_header(path).tensors["x"].nbytes == dt.bits
    assert (DTYPES["BF16"].torch, DTYPES["BF16"].itemsize) == ("bfloat16", 2)
    assert (DTYPES["F8_E4M3"].torch, DTYPES["I64"].itemsize) == ("float8_e4m3fn", 8)


def test_dtype_table_knows_every_code_the_library_knows(tmp_path):
    """The library lists its codes when it refuses an unknown one: none may be missing from DTYPES."""
    path = tmp_path / "u.safetensors"
    _write_raw(path, {"x": {"dtype": "NOPE", "shape": [1], "data_offsets": [0, 1]}}, b"\0")
    with pytest.raises(SafetensorError) as err:
        safe_open(str(path), framework="np")
    listed = re.findall(r"`([A-Z0-9_]+)`", str(err.value).split("expected one of", 1)[1])
    assert len(listed) > 15 and set(listed) == set(DTYPES)


def _write_raw(path: Path, header: dict | None, data: bytes, raw: bytes | None = None, pad: bool = True) -> Path:
    h = raw if raw is not None else json.dumps(header).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + data)
    return path


def _t(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


BAD = {
    "trailing bytes": ({"a": _t("F32", [2], 0, 8)}, b"\0" * 12, None),
    "short data": ({"a": _t("F32", [2], 0, 8)}, b"\0" * 4, None),
    "gap": ({"a": _t("F32", [1], 0, 4), "b": _t("F32", [1], 8, 12)}, b"\0" * 12, None),
    "overlap": ({"a": _t("F32", [2], 0, 8), "b": _t("F32", [1], 4, 8)}, b"\0" * 8, None),
    "not from zero": ({"a": _t("F32", [1], 4, 8)}, b"\0" * 8, None),
    "size mismatch": ({"a": _t("F32", [3], 0, 8)}, b"\0" * 8, None),
    "end before begin": ({"a": _t("F32", [0], 8, 0)}, b"\0" * 8, None),
    "unknown dtype": ({"a": _t("F99", [2], 0, 8)}, b"\0" * 8, None),
    "lower-case dtype": ({"a": _t("f32", [1], 0, 4)}, b"\0" * 4, None),
    "sub-byte not on a byte": ({"a": _t("F4", [3], 0, 2)}, b"\0" * 2, None),
    "metadata int": ({"__metadata__": {"a": 1}, "a": _t("F32", [1], 0, 4)}, b"\0" * 4, None),
    "metadata nested": ({"__metadata__": {"a": {"b": "c"}}, "a": _t("F32", [1], 0, 4)}, b"\0" * 4, None),
    "negative dim": ({"a": _t("F32", [-1], 0, 4)}, b"\0" * 4, None),
    "float dim": ({"a": _t("F32", [1.0], 0, 4)}, b"\0" * 4, None),
    "bool dim": ({"a": _t("F32", [True], 0, 4)}, b"\0" * 4, None),
    "no offsets": ({"a": {"dtype": "F32", "shape": [1]}}, b"\0" * 4, None),
    "three offsets": ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 4]}}, b"\0" * 4, None),
    "entry not object": ({"a": [1, 2]}, b"", None),
    "empty header with data": ({}, b"\0" * 4, None),
    "duplicate name": (
        None,
        b"\0" * 8,
        b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}',
    ),
    "header is a list": (None, b"", b"[]"),
    "NUL padding": (None, b"\0" * 4, b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}\0\0'),
    "cut JSON": (None, b"", b'{"a":'),
    "bad UTF-8": (None, b"", b'{"\xff":1}'),
    "zero-length header": (None, b"", b""),
}
GOOD = {
    "extra entry key": ({"a": {**_t("F32", [1], 0, 4), "x": 1}}, b"\0" * 4, None),
    "null metadata": ({"__metadata__": None, "a": _t("F32", [1], 0, 4)}, b"\0" * 4, None),
    "empty file header": ({}, b"", None),
    "entries out of offset order": ({"b": _t("F32", [1], 4, 8), "a": _t("F32", [1], 0, 4)}, b"\0" * 8, None),
    "leading space": (None, b"\0" * 4, b' {"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'),
    "F6 on a byte boundary": ({"a": _t("F6_E2M3", [4], 0, 3)}, b"\0" * 3, None),
}


def _assert_one_line_error(path: Path) -> EaglehubError:
    with pytest.raises(EaglehubError) as err:
        read_header(path)
    e = err.value
    assert e.exit_code == 2 and e.hint and "\n" not in e.message and str(path) in e.message
    return e


@pytest.mark.parametrize("case", list(BAD))
def test_library_and_read_header_refuse_the_same_files(tmp_path, case):
    header, data, raw = BAD[case]
    path = _write_raw(tmp_path / "bad.safetensors", header, data, raw, pad=raw is None)
    with pytest.raises(SafetensorError):
        safe_open(str(path), framework="np")
    _assert_one_line_error(path)


@pytest.mark.parametrize("case", list(GOOD))
def test_library_and_read_header_accept_the_same_files(tmp_path, case):
    header, data, raw = GOOD[case]
    path = _write_raw(tmp_path / "good.safetensors", header, data, raw, pad=raw is None)
    with safe_open(str(path), framework="np") as f:
        keys = sorted(f.keys())
    h = read_header(path)
    assert sorted(h.tensors) == keys and h.metadata == {}


@pytest.mark.parametrize(
    "prefix,match",
    [
        (b"abc", "too short"),
        (struct.pack("<Q", MAX_HEADER_SIZE + 1) + b"{}", "exceeds"),
        (struct.pack("<Q", 1 << 40) + b"{}", "exceeds"),
        (struct.pack("<Q", 1000) + b"{}", "runs past the end"),
    ],
)
def test_bad_length_prefix(tmp_path, prefix, match):
    path = tmp_path / "p.safetensors"
    path.write_bytes(prefix)
    with pytest.raises(SafetensorError):
        safe_open(str(path), framework="np")
    assert match in _assert_one_line_error(path).message


def test_missing_file_is_a_one_line_error(tmp_path):
    with pytest.raises(EaglehubError) as err:
        read_header(tmp_path / "absent.safetensors")
    assert err.value.exit_code == 2 and "absent.safetensors" in err.value.message and "\n" not in err.value.message


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_every_truncation_is_refused_by_both(tmp_path, data):
    path = tmp_path / "full.safetensors"
    if not path.exists():
        pt_save_file(
            {"w": torch.randn(4, 8).to(torch.bfloat16), "d2t": torch.arange(5)},
            str(path),
            metadata={"format": "pt"},
        )
    full = path.read_bytes()
    cut = data.draw(st.integers(0, len(full) - 1), label="cut")
    short = tmp_path / "short.safetensors"
    short.write_bytes(full[:cut])
    with pytest.raises(SafetensorError):
        safe_open(str(short), framework="np")
    _assert_one_line_error(short)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_garbled_header_bytes_never_crash(tmp_path, data):
    """Flip one header byte: either both accept the file (and agree on it) or read_header refuses it
    with an EaglehubError, never another exception."""
    path = tmp_path / "full.safetensors"
    if not path.exists():
        pt_save_file(
            {"w": torch.randn(4, 8).to(torch.bfloat16), "d2t": torch.arange(5)},
            str(path),
            metadata={"format": "pt"},
        )
    full = bytearray(path.read_bytes())
    n = struct.unpack("<Q", full[:8])[0]
    pos = data.draw(st.integers(0, 8 + n - 1), label="pos")
    full[pos] = data.draw(st.integers(0, 255).filter(lambda b: b != full[pos]), label="byte")
    bad = tmp_path / "garbled.safetensors"
    bad.write_bytes(bytes(full))
    try:
        with safe_open(str(bad), framework="np") as f:
            lib = {k: (f.get_slice(k).get_dtype(), f.get_slice(k).get_shape()) for k in f.keys()}
    except SafetensorError:
        lib = None
    if lib is None:
        _assert_one_line_error(bad)
    else:
        h = read_header(bad)
        assert {k: (e.dtype, list(e.shape)) for k, e in h.tensors.items()} == lib
