"""The acceptance curve (eaglehub/measure/curve.py): the rates per draft position of one run at k and the AL(k')
they predict for k' <= k, in the verify report and its text view, as vLLM's synthetic acceptance
(``verify --write-synthetic``), and from a served drafter. The scripted engine's counters give exact arithmetic;
the real pair's curve comes from the reference-engine runs the session shares (helpers/real_runs.py)."""

from __future__ import annotations

import hashlib
import json

import pytest
from click.testing import CliRunner
from helpers.scripted import BASE, GOOD, ScriptedEngine, write_prompts

from eaglehub.cli import main
from eaglehub.endpoint.served_config import parse_served_config
from eaglehub.engines.base import SpecCounters
from eaglehub.io.schemas import validate_json
from eaglehub.measure import acceptance
from eaglehub.measure.curve import AcceptanceCurve, curve_from_counters, token_ids_sha256
from eaglehub.verify import run as verify

SETTINGS = {
    "temperature": 0.0,
    "top_p": 1.0,
    "top_k": 0,
    "max_tokens": 4,
    "dtype": "float32",
    "engine": {"name": "scripted", "version": "1.0"},
}
SHA = "0" * 64


def test_the_curve_is_the_counters_rates_and_predicts_al_up_to_the_measured_k():
    overall = acceptance.total(GOOD.values())  # 10 drafts accepting 7 / 3 / 1 tokens at positions 1 / 2 / 3
    c = curve_from_counters(overall, 3, 4, SHA, SETTINGS)
    assert c.rates == (0.7, 0.3, 0.1) and c.num_drafts == 10
    assert c.al_by_k() == [1.0, 1.7, 2.0, 2.1]
    assert c.al(3) == pytest.approx(acceptance.acceptance_length(overall))  # the measured AL, bonus token once
    with pytest.raises(ValueError, match=r"measured at k=3 \(0 <= k <= 3\)"):
        c.al(4)
    with pytest.raises(ValueError):
        c.al(-1)
    d = c.to_dict()
    validate_json(d, "acceptance-curve")
    assert AcceptanceCurve.from_dict(d) == c and d["al_by_k"] == [1.0, 1.7, 2.0, 2.1]
    assert c.line() == "AL(k) 1.70 / 2.00 / 2.10 at k=1..3, T=0"
    assert c.synthetic_config() == {
        "rejection_sample_method": "synthetic",
        "synthetic_acceptance_rates": [0.7, 0.3, 0.1],
    }
    # vLLM's own check of the same rates (eaglehub.endpoint.served_config, vllm 0.32.0 config/speculative.py L566-601)
    assert parse_served_config(json.dumps({"num_speculative_tokens": 3, **c.synthetic_config()}))
    # positions the engine counted nothing at are rate 0; positions past k with nothing accepted are dropped
    short = curve_from_counters(SpecCounters(4, 12, 3, (2, 1)), 3, 1, SHA, SETTINGS)
    assert short.rates == (0.5, 0.25, 0.0) and short.al_by_k() == [1.0, 1.5, 1.75, 1.75]
    assert curve_from_counters(SpecCounters(4, 4, 2, (2, 0, 0)), 1, 1, SHA, SETTINGS).rates == (0.5,)


@pytest.mark.parametrize(
    "counters, k, message",
    [
        (SpecCounters(), 3, "nothing was drafted"),
        (SpecCounters(4, 12, 5, (2, 3, 0)), 3, "rise with position"),
        (SpecCounters(4, 12, 6, (2, 2, 2)), 2, "more than k=2"),
    ],
)
def test_counters_that_make_no_curve_are_refused(counters, k, message):
    with pytest.raises(ValueError, match=message):
        curve_from_counters(counters, k, 1, SHA, SETTINGS)


