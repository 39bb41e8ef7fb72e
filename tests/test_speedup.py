"""eaglehub speedup: the speculative-decoding formulas (Leviathan et al. 2023; docs/speedup.md §1) with
real values and as properties, the batch plan, the throughput assembly on a scripted engine, the
PyTorch cost measurement on a tiny generated target, the report schema and the CLI."""

import copy
import json
import math

import pytest
from click.testing import CliRunner
from helpers.checkpoints import BASE_CONFIG
from hypothesis import given
from hypothesis import strategies as st

from eaglehub.cli import main
from eaglehub.engines.base import Engine, RunResult, SpecCounters
from eaglehub.errors import EaglehubError
from eaglehub.io.schemas import schema_errors
from eaglehub.speedup import run as speedup
from eaglehub.speedup.model import expected_al
from eaglehub.views.speedup import plot_speedup

alphas = st.floats(0.0, 1.0)
ks = st.integers(1, 8)
cs = st.floats(0.0, 2.0)
vs = st.floats(0.05, 20.0)

# --- formulas: the worked examples of docs/speedup.md §1 ----------------------------------------------


def test_expected_al_and_leviathan_speedup_of_the_paper_example():
    assert expected_al(0.8, 3) == pytest.approx(2.952, abs=1e-12)  # 1 + .8 + .64 + .512
    assert speedup.leviathan_speedup(0.8, 3, 0.05) == pytest.approx(2.952 / 1.15, abs=1e-12)
    assert round(speedup.leviathan_speedup(0.8, 3, 0.05), 2) == 2.57


def test_implied_alpha_of_the_vllm_ci_acceptance_length():
    alpha = speedup.implied_alpha(2.60, 3)  # Llama-3.1-8B + RedHatAI eagle3 in vLLM CI (docs/verification.md §2)
    assert alpha == pytest.approx(0.7171, abs=1e-4)
    assert round(alpha, 2) == 0.72 and 0.70 < alpha < 0.72  # "≈ 0.71": between the CI's conditional rates
    assert expected_al(alpha, 3) == pytest.approx(2.60, abs=1e-12)
    assert speedup.implied_alpha(2.952, 3) == pytest.approx(0.8, abs=1e-12)


def test_general_speedup_and_bound_with_the_cpu_costs_of_benchmarks_md():
    # SmolLM2 fp32 on the 2-core CPU, 256-token prefix: q=1 107 ms, q=4 181 ms
    v = 181 / 107
    assert speedup.speedup_bound(3, v, 0.0) == pytest.approx(4 * 107 / 181)
    assert round(speedup.speedup_bound(3, v, 0.0), 1) == 2.4  # "at most ≈ 2.4× at k=3 even with a perfect drafter"
    assert speedup.general_speedup(2.60, 3, 107.0, 181.0, 5.0) == pytest.approx(2.60 * 107 / (181 + 15))
    # the README's fixture drafter (AL 1.657) cannot pay for a 1.7× verify on this CPU
    assert speedup.general_speedup(1.657, 3, 107.0, 181.0, 5.0) < 1.0


@pytest.mark.parametrize(
    "call",
    [
        lambda: speedup.implied_alpha(0.99, 3),
        lambda: speedup.implied_alpha(4.01, 3),
        lambda: speedup.implied_alpha(float("nan"), 3),
        lambda: speedup.implied_alpha(2.0, 0),
        lambda: expected_al(1.01, 3),
        lambda: expected_al(-0.1, 3),
        lambda: expected_al(0.5, True),
        lambda: speedup.leviathan_speedup(0.5, 3, -0.1),
        lambda: speedup.general_speedup(0.9, 3, 1.0, 1.0, 0.0),
        lambda: speedup.general_speedup(2.0, 3, 0.0, 1.0, 0.0),
        lambda: speedup.speedup_bound(3, 0.0, 0.1),
    ],
)
def test_formulas_refuse_values_outside_their_domain(call):
    with pytest.raises(ValueError):
        call()


