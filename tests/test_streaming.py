"""The streaming safetensors writer: files it writes are read back by the safetensors library,
bytes are copied exactly (kernel copy and the chunked fallback), shards follow huggingface_hub's
splitter, and byte-level convert never imports torch."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from eaglehub.cli import main
from eaglehub.io import copying as background
from eaglehub.io import streaming
from eaglehub.io.stformat import DTYPE_BY_TORCH, read_header
from eaglehub.io.streaming import OutTensor, plan_shards, write_checkpoint, write_file
from eaglehub.io.tensorio import read_index

DTYPES = [torch.bfloat16, torch.float16, torch.float32, torch.int64, torch.bool, torch.uint8]


def _random(dtype, shape, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype in (torch.int64, torch.uint8):
        return torch.randint(0, 200, shape, generator=g).to(dtype)
    return torch.randn(shape, generator=g).to(dtype)


def _copy_plan(src: Path) -> list[OutTensor]:
    """OutTensors that copy every tensor of ``src`` through, renamed with a ``copy.`` prefix."""
    h = read_header(src)
    return [
        OutTensor(f"copy.{e.name}", e.dtype, e.shape, e.nbytes, src_file=src, src_offset=e.start)
        for e in h.tensors.values()
    ]


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(DTYPES), st.lists(st.integers(0, 5), min_size=0, max_size=3)),
        min_size=1,
        max_size=6,
    ),
    st.integers(0, 2**16),
)
def test_copied_files_read_back_bit_exact(tmp_path_factory, specs, seed):
    tmp = tmp_path_factory.mktemp("st")
    tensors = {f"t{i}": _random(dt, tuple(shape), seed + i) for i, (dt, shape) in enumerate(specs)}
    save_file(tensors, str(tmp / "src.safetensors"))
    new = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    plan = _copy_plan(tmp / "src.safetensors")
    plan.append(OutTensor("new", "BF16", (2,), 4, data=new.view(torch.uint8).numpy().tobytes()))
    size = write_file(tmp / "out.safetensors", plan, {"k": "v"})
    assert size == (tmp / "out.safetensors").stat().st_size
    back = load_file(str(tmp / "out.safetensors"))
    assert set(back) == {f"copy.{n}" for n in tensors} | {"new"}
    for n, t in tensors.items():
        b = back[f"copy.{n}"]
        assert b.dtype == t.dtype and b.shape == t.shape
        assert b.reshape(-1).view(torch.uint8).tolist() == t.reshape(-1).view(torch.uint8).tolist()
    assert torch.equal(back["new"], new)
    with safe_open(str(tmp / "out.safetensors"), "pt") as f:
        assert f.metadata() == {"k": "v"}


def test_chunked_fallback_when_the_kernel_copy_is_refused(tmp_path, monkeypatch):
    t = {"a": torch.arange(1000, dtype=torch.int64), "b": torch.ones(3, dtype=torch.float16)}
    save_file(t, str(tmp_path / "src.safetensors"))
    calls = []

    def refuse(*args, **kwargs):
        calls.append(args)
        raise OSError(errno.EXDEV, "cross-device")

    monkeypatch.setattr(os, "copy_file_range", refuse)
    monkeypatch.setattr(streaming, "CHUNK", 100)  # several chunks per tensor
    monkeypatch.setattr(background, "CHUNK", 100)
    write_file(tmp_path / "out.safetensors", _copy_plan(tmp_path / "src.safetensors"))
    back = load_file(str(tmp_path / "out.safetensors"))
    assert calls and torch.equal(back["copy.a"], t["a"]) and torch.equal(back["copy.b"], t["b"])


def test_contiguous_tensors_are_copied_in_one_run(tmp_path, monkeypatch):
    save_file(
        {f"t{i}": torch.full((10,), i, dtype=torch.float32) for i in range(5)},
        str(tmp_path / "src.safetensors"),
    )
    sizes = []
    real = os.copy_file_range

    def spy(src, dst, count, offset_src=None, offset_dst=None):
        sizes.append(count)
        return real(src, dst, count, offset_src, offset_dst)

    monkeypatch.setattr(os, "copy_file_range", spy)
    write_file(tmp_path / "out.safetensors", _copy_plan(tmp_path / "src.safetensors"))
    assert sizes == [5 * 40]


def test_a_short_buffer_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="2 bytes, header says 4"):
        write_file(tmp_path / "x.safetensors", [OutTensor("x", "F16", (2,), 4, data=b"\0\0")])


def test_shards_and_index(tmp_path):
    tensors = {f"w{i}": torch.full((256,), float(i)) for i in range(6)}  # 1 KiB each
    save_file(tensors, str(tmp_path / "src.safetensors"))
    plan = _copy_plan(tmp_path / "src.safetensors")
    assert list(plan_shards(plan, None)) == ["model.safetensors"]
    (tmp_path / "out").mkdir()
    files = write_checkpoint(tmp_path / "out", plan, {"format": "pt"}, max_shard_size="2.1KB")
    index = json.loads((tmp_path / "out" / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert files[-1] == "model.safetensors.index.json" and len(shards) == 3 == len(files) - 1
    assert index["metadata"]["total_size"] == 6 * 1024
    for name, shard in index["weight_map"].items():
        assert torch.equal(load_file(str(tmp_path / "out" / shard))[name], tensors[name.removeprefix("copy.")])
    assert DTYPE_BY_TORCH["float32"].code == "F32"


def test_byte_level_convert_does_not_import_torch(make_drafter, tmp_path):
    src = make_drafter()
    code = (
        "import sys\n"
        "from eaglehub.cli import main\n"
        f"try:\n    main([ 'convert', {str(src)!r}, {str(tmp_path / 'out')!r}, '--to', '3.1', '--format', 'speculators',"
        " '--verifier', 'org/target'], standalone_mode=False)\n"
        "finally:\n    print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout + out.stderr
    assert json.loads((tmp_path / "out" / "config.json").read_text())["speculators_model_type"] == "eagle3"
    before, after = (
        load_file(str(src / "model.safetensors")),
        load_file(str(tmp_path / "out" / "model.safetensors")),
    )
    assert torch.equal(after["layers.0.mlp.up_proj.weight"], before["midlayer.mlp.up_proj.weight"])
    assert torch.equal(after["fc_norm.2.weight"], torch.ones(64, dtype=torch.bfloat16))


def _two_sizes(tmp_path: Path) -> tuple[Path, dict]:
    """A source with a big tensor (copied in the background once SMALL is 1000) and a small one after it."""
    t = {"big": torch.arange(4000, dtype=torch.int64), "small": torch.arange(7, dtype=torch.int64)}
    save_file(t, str(tmp_path / "src.safetensors"))
    return tmp_path / "src.safetensors", t


def test_a_read_of_bytes_still_being_copied_waits_for_them(tmp_path, monkeypatch):
    src, t = _two_sizes(tmp_path)
    monkeypatch.setattr(streaming, "SMALL", 1000)
    monkeypatch.setattr(background, "SMALL", 1000)
    gate, waiting = threading.Event(), threading.Event()
    real = os.copy_file_range

    def held(*args):
        if threading.current_thread().name == "eaglehub-copy":
            assert gate.wait(60)
        return real(*args)

    class Watched(threading.Condition):
        def wait(self, timeout=None):
            waiting.set()
            return super().wait(timeout)

    monkeypatch.setattr(os, "copy_file_range", held)
    monkeypatch.setattr(background, "_state", Watched())
    (tmp_path / "out").mkdir()
    files, copying = streaming.start_checkpoint(tmp_path / "out", _copy_plan(src))
    index = read_index(tmp_path / "out")
    # the small tensor is in place when start_checkpoint returns; the big one is not copied yet
    assert files == ["model.safetensors"] and index.load_numpy("copy.small").tolist() == list(range(7))
    got: list = []
    reader = threading.Thread(target=lambda: got.append(index.load_numpy("copy.big")))
    reader.start()
    assert waiting.wait(60)  # the reader waits for the copy instead of reading zeros
    gate.set()
    reader.join(60)
    copying.finish()
    assert got[0].tolist() == t["big"].tolist()
    assert torch.equal(load_file(str(tmp_path / "out" / "model.safetensors"))["copy.big"], t["big"])


def test_background_and_inline_copies_write_the_same_checkpoint(make_drafter, tmp_path, monkeypatch):
    src = make_drafter()
    outs = []
    for small in (1, 1 << 40):  # every copied tensor in the background, then none
        monkeypatch.setattr(streaming, "SMALL", small)
        monkeypatch.setattr(background, "SMALL", small)
        out = tmp_path / f"out{small}"
        res = CliRunner().invoke(main, ["convert", str(src), str(out), "--to", "3.1"])
        assert res.exit_code == 0, res.output
        outs.append((out / "model.safetensors").read_bytes())
    assert outs[0] == outs[1]


def test_a_failed_background_copy_is_the_error_convert_reports(make_drafter, tmp_path, monkeypatch):
    src = make_drafter()
    monkeypatch.setattr(streaming, "SMALL", 1)
    monkeypatch.setattr(background, "SMALL", 1)
    real = os.copy_file_range

    def full(*args):
        if threading.current_thread().name == "eaglehub-copy":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(*args)

    monkeypatch.setattr(os, "copy_file_range", full)
    res = CliRunner().invoke(main, ["convert", str(src), str(tmp_path / "out"), "--to", "3.1"])
    assert res.exit_code == 2
    assert f"cannot write {tmp_path / 'out'}: No space left on device" in res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [src.name]  # no DST, no temporary left behind
    assert not background._pending and not background._failed


def test_a_source_with_errors_is_refused_by_them_though_its_checks_now_run_during_the_copy(make_drafter, tmp_path):
    """The source's checks run while the bytes are copied; a plan that fails first (no verifier for the
    speculators format) still leaves the refusal to the source's own findings, and nothing is left behind."""

    def duplicate_ids(cfg, t):
        t["d2t"] = t["d2t"] * 0 + 5

    bad = make_drafter("bad", mutate=duplicate_ids)
    for extra in ([], ["--format", "speculators"]):
        res = CliRunner().invoke(main, ["convert", str(bad), str(tmp_path / "out"), "--to", "3.1", *extra])
        assert res.exit_code == 1 and "error finding(s) (E-T2D-MISMATCH); refusing to convert" in res.output
        assert sorted(p.name for p in tmp_path.iterdir()) == ["bad"]


