"""``eaglehub inspect`` and ``eaglehub validate`` on safetensors drafters start without torch or
transformers (a fresh interpreter per case, so nothing imported by the test process leaks in).

If one of these fails, the message names each heavy package imported and the eaglehub source lines
on the stack when it was first imported."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest
import torch
from helpers.checkpoints import BASE_CONFIG, add_fc_norm, target_config, target_tensors, write_checkpoint
from test_findings import to_mla

HEAVY = ("torch", "transformers")

# Runs in a fresh interpreter: a meta-path spy records, for the first import of each heavy package,
# the eaglehub source lines on the stack (works for imports inside functions too).
PROGRAM = """
import json, sys, traceback
HEAVY = {heavy!r}
first = {{}}

class Spy:
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in HEAVY and top not in first:
            first[top] = [f"{{f.filename.split('/eaglehub/')[-1]}}:{{f.lineno}} {{f.line}}"
                          for f in traceback.extract_stack() if "/eaglehub/" in f.filename]
        return None

sys.meta_path.insert(0, Spy())
from eaglehub.cli import main
codes = []
for args in {runs!r}:
    try:
        main(args, standalone_mode=False)
        codes.append(0)
    except SystemExit as exc:
        codes.append(exc.code)
print("@@" + json.dumps({{"codes": codes, "heavy": sorted(first), "where": first}}))
"""


def _run(runs: list[list[str]]) -> dict:
    r = subprocess.run(
        [sys.executable, "-c", PROGRAM.format(runs=runs, heavy=HEAVY)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("@@")), None)
    assert line, r.stderr[-3000:]
    return json.loads(line[2:])


def _assert_light(result: dict) -> None:
    assert result["heavy"] == [], "inspect/validate imported " + "; ".join(
        f"{m} from {' -> '.join(result['where'][m]) or '(no eaglehub frame)'}" for m in result["heavy"]
    )


@pytest.mark.parametrize("fmt", ["safetensors", "sharded"])
def test_inspect_and_validate_do_not_import_torch(make_drafter, fmt):
    d = str(make_drafter(fmt=fmt))
    result = _run([["inspect", d, "--json"], ["validate", d, "--json"]])
    assert result["codes"] == [0, 0]  # both ran to the end on the clean drafter
    _assert_light(result)


def test_validate_with_checks_that_read_data_does_not_import_torch(make_drafter, make_target):
    """A 3.1 drafter shipping its own embedding, validated against a target with weights: the norm,
    init, d2t/t2d and embedding-equality checks all read tensor data."""

    def embed(cfg, t):
        add_fc_norm(cfg, t)
        t["embed_tokens.weight"] = target_tensors(target_config(8))["model.embed_tokens.weight"]

    d = str(make_drafter(mutate=embed))
    target = str(make_target(8, weights=True))
    result = _run([["validate", d, "--target", target, "--json"]])
    assert result["codes"] == [0]
    _assert_light(result)


def test_broken_drafter_is_reported_without_torch(make_drafter):
    """Findings that load data (all-ones norm, bad d2t) still come from numpy only; exit 1."""

    def broken(cfg, t):
        t["norm.weight"] = torch.ones_like(t["norm.weight"])
        t["d2t"] = t["d2t"].float()

    d = str(make_drafter(mutate=broken))
    result = _run([["validate", d, "--json"]])
    assert result["codes"] == [1]
    _assert_light(result)


@pytest.mark.slow
def test_the_probe_sees_torch_when_it_is_imported(make_drafter):
    """The check itself can fail: a pytorch_model.bin drafter needs torch, and the probe reports it."""
    d = str(make_drafter(fmt="bin"))
    result = _run([["inspect", d, "--json"]])
    assert result["codes"] == [0] and "torch" in result["heavy"]
    assert any("tensorio.py" in frame and "import torch" in frame for frame in result["where"]["torch"])


def test_mla_drafter_validates_without_torch(tmp_path):
    cfg, t = copy.deepcopy(BASE_CONFIG), {}
    to_mla(cfg, t)
    d = str(write_checkpoint(tmp_path / "mla", cfg, t))
    result = _run([["inspect", d, "--json"], ["validate", d, "--json"]])
    assert result["codes"] == [0, 0]
    _assert_light(result)
