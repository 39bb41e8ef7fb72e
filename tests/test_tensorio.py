"""Header-only tensor reading: single, sharded, .bin, model. prefix, bad files (docs/formats.md §6.7)."""

from __future__ import annotations

import copy

import pytest
import torch
from helpers.checkpoints import BASE_CONFIG, drafter_tensors, write_checkpoint

from eaglehub.errors import EaglehubError
from eaglehub.io.tensorio import TensorIndex, read_index


@pytest.fixture
def tensors():
    return drafter_tensors(copy.deepcopy(BASE_CONFIG))


@pytest.mark.parametrize(
    "fmt,expect", [("safetensors", "safetensors"), ("sharded", "safetensors-sharded"), ("bin", "pytorch")]
)
def test_formats_agree(tmp_path, tensors, fmt, expect):
    idx = read_index(write_checkpoint(tmp_path / fmt, None, tensors, fmt))
    assert idx.format == expect
    assert set(idx.names()) == set(tensors)
    assert idx.tensors["fc.weight"].shape == (64, 192) and idx.tensors["fc.weight"].dtype == "bfloat16"
    assert idx.tensors["d2t"].dtype == "int64" and idx.tensors["t2d"].dtype == "bool"
    assert idx.nbytes == sum(t.numel() * t.element_size() for t in tensors.values())
    assert idx.numel == sum(t.numel() for t in tensors.values())
    if fmt == "sharded":
        assert len(idx.files) == 2 and len({i.file for i in idx.tensors.values()}) == 2
    assert torch.equal(idx.load("lm_head.weight"), tensors["lm_head.weight"])
    assert torch.equal(idx.load("fc.weight", max_rows=3), tensors["fc.weight"][:3])
    loaded = idx.load_all()
    assert list(loaded) == idx.names() and all(torch.equal(loaded[n], tensors[n]) for n in tensors)


def test_model_prefix_is_stripped_and_recorded(tmp_path, tensors):
    idx = read_index(write_checkpoint(tmp_path / "p", None, {"model." + n: t for n, t in tensors.items()}))
    assert idx.stripped_prefix == "model."
    assert idx.tensors["fc.weight"].source_name == "model.fc.weight"
    assert torch.equal(idx.load("fc.weight"), tensors["fc.weight"])


def test_name_stored_twice_is_refused(tmp_path, tensors):
    path = write_checkpoint(
        tmp_path / "dup",
        None,
        {"fc.weight": tensors["fc.weight"], "model.fc.weight": tensors["fc.weight"].clone()},
    )
    with pytest.raises(EaglehubError, match="stored twice"):
        read_index(path)


def test_truncated_safetensors_is_a_one_line_error(tmp_path, tensors):
    path = write_checkpoint(tmp_path / "t", None, tensors)
    f = path / "model.safetensors"
    f.write_bytes(f.read_bytes()[:-100])
    with pytest.raises(EaglehubError) as err:
        read_index(path)
    assert err.value.exit_code == 2 and "\n" not in err.value.message and err.value.hint


@pytest.mark.parametrize(
    "setup,match",
    [
        (lambda p: None, "not a directory"),
        (lambda p: p.mkdir(), "no weights"),
        (lambda p: (p.mkdir(), (p / "training_state.pt").write_bytes(b"x")), "SpecForge"),
        (lambda p: (p.mkdir(), (p / "pytorch_model.bin").write_bytes(b"not a zip")), "cannot read"),
    ],
)
def test_bad_directories(tmp_path, setup, match):
    path = tmp_path / "x"
    setup(path)
    with pytest.raises(EaglehubError, match=match):
        read_index(path)


def test_missing_shard(tmp_path, tensors):
    path = write_checkpoint(tmp_path / "s", None, tensors, "sharded")
    (path / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(EaglehubError, match="shard .* is missing"):
        read_index(path)


def test_index_reads_headers_only(tmp_path, tensors, monkeypatch):
    path = write_checkpoint(tmp_path / "h", None, tensors)
    monkeypatch.setattr(TensorIndex, "load", lambda *a, **k: pytest.fail("data loaded"))
    monkeypatch.setattr(TensorIndex, "load_all", lambda *a, **k: pytest.fail("data loaded"))
    from eaglehub.checks.inspection import inspect_drafter

    (path / "config.json").write_text(__import__("json").dumps(BASE_CONFIG))
    assert inspect_drafter(path)["parameters"] == sum(t.numel() for t in tensors.values())


# --- torch-free index and numpy loading ---------------------------------------------------------

import numpy as np  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from eaglehub.io.decode import fp8_table  # noqa: E402
from eaglehub.io.stformat import DTYPES  # noqa: E402

FP8 = {
    "F8_E4M3": torch.float8_e4m3fn,
    "F8_E5M2": torch.float8_e5m2,
    "F8_E4M3FNUZ": torch.float8_e4m3fnuz,
    "F8_E5M2FNUZ": torch.float8_e5m2fnuz,
    "F8_E8M0": torch.float8_e8m0fnu,
}
LOADABLE = [
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
    *FP8.values(),
]


@pytest.mark.parametrize("code", list(FP8))
def test_fp8_lookup_table_equals_torch_conversion(code):
    """All 256 bytes decode to torch's own float32 value: same bits for numbers (signed zeros
    included), NaN where torch gives NaN."""
    want = torch.arange(256, dtype=torch.uint8).view(FP8[code]).float().numpy()
    got = fp8_table(code)
    assert got.dtype == np.float32 and got.shape == (256,)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.isnan(want).any()
    ok = ~np.isnan(want)
    assert np.array_equal(got[ok].view(np.uint32), want[ok].view(np.uint32))


def _bits(dtype: torch.dtype, shape: tuple[int, ...], seed: int = 0) -> torch.Tensor:
    n = int(np.prod(shape)) * dtype.itemsize
    raw = torch.randint(0, 256, (n,), dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))
    return (raw % 2 if dtype == torch.bool else raw).view(dtype).reshape(shape)