@given(alphas, ks)
def test_alpha_to_al_to_alpha_round_trip(alpha, k):
    al = expected_al(alpha, k)
    assert 1.0 <= al <= k + 1
    assert speedup.implied_alpha(al, k) == pytest.approx(alpha, abs=1e-9)


@given(ks)
def test_al_1_means_alpha_0_and_al_k_plus_1_means_alpha_1(k):
    assert speedup.implied_alpha(1.0, k) == 0.0
    assert speedup.implied_alpha(float(k + 1), k) == 1.0
    assert expected_al(1.0, k) == k + 1


@given(alphas, ks, cs)
def test_leviathan_is_the_general_formula_with_a_one_forward_verify(alpha, k, c):
    al = expected_al(alpha, k)
    assert speedup.general_speedup(al, k, 1.0, 1.0, c) == pytest.approx(
        speedup.leviathan_speedup(alpha, k, c), rel=1e-12
    )


@given(alphas, ks, cs, vs)
def test_speedup_never_exceeds_the_bound(alpha, k, c, v):
    bound = speedup.speedup_bound(k, v, c)
    assert speedup.general_speedup(expected_al(alpha, k), k, 1.0, v, c) <= bound * (1 + 1e-12)
    assert speedup.leviathan_speedup(alpha, k, c) <= speedup.speedup_bound(k, 1.0, c) * (1 + 1e-12)


# --- plan and CLI-level parsing ------------------------------------------------------------------------


def test_plan_cycles_prompts_into_batches_of_exactly_c():
    plan = speedup.plan_batches(6, [1, 4, 16])
    assert plan.groups[0] == speedup.WARMUP_GROUP and plan.order[0] == 0
    assert plan.levels == {1: [f"c1-{i}" for i in range(6)], 4: ["c4-0", "c4-1"], 16: ["c16-0"]}
    for c, labels in plan.levels.items():
        assert all(plan.groups.count(g) == c for g in labels)
    assert [plan.order[i] for i in plan.positions(4)] == [0, 1, 2, 3, 4, 5, 0, 1]
    assert [plan.order[i] for i in plan.positions(16)] == [j % 6 for j in range(16)]
    assert len(plan.order) == 1 + 6 + 8 + 16


@pytest.mark.parametrize("text, levels", [("1,4,16", [1, 4, 16]), (" 16, 1 ", [1, 16]), ("8", [8])])
def test_parse_concurrency(text, levels):
    assert speedup.parse_concurrency(text) == levels


@pytest.mark.parametrize("text", ["", "1,,4", "1,x", "0,4", "-1", "1.5", "4,4"])
def test_parse_concurrency_refuses_bad_lists(text):
    with pytest.raises(EaglehubError) as exc:
        speedup.parse_concurrency(text)
    assert exc.value.exit_code == 2 and "\n" not in exc.value.message


# --- throughput assembly on a scripted engine ------------------------------------------------------------

COSTS = speedup.Costs(
    t_target_1_ms=100.0,
    t_verify_k1_ms=170.0,
    t_draft_1_ms=5.0,
    prefix_tokens=256,
    repeats=10,
    device="cpu",
    threads=2,
    dtype="float32",
)  # c = 0.05, v = 1.7


def batch_counters(c: int) -> SpecCounters:
    """Per batch of c prompts: 10 drafts each, AL 2.6, per position 0.7 / 0.5 / 0.4."""
    return SpecCounters(10 * c, 30 * c, 16 * c, (7 * c, 5 * c, 4 * c))


