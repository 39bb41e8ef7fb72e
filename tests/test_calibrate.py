"""Calibrated 3 → 3.1 upgrade (eaglehub.convert.calibrate) on tiny generated pairs: the closed-form fit on
synthetic hidden states, what --steps 0 writes, fine-tuning scopes, the norm_output choice, the report."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file
from test_reference_engine import PROMPTS, _constant_drafter, target  # noqa: F401  (fixture)

from eaglehub.cli import main
from eaglehub.convert import calibrate, finetune
from eaglehub.errors import EaglehubError
from eaglehub.io.schemas import schema_errors

A, HT = 3, 64


def _shards(x: torch.Tensor, lengths: list[int]) -> list[dict]:
    out, at = [], 0
    for n in lengths:
        out.append({"ids": torch.zeros(n, dtype=torch.long), "aux": x[at : at + n], "answer_start": 1})
        at += n
    return out


def test_fit_recovers_known_gains_when_each_layer_has_one_scale():
    """x = s_i · n with n of unit RMS: g·n matches x exactly for g = s_i in every channel."""
    g = torch.Generator().manual_seed(0)
    n = torch.randn(400, A, HT, generator=g, dtype=torch.float64)
    n = n / n.pow(2).mean(-1, keepdim=True).sqrt()
    scales = torch.tensor([2.9, 11.4, 27.4], dtype=torch.float64)  # docs/training.md §4's SmolLM2 layers
    x = (n * scales[None, :, None]).reshape(400, A * HT).float()
    gains, stats = calibrate.fit_gains(_shards(x, [100, 150, 150]), A, eps=0.0)
    for i in range(A):
        assert torch.allclose(gains[i], torch.full((HT,), float(scales[i])), rtol=1e-4)
        assert stats[i]["tokens"] == 397 and stats[i]["mean_rms"] == pytest.approx(float(scales[i]), rel=1e-4)


def test_fit_is_the_per_channel_least_squares_solution_and_skips_the_first_position():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(60, A * HT, generator=g) * torch.rand(60, 1, generator=g) * 10
    x[0] = 1000.0  # an attention-sink position: excluded
    gains, _ = calibrate.fit_gains(_shards(x, [60]), A, eps=1e-5)
    xs = x[1:].double().reshape(59, A, HT)
    nrm = xs / (xs.pow(2).mean(-1, keepdim=True) + 1e-5).sqrt()
    expected = (nrm * xs).sum(0) / nrm.pow(2).sum(0)
    for i in range(A):
        assert torch.allclose(gains[i].double(), expected[i], rtol=1e-5)
        # no other gain does better in least squares (perturbing it raises the residual)
        res = lambda gg: ((gg * nrm[:, i] - xs[:, i]) ** 2).sum()  # noqa: E731
        assert res(expected[i]) < res(expected[i] * 1.01) and res(expected[i]) < res(expected[i] * 0.99)


@pytest.fixture
def pair(tmp_path, target, monkeypatch):
    drafter, _ = _constant_drafter(tmp_path, target)
    prompts = tmp_path / "calib.jsonl"
    prompts.write_text(
        "".join(json.dumps({"id": f"c{i}", "category": "ab"[i % 2], "prompt": f"q{i}"}) + "\n" for i in range(6))
    )
    ids = {f"q{i}": PROMPTS[i % len(PROMPTS)] for i in range(6)}
    monkeypatch.setattr("eaglehub.engines.chat.encode_chat", lambda t, msgs: [ids[m] for m in msgs])
    return drafter, target, prompts


def _opts(target, prompts, **over):
    return calibrate.CalibrationOptions(
        target=str(target), prompts_file=str(prompts), max_new_tokens=8, eval_tokens=12, held_out=1, **over
    )


@pytest.mark.slow
def test_steps_0_adds_only_the_gains_and_the_flags(tmp_path, pair):
    drafter, target, prompts = pair
    report = calibrate.calibrated_upgrade(drafter, tmp_path / "out", _opts(target, prompts, steps=0))
    assert schema_errors(report, "convert-report") == []
    src, out = (
        load_file(str(drafter / "model.safetensors")),
        load_file(str(tmp_path / "out" / "model.safetensors")),
    )
    assert set(out) - set(src) == {f"fc_norm.{i}.weight" for i in range(3)}
    assert all(torch.equal(src[k], out[k]) for k in src)  # bit-exact
    cal = report["calibration"]
    for i in range(3):
        assert not torch.equal(out[f"fc_norm.{i}.weight"], torch.ones(64))  # fitted, not the plain unit gains
        assert out[f"fc_norm.{i}.weight"].mean().item() == pytest.approx(cal["gains"][i]["gain_mean"], rel=1e-3)
    before = json.loads((drafter / "config.json").read_text())
    after = json.loads((tmp_path / "out" / "config.json").read_text())
    assert {k for k in after if after.get(k) != before.get(k)} == {"fc_norm", "norm_output"}
    assert after["fc_norm"] is True and after["norm_output"] is cal["norm_output"]["chosen"]
    assert cal["prompts"]["fit"] == 4 and cal["prompts"]["held_out"] == 2 and cal["fine_tuning"] is None
    assert {c["norm_output"] for c in cal["norm_output"]["candidates"]} == {False, True}
    acc = cal["acceptance"]
    assert acc["source"]["acceptance_length"] >= 1 and acc["plain_upgrade"]["num_drafts"] > 0
    best = max(c["acceptance_length"] for c in cal["norm_output"]["candidates"])
    assert acc["calibrated"]["acceptance_length"] == best and acc["closed_form"] == acc["calibrated"]


@pytest.mark.slow
def test_fine_tuning_scopes(tmp_path, pair):
    drafter, target, prompts = pair
    norms = calibrate.calibrated_upgrade(
        drafter, tmp_path / "norms", _opts(target, prompts, steps=2, train="norms", norm_output=False)
    )
    src, out = (
        load_file(str(drafter / "model.safetensors")),
        load_file(str(tmp_path / "norms" / "model.safetensors")),
    )
    assert all(torch.equal(src[k], out[k]) for k in src)  # norms only: the rest is bit-exact
    tune = norms["calibration"]["fine_tuning"]
    assert (
        tune["steps"] == 2
        and tune["train"] == "norms"
        and tune["lr"] == 1e-2
        and tune["label_weight"] == finetune.DEFAULT_LABEL_WEIGHT
    )
    assert "KL(source drafter || upgraded)" in tune["objective"]
    assert norms["calibration"]["norm_output"]["reason"] == "forced by --no-norm-output"
    calibrate.calibrated_upgrade(drafter, tmp_path / "all", _opts(target, prompts, steps=2, train="all", lr=1e-3))
    every = load_file(str(tmp_path / "all" / "model.safetensors"))
    assert torch.equal(every["d2t"], src["d2t"]) and torch.equal(every["t2d"], src["t2d"])
    assert not torch.equal(every["fc.weight"], src["fc.weight"])
    assert every["fc.weight"].dtype == src["fc.weight"].dtype


@pytest.mark.slow
def test_default_fine_tunes_every_weight_distilling_the_source(tmp_path, pair):
    drafter, target, prompts = pair
    report = calibrate.calibrated_upgrade(drafter, tmp_path / "out", _opts(target, prompts))
    assert schema_errors(report, "convert-report") == []
    tune = report["calibration"]["fine_tuning"]
    assert (tune["steps"], tune["train"], tune["lr"], tune["label_weight"]) == (
        calibrate.DEFAULT_STEPS,
        "all",
        1e-4,
        finetune.DEFAULT_LABEL_WEIGHT,
    )
    assert tune["loss_last"] < tune["loss_first"]
    src, out = (
        load_file(str(drafter / "model.safetensors")),
        load_file(str(tmp_path / "out" / "model.safetensors")),
    )
    assert torch.equal(out["d2t"], src["d2t"]) and not torch.equal(out["fc.weight"], src["fc.weight"])
    acc = report["calibration"]["acceptance"]
    assert {"source", "plain_upgrade", "closed_form", "calibrated"} <= set(acc)
    changed = sorted(k for k in src if not torch.equal(src[k], out[k]))
    assert "fc.weight" in changed and set(changed) <= set(
        report["replaced_tensors"]
    )  # every rewritten tensor is listed
    prov = json.loads((tmp_path / "out" / "eaglehub.json").read_text())
    assert (
        schema_errors(prov, "provenance") == [] and prov["conversion"]["replaced_tensors"] == report["replaced_tensors"]
    )
    assert prov["conversion"]["calibration"]["fine_tuning"]["label_weight"] == finetune.DEFAULT_LABEL_WEIGHT
    assert (
        prov["conversion"]["calibration"]["held_out_acceptance_length"]["calibrated"]
        == acc["calibrated"]["acceptance_length"]
    )
    # the gains summary describes the fine-tuned gains that were written
    assert report["calibration"]["gains"][0]["gain_max"] == pytest.approx(
        float(out["fc_norm.0.weight"].float().max()), rel=1e-3
    )


@pytest.mark.slow
def test_a_diverging_fine_tune_writes_nothing(tmp_path, pair, monkeypatch):
    drafter, target, prompts = pair

    def diverged(
        model, *args, **kwargs
    ):  # what too high a learning rate ends in: a NaN loss, NaN weights after the step
        return sum(p.sum() for p in model.parameters()) * float("nan"), [], []

    monkeypatch.setattr("eaglehub.model.ttt.ttt_loss", diverged)
    with pytest.raises(EaglehubError, match="fine-tuning diverged") as err:
        calibrate.calibrated_upgrade(drafter, tmp_path / "out", _opts(target, prompts, steps=3))
    assert "lower --lr" in err.value.hint and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_an_existing_destination_is_refused_before_calibrating(tmp_path, pair, monkeypatch):
    drafter, target, prompts = pair
    (tmp_path / "out").mkdir()
    monkeypatch.setattr(calibrate, "collect", lambda *a, **k: pytest.fail("calibrated before checking DST"))
    with pytest.raises(EaglehubError, match="already exists"):
        calibrate.calibrated_upgrade(drafter, tmp_path / "out", _opts(target, prompts))
    assert list((tmp_path / "out").iterdir()) == []


def test_default_steps_skip_a_drafter_training_time_test_cannot_unroll():
    from types import SimpleNamespace as NS

    one = NS(dims=NS(num_layers=1, norm_before_residual=False), midlayer=NS(self_attn=type("_Attention", (), {})()))
    two = NS(dims=NS(num_layers=2, norm_before_residual=False), midlayer=one.midlayer)
    opts = calibrate.CalibrationOptions(target="t")
    assert calibrate._steps(opts, one) == (calibrate.DEFAULT_STEPS, None)
    steps, why = calibrate._steps(opts, two)
    assert steps == 0 and "single-layer" in why and "--steps 20" in why
    assert calibrate._steps(calibrate.CalibrationOptions(target="t", steps=3), two) == (
        3,
        None,
    )  # asked: finetune raises


@pytest.mark.slow
def test_bad_calibration_options_are_one_line_errors(tmp_path, pair):
    drafter, target, prompts = pair
    res = CliRunner().invoke(main, ["convert", str(drafter), str(tmp_path / "x"), "--to", "3.1", "--calibrate"])
    assert res.exit_code == 2 and "--calibrate needs --to 3.1 and --target" in res.output
    res = CliRunner().invoke(
        main,
        [
            "convert",
            str(drafter),
            str(tmp_path / "x"),
            "--to",
            "3.1",
            "--calibrate",
            "--target",
            str(target),
            "--calibration-prompts",
            str(prompts),
            "--lr",
            "-1",
        ],
    )
    assert res.exit_code == 2 and "--lr must be a finite number > 0" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(main, ["convert", str(drafter), str(tmp_path / "x"), "--to", "3.1", "--steps", "5"])
    assert res.exit_code == 2 and "they need --calibrate" in res.output
    res = CliRunner().invoke(
        main, ["convert", str(drafter), str(tmp_path / "x"), "--to", "3.1", "--label-weight", "0.5"]
    )
    assert res.exit_code == 2 and "they need --calibrate" in res.output
    res = CliRunner().invoke(
        main, ["convert", str(drafter), str(tmp_path / "x"), "--to", "3.1", "--target", str(target)]
    )
    assert res.exit_code == 2 and "read only by --calibrate" in res.output and "add --calibrate" in res.output
    res = CliRunner().invoke(
        main,
        [
            "convert",
            str(drafter),
            str(tmp_path / "x"),
            "--to",
            "3",
            "--force",
            "--target",
            str(target),
            "--calibrate",
        ],
    )
    assert res.exit_code == 2 and "--calibrate and --norm-output apply to --to 3.1" in res.output
    res = CliRunner().invoke(
        main,
        [
            "convert",
            str(drafter),
            str(tmp_path / "x"),
            "--to",
            "3.1",
            "--calibrate",
            "--target",
            str(target),
            "--lr",
            "inf",
        ],
    )
    assert res.exit_code == 2 and "--lr must be a finite number > 0" in res.output
    res = CliRunner().invoke(
        main,
        [
            "convert",
            str(drafter),
            str(tmp_path / "x"),
            "--to",
            "3.1",
            "--calibrate",
            "--target",
            str(target),
            "--label-weight",
            "2",
        ],
    )
    assert res.exit_code == 2 and "--label-weight" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(
        main,
        [
            "convert",
            str(drafter),
            str(tmp_path / "x"),
            "--to",
            "3.1",
            "--calibrate",
            "--target",
            str(target),
            "--calibration-prompts",
            str(tmp_path / "none.jsonl"),
        ],
    )
    assert res.exit_code == 2 and "calibration prompt file" in res.output and "--calibration-prompts FILE" in res.output
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_cli_prints_the_calibration(tmp_path, pair):
    drafter, target, prompts = pair
    res = CliRunner().invoke(
        main,
        [
            "convert",
            str(drafter),
            str(tmp_path / "out"),
            "--to",
            "3.1",
            "--calibrate",
            "--target",
            str(target),
            "--calibration-prompts",
            str(prompts),
            "--calibration-tokens",
            "8",
            "--calibration-limit",
            "2",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "(fitted)" in res.output and "calibration: 2 prompts" in res.output  # 2 per category: 1 fit, 1 held out
    assert "acceptance on 2 held-out prompts" in res.output and "plain upgrade (unit gains)" in res.output
    assert "closed-form gains" in res.output and "tensor(s) recomputed (calibration / fold): fc.weight" in res.output


@pytest.mark.slow
def test_to_3_is_refused_unless_forced_then_folds_the_gains(tmp_path, pair):
    drafter, target, prompts = pair
    res = CliRunner().invoke(main, ["convert", str(drafter), str(tmp_path / "v31"), "--to", "3.1"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(main, ["convert", str(tmp_path / "v31"), str(tmp_path / "v3"), "--to", "3"])
    assert res.exit_code == 1 and "cannot become EAGLE-3 exactly" in res.output and "--force --target" in res.output
    res = CliRunner().invoke(main, ["convert", str(tmp_path / "v31"), str(tmp_path / "v3"), "--to", "3", "--force"])
    assert res.exit_code == 2 and "--to 3 --force needs --target T" in res.output
    res = CliRunner().invoke(
        main,
        [
            "convert",
            str(tmp_path / "v31"),
            str(tmp_path / "v3"),
            "--to",
            "3",
            "--force",
            "--target",
            str(target),
            "--calibration-prompts",
            str(prompts),
            "--calibration-tokens",
            "8",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert schema_errors(report, "convert-report") == [] and report["replaced_tensors"] == ["fc.weight"]
    assert any("nearest EAGLE-3 approximation" in w for w in report["warnings"]) and report["version"] == "3"
    assert any(
        "norm_output (the post-norm state fed back) cannot be kept" in w for w in report["warnings"]
    )  # on in v31
    fold = report["dropped"][0]
    assert fold["tensors"] == ["fc_norm.0.weight", "fc_norm.1.weight", "fc_norm.2.weight"]
    assert fold["keys"] == ["fc_norm", "norm_output"] and "folded into fc.weight" in fold["what"]
    assert json.loads((tmp_path / "v3" / "eaglehub.json").read_text())["conversion"]["dropped"] == report["dropped"]
    out, src = (
        load_file(str(tmp_path / "v3" / "model.safetensors")),
        load_file(str(tmp_path / "v31" / "model.safetensors")),
    )
    assert not any(k.startswith("fc_norm.") for k in out)
    cfg = json.loads((tmp_path / "v3" / "config.json").read_text())
    assert not cfg.get("fc_norm") and not cfg.get("norm_output")
    # unit gains: every fc column scaled by 1 / (its chunk's mean RMS), one factor per chunk
    ratio = (out["fc.weight"].double() / src["fc.weight"].double()).chunk(3, dim=1)
    for r in ratio:
        assert torch.allclose(r, r.flatten()[0].expand_as(r), rtol=1e-3) and 0 < float(r.flatten()[0]) < 1
    assert all(torch.equal(src[k], out[k]) for k in out if k != "fc.weight")


WINDOW = 4


def _as_qwen3(drafter, root, window: int):
    """The pair's drafter with Qwen3-style layers (q/k norms) and a sliding window every prompt outgrows."""
    from helpers.checkpoints import qwen3_layers, write_checkpoint

    cfg = json.loads((drafter / "config.json").read_text())
    tensors = load_file(str(drafter / "model.safetensors"))
    qwen3_layers(cfg, tensors, window)
    return write_checkpoint(root / "q3", cfg, tensors)