def test_a_stored_curve_is_checked_against_its_schema_and_its_own_rates():
    d = curve_from_counters(acceptance.total(GOOD.values()), 3, 4, SHA, SETTINGS).to_dict()
    with pytest.raises(ValueError, match="not 1 \\+ the running sum"):
        AcceptanceCurve.from_dict({**d, "al_by_k": [1.0, 1.7, 2.0, 2.2]})
    with pytest.raises(ValueError, match="not an acceptance curve: rates"):
        AcceptanceCurve.from_dict({**d, "rates": [0.7, 1.3, 0.1]})
    with pytest.raises(ValueError, match="not an acceptance curve"):
        AcceptanceCurve.from_dict({**d, "settings": {**SETTINGS, "seed": 1}})
    assert token_ids_sha256([[1, 2], [3]]) == hashlib.sha256(b"[[1,2],[3]]").hexdigest()


@pytest.fixture
def scripted(tmp_path, monkeypatch, make_drafter, make_target):
    """The scripted engine (GOOD: rates 0.7 / 0.3 / 0.1 at k = 3) behind the CLI, a tiny target and drafter."""
    target = make_target(n_layers=8)
    make_drafter("good")
    prompts = tmp_path / "p.jsonl"
    write_prompts(prompts)
    monkeypatch.setattr("eaglehub.engines.chat.encode_chat", lambda t, msgs: [[1, 2, 3]] * len(msgs))
    engine = ScriptedEngine({"good": (BASE, GOOD)})
    monkeypatch.setattr(verify, "make_engines", lambda *a, **k: [engine])
    monkeypatch.setattr("eaglehub.engines.registry.make_engines", lambda *a, **k: [engine])
    args = ["verify", "--target", str(target), "--prompts", str(prompts), "-k", "3", "--max-tokens", "4"]
    return tmp_path, args, engine


def test_verify_reports_the_curve_and_writes_it_as_vllms_synthetic_acceptance(scripted):
    tmp_path, args, _ = scripted
    drafter = tmp_path / "good"
    out, report_path = tmp_path / "synthetic.json", tmp_path / "r.json"
    res = CliRunner().invoke(
        main, [*args, "--drafter", str(drafter), "--report", str(report_path), "--write-synthetic", str(out)]
    )
    assert res.exit_code == 0, res.output
    report = json.loads(report_path.read_text())
    curve = report["drafters"][0]["acceptance_curve"]
    assert curve["rates"] == [0.7, 0.3, 0.1] and curve["al_by_k"] == [1.0, 1.7, 2.0, 2.1]
    assert (
        curve["prompts_sha256"]
        == report["prompts"]["sha256"]
        == hashlib.sha256((tmp_path / "p.jsonl").read_bytes()).hexdigest()
    )
    assert curve["settings"] == SETTINGS and curve["prompts"] == 4 and curve["num_drafts"] == 10
    assert report["definitions"]["acceptance_curve"].startswith("AL(k') = 1 + p_1 + ... + p_k'")
    text = " ".join(res.output.split())
    assert "acceptance curve: AL(k) 1.70 / 2.00 / 2.10 at k=1..3, T=0 (predicted from the rates at k=3" in text
    written = json.loads(out.read_text())
    validate_json(written, "synthetic-config")
    assert written == {
        "method": "eagle3",
        "model": str(drafter.resolve()),
        "num_speculative_tokens": 3,
        "rejection_sample_method": "synthetic",
        "synthetic_acceptance_rates": [0.7, 0.3, 0.1],
    }
    assert parse_served_config(out.read_text())["synthetic_acceptance_rates"] == [0.7, 0.3, 0.1]
    assert f"wrote {out}: vLLM's synthetic acceptance at the measured rates 0.700 / 0.300 / 0.100" in text


