"""verify --context: every prompt padded with real text to an exact number of target tokens before any
engine runs (a tiny target with a tiny BPE tokenizer), the same ids for the baseline and every drafter,
a max_model_len that holds them, the report's context section, k lengths fitted to the target's limit,
and the refusals (a length the target cannot hold, multi-turn prompts, bad values)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from helpers.scripted import BASE, GOOD, ScriptedEngine, write_prompts
from helpers.tiny_tokenizer import add_tokenizer

from eaglehub.cli import main
from eaglehub.errors import EaglehubError, UsageError
from eaglehub.io.schemas import validate_json
from eaglehub.measure.context import parse_context
from eaglehub.measure.padding import padding_source
from eaglehub.verify import run as verify
from eaglehub.verify.regression import settings_differences


class RecordingEngine(ScriptedEngine):
    """The scripted engine, also keeping every run's prompt ids and max_model_len."""

    def __init__(self, scripts):
        super().__init__(scripts)
        self.inputs: list[tuple[str | None, list[list[int]], int]] = []

    def run(self, spec, prompt_token_ids, groups, progress=None):
        self.inputs.append((spec.drafter.name if spec.drafter else None, prompt_token_ids, spec.max_model_len))
        return super().run(spec, prompt_token_ids, groups, progress)


def _engine() -> RecordingEngine:
    """The target alone and the drafter agree on every prompt (BASE): lossless."""
    return RecordingEngine({"good": (BASE, GOOD)})


@pytest.fixture
def setup(tmp_path, make_drafter, make_target):
    """A tiny target (max_position_embeddings 1200) with a fast tokenizer, one drafter, a 4-prompt file."""
    target = add_tokenizer(make_target(n_layers=8, max_position_embeddings=1200))
    make_drafter("good")
    prompts = tmp_path / "p.jsonl"
    write_prompts(prompts)
    return tmp_path, target, prompts


def _opts(tmp_path, target, prompts, **over):
    kw = dict(target=str(target), drafters=[str(tmp_path / "good")], k=3, max_tokens=4, prompts_file=str(prompts))
    return verify.VerifyOptions(**{**kw, **over})


def test_every_run_gets_the_same_prompts_padded_to_the_length(setup):
    tmp_path, target, prompts = setup
    engine = _engine()
    report = verify.run_verify(_opts(tmp_path, target, prompts, context=1000), engine=engine)
    validate_json(report, "verify-report")
    (base_name, base_ids, base_len), (name, ids, max_model_len) = engine.inputs
    assert (base_name, name) == (None, "good") and ids == base_ids and len(ids) == 4
    assert all(999 <= len(x) <= 1000 for x in ids)
    # the longest prompt, its output and the last pass's k drafts; the target holds 1200
    assert base_len == max_model_len == min(max(2048, max(map(len, ids)) + 4 + 3), 1200) == 1200
    c = report["settings"]["context"]
    assert (c["requested"], c["fit_to_target"], c["context_tokens"]) == (1000, False, 1000)
    assert c["prompt_tokens"] == [len(x) for x in ids] and all(n > 900 for n in c["padding_tokens"])
    assert c["padding"]["sha256"] == padding_source()["sha256"] and report["settings"]["max_model_len"] == 1200
    assert report["drafters"][0]["lossless"]


def test_a_k_length_past_the_target_is_measured_at_the_longest_that_fits(setup):
    tmp_path, target, prompts = setup
    engine = _engine()
    length, fit = parse_context("2k")
    report = verify.run_verify(_opts(tmp_path, target, prompts, context=length, context_fit=fit), engine=engine)
    c = report["settings"]["context"]
    assert (c["requested"], c["fit_to_target"], c["context_tokens"]) == (2048, True, 1196)  # 1200 - 4 output tokens
    assert all(1195 <= len(x) <= 1196 for x in engine.inputs[0][1])


def test_an_exact_length_the_target_cannot_hold_names_the_longest_that_fits(setup):
    tmp_path, target, prompts = setup
    engine = RecordingEngine({})
    with pytest.raises(UsageError, match="longest that fits is 1196") as info:
        verify.run_verify(_opts(tmp_path, target, prompts, context=2048), engine=engine)
    assert "--context 2k" in info.value.hint and engine.inputs == []  # refused before any run


def test_multi_turn_prompts_are_refused(setup, tmp_path):
    _, target, _ = setup
    mt = tmp_path / "question.jsonl"
    mt.write_text(json.dumps({"question_id": 1, "category": "writing", "turns": ["first", "second"]}) + "\n")
    with pytest.raises(UsageError, match="multi-turn"):
        verify.run_verify(_opts(tmp_path, target, mt, context=512), engine=RecordingEngine({}))


def test_a_reference_report_at_another_context_is_not_compared(setup):
    tmp_path, target, prompts = setup
    engine = _engine()
    padded = verify.run_verify(_opts(tmp_path, target, prompts, context=600), engine=engine)
    plain = json.loads(json.dumps(padded))
    plain["settings"]["context"] = None
    diff = settings_differences(padded["settings"], padded["prompts"], plain)
    assert diff == [{"setting": "context.context_tokens", "reference": None, "run": 600}]
    del plain["settings"]["context"]  # a report written before --context existed ran unpadded
    assert settings_differences(plain["settings"], plain["prompts"], plain) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [("8192", (8192, False)), ("8k", (8192, True)), ("32K", (32768, True)), (" 1k ", (1024, True))],
)
def test_parse_context(text, expected):
    assert parse_context(text) == expected


@pytest.mark.parametrize("text", ["", "0", "0k", "k", "1.5k", "-8", "8m", "８k"])
def test_parse_context_refuses(text):
    with pytest.raises(EaglehubError, match="--context"):
        parse_context(text)


def test_cli_context_line_and_one_line_errors(setup, monkeypatch):
    tmp_path, target, prompts = setup
    engine = _engine()
    monkeypatch.setattr("eaglehub.engines.vllm_engine.VllmEngine", lambda **kw: engine)
    args = ["verify", "--target", target, "--drafter", tmp_path / "good", "--prompts", prompts, "-k", "3"]
    res = CliRunner().invoke(main, [str(a) for a in [*args, "--max-tokens", "4", "--context", "1k"]])
    assert res.exit_code == 0, res.output
    assert "every prompt padded to 1024 tokens" in res.output and "King James Version" in res.output
    for bad, words in (("1.5k", "expected a prompt length"), ("2048", "longest that fits is 1196")):
        res = CliRunner().invoke(main, [str(a) for a in [*args, "--max-tokens", "4", "--context", bad]])
        assert res.exit_code == 2 and words in res.output and "Traceback" not in res.output, res.output