def _early(monkeypatch) -> None:
    """Every copied tensor in the background and every --to 3.1 started early, on the small test drafters."""
    from eaglehub.convert import early

    monkeypatch.setattr(streaming, "SMALL", 1)

    monkeypatch.setattr(background, "SMALL", 1)
    monkeypatch.setattr(early, "MIN_BYTES", 0)


def _tensors(path: Path) -> dict:
    """Each tensor's header entry less its offsets, with its raw bytes."""
    h = read_header(path)
    with open(path, "rb") as f:
        return {n: (e.dtype, tuple(e.shape), os.pread(f.fileno(), e.nbytes, e.start)) for n, e in h.tensors.items()}


def test_an_early_copy_writes_the_same_tensors_and_starts_before_the_plan(make_drafter, tmp_path, monkeypatch):
    src = make_drafter()
    plain = tmp_path / "plain"
    assert CliRunner().invoke(main, ["convert", str(src), str(plain), "--to", "3.1"]).exit_code == 0
    _early(monkeypatch)
    started: list = []
    real_start, real_discard = streaming.EarlyCopy.start.__func__, streaming.EarlyCopy.discard
    monkeypatch.setattr(
        streaming.EarlyCopy, "start", classmethod(lambda cls, *a, **k: started.append(a) or real_start(cls, *a, **k))
    )
    discarded: list = []
    monkeypatch.setattr(streaming.EarlyCopy, "discard", lambda self: discarded.append(1) or real_discard(self))
    out = tmp_path / "early"
    res = CliRunner().invoke(main, ["convert", str(src), str(out), "--to", "3.1"])
    assert res.exit_code == 0, res.output
    assert len(started) == 1 and not discarded  # the copy started before the plan was kept
    assert _tensors(out / "model.safetensors") == _tensors(plain / "model.safetensors")
    assert (out / "config.json").read_text() == (plain / "config.json").read_text()
    head = read_header(out / "model.safetensors")
    source_head = read_header(src / "model.safetensors")
    # the data starts where the early copy put it: past room for a bigger header, at the source's page phase
    start = min(e.start for e in head.tensors.values())
    assert start > 8192 and start % background.FOLIO == min(e.start for e in source_head.tensors.values()) % (64 << 10)
    assert torch.equal(
        load_file(str(out / "model.safetensors"))["fc.weight"], load_file(str(src / "model.safetensors"))["fc.weight"]
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([src.name, "plain", "early"])


def test_a_plain_upgrade_copies_before_the_checks_and_views_are_imported(make_drafter, tmp_path):
    """The byte copy of a big drafter's --to 3.1 starts before numpy, jsonschema, rich, the formats and the
    checks are imported (they load during the copy), in a fresh process as a user runs it."""
    src = make_drafter()
    code = f"""
import sys
from eaglehub.convert import early
from eaglehub.io import copying as background, streaming
early.MIN_BYTES = 0
streaming.SMALL = background.SMALL = 1
real = streaming.EarlyCopy.start.__func__
heavy = ("numpy", "jsonschema", "rich", "eaglehub.formats.registry", "eaglehub.checks", "eaglehub.convert.run")
def start(cls, *a, **k):
    print("loaded when the copy started:", sorted(m for m in heavy if m in sys.modules), file=sys.__stderr__)
    return real(cls, *a, **k)
streaming.EarlyCopy.start = classmethod(start)
from eaglehub.cli import main
main(["convert", {str(src)!r}, {str(tmp_path / "out")!r}, "--to", "3.1"])
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "loaded when the copy started: []" in res.stderr
    assert (tmp_path / "out" / "model.safetensors").is_file()


def test_an_early_copy_the_plan_does_not_lay_out_is_discarded(tmp_path, monkeypatch):
    src, t = _two_sizes(tmp_path)
    monkeypatch.setattr(streaming, "SMALL", 1000)
    monkeypatch.setattr(background, "SMALL", 1000)
    (tmp_path / "out").mkdir()
    early = streaming.EarlyCopy.start(src, tmp_path / "out" / "model.safetensors")
    assert early is not None and [r.count for r in early.ranges] == [4000 * 8]
    plan = [OutTensor("pad", "I64", (3,), 24, data=bytes(24)), *_copy_plan(src)]  # the big one moves by 24 bytes
    files, copying = streaming.start_checkpoint(tmp_path / "out", plan, early=early)
    copying.finish()
    back = load_file(str(tmp_path / "out" / "model.safetensors"))
    assert torch.equal(back["copy.big"], t["big"]) and torch.equal(back["copy.small"], t["small"])
    assert not background._pending and not background._failed


@pytest.mark.parametrize(
    "args, code, says",
    [
        ([], 1, "error finding(s) (E-T2D-MISMATCH); refusing to convert"),
        (["--set", "norm_output=false"], 2, "--set norm_output with --to 3.1"),
    ],
)
def test_a_conversion_that_fails_after_its_early_copy_started_leaves_nothing(
    make_drafter, tmp_path, monkeypatch, args, code, says
):
    def duplicate_ids(cfg, t):
        t["d2t"] = t["d2t"] * 0 + 5

    src = make_drafter("src", mutate=duplicate_ids if not args else None)
    _early(monkeypatch)
    started: list = []
    real_start = streaming.EarlyCopy.start.__func__
    monkeypatch.setattr(
        streaming.EarlyCopy, "start", classmethod(lambda cls, *a, **k: started.append(a) or real_start(cls, *a, **k))
    )
    res = CliRunner().invoke(main, ["convert", str(src), str(tmp_path / "out"), "--to", "3.1", *args])
    assert started and res.exit_code == code and says in res.output, res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]  # no DST, no temporary, no lock left behind
    assert not background._pending and not background._failed


def test_a_big_copy_keeps_the_source_offset_modulo_64_kib(make_drafter, tmp_path, monkeypatch):
    """Big copies shifted by a multiple of 4 KiB ran at 2/3 the speed of ones shifted by 64 KiB (large folios):
    the header is padded so the data keeps the source's offset modulo 64 KiB; small outputs stay within 4 KiB."""
    src = make_drafter()
    first = min(e.start for e in read_header(src / "model.safetensors").tensors.values())
    for big, period in ((1 << 40, 4096), (1, 64 << 10)):
        monkeypatch.setattr(streaming, "FOLIO_BYTES", big)
        out = tmp_path / f"out{period}"
        assert CliRunner().invoke(main, ["convert", str(src), str(out), "--to", "3.1"]).exit_code == 0
        start = min(e.start for e in read_header(out / "model.safetensors").tensors.values())
        assert start % period == first % period and start - first < period + 4096
