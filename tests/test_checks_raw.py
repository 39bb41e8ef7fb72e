"""The checks a plain conversion runs decide from the stored bytes where they can (no numpy to import), and say
exactly what the numpy reading says: the vocabulary maps' agreement and the unit fc_norm gains."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from click.testing import CliRunner

from eaglehub.checks import tensors as tensor_checks
from eaglehub.checks import vocab
from eaglehub.checks.validate import run_checks
from eaglehub.cli import main
from eaglehub.formats.registry import read_drafter

MAPS = {
    "valid": None,
    "duplicate": lambda cfg, t: t.__setitem__("d2t", t["d2t"] * 0 + 5),
    "range": lambda cfg, t: t.__setitem__("d2t", t["d2t"] + 10_000),
    "zero": lambda cfg, t: t.__setitem__("d2t", t["d2t"] * 0),
    "count": lambda cfg, t: t["t2d"].__setitem__(-1, not bool(t["t2d"][-1])),
    "int32": lambda cfg, t: t.__setitem__("d2t", t["d2t"].to(torch.int32)),
    "float d2t": lambda cfg, t: t.__setitem__("d2t", t["d2t"].to(torch.float32)),
    "int t2d": lambda cfg, t: t.__setitem__("t2d", t["t2d"].to(torch.int64)),
    "no t2d": lambda cfg, t: t.pop("t2d"),
}


@pytest.mark.parametrize("case", list(MAPS))
def test_the_maps_read_from_their_bytes_say_what_numpy_says(make_drafter, monkeypatch, case):
    d = read_drafter(make_drafter(case.replace(" ", "-"), mutate=MAPS[case]))
    V, Vd = d.dims.V, d.dims.Vd
    fast = run_checks(d)
    agree = vocab._maps_agree(d, V, Vd)
    monkeypatch.setattr(vocab, "_maps_agree", lambda *a: False)
    slow = run_checks(d)
    assert fast == slow
    assert agree == (case == "valid")  # only maps numpy finds nothing in are passed without it
    if agree:
        assert not [f for f in slow if f.subject in ("d2t", "t2d")]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64])
@pytest.mark.parametrize("gains", ["ones", "one off", "negative", "zeros"])
def test_unit_gains_read_from_their_bytes_say_what_numpy_says(make_drafter, monkeypatch, dtype, gains):
    def set_gains(cfg, t):
        for i in range(3):
            g = torch.ones_like(t[f"fc_norm.{i}.weight"], dtype=dtype)
            if gains == "one off" and i == 2:
                g[-1] = 1.5
            if gains == "negative":
                g = -g
            if gains == "zeros":
                g = g * 0
            t[f"fc_norm.{i}.weight"] = g

    d = read_drafter(make_drafter(f"g-{gains.replace(' ', '-')}-{str(dtype)[6:]}", v31=True, mutate=set_gains))
    assert d.tensors["fc_norm.0.weight"].dtype == str(dtype)[6:]
    fast = [f.code for f in run_checks(d)]
    monkeypatch.setattr(tensor_checks, "_ONE", {})
    slow = [f.code for f in run_checks(d)]
    assert fast == slow
    assert ("W-FCNORM-UNIT" in fast) == (gains == "ones")


def test_a_plain_upgrade_imports_no_numpy(make_drafter, tmp_path):
    src = make_drafter()
    code = f"""
import sys
from eaglehub.cli import main
try:
    main(["convert", {str(src)!r}, {str(tmp_path / "out")!r}, "--to", "3.1"])
except SystemExit as exc:
    assert not exc.code, exc.code
print("numpy imported:", "numpy" in sys.modules, file=sys.__stderr__)
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "numpy imported: False" in res.stderr
    res = CliRunner().invoke(main, ["validate", str(tmp_path / "out")])
    assert "W-FCNORM-UNIT" in res.output  # the output's unit gains are still found, from their bytes
