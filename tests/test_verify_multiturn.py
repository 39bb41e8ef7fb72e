"""verify on multi-turn prompt sets (MT-Bench / Spec-Bench rows): one request per (prompt, turn), the
target-alone baseline run turn by turn with its decoded outputs fed back as replies, identical ids for
every other run, request ids and turns in the report; single-turn sets unchanged."""

from __future__ import annotations

import io
import json

import pytest
from helpers.checkpoints import target_config, target_tensors, write_checkpoint
from helpers.scripted import BASE
from rich.console import Console
from test_prompts import TEMPLATE
from test_reference_engine import _constant_drafter
from test_verify import _opts, setup  # noqa: F401  (setup: the single-turn fixture)

from eaglehub.engines.base import RunResult, SpecCounters
from eaglehub.engines.chat import ChatTokenizer
from eaglehub.engines.reference import ReferenceEngine
from eaglehub.errors import EaglehubError
from eaglehub.io.schemas import validate_json
from eaglehub.measure.requests import merge_runs
from eaglehub.verify import run as verify

EOS = 255
# ids 0..249 are the words w0..w249, so any output id below 250 decodes to a word and re-encodes to itself
WORDS = [f"w{i}" for i in range(250)] + ["<s>", "<|user|>", "<|assistant|>", "<|end|>", "[UNK]", "</s>"]
ASSISTANT = WORDS.index("<|assistant|>")
CONVERSATIONS = [
    (101, "Math", ["w1 w2 w3", "w4 w5"]),
    (102, "Math", ["w6"]),
    (103, "Role Play", ["w7 w8", "w9", "w10 w11"]),
]
REQUEST_IDS = ["101", "101#2", "102", "103", "103#2", "103#3"]


