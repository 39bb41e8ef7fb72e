"""``verify --dry-run`` runs the preflight a real run makes (validate --deep against the target, for the plan's
release) and says green only when it passes: a drafter that fails it exits 1 with the finding ids, in text
and --json, the plan is marked not ready, and the last line says FAILED."""

from __future__ import annotations

import json

import torch
from click.testing import CliRunner

from eaglehub.cli import main

MACHINE = ("--gpus", "1", "--gpu-memory", "80")


def dry_run(target, drafter, *args):
    res = CliRunner(env={"COLUMNS": "80"}).invoke(
        main, ["verify", "--dry-run", "--target", str(target), "--drafter", str(drafter), *MACHINE, *args]
    )
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res


def error_codes(report: dict) -> set[str]:
    return {f["code"] for f in report["drafter_check"]["findings"] if f["severity"] == "error"}


def test_a_drafter_that_fails_validation_against_smollm2_is_not_planned_green(make_drafter):
    """The tiny drafter (hidden 64) against SmolLM2-135M (hidden 576, 30 layers), its aux ids past the target's
    layers: the dry run exits 1, names the findings and never prints the plan as ready."""
    drafter = make_drafter(mutate=lambda cfg, t: cfg.update(eagle_aux_hidden_state_layer_ids=[2, 15, 40]))
    res = dry_run("smollm2", drafter, "--json")
    assert res.exit_code == 1, res.output
    report = json.loads(res.stdout)
    assert not report["drafter_check"]["ok"] and report["drafter_check"]["profile"] == "vllm-0.33-gpu"
    assert {"E-HIDDEN-MISMATCH", "E-AUX-RANGE"} <= error_codes(report)
    res = dry_run("smollm2", drafter)
    assert res.exit_code == 1
    text = res.output
    assert "E-HIDDEN-MISMATCH" in text and "E-AUX-RANGE" in text
    assert "fails the preflight" in text and "plan (not ready" in text and "\nplan:" not in text
    tail = text[text.rindex("\nFAILED: the drafter fails the preflight") :]  # the last thing said
    assert "E-AUX-RANGE" in tail and "plan" not in tail and "serve" not in tail, tail
    assert f"eaglehub validate {drafter} --target smollm2 --deep --profile vllm-0.33-gpu" in text


def test_the_dry_run_reads_the_weights_as_the_real_preflight_does(make_drafter, make_target):
    """An all-zero final norm gain passes the header checks; the real run's preflight reads the values, and
    so does the dry run now."""
    target = make_target(8)
    zero = make_drafter("zero", mutate=lambda cfg, t: t.update({"norm.weight": torch.zeros_like(t["norm.weight"])}))
    res = dry_run(target, zero, "--json")
    assert res.exit_code == 1, res.output
    assert error_codes(json.loads(res.stdout)) == {"E-TENSOR-ZERO"}
    res = dry_run(target, zero)
    assert res.exit_code == 1 and "E-TENSOR-ZERO" in res.output and "plan (not ready" in res.output
    good = make_drafter("good")
    res = dry_run(target, good)
    assert res.exit_code == 0, res.output
    assert "passes the preflight" in res.output and "\nplan: TP" in res.output and "FAILED" not in res.output