def test_with_a_temperature_the_sampled_runs_curve_is_written(scripted):
    tmp_path, args, _ = scripted
    out = tmp_path / "synthetic.json"
    res = CliRunner().invoke(
        main,
        [
            *args,
            "--drafter",
            str(tmp_path / "good"),
            "--temperature",
            "0.7",
            "--top-p",
            "0.9",
            "--write-synthetic",
            str(out),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    entry = json.loads(res.stdout)["drafters"][0]
    sampled = entry["sampled_acceptance"]["acceptance_curve"]
    assert sampled["settings"] == {**SETTINGS, "temperature": 0.7, "top_p": 0.9}
    assert entry["acceptance_curve"]["settings"]["temperature"] == 0.0
    assert json.loads(out.read_text())["synthetic_acceptance_rates"] == sampled["rates"]
    assert "at k=1..3, T=0.7)" in " ".join(res.stderr.split())


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--drafter", "{d}", "--drafter", "{d}"], "2 drafters"),
        (["--drafter", "{d}", "--baseline-drafter", "{d}"], "--baseline-drafter adds a second drafter"),
        ([], "the drafters found for --target are verified, maybe several"),
        (["--drafter", "{d}", "--dry-run"], "--dry-run measures nothing"),
    ],
)
def test_write_synthetic_without_exactly_one_measured_drafter_is_refused_before_any_run(scripted, extra, message):
    tmp_path, args, engine = scripted
    extra = [e.format(d=tmp_path / "good") for e in extra]
    res = CliRunner().invoke(main, [*args, *extra, "--write-synthetic", str(tmp_path / "s.json")])
    assert res.exit_code == 2 and message in res.output, res.output
    assert "give exactly one --drafter (or --endpoint)" in " ".join(res.output.split())
    assert engine.calls == [] and not (tmp_path / "s.json").exists()


def test_a_served_drafter_has_its_curve_unless_its_acceptance_is_configured(tmp_path):
    """A fixed-k vLLM server (rates 2/3, 2/3, 1/3 from its counters) has a curve, in the server's engine; one that
    accepts synthetically has none (its AL is the setting), and --write-synthetic says so without writing."""
    from test_served_settings import VLLM_032_SPEC, FakeServer, SpecServer, _verify

    fixed = {**VLLM_032_SPEC, "num_speculative_tokens_per_batch_size": None}
    out = tmp_path / "s.json"
    with SpecServer(fixed, steps=[(3, 2), (3, 0), (3, 3)]) as served, FakeServer("nospec") as target:
        res, report = _verify(served.base_url, target.url, tmp_path, "--api", "chat", "--write-synthetic", str(out))
    assert res.exit_code == 0, res.output
    curve = report["drafters"][0]["acceptance_curve"]
    assert curve["rates"] == pytest.approx([2 / 3, 2 / 3, 1 / 3]) and curve["num_drafts"] == 18
    assert curve["settings"]["engine"] == {"name": "vllm", "version": "0.32.0"}
    assert json.loads(out.read_text()) == {
        "num_speculative_tokens": 3,
        "rejection_sample_method": "synthetic",
        "synthetic_acceptance_rates": [0.666667, 0.666667, 0.333333],
    }
    out.unlink()
    synthetic = {"method": "eagle3", "model": "/d", "num_speculative_tokens": 3}
    synthetic |= {"rejection_sample_method": "synthetic", "synthetic_acceptance_length": 2.5}
    with SpecServer(None, steps=[(3, 1), (3, 2)], diverge=True) as served, FakeServer("nospec") as target:
        res, report = _verify(
            served.base_url,
            target.url,
            tmp_path,
            "--api",
            "chat",
            "--served-config",
            json.dumps(synthetic),
            "--write-synthetic",
            str(out),
        )
    assert report["drafters"][0]["acceptance_curve"] is None
    assert res.exit_code == 2 and "the greedy run measured no acceptance curve" in res.output and not out.exists()