class FakeEngine:
    """Each prompt yields 8 output tokens; a batch of c takes 2 s alone, and with the drafter 1 s at
    concurrency 1 and 1.6 s above (speedups 2.0 and 1.25). Records every run's specs and batches."""

    name = "fake"

    def __init__(self, timed: bool = True):
        self.timed = timed
        self.runs = []

    def version(self):
        return "0.1"

    def run(self, spec, prompt_token_ids, groups, progress=None):
        batches = {g: groups.count(g) for g in dict.fromkeys(groups)}
        self.runs.append((spec, batches, [list(p) for p in prompt_token_ids]))
        seconds = {g: (2.0 if spec.drafter is None else 1.0 if n == 1 else 1.6) for g, n in batches.items()}
        counters = {} if spec.drafter is None else {g: batch_counters(n) for g, n in batches.items()}
        for g, n in batches.items():
            if progress:
                progress(g, n)
        return RunResult(
            outputs=[[7] * 8 for _ in groups],
            group_counters=counters,
            generate_seconds=sum(seconds.values()),
            load_seconds=3.0,
            engine=self.name,
            engine_version="0.1",
            group_seconds=seconds if self.timed else {},
        )


def test_fake_engine_satisfies_the_protocol():
    assert isinstance(FakeEngine(), Engine)


@pytest.fixture
def setup(tmp_path, monkeypatch, make_drafter, make_target):
    """A tiny target with weights, a valid tiny drafter, 3 prompts in 2 categories, a chat encoder
    that gives prompt i the ids [1, 2, i]."""
    target = make_target(n_layers=8, weights=True)
    drafter = make_drafter("good")
    prompts = tmp_path / "p.jsonl"
    rows = [("m1", "math"), ("m2", "math"), ("c1", "coding")]
    prompts.write_text("".join(json.dumps({"id": i, "category": c, "prompt": f"question {i}"}) + "\n" for i, c in rows))
    monkeypatch.setattr("eaglehub.engines.chat.encode_chat", lambda t, msgs: [[1, 2, n] for n in range(len(msgs))])
    return target, drafter, prompts


def _opts(setup, **over):
    target, drafter, prompts = setup
    return speedup.SpeedupOptions(
        **{
            "target": str(target),
            "drafter": str(drafter),
            "prompts_file": str(prompts),
            "concurrency": [1, 4],
            "max_tokens": 8,
            **over,
        }
    )


def test_throughput_levels_batches_ratios_and_expected_speedups(setup):
    engine = FakeEngine()
    report = speedup.run_speedup(_opts(setup), engine=engine, costs=COSTS)
    assert schema_errors(report, speedup.REPORT_SCHEMA) == []
    # two engine runs (alone, with the drafter), identical batches of exactly c, max_num_seqs = the largest level
    assert [r[0].drafter is not None for r in engine.runs] == [False, True]
    assert engine.runs[0][1] == engine.runs[1][1] == {"warmup": 1, "c1-0": 1, "c1-1": 1, "c1-2": 1, "c4-0": 4}
    assert (
        engine.runs[0][2]
        == engine.runs[1][2]
        == [[1, 2, 0], [1, 2, 0], [1, 2, 1], [1, 2, 2], [1, 2, 0], [1, 2, 1], [1, 2, 2], [1, 2, 0]]
    )
    assert all(r[0].engine_options == {"max_num_seqs": 4} and r[0].k == 3 for r in engine.runs)
    one, four = report["levels"]
    assert (one["concurrency"], one["batches"], one["prompts"]) == (1, 3, 3)
    assert (four["concurrency"], four["batches"], four["prompts"]) == (4, 1, 4)
    # the warm-up batch is in neither level: 3 batches × 2 s alone, 3 × 1 s with the drafter
    assert one["target_alone"] == {
        "generate_seconds": 6.0,
        "output_tokens": 24,
        "output_tokens_per_second": 4.0,
    }
    assert one["with_drafter"] == {
        "generate_seconds": 3.0,
        "output_tokens": 24,
        "output_tokens_per_second": 8.0,
    }
    assert one["measured_speedup"] == pytest.approx(2.0)
    assert four["target_alone"]["output_tokens_per_second"] == pytest.approx(16.0)
    assert four["with_drafter"]["output_tokens_per_second"] == pytest.approx(20.0)
    assert four["measured_speedup"] == pytest.approx(1.25)
    for lv in (one, four):
        assert lv["prompts_token_identical"] == lv["prompts"]
        assert lv["acceptance"]["acceptance_length"] == pytest.approx(2.6)
        assert lv["acceptance"]["acceptance_rate_per_position"] == pytest.approx([0.7, 0.5, 0.4])
        assert lv["implied_alpha"] == pytest.approx(0.7171, abs=1e-4)
        assert lv["expected_speedup_leviathan"] == pytest.approx(2.6 / 1.15)
        assert lv["expected_speedup_general"] == pytest.approx(2.6 * 100 / (170 + 3 * 5))
    assert report["speedup_bound"] == pytest.approx(4 / 1.85)
    assert report["settings"]["concurrency"] == [1, 4] and report["settings"]["max_num_seqs"] == 4
    assert report["costs"]["c"] == pytest.approx(0.05) and report["costs"]["v"] == pytest.approx(1.7)
    assert report["engine"] == {"name": "fake", "version": "0.1"}
    assert report["prompts"]["count"] == 3 and report["prompts"]["categories"] == {"math": 2, "coding": 1}
    assert (
        report["serve_command"].startswith("vllm serve ") and '"num_speculative_tokens": 3' in report["serve_command"]
    )
    assert any(n.startswith("CPU speedups are not GPU speedups") and "v = 1.70" in n for n in report["notes"])
    assert set(report["definitions"]) >= {"measured_speedup", "implied_alpha", "expected_speedup_leviathan"}


