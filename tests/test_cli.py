"""CLI: inspect / validate / convert through click's CliRunner; exit codes 0/1/2; --json matches schemas.

Includes the issue's "Done when" checks: the 3.1 upgrade validates clean; deleting one fc_norm weight,
renaming the ``midlayer.`` prefix, or a target with too few layers each gives a named error and exit 1.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from safetensors.torch import load_file, save_file

from eaglehub.cli import main
from eaglehub.io.schemas import validate_json


def run(*args):
    result = CliRunner(env={"COLUMNS": "250"}).invoke(main, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


@pytest.fixture
def upgraded(make_drafter, tmp_path):
    dst = tmp_path / "d31"
    r = run("convert", make_drafter(), dst, "--to", "3.1", "--json")
    assert r.exit_code == 0, r.output
    validate_json(json.loads(r.stdout), "convert-report")
    assert "not numerically equivalent" in r.stderr
    return dst


def rewrite(path, fn):
    f = path / "model.safetensors"
    tensors = load_file(str(f))
    fn(tensors)
    save_file(tensors, str(f))


def findings(result):
    report = json.loads(result.stdout)
    validate_json(report, "validate-report")
    return [(f["code"], f["subject"]) for f in report["findings"]]


UNIT = (
    "W-FCNORM-UNIT",
    "fc_norm.0.weight",
)  # the uncalibrated upgrade's unit gains, which a person should hear about


def test_upgrade_validates_clean(upgraded, make_target):
    r = run("validate", upgraded, "--target", make_target(8), "--json")
    assert r.exit_code == 0 and findings(r) == [UNIT]
    human = run("validate", upgraded)
    # without --deep the weights' values were not read: the final line and --json say so, the exit code stays 0
    verdict = "OK (weight values not read: add --deep): 0 error(s), 1 warning(s), 0 info"
    assert human.exit_code == 0 and human.stdout.splitlines()[-1] == verdict and "calibrate" in human.stdout
    assert json.loads(r.stdout)["values_read"] is False
    deep = run("validate", upgraded, "--deep")
    assert deep.exit_code == 0 and deep.stdout.splitlines()[-1].startswith("OK: 0 error(s)"), deep.stdout
    assert json.loads(run("validate", upgraded, "--deep", "--json").stdout)["values_read"] is True
    assert run("validate", upgraded, "--strict").exit_code == 1


def test_deleting_one_fc_norm_weight_fails(upgraded):
    rewrite(upgraded, lambda t: t.pop("fc_norm.1.weight"))
    r = run("validate", upgraded, "--json")
    assert r.exit_code == 1 and findings(r) == [("E-FCNORM-MISSING", "fc_norm.1.weight")]
    human = run("validate", upgraded)
    assert human.exit_code == 1 and "E-FCNORM-MISSING" in human.stdout and "FAILED: 1 error(s)" in human.stdout


def test_unknown_layer_prefix_fails(upgraded):
    rewrite(
        upgraded,
        lambda t: t.update({"blocks.0." + n[9:]: t.pop(n) for n in [n for n in t if n.startswith("midlayer.")]}),
    )
    r = run("validate", upgraded, "--json")
    codes = findings(r)
    assert r.exit_code == 1
    assert ("E-TENSOR-UNEXPECTED", "blocks.0.mlp.down_proj.weight") in codes
    assert ("E-TENSOR-MISSING", "midlayer.mlp.down_proj.weight") in codes
    assert {c for c, _ in codes} == {"E-TENSOR-UNEXPECTED", "E-TENSOR-MISSING", UNIT[0]}


def test_target_with_too_few_layers_fails(upgraded, make_target):
    r = run("validate", upgraded, "--target", make_target(4), "--json")
    assert r.exit_code == 1 and findings(r) == [UNIT, ("E-AUX-RANGE", "eagle_aux_hidden_state_layer_ids")]


def test_inspect_json_and_table(upgraded):
    r = run("inspect", upgraded, "--json")
    report = json.loads(r.stdout)
    validate_json(report, "inspect-report")
    assert r.exit_code == 0 and report["eagle_version"] == "3.1" and report["format"] == "vllm"
    assert report["layer_kind"] == "llama" and any("top-level C-in" in e for e in report["format_evidence"])
    assert report["dims"] | {} == {
        "H": 64,
        "Ht": 64,
        "A": 3,
        "nh": 4,
        "nkv": 2,
        "head_dim": 16,
        "I": 128,
        "V": 256,
        "Vd": 32,
        "layers": 1,
        "attention_bias": False,
        "mlp_bias": False,
        "Ht_declared": True,
    }
    assert report["vocab"] == {"V": 256, "Vd": 32, "pruned": True, "d2t": True, "t2d": True}
    assert report["aux"]["c_in"] == [2, 4, 5] and report["aux"]["convention"] == "C-in"
    assert len(report["tensors"]) == 18 and report["parameters"] == 60128 and report["bytes"] == 120192
    human = run("inspect", upgraded)
    assert human.exit_code == 0 and "fc_norm.2.weight" in human.stdout and "60,128 parameters" in human.stdout


def test_convert_refuses_existing_and_already_31(upgraded, make_drafter):
    r = run("convert", make_drafter(name="other"), upgraded, "--to", "3.1")
    assert r.exit_code == 2 and "already exists" in r.stderr and "--overwrite" in r.stderr
    r = run("convert", upgraded, upgraded.parent / "again", "--to", "3.1")
    assert r.exit_code == 2 and "already an EAGLE-3.1" in r.stderr
    r = run("convert", make_drafter(name="third"), upgraded, "--to", "3.1", "--overwrite", "--no-norm-output")
    assert r.exit_code == 0 and json.loads((upgraded / "config.json").read_text())["norm_output"] is False


BREAKAGES = {
    "json": "E-INPUT-CONFIG",
    "truncated": "E-INPUT-WEIGHTS",
    "noconfig": "E-INPUT-MISSING",
    "noweights": "E-INPUT-MISSING",
}


def _broken(make_drafter, breakage):
    path = make_drafter()
    if breakage == "json":
        (path / "config.json").write_text("{not json")
    elif breakage == "truncated":
        f = path / "model.safetensors"
        f.write_bytes(f.read_bytes()[:1000])
    elif breakage == "noconfig":
        (path / "config.json").unlink()
    elif breakage == "noweights":
        (path / "model.safetensors").unlink()
    return path


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_unreadable_input_is_a_finding_for_validate(make_drafter, breakage):
    """validate reports broken content as a named finding with exit 1 (--json: a schema-valid report)."""
    path = _broken(make_drafter, breakage)
    r = run("validate", path, "--json")
    report = json.loads(r.stdout)
    validate_json(report, "validate-report")
    assert (
        r.exit_code == 1
        and report["layout"] == "unreadable"
        and [f["code"] for f in report["findings"]] == [BREAKAGES[breakage]]
    )
    assert report["findings"][0]["hint"]
    human = run("validate", path)
    assert human.exit_code == 1 and BREAKAGES[breakage] in human.stdout and "Traceback" not in human.output


@pytest.mark.parametrize("breakage", ["missing", *BREAKAGES])
def test_bad_input_is_one_line_and_exit_2(make_drafter, tmp_path, breakage):
    """inspect and convert stop on unreadable input with one line and a hint; so does validate for a
    path that names nothing at all (a usage error, not a finding about a drafter)."""
    path = tmp_path / "nope" if breakage == "missing" else _broken(make_drafter, breakage)
    cmds = (
        (["validate"], ["inspect"], ["convert", "--to", "3.1"])
        if breakage == "missing"
        else (["inspect"], ["convert", "--to", "3.1"])
    )
    for cmd in cmds:
        args = cmd[:1] + [path] + ([tmp_path / "dst"] if cmd[0] == "convert" else []) + cmd[1:]
        r = run(*args)
        assert r.exit_code == 2, (cmd, r.output)
        lines = r.stderr.strip().splitlines()
        assert lines[0].startswith("error:") and lines[-1].startswith("hint:") and "Traceback" not in r.output


def test_usage_errors_exit_2(make_drafter, tmp_path):
    assert run("convert", make_drafter(), tmp_path / "x", "--to", "4").exit_code == 2
    assert run("validate").exit_code == 2


def test_target_build_json_describes_a_local_target(tmp_path, make_target):
    target = make_target(n_layers=4)
    res = CliRunner().invoke(main, ["target", "build", str(target), "--json"])
    assert res.exit_code == 0, res.output
    record = json.loads(res.output)
    validate_json(record, "target")
    assert record == {"target": str(target), "path": str(target.resolve()), "source": None}


def test_target_build_unknown_spec_is_a_usage_error(tmp_path):
    res = CliRunner().invoke(main, ["target", "build", str(tmp_path / "missing")])
    assert res.exit_code == 2
    assert f"target {tmp_path / 'missing'}: no such directory" in res.output and "Traceback" not in res.output


def test_list_rules_prints_the_whole_catalogue():
    from eaglehub.findings import CODES

    r = run("validate", "--list-rules", "--json")
    report = json.loads(r.stdout)
    validate_json(report, "rules")
    assert r.exit_code == 0 and [x["code"] for x in report["rules"]] == list(CODES)
    assert {x["code"]: x["severity"] for x in report["rules"]}["W-AUX-CONFLICT"] == "warning"
    human = run("validate", "--list-rules")
    assert human.exit_code == 0 and "E-TENSOR-NONFINITE" in human.stdout and f"{len(CODES)} rules" in human.stdout


def test_strict_fails_on_warnings_only(make_drafter):
    warned = make_drafter(
        mutate=lambda cfg, t: cfg.update(eagle_config={"eagle_aux_hidden_state_layer_ids": [2, 3, 4]})
    )
    plain, strict = run("validate", warned, "--json"), run("validate", warned, "--strict", "--json")
    codes = [f["code"] for f in json.loads(plain.stdout)["findings"]]
    assert codes == ["W-AUX-CONFLICT"] and plain.exit_code == 0 and strict.exit_code == 1
    assert run("validate", make_drafter("clean"), "--strict").exit_code == 0


def test_validate_without_src_is_a_usage_error():
    r = run("validate")
    assert r.exit_code == 2 and "SRC" in r.output