def add_chat_tokenizer(target, template: str = TEMPLATE):
    """Save a word-level tokenizer over the target's 256 ids, with a chat template, into ``target``."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    t = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=t,
        unk_token="[UNK]",
        bos_token="<s>",
        eos_token="</s>",
        additional_special_tokens=["<|user|>", "<|assistant|>", "<|end|>"],
    )
    fast.chat_template = template
    fast.save_pretrained(target)
    return target


def write_mtbench(path, conversations=CONVERSATIONS):
    path.write_text(
        "".join(
            json.dumps({"question_id": q, "category": c, "turns": t, "reference": []}) + "\n"
            for q, c, t in conversations
        )
    )
    return path


class EchoEngine:
    """Target alone: each output is a function of the whole input (so a turn-2 input shows which reply it
    holds), ending in EOS; a drafter reproduces it (``lossy``: not for ``101#2``'s input) with AL 2 per
    category. Records every call's drafter, ids and groups."""

    def __init__(self, name="echo"):
        self.name = name
        self.calls = []
        self.lossy_ids = None  # input ids whose drafter output is changed

    def version(self):
        return "1.0"

    def run(self, spec, prompt_token_ids, groups, progress=None):
        self.calls.append(
            (spec.drafter.name if spec.drafter else None, [list(i) for i in prompt_token_ids], list(groups))
        )
        outputs = [[sum(i) % 250, len(i), 7, EOS] for i in prompt_token_ids]
        counters = {}
        if spec.drafter:
            if spec.drafter.name == "lossy":
                outputs = [[o[0], 8, *o[2:]] if i == self.lossy_ids else o for i, o in zip(prompt_token_ids, outputs)]
            for g in dict.fromkeys(groups):
                n = groups.count(g)
                counters[g] = SpecCounters(n, 3 * n, n, (n, 0, 0))
        for g in dict.fromkeys(groups):
            if progress:
                progress(g, groups.count(g))
        return RunResult(
            outputs=outputs,
            group_counters=counters,
            generate_seconds=2.0,
            load_seconds=1.0,
            engine=self.name,
            engine_version="1.0",
        )


@pytest.fixture
def mt(tmp_path, make_drafter, make_target):
    target = add_chat_tokenizer(make_target(n_layers=8))
    for name in ("good", "lossy"):
        make_drafter(name)
    return tmp_path, target, write_mtbench(tmp_path / "question.jsonl")


def _expected_ids(target):
    """Each request's input, rebuilt here from the rule: the reply to turn n is EchoEngine's target-alone
    output for turn n, decoded with special tokens skipped."""
    tok = ChatTokenizer(target)
    ids = {}
    for q, _, turns in CONVERSATIONS:
        replies = []
        for n in range(1, len(turns) + 1):
            x = tok.encode_turn(turns[:n], replies)
            ids[str(q) if n == 1 else f"{q}#{n}"] = x
            replies.append(tok.decode([sum(x) % 250, len(x), 7, EOS]))
    return ids


def test_turn_two_inputs_hold_the_baseline_reply_and_every_run_gets_the_same_ids(mt):
    tmp_path, target, prompts = mt
    engine = EchoEngine()
    report = verify.run_verify(_opts(tmp_path, target, prompts, "good"), engine=engine)
    (b1, ids1, g1), (b2, ids2, g2), (b3, ids3, g3), (d, ids_d, g_d) = engine.calls
    assert (b1, b2, b3, d) == (
        None,
        None,
        None,
        "good",
    )  # turn 1, 2, 3 of the baseline, then the drafter once
    assert g1 == ["math", "math", "role_play"] and g2 == ["math", "role_play"] and g3 == ["role_play"]
    expected = _expected_ids(target)
    assert ids1 == [expected[r] for r in ("101", "102", "103")]
    assert ids2 == [expected["101#2"], expected["103#2"]] and ids3 == [expected["103#3"]]
    # 101's turn-1 output [s, n, 7, EOS] comes back as the words w<s> w<n> w7 after the first assistant marker
    s, n = sum(ids1[0]) % 250, len(ids1[0])
    assert ids2[0][:n] == ids1[0] and ids2[0][n : n + 4] == [s, n, 7, WORDS.index("<|end|>")]
    assert ids1[0][-1] == ASSISTANT and EOS not in ids2[0]
    assert ids_d == [expected[r] for r in REQUEST_IDS] and g_d == [
        "math",
        "math",
        "math",
        "role_play",
        "role_play",
        "role_play",
    ]
    dr = report["drafters"][0]
    assert [(r["id"], r["turn"], r["category"]) for r in dr["prompts"]] == [
        ("101", 1, "math"),
        ("101#2", 2, "math"),
        ("102", 1, "math"),
        ("103", 1, "role_play"),
        ("103#2", 2, "role_play"),
        ("103#3", 3, "role_play"),
    ]
    assert dr["lossless"] and dr["passed"] and dr["num_prompts"] == dr["num_prompts_matched"] == 6
    assert dr["acceptance"]["per_category"]["math"]["num_drafts"] == 3  # turns of a category share its counters
    assert report["prompts"] | {"file": None, "sha256": None} == {
        "file": None,
        "sha256": None,
        "count": 3,
        "categories": {"math": 2, "role_play": 1},
        "format": "mt-bench",
        "max_turns": 3,
        "multi_turn": True,
        "requests": 6,
    }
    # three phases of 3 + 2 + 1 requests, each 1 s to load and 2 s to generate, 4 tokens per output
    assert report["baseline"] == {
        "load_seconds": 3.0,
        "generate_seconds": 6.0,
        "output_tokens": 24,
        "output_tokens_per_second": 4.0,
    }
    assert "turn by turn" in report["settings"]["batching"]
    assert "decoded with special tokens skipped" in report["definitions"]["multi_turn"]
    validate_json(report, "verify-report")


def test_a_divergent_later_turn_is_named_by_its_request_id(mt):
    tmp_path, target, prompts = mt
    engine = EchoEngine()
    engine.lossy_ids = _expected_ids(target)["101#2"]
    report = verify.run_verify(_opts(tmp_path, target, prompts, "good", "lossy"), engine=engine)
    good, lossy = report["drafters"]
    assert good["passed"] and [c[0] for c in engine.calls] == [None, None, None, "good", "lossy"]
    assert [f["code"] for f in lossy["findings"]] == ["E-VERIFY-LOSSLESS"]
    assert "1 of 6 prompts" in lossy["findings"][0]["message"] and "101#2@1" in lossy["findings"][0]["message"]
    bad = [r for r in lossy["prompts"] if not r["match"]]
    assert [(r["id"], r["turn"], r["first_divergence"]) for r in bad] == [("101#2", 2, 1)]
    verify.validate_report(report)


def test_a_second_engine_runs_every_request_at_once_with_the_primary_ids(mt):
    tmp_path, target, prompts = mt
    primary, other = EchoEngine(), EchoEngine("echo-copy")
    report = verify.run_verify(_opts(tmp_path, target, prompts, "good"), engines=[primary, other])
    expected = [_expected_ids(target)[r] for r in REQUEST_IDS]
    assert [(d, ids) for d, ids, _ in other.calls] == [(None, expected), ("good", expected)]
    row = report["cross_engine"]["engines"][0]["comparison"][0]
    assert row["num_prompts"] == 6 and row["baseline_outputs_identical"] == 6 and row["outputs_identical"] == 6
    assert [r["id"] for r in report["cross_engine"]["engines"][0]["drafters"][0]["prompts"]] == REQUEST_IDS
    verify.validate_report(report)


def test_progress_shows_each_baseline_turn(mt):
    tmp_path, target, prompts = mt
    out = io.StringIO()
    verify.run_verify(
        _opts(tmp_path, target, prompts, "good"),
        engine=EchoEngine(),
        console=Console(file=out, width=200, force_terminal=False),
    )
    text = out.getvalue()
    for label, done in (
        ("target alone (turn 1)", "3/3"),
        ("target alone (turn 2)", "2/2"),
        ("target alone (turn 3)", "1/1"),
        ("target + drafter good (k=3)", "6/6"),
    ):
        assert any(label in line and done in line for line in text.splitlines()), (label, text)


def test_a_template_that_refuses_multi_turn_chats_fails_before_any_engine_run(tmp_path, make_drafter, make_target):
    strict = (
        "{% if messages | length > 1 %}{{ raise_exception('single turn only') }}{% endif %}{{ messages[0]['content'] }}"
    )
    target = add_chat_tokenizer(make_target(n_layers=8), strict)
    make_drafter("good")
    engine = EchoEngine()
    with pytest.raises(EaglehubError) as exc:
        verify.run_verify(_opts(tmp_path, target, write_mtbench(tmp_path / "q.jsonl"), "good"), engine=engine)
    assert exc.value.exit_code == 2 and "fails on a 3-turn chat: single turn only" in exc.value.message
    assert engine.calls == []
    # a single-turn MT-Bench selection never renders a second turn: it runs
    report = verify.run_verify(
        _opts(tmp_path, target, write_mtbench(tmp_path / "one.jsonl", CONVERSATIONS[1:2]), "good"),
        engine=engine,
    )
    assert report["prompts"]["multi_turn"] is False and [r["id"] for r in report["drafters"][0]["prompts"]] == ["102"]


def test_single_turn_sets_run_one_baseline_as_before(setup):
    tmp_path, target, prompts, engine = setup
    out = io.StringIO()
    report = verify.run_verify(
        _opts(tmp_path, target, prompts, "good"),
        engine=engine,
        console=Console(file=out, width=200, force_terminal=False),
    )
    assert engine.calls == [(None, 3, 4), ("good", 3, 4)]
    assert "target alone " in out.getvalue() and "(turn" not in out.getvalue()
    rows = report["drafters"][0]["prompts"]
    assert [(r["id"], r["turn"]) for r in rows] == [("m1", 1), ("m2", 1), ("c1", 1), ("c2", 1)]
    assert {k: report["prompts"][k] for k in ("count", "format", "max_turns", "multi_turn", "requests")} == {
        "count": 4,
        "format": "eaglehub",
        "max_turns": 1,
        "multi_turn": False,
        "requests": 4,
    }
    assert report["settings"]["batching"] == (
        "one batch per prompt category, identical for every run; counters read between batches"
    )
    assert report["baseline"]["output_tokens"] == sum(map(len, BASE))
    validate_json(report, "verify-report")


def test_merge_runs_places_outputs_and_sums_seconds_and_counters():
    a = RunResult(
        [[1], [2, 3]],
        {"x": SpecCounters(2, 6, 1, (1, 0, 0))},
        1.5,
        0.5,
        "e",
        "1",
        [SpecCounters(1, 3, 1, (1, 0, 0)), SpecCounters(1, 3, 0, (0, 0, 0))],
        group_seconds={"x": 1.5},
    )
    b = RunResult(
        [[4]],
        {"x": SpecCounters(1, 3, 2, (1, 1, 0)), "y": SpecCounters(1, 3, 0, (0, 0, 0))},
        2.0,
        0.25,
        "e",
        "1",
        [SpecCounters(1, 3, 2, (1, 1, 0))],
        group_seconds={"x": 2.0},
    )
    m = merge_runs([([0, 2], a), ([1], b)], 3)
    assert m.outputs == [[1], [4], [2, 3]]
    assert m.prompt_counters == [a.prompt_counters[0], b.prompt_counters[0], a.prompt_counters[1]]
    assert m.group_counters == {"x": SpecCounters(3, 9, 3, (2, 1, 0)), "y": SpecCounters(1, 3, 0, (0, 0, 0))}
    assert (m.generate_seconds, m.load_seconds, m.group_seconds, m.engine) == (3.5, 0.75, {"x": 3.5}, "e")
    assert merge_runs([([0, 1], a)], 2) is a
    b.prompt_counters = None  # one phase without per-request counters: none merged
    assert merge_runs([([0, 2], a), ([1], b)], 3).prompt_counters is None
    with pytest.raises(ValueError, match="cover requests 0..2 once"):
        merge_runs([([0, 1], a), ([1], b)], 3)


def test_requests_of_orders_turns_within_each_prompt(tmp_path):
    from eaglehub.measure.prompts import load_prompts

    requests = verify.requests_of(load_prompts(write_mtbench(tmp_path / "q.jsonl")))
    assert [(r.id, r.turn, r.category) for r in requests][:3] == [
        ("101", 1, "math"),
        ("101#2", 2, "math"),
        ("102", 1, "math"),
    ]
    assert [r.id for r in requests] == REQUEST_IDS


# --- the real tiny reference engine --------------------------------------------------------------


@pytest.fixture(scope="module")
def chat_target(tmp_path_factory):
    """test_reference_engine's tiny float32 target (EOS 255, peaky logits) with a chat tokenizer."""
    cfg = target_config(8, torch_dtype="float32", eos_token_id=EOS)
    tensors = {k: v.float() * 8 for k, v in target_tensors(cfg).items()}
    return add_chat_tokenizer(write_checkpoint(tmp_path_factory.mktemp("t") / "target", cfg, tensors))


@pytest.mark.slow
def test_reference_engine_end_to_end_on_two_turns(tmp_path, chat_target, monkeypatch):
    drafter, _ = _constant_drafter(tmp_path, chat_target)
    conversations = [(1, "writing", ["w3 w17 w45", "w9 w200"]), (2, "math", ["w1 w2", "w60"])]
    prompts = write_mtbench(tmp_path / "q.jsonl", conversations)
    monkeypatch.setattr(
        verify, "preflight", lambda d, t, profiles=None: None
    )  # validate's deep checks want a real target
    engine = ReferenceEngine()
    calls = []
    real_run = engine.run

    def recording(spec, ids, groups, progress=None):
        res = real_run(spec, ids, groups, progress)
        calls.append((spec.drafter, [list(i) for i in ids], [list(o) for o in res.outputs]))
        return res

    monkeypatch.setattr(engine, "run", recording)
    opts = verify.VerifyOptions(
        target=str(chat_target), drafters=[str(drafter)], k=3, max_tokens=12, prompts_file=str(prompts)
    )
    report = verify.run_verify(opts, engine=engine)
    (_, turn1, out1), (_, turn2, out2), (d, all_ids, out_d) = calls
    assert d == drafter and all_ids == [turn1[0], turn2[0], turn1[1], turn2[1]]
    tok = ChatTokenizer(chat_target)
    for (_, _, turns), first, second, out in zip(conversations, turn1, turn2, out1):
        assert second == tok.encode_turn(turns, [tok.decode(out)])
        words = [t for t in out if t < 250]  # what survives decoding with special tokens skipped
        assert words and second[: len(first)] == first and second[len(first) : len(first) + len(words)] == words
    assert out_d == [out1[0], out2[0], out1[1], out2[1]]  # greedy speculation is lossless on every turn
    dr = report["drafters"][0]
    assert [(r["id"], r["turn"], r["match"]) for r in dr["prompts"]] == [
        ("1", 1, True),
        ("1#2", 2, True),
        ("2", 1, True),
        ("2#2", 2, True),
    ]
    assert dr["lossless"] and dr["passed"], dr["findings"]
    assert dr["acceptance"]["overall"]["num_accepted_tokens"] > 0
    assert report["baseline"]["output_tokens"] == sum(map(len, out1 + out2))
    assert report["prompts"]["requests"] == 4 and report["prompts"]["multi_turn"] is True
    verify.validate_report(report)
