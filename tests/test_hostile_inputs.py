"""Inputs a hostile tester used to break validate on a fresh clone: each now gives a named finding (or a
one-line usage error), never a traceback, unbounded work or a false verdict."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from helpers.checkpoints import BASE_CONFIG, drafter_tensors
from safetensors.torch import save_file
from test_quant_findings import fp8

from eaglehub.checks.validate import Options, validate
from eaglehub.cli import main
from eaglehub.io.schemas import validate_json


def run(*args):
    res = CliRunner(env={"COLUMNS": "200"}).invoke(main, [str(a) for a in args])
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output
    return res


def codes(report) -> list[tuple[str, str]]:
    validate_json(report, "validate-report")
    return [(f["code"], f["subject"]) for f in report["findings"]]


def _config(path, edit):
    cfg = json.loads((path / "config.json").read_text())
    edit(cfg)
    (path / "config.json").write_text(json.dumps(cfg))


def _shard(path):
    """The drafter as one shard plus an index (the layout the index cases damage)."""
    (path / "model.safetensors").rename(path / "model-00001-of-00001.safetensors")
    return path


@pytest.mark.parametrize(
    "weight_map",
    [
        None,
        [1],
        {"fc.weight": 5},
        {"fc.weight": None},
        {"fc.weight": "../../etc/passwd"},
        {"fc.weight": "/abs/model.safetensors"},
        {},
    ],
    ids=["no-map", "list", "int-shard", "null-shard", "dotdot", "absolute", "empty"],
)
def test_malformed_index_weight_map_is_a_finding(make_drafter, weight_map):
    path = _shard(make_drafter())
    (path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}} | ({} if weight_map is None else {"weight_map": weight_map}))
    )
    report = validate(path)
    assert codes(report) == [("E-INPUT-WEIGHTS", "weight files")] and "index" in report["findings"][0]["message"]
    assert run("inspect", path).exit_code == 2


def test_stale_index_next_to_model_safetensors_is_read_as_vllm_reads_it(make_drafter):
    """vLLM loads only the files an index names; the tensors it would not see are missing."""
    path = make_drafter()
    part = dict(list(drafter_tensors(dict(BASE_CONFIG)).items())[:5])
    save_file(part, str(path / "model-00002-of-00002.safetensors"))
    (path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": dict.fromkeys(part, "model-00002-of-00002.safetensors")})
    )
    assert list(part) == ["fc.weight", *(f"midlayer.self_attn.{p}_proj.weight" for p in "qkvo")]
    found = codes(validate(path))
    assert ("E-LMHEAD-MISSING", "lm_head.weight") in found and (
        "E-TENSOR-MISSING",
        "midlayer.mlp.down_proj.weight",
    ) in found
    assert ("E-D2T-MISSING", "d2t") in found


def test_several_safetensors_without_index_are_named_not_called_absent(make_drafter):
    path = make_drafter()
    t = drafter_tensors(dict(BASE_CONFIG))
    (path / "model.safetensors").unlink()
    names = list(t)
    save_file({n: t[n] for n in names[:6]}, str(path / "a.safetensors"))
    save_file({n: t[n] for n in names[6:]}, str(path / "b.safetensors"))
    report = validate(path)
    assert (
        codes(report) == [("E-INPUT-WEIGHTS", "weight files")]
        and "no model.safetensors.index.json" in report["findings"][0]["message"]
    )


@pytest.mark.parametrize(
    "text",
    ['{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", '{"hidden_size": ' + "9" * 5000 + "}"],
    ids=["deep-nesting", "huge-integer"],
)
def test_hostile_json_config_is_a_finding(make_drafter, make_target, text):
    path = make_drafter()
    (path / "config.json").write_text(text)
    assert codes(validate(path)) == [("E-INPUT-CONFIG", "config.json")]
    target = make_target(8, name="hostile-target")
    (target / "config.json").write_text(text)
    found = codes(validate(make_drafter("other"), target))
    assert ("E-TARGET-CONFIG", "target config.json") in found


def test_deeply_nested_safetensors_header_is_a_finding(make_drafter):
    path = make_drafter()
    body = b"[" * 200_000 + b"]" * 200_000
    (path / "model.safetensors").write_bytes(len(body).to_bytes(8, "little") + body)
    assert codes(validate(path)) == [("E-INPUT-WEIGHTS", "weight files")]


def test_lone_surrogates_and_terminal_escapes_are_printed_as_escapes(make_drafter):
    path = make_drafter(mutate=lambda cfg, t: cfg.update(architectures=["\ud800X\x1b[2J"]))
    res = run("validate", path)
    assert res.exit_code == 1 and "\\ud800X\\x1b[2J" in res.output and "\x1b[2J" not in res.output
    assert run("inspect", path).exit_code == 0
    named = make_drafter("surrogate-name")  # a tensor name with a lone surrogate escape: the library refuses the header
    raw = (named / "model.safetensors").read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = raw[8 : 8 + n].replace(b'"fc.weight"', b'"fc.weight\\ud800"')
    (named / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + raw[8 + n :])
    assert codes(validate(named)) == [("E-INPUT-WEIGHTS", "weight files")]


def test_hostile_target_values_are_findings(make_drafter, make_target):
    """A huge rope_theta, an unpaired surrogate in the template, a non-ASCII digit as token id, sizes of
    the wrong type: the pairing checks report or skip, and say so."""
    target = make_target(8, name="t", rope_theta=10**400, num_hidden_layers="30", hidden_size=-4)
    (target / "tokenizer_config.json").write_text(
        json.dumps({"chat_template": "\ud800", "added_tokens_decoder": {"²": {}, "9" * 5000: {}}})
    )
    drafter = make_drafter()
    (drafter / "training.json").write_text(json.dumps({"chat_template_sha256": "0" * 64}))
    found = codes(validate(drafter, target))
    assert ("E-TARGET-CONFIG", "target num_hidden_layers") in found and (
        "E-TARGET-CONFIG",
        "target hidden_size",
    ) in found
    assert ("W-TEMPLATE-CHANGED", "chat_template") in found and ("W-ROPE-MISMATCH", "rope_scaling") in found


def test_huge_layer_and_aux_counts_are_one_finding_each_and_fast(make_drafter):
    path = make_drafter(mutate=lambda cfg, t: cfg.update(num_hidden_layers=10**9, num_aux_hidden_states=10**9))
    found = codes(validate(path, deep=True))
    assert ("E-TENSOR-MISSING", "layers.2") in found and sum(
        c == "E-TENSOR-MISSING" for c, _ in found
    ) == 10  # layer 1 in detail
    assert ("E-AUX-COUNT", "fc.weight") in found and len(found) < 20


def test_inspect_of_a_huge_declared_layer_count_lists_the_layers_the_tensors_hold(make_drafter):
    path = make_drafter(
        mutate=lambda cfg, t: cfg.update(
            num_hidden_layers=10**8, model_type="qwen3", use_sliding_window=True, sliding_window=8
        )
    )
    res = run("inspect", path, "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["attention_windows"] == [None]  # max_window_layers 28 > layer 0: full attention


def test_integer_valued_floats_are_schema_errors_not_silently_dropped(make_drafter, make_target):
    path = make_drafter(
        mutate=lambda cfg, t: cfg.update(eagle_aux_hidden_state_layer_ids=[2.0, 4, 5], hidden_size=64.0)
    )
    found = codes(validate(path, make_target(8)))
    assert ("E-CONFIG-SCHEMA", "eagle_aux_hidden_state_layer_ids[0]") in found and (
        "E-CONFIG-SCHEMA",
        "hidden_size",
    ) in found
    assert not [
        c for c, _ in found if c in ("I-AUX-DEFAULT", "E-EMBED-MISSING")
    ]  # no verdict built on the dropped values
    res = run("convert", path, path.parent / "out", "--format", "specforge")
    assert res.exit_code == 1 and "E-CONFIG-SCHEMA" in res.output  # refused, not converted without its ids


def test_llm_compressor_ignore_list_with_only_lm_head_is_clean(make_drafter, make_target):
    path = make_drafter(mutate=fp8(ignore=["lm_head", "re:.*fc$"]))
    assert codes(validate(path, make_target(8))) == []


def test_zero_weight_scale_is_flagged_by_deep(make_drafter):
    def zero_scale(cfg, t):
        fp8()(cfg, t)
        t["midlayer.self_attn.q_proj.weight_scale"] = t["midlayer.self_attn.q_proj.weight_scale"] * 0

    path = make_drafter(mutate=zero_scale)
    # the FP8 layer's values times a zero scale: every block dequantizes to 0 (checks/zeros.py)
    assert ("E-QUANT-ZERO-BLOCK", "midlayer.self_attn.q_proj.weight") in codes(validate(path, deep=True))
    assert codes(validate(path)) == []


@pytest.mark.parametrize("version", ["0.22.0rc1", "0.22.0.dev0"])
def test_pre_release_of_the_minimum_version_is_older(make_drafter, version):
    found = codes(validate(make_drafter(v31=True), options=Options(vllm_version=version)))
    assert ("E-ENGINE-VERSION", "fc_norm") in found


@pytest.mark.parametrize(
    "args, message",
    [
        (["validate", "x", "--tp", "0"], "Invalid value for '--tp'"),
        (["validate", "--list-rules", "somewhere"], "--list-rules prints the catalogue"),
        (["validate", "x", "--markdown"], "--markdown goes with --list-rules"),
        (["validate", "--list-rules", "--markdown", "--json"], "pick one of --markdown and --json"),
        (["validate", "--from", "garbage", "x"], "Invalid value for '--from'"),
        (["nope"], "No such command"),
    ],
)
def test_usage_errors_are_one_line_with_a_hint(args, message):
    res = run(*args)
    lines = res.stderr.strip().splitlines()
    assert (
        res.exit_code == 2 and lines[0].startswith("error:") and message in lines[0] and lines[-1].startswith("hint:")
    )
    assert len(lines) == 2


def test_empty_or_file_target_is_a_usage_error(make_drafter, tmp_path):
    drafter = make_drafter()
    for target, message in (("", "empty"), (str(drafter / "config.json"), "is a file")):
        res = run("validate", drafter, "--target", target)
        assert res.exit_code == 2 and message in res.stderr