def test_gpu_costs_carry_no_cpu_note(setup):
    report = speedup.run_speedup(
        _opts(setup), engine=FakeEngine(), costs=speedup.Costs(10.0, 10.5, 0.5, 256, 10, "cuda", 1, "float32")
    )
    assert not any("CPU" in n for n in report["notes"])


def test_an_engine_that_does_not_time_batches_is_an_error(setup):
    with pytest.raises(EaglehubError, match="did not time batch c1-0") as exc:
        speedup.run_speedup(_opts(setup), engine=FakeEngine(timed=False), costs=COSTS)
    assert exc.value.exit_code == 1


def test_inconsistent_counters_are_an_error(setup, monkeypatch):
    monkeypatch.setattr(f"{__name__}.batch_counters", lambda c: SpecCounters(c, 3 * c, 4 * c, (c, c, c)))
    with pytest.raises(EaglehubError, match="concurrency 1: .*inconsistent.*accepted 12 > drafted 9") as exc:
        speedup.run_speedup(_opts(setup), engine=FakeEngine(), costs=COSTS)
    assert exc.value.exit_code == 1


@pytest.mark.parametrize(
    "over, match",
    [
        ({"k": 0}, "-k must be at least 1"),
        ({"max_tokens": 0}, "--max-tokens"),
        ({"repeats": 0}, "--repeats"),
        ({"concurrency": []}, "concurrency levels"),
        ({"concurrency": [4, 4]}, "concurrency levels"),
        ({"prefix_tokens": 2048}, "exceeds max_model_len"),
        ({"limit": 0}, "--limit"),
    ],
)
def test_usage_errors_come_before_any_engine_run(setup, over, match):
    engine = FakeEngine()
    with pytest.raises(EaglehubError, match=match) as exc:
        speedup.run_speedup(_opts(setup, **over), engine=engine, costs=COSTS)
    assert exc.value.exit_code == 2
    assert engine.runs == []


def test_report_schema_rejects_a_report_without_definitions(setup):
    report = speedup.run_speedup(_opts(setup), engine=FakeEngine(), costs=COSTS)
    broken = copy.deepcopy(report)
    del broken["definitions"]["implied_alpha"]
    broken["levels"][0]["implied_alpha"] = 1.5
    where = {w for w, _ in schema_errors(broken, speedup.REPORT_SCHEMA)}
    assert where == {"definitions", "levels[0].implied_alpha"}