def test_a_local_run_under_a_schedule_of_several_ks_has_no_curve_and_of_one_k_has_it_at_that_k():
    from eaglehub.measure.curve import entry_curve

    def report(schedule):
        features = {"requested": {"num_speculative_tokens_per_batch_size": schedule}}
        return {
            "settings": {"num_speculative_tokens": 3, "max_tokens": 32, "dtype": "float32", "temperature": 0.0,
                         "production_features": features},
            "prompts": {"count": 2, "sha256": "0" * 64},
            "engine": {"name": "vllm", "version": "0.32.0"},
        }  # fmt: skip

    mixed = {"acceptance": {"overall": SpecCounters(10, 26, 9, (6, 3)).to_dict()}}
    assert entry_curve(report([[1, 4, 3], [5, 8, 2]]), mixed) is None  # steps at k 3 and k 2: rates of neither
    one = {"acceptance": {"overall": SpecCounters(10, 20, 9, (6, 3)).to_dict()}}
    curve = entry_curve(report([[1, 8, 2]]), one)
    assert curve is not None and curve.k == 2 and curve.rates == (0.6, 0.3)
    # k 0 at some batch sizes: those steps draft nothing and count no drafts, the others are all at k 2
    assert entry_curve(report([[1, 2, 2], [3, 8, 0]]), one) == curve


@pytest.mark.real
def test_the_fixture_pairs_curve_is_its_counters_and_vllm_takes_its_rates(shared_engine_runs, tmp_path):
    """The committed SmolLM2 drafter in the reference engine at the shared settings (helpers/real_runs.py: k = 3,
    one prompt per category, 32 tokens; the runs test_real_pair and test_quantize make too): the curve is the
    report's counters, AL(3) is the measured AL, the prompts' hash is the default prompt file's, and vLLM's own
    validator of synthetic_acceptance_rates (vllm 0.32.0 config/speculative.py L566-601) takes the file written."""
    from helpers.paths import FIXTURE
    from helpers.real_runs import MAX_TOKENS, PROMPTS, K
    from helpers.real_runs import SETTINGS as RUN

    from eaglehub.measure.prompts import default_prompts_path

    report_path, out = tmp_path / "r.json", tmp_path / "synthetic.json"
    args = ["verify", *RUN, "--drafter", str(FIXTURE), "--engine", "reference", "--report", str(report_path)]
    res = CliRunner().invoke(main, [*args, "--write-synthetic", str(out)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    report = json.loads(report_path.read_text())
    (entry,) = report["drafters"]
    counters = SpecCounters.from_dict(entry["acceptance"]["overall"])
    curve = AcceptanceCurve.from_dict(entry["acceptance_curve"])
    assert curve.k == K and curve.num_drafts == counters.num_drafts > 0 and curve.prompts == PROMPTS
    assert list(curve.rates) == [n / counters.num_drafts for n in counters.accepted_per_pos]
    assert curve.rates[0] > 0.2  # wired and trained
    assert curve.al(K) == pytest.approx(entry["acceptance"]["overall"]["acceptance_length"], abs=1e-12)
    assert all(a < b for a, b in zip(curve.al_by_k(), curve.al_by_k()[1:]))  # every position accepts something
    assert curve.prompts_sha256 == hashlib.sha256(default_prompts_path().read_bytes()).hexdigest()
    assert curve.settings == {
        "temperature": 0.0,
        "top_p": 1.0,
        "top_k": 0,
        "max_tokens": MAX_TOKENS,
        "dtype": "float32",
        "engine": report["engine"],
    }
    assert curve.line() in " ".join(res.output.split())
    written = json.loads(out.read_text())
    assert written["synthetic_acceptance_rates"] == [round(r, 6) for r in curve.rates]
    assert written["num_speculative_tokens"] == K and written["model"] == str(FIXTURE.resolve())
    from vllm.config.speculative import SpeculativeConfig

    resolved = SpeculativeConfig._resolve_synthetic_acceptance_rates(K, written["synthetic_acceptance_rates"], None)
    assert resolved == written["synthetic_acceptance_rates"]