def _as_numpy(t: torch.Tensor) -> np.ndarray:
    return t.float().numpy() if t.dtype == torch.bfloat16 or t.dtype in FP8.values() else t.numpy()


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-for-bit equality (signed zeros included); NaNs only need to sit at the same places, since
    torch's NaN payloads differ per fp8 format and carry no information."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind != "f":
        return a.tobytes() == b.tobytes()
    nan = np.isnan(a)
    return bool(np.array_equal(nan, np.isnan(b))) and a[~nan].tobytes() == b[~nan].tobytes()


@pytest.mark.parametrize("fmt", ["safetensors", "sharded", "bin"])
def test_load_numpy_every_dtype_matches_torch(tmp_path, fmt):
    tensors = {str(dt).removeprefix("torch."): _bits(dt, (7, 3), seed=i) for i, dt in enumerate(LOADABLE)}
    tensors["scalar"] = torch.tensor(2.5, dtype=torch.bfloat16)
    tensors["empty"] = torch.zeros(0, 4, dtype=torch.float32)
    idx = read_index(write_checkpoint(tmp_path / fmt, None, tensors, fmt))
    for name, t in tensors.items():
        got, want = idx.load_numpy(name), _as_numpy(t)
        assert _same(got, want), name
        if t.dim():
            assert _same(idx.load_numpy(name, max_rows=2), want[:2]), name
            assert _same(idx.load_numpy(name, max_rows=3, start_row=5), want[5:8]), name
            assert _same(idx.load_numpy(name, max_rows=100), want), name
    assert idx.load_numpy("bfloat16").dtype == np.float32 and idx.load_numpy("int64").dtype == np.int64
    assert float(idx.load_numpy("scalar")) == 2.5


def test_index_records_absolute_offsets_and_codes(tmp_path, tensors):
    path = write_checkpoint(tmp_path / "o", None, tensors)
    idx = read_index(path)
    blob = (path / "model.safetensors").read_bytes()
    for name, t in tensors.items():
        info = idx.tensors[name]
        assert info.st_dtype == {"bfloat16": "BF16", "int64": "I64", "bool": "BOOL"}[info.dtype]
        assert DTYPES[info.st_dtype].torch == info.dtype
        assert (
            blob[info.offset : info.offset + info.nbytes] == t.contiguous().view(-1).view(torch.uint8).numpy().tobytes()
        )
    bin_idx = read_index(write_checkpoint(tmp_path / "b", None, tensors, "bin"))
    assert all(i.offset is None and i.st_dtype is None for i in bin_idx.tensors.values())
    assert bin_idx.nbytes == idx.nbytes


def test_load_numpy_reads_only_the_requested_rows(tmp_path, tensors, monkeypatch):
    """A row sample of a big matrix costs only its bytes: count what the file reads return."""
    import builtins

    path = write_checkpoint(tmp_path / "r", None, tensors)
    idx = read_index(path)
    read = []
    real_open = builtins.open

    class Counting:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.f.close()

        def seek(self, *a):
            return self.f.seek(*a)

        def readinto(self, b):
            n = self.f.readinto(b)
            read.append(n)
            return n

    monkeypatch.setattr(builtins, "open", lambda *a, **k: Counting(real_open(*a, **k)))
    sample = idx.load_numpy("lm_head.weight", max_rows=2)
    assert sample.shape == (2, 64) and read == [2 * 64 * 2]


def test_load_numpy_on_a_file_cut_after_indexing(tmp_path, tensors):
    path = write_checkpoint(tmp_path / "c", None, tensors)
    idx = read_index(path)
    last = max(idx.tensors.values(), key=lambda i: i.offset)
    f = path / "model.safetensors"
    f.write_bytes(f.read_bytes()[: last.offset + 1])
    with pytest.raises(EaglehubError) as err:
        idx.load_numpy(last.name)
    assert err.value.exit_code == 2 and "\n" not in err.value.message and last.name in err.value.message


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.sampled_from(LOADABLE),
    st.lists(st.integers(0, 6), min_size=1, max_size=3),
    st.integers(-2, 8),
    st.integers(0, 8),
)
def test_load_numpy_slices_like_torch(tmp_path, dtype, shape, max_rows, start_row):
    t = _bits(dtype, tuple(shape), seed=sum(shape))
    path = tmp_path / "h"
    write_checkpoint(path, None, {"x": t})
    idx = read_index(path)
    want = _as_numpy(t)[start_row : start_row + max_rows]
    assert _same(idx.load_numpy("x", max_rows=max_rows, start_row=start_row), want)


def test_legacy_pickle_bin_is_named_as_such(tmp_path):
    import torch

    from eaglehub.errors import EaglehubError
    from eaglehub.io.tensorio import read_index

    torch.save({"fc.weight": torch.zeros(2, 2)}, tmp_path / "pytorch_model.bin", _use_new_zipfile_serialization=False)
    with pytest.raises(EaglehubError, match="legacy \\(non-zip\\) format") as err:
        read_index(tmp_path)
    assert "re-save" in err.value.hint