@pytest.mark.slow
def test_a_qwen3_style_drafter_with_a_window_calibrates_and_keeps_its_layer(tmp_path, pair):
    from eaglehub.checks.validate import validate
    from eaglehub.formats.registry import read_drafter

    drafter, target, prompts = pair
    q3 = _as_qwen3(drafter, tmp_path, window=WINDOW)
    closed = calibrate.calibrated_upgrade(q3, tmp_path / "closed", _opts(target, prompts, steps=0))
    src, out = load_file(str(q3 / "model.safetensors")), load_file(str(tmp_path / "closed" / "model.safetensors"))
    assert set(out) - set(src) == {f"fc_norm.{i}.weight" for i in range(3)}
    assert all(torch.equal(src[k], out[k]) for k in src)  # q/k norms included, bit-exact
    assert closed["calibration"]["acceptance"]["calibrated"]["num_drafts"] > 0
    tuned = calibrate.calibrated_upgrade(q3, tmp_path / "tuned", _opts(target, prompts, steps=2, train="all", lr=1e-3))
    assert tuned["calibration"]["fine_tuning"]["steps"] == 2
    every = load_file(str(tmp_path / "tuned" / "model.safetensors"))
    assert not torch.equal(every["midlayer.self_attn.q_norm.weight"], src["midlayer.self_attn.q_norm.weight"])
    for out_dir in ("closed", "tuned"):
        d = read_drafter(tmp_path / out_dir)
        assert (d.layer_kind, d.windows, d.version) == ("qwen3", [4], "3.1")
        report = validate(tmp_path / out_dir, target=target)
        assert [f["code"] for f in report["findings"] if f["severity"] == "error"] == [], report["findings"]