def test_plot_is_a_png(setup, tmp_path):
    report = speedup.run_speedup(_opts(setup), engine=FakeEngine(), costs=COSTS)
    path = plot_speedup(report, tmp_path / "out" / "speedup.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- cost measurement on a real (tiny, generated) target ------------------------------------------------


def test_measure_costs_on_a_tiny_target(setup):
    target, _, _ = setup
    costs = speedup.measure_costs(target, copy.deepcopy(BASE_CONFIG), k=3, prefix_tokens=16, repeats=3)
    assert costs.device == "cpu" and costs.prefix_tokens == 16 and costs.repeats == 3 and costs.dtype == "float32"
    for t in (costs.t_target_1_ms, costs.t_verify_k1_ms, costs.t_draft_1_ms):
        assert math.isfinite(t) and t > 0
    d = costs.to_dict()
    assert d["c"] == pytest.approx(costs.t_draft_1_ms / costs.t_target_1_ms)
    assert d["v"] == pytest.approx(costs.t_verify_k1_ms / costs.t_target_1_ms)


def test_measure_costs_refuses_a_non_float_dtype(setup):
    target, _, _ = setup
    with pytest.raises(EaglehubError, match="not a torch floating-point dtype") as exc:
        speedup.measure_costs(target, copy.deepcopy(BASE_CONFIG), k=3, dtype="int8")
    assert exc.value.exit_code == 2


# --- CLI -----------------------------------------------------------------------------------------------------


def _cli(*args):
    res = CliRunner(env={"COLUMNS": "250"}).invoke(main, [str(a) for a in args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception  # never a traceback
    return res


def test_cli_table_json_report_and_plot(setup, tmp_path, monkeypatch):
    target, drafter, prompts = setup
    monkeypatch.setattr("eaglehub.engines.vllm_engine.VllmEngine", lambda **kw: FakeEngine())
    args = [
        "speedup",
        "--target",
        target,
        "--drafter",
        drafter,
        "--prompts",
        prompts,
        "--concurrency",
        "4,1",
        "--max-tokens",
        "8",
        "--prefix-tokens",
        "16",
        "--repeats",
        "2",
    ]
    res = _cli(*args, "--report", tmp_path / "s.json", "--plot", tmp_path / "s.png")
    assert res.exit_code == 0, res.output
    assert "question" not in res.output  # prompt text is never printed
    assert "speedup" in res.output and "2.00×" in res.output and "1.25×" in res.output
    assert "CPU speedups are not GPU speedups" in res.output and "vllm serve" in res.output
    saved = json.loads((tmp_path / "s.json").read_text())
    assert schema_errors(saved, speedup.REPORT_SCHEMA) == []
    assert saved["costs"]["prefix_tokens"] == 16 and saved["costs"]["repeats"] == 2
    assert (tmp_path / "s.png").read_bytes()[:4] == b"\x89PNG"
    res = _cli(*args, "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert [lv["concurrency"] for lv in report["levels"]] == [1, 4]
    assert [lv["measured_speedup"] for lv in report["levels"]] == pytest.approx([2.0, 1.25])


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--concurrency", "1,x"], "error: --concurrency '1,x': 'x' is not an integer in [1, 1024]"),
        (["--concurrency", ""], "error: --concurrency is empty"),
        (["-k", "0"], "error: Invalid value for '-k' / '--num-speculative-tokens': 0 is not in the range x>=1."),
    ],
)
def test_cli_usage_errors_are_one_line_exit_2(setup, monkeypatch, extra, match):
    target, drafter, prompts = setup
    engine = FakeEngine()
    monkeypatch.setattr("eaglehub.engines.vllm_engine.VllmEngine", lambda **kw: engine)
    res = _cli("speedup", "--target", target, "--drafter", drafter, "--prompts", prompts, *extra)
    assert res.exit_code == 2, res.output
    lines = res.stderr.splitlines()
    assert lines[0] == match and all(line.startswith("hint:") for line in lines[1:]) and len(lines) <= 2, res.stderr
    assert "Traceback" not in res.output and engine.runs == []


@pytest.mark.parametrize("text", ["１", "٣", "99999999999999999999999999", "1025"])
def test_concurrency_must_be_ascii_and_bounded(text):
    with pytest.raises(EaglehubError, match=r"not an integer in \[1, 1024\]"):
        speedup.parse_concurrency(text)
