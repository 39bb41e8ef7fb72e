"""Rough edges of issue #37: what `inspect` shows for an MLA drafter, the file modes of the built target cache,
and a mistyped local path taken as a Hub id when the Hub cannot be reached."""

from __future__ import annotations

import json

from click.testing import CliRunner
from helpers.formats_factory import write_format

from eaglehub.cli import main
from eaglehub.io.schemas import validate_json


def cli(*args):
    res = CliRunner().invoke(main, [str(a) for a in args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res


def test_inspect_shows_an_mla_drafters_ranks_not_head_dim(tmp_path):
    mla = write_format(tmp_path / "mla", "vllm", layer_kind="mla", dtype="float32").path
    config = json.loads((mla / "config.json").read_text())
    keys = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
    assert "head_dim" not in config and all(isinstance(config[k], int) for k in keys)
    res = cli("inspect", mla, "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    validate_json(report, "inspect-report")
    assert report["mla"] == {k: config[k] for k in keys}
    lines = cli("inspect", mla).stdout.splitlines()
    dims = next(line for line in lines if line.startswith("dims:"))
    ranks = " ".join(lines[lines.index(dims) + 1 :][:2])  # the MLA line, wrapped at 80 columns
    assert "head_dim" not in dims and ranks.startswith("MLA: ")
    for k in keys:
        assert f"{k}={config[k]}" in ranks
    # a Llama-style drafter keeps its head_dim and has no MLA section
    llama = write_format(tmp_path / "llama", "vllm", dtype="float32").path
    report = json.loads(cli("inspect", llama, "--json").stdout)
    assert (
        report["mla"] is None
        and report["dims"]["head_dim"] == json.loads((llama / "config.json").read_text())["head_dim"]
    )
    assert f"head_dim={report['dims']['head_dim']} " in cli("inspect", llama).stdout
