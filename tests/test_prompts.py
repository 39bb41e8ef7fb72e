"""The project's evaluation prompts and the prompt loader."""

import json
from collections import Counter

import jsonschema
import pytest

from eaglehub.errors import EaglehubError
from eaglehub.io.resources import schemas_dir
from eaglehub.measure.prompts import default_prompts_path, load_prompts

REQUIRED = {"coding", "math", "writing", "question_answering", "summarisation", "explanation"}


def test_eval_prompts_are_valid_and_large_enough():
    schema = json.loads((schemas_dir() / "prompts.schema.json").read_text())
    rows = [json.loads(line) for line in default_prompts_path().read_text().splitlines()]
    for row in rows:
        jsonschema.validate(row, schema)
    assert len(rows) >= 40
    assert len({r["id"] for r in rows}) == len(rows)
    per_cat = Counter(r["category"] for r in rows)
    assert REQUIRED <= set(per_cat)
    assert len(per_cat) >= 5 and min(per_cat.values()) >= 8


def test_loader_keeps_file_order_and_filters():
    prompts = load_prompts()
    assert len(prompts) == 48
    assert prompts[0].id == "code-01"
    one_each = load_prompts(limit=1)
    assert [p.category for p in one_each] == [
        "coding",
        "math",
        "writing",
        "question_answering",
        "summarisation",
        "explanation",
    ]
    maths = load_prompts(categories=["math"], limit=3)
    assert [p.id for p in maths] == ["math-01", "math-02", "math-03"]


def _write(tmp_path, lines):
    f = tmp_path / "p.jsonl"
    f.write_text("\n".join(lines) + "\n")
    return f


@pytest.mark.parametrize(
    "lines, needle",
    [
        (
            [
                '{"id": "a", "category": "math", "prompt": "1+1?"}',
                '{"id": "a", "category": "math", "prompt": "2+2?"}',
            ],
            "duplicate prompt id 'a'",
        ),
        (['{"id": "a", "category": "math"}'], ":1: row: 'prompt' is a required property"),
        (['{"id": "a", "category": "math", "prompt": "x"}', "{not json"], ":2: not valid JSON"),
        (['{"id": "a", "category": "Math!", "prompt": "x"}'], ":1: category:"),
        ([""], "holds no prompts"),
    ],
)
def test_loader_rejects_bad_files(tmp_path, lines, needle):
    with pytest.raises(EaglehubError) as exc:
        load_prompts(_write(tmp_path, lines))
    assert needle in exc.value.message
    assert exc.value.exit_code == 2


def test_loader_rejects_unknown_category_and_bad_limit(tmp_path):
    f = _write(tmp_path, ['{"id": "a", "category": "math", "prompt": "1+1?"}'])
    with pytest.raises(EaglehubError, match="unknown category: poetry"):
        load_prompts(f, categories=["poetry"])
    with pytest.raises(EaglehubError, match="--limit must be at least 1"):
        load_prompts(f, limit=0)
    with pytest.raises(EaglehubError, match="not found"):
        load_prompts(tmp_path / "missing.jsonl")


# --- formats: MT-Bench / Spec-Bench JSONL and plain text ------------------------------------------

from pathlib import Path  # noqa: E402

from eaglehub.io.schemas import schema_errors  # noqa: E402
from eaglehub.measure.prompts import (  # noqa: E402
    Prompt,
    describe_prompt_file,
    describe_prompts,
    normalise_category,
    read_prompt_file,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "prompts"
MTBENCH = FIXTURES / "mt-bench-sample.jsonl"
TEXT = FIXTURES / "quick-checks.txt"


def test_mtbench_sample_loads_two_turn_prompts():
    fmt, prompts = read_prompt_file(MTBENCH)
    assert fmt == "mt-bench"
    assert [p.id for p in prompts] == ["101", "102", "103", "104", "105", "106"]
    assert [p.category for p in prompts] == ["writing", "writing", "math", "math", "role_play", "role_play"]
    assert [p.original_category for p in prompts][4:] == ["Role-Play", "Role-Play"]
    assert all(len(p.turns) == 2 and p.source_format == "mt-bench" for p in prompts)
    assert prompts[2].turns == (
        "A tank holds 240 litres and drains at 8 litres per minute. How long until it is empty?",
        "If a second pipe fills it at 3 litres per minute while it drains, how long does it take instead?",
    )
    assert prompts[2].text == prompts[2].turns[0]  # existing callers read .text: the first turn


def test_mtbench_filters_by_normalised_or_original_category():
    assert [p.id for p in load_prompts(MTBENCH, limit=1)] == ["101", "103", "105"]
    assert [p.id for p in load_prompts(MTBENCH, categories=["Role-Play"])] == ["105", "106"]
    assert [p.id for p in load_prompts(MTBENCH, categories=["role_play", "math"], limit=1)] == ["103", "105"]
    with pytest.raises(EaglehubError) as exc:
        load_prompts(MTBENCH, categories=["poetry"])
    assert exc.value.message == "unknown category: poetry" and exc.value.hint == "available: math, role_play, writing"


def test_text_file_one_prompt_per_line():
    fmt, prompts = read_prompt_file(TEXT)
    assert fmt == "text"
    assert [p.id for p in prompts] == ["quick_checks-1", "quick_checks-2", "quick_checks-3", "quick_checks-4"]
    assert {p.category for p in prompts} == {"quick_checks"} and prompts[0].original_category == "quick-checks"
    assert [p.text for p in prompts][2:] == [
        "Convert 5 kilometres to miles and show the arithmetic.",
        "Explain in one sentence what a hash table is.",
    ]
    assert all(p.turns == (p.text,) and p.source_format == "text" for p in prompts)
    assert [p.id for p in load_prompts(TEXT, categories=["quick_checks"], limit=2)] == [
        "quick_checks-1",
        "quick_checks-2",
    ]


def test_descriptions_per_format():
    described = {
        "mt-bench": describe_prompt_file(MTBENCH),
        "text": describe_prompt_file(TEXT),
        "eaglehub": describe_prompt_file(None),
    }
    assert described["mt-bench"] == {
        "format": "mt-bench",
        "count": 6,
        "max_turns": 2,
        "multi_turn": True,
        "categories": {"writing": 2, "math": 2, "role_play": 2},
        "category_names": {"role_play": "Role-Play"},
    }
    assert described["text"] == {
        "format": "text",
        "count": 4,
        "max_turns": 1,
        "multi_turn": False,
        "categories": {"quick_checks": 4},
        "category_names": {"quick_checks": "quick-checks"},
    }
    assert described["eaglehub"]["format"] == "eaglehub" and described["eaglehub"]["count"] == 48
    assert set(described["eaglehub"]["categories"].values()) == {8} and described["eaglehub"]["category_names"] == {}
    for d in described.values():
        assert schema_errors(d, "prompts-description") == []
    assert describe_prompts(load_prompts(MTBENCH, limit=1))["categories"] == {
        "writing": 1,
        "math": 1,
        "role_play": 1,
    }
    with pytest.raises(ValueError):
        describe_prompts([])


def test_mtbench_fixture_rows_fit_the_schema():
    rows = [json.loads(line) for line in MTBENCH.read_text().splitlines()]
    assert [schema_errors(r, "prompts-mtbench") for r in rows] == [[]] * 6
    assert len({r["category"] for r in rows}) == 3


def test_prompt_still_builds_from_one_text():
    p = Prompt("a", "math", "1+1?")
    assert p.turns == ("1+1?",) and p.text == "1+1?" and p.original_category == "math" and p.source_format == "eaglehub"
    assert Prompt("b", "math", ["x", "y"]).turns == ("x", "y")
    with pytest.raises(ValueError):
        Prompt("c", "math", ())


@pytest.mark.parametrize(
    "name, expected",
    [
        ("writing", "writing"),
        ("Role Play", "role_play"),
        ("Role-Play ", "role_play"),
        ("math/reasoning", "math_reasoning"),
        ("2024 set", "c_2024_set"),
        ("_x", "c__x"),
        ("Übersetzung", "c__bersetzung"),
        ("a" * 50, "a" * 40),
    ],
)
def test_normalise_category(name, expected):
    assert normalise_category(name) == expected
    assert schema_errors({"id": "x", "category": expected, "prompt": "p"}, "prompts") == []


def _mt(**row):
    return json.dumps({"question_id": 1, "category": "writing", "turns": ["a", "b"], **row})


EH = '{"id": "a", "category": "math", "prompt": "1+1?"}'


@pytest.mark.parametrize(
    "name, lines, needle",
    [
        ("p.jsonl", [_mt(), EH], ":2: an eaglehub row in an mt-bench file (format decided by line 1)"),
        ("p.jsonl", [EH, _mt()], ":2: an mt-bench row in an eaglehub file (format decided by line 1)"),
        ("p.txt", ["hello there", EH], ":2: an eaglehub JSON row in a plain-text prompt file"),
        ("p.jsonl", [_mt(turns=["hi", ""])], ":1: turns[1]:"),
        ("p.jsonl", [_mt(turns=["   \t"])], ":1: turns[0]:"),
        ("p.jsonl", [_mt(turns="just one string")], ":1: turns: 'just one string' is not of type 'array'"),
        ("p.jsonl", [_mt(turns=[])], ":1: turns:"),
        ("p.jsonl", [_mt(turns=["ok", 7])], ":1: turns[1]: 7 is not of type 'string'"),
        ("p.jsonl", [_mt(turns=["x" * 70_000])], ":1: turns[0]:"),
        ("p.jsonl", [_mt(question_id=1.5)], ":1: question_id:"),
        ("p.jsonl", [_mt(question_id=True)], ":1: question_id:"),
        ("p.jsonl", [_mt(category="")], ":1: category:"),
        (
            "p.jsonl",
            [_mt(question_id=7), _mt(question_id=8), _mt(question_id=7)],
            ":3: duplicate question_id 7",
        ),
        ("p.jsonl", [_mt(question_id=7), _mt(question_id="7")], ":2: duplicate question_id '7'"),
        (
            "p.jsonl",
            [_mt(question_id=1, category="Role Play"), _mt(question_id=2, category="role-play")],
            ":2: categories 'Role Play' and 'role-play' both normalise to 'role_play'",
        ),
        (
            "p.jsonl",
            ['{"category": "math"}'],
            ":1: a JSON object with neither 'prompt'/'id' nor 'turns'/'question_id'",
        ),
        ("p.jsonl", ['{"question_id": 4, "category": "math"}'], ":1: row: 'turns' is a required property"),
        (
            "p.jsonl",
            [EH, '{"question_id": 4, "category": "math"}'],
            ":2: an mt-bench row in an eaglehub file",
        ),
        ("p.jsonl", [_mt(prompt="x")], ":1: a JSON object with both 'prompt' and 'turns'"),
        ("p.jsonl", ["[1, 2]"], ":1: a .jsonl prompt file holds JSON objects, this line is a JSON list"),
        ("p.jsonl", ["What is 2 + 2?"], ":1: not valid JSON"),
        ("p.txt", ['{"id": "a", broken'], ":1: not valid JSON"),
        ("p.jsonl", [_mt(), "{not json"], ":2: not valid JSON"),
        ("p.txt", ["fine", "y" * (2**20 + 1)], ":2: line of 1,048,577 characters, more than 1,048,576"),
        ("p.txt", ["z" * 4001], ":1: prompt:"),
        ("p.txt", ["", "  ", "\t"], "holds no prompts"),
    ],
)
def test_loader_rejects_hostile_files(tmp_path, name, lines, needle):
    f = tmp_path / name
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(EaglehubError) as exc:
        load_prompts(f)
    assert needle in exc.value.message
    assert exc.value.exit_code == 2
    assert "\n" not in str(exc.value) and len(exc.value.message) < 400  # one short line, never the whole input


def test_loader_rejects_non_utf8(tmp_path):
    f = tmp_path / "p.txt"
    f.write_bytes(b"caf\xe9 au lait\n")
    with pytest.raises(EaglehubError, match=r"is not UTF-8 text \(byte 3\)"):
        load_prompts(f)


def test_loader_keeps_line_separators_inside_json_strings(tmp_path):
    """U+2028 is legal raw inside a JSON string; str.splitlines would cut the row in two."""
    f = tmp_path / "p.jsonl"
    f.write_text(
        "\ufeff"
        + json.dumps({"question_id": 3, "category": "writing", "turns": ["one\u2028two"]}, ensure_ascii=False)
        + "\r\n",
        encoding="utf-8",
    )
    (p,) = load_prompts(f)
    assert p.id == "3" and p.turns == ("one\u2028two",)


# --- chat rendering: single and multi-turn, with and without a chat template ----------------------

from eaglehub.engines import chat  # noqa: E402

WORDS = ["[UNK]", "<s>", "<|user|>", "<|assistant|>", "<|end|>", "hello", "world", "again", "bye"]
TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} <|end|> {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def _tokenizer_dir(tmp_path, template: str | None) -> Path:
    """A word-level tokenizer (ids = WORDS positions) that adds BOS to plain text, saved as a target dir."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    t = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    t.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=t,
        unk_token="[UNK]",
        bos_token="<s>",
        additional_special_tokens=["<|user|>", "<|assistant|>", "<|end|>"],
    )
    if template is not None:
        fast.chat_template = template
    out = tmp_path / ("chat" if template else "base")
    fast.save_pretrained(out)
    return out


def test_chat_template_single_and_two_turns(tmp_path):
    target = _tokenizer_dir(tmp_path, TEMPLATE)
    tok = chat.ChatTokenizer(target)
    assert tok.has_chat_template
    assert tok.render(["hello world"]) == "<s><|user|> hello world <|end|> <|assistant|>"
    # the template writes BOS; tokenizing must not add a second one
    assert chat.encode_turn(target, ["hello world"], []) == [1, 2, 5, 6, 4, 3]
    assert chat.encode_chat(target, ["hello world", "bye"]) == [[1, 2, 5, 6, 4, 3], [1, 2, 8, 4, 3]]
    # turn 2: the target-alone turn-1 output (ending in the end-of-turn token) decoded, then fed back
    reply = chat.decode(target, [6, 4])
    assert reply == "world"
    assert tok.render(["hello", "again"], [reply]) == (
        "<s><|user|> hello <|end|> <|assistant|> world <|end|> <|user|> again <|end|> <|assistant|>"
    )
    assert chat.encode_turn(target, ["hello", "again"], [reply]) == [1, 2, 5, 4, 3, 6, 4, 2, 7, 4, 3]
    assert chat.encode_turns(target, [(["hello"], []), (["hello", "again"], [reply])]) == [
        [1, 2, 5, 4, 3],
        [1, 2, 5, 4, 3, 6, 4, 2, 7, 4, 3],
    ]
    assert chat.decode_batch(target, [[5, 6, 4], [1, 8]]) == ["hello world", "bye"]


def test_no_chat_template_gets_raw_text(tmp_path):
    target = _tokenizer_dir(tmp_path, None)
    tok = chat.ChatTokenizer(target)
    assert not tok.has_chat_template
    assert tok.render(["hello world"]) == "hello world"
    assert tok.render(["hello", "again"], ["world"]) == "hello\n\nworld\n\nagain"
    # raw text is tokenized like a vLLM text prompt: the tokenizer's BOS is added
    assert chat.encode_chat(target, ["hello world"]) == [[1, 5, 6]]
    assert chat.encode_turn(target, ["hello", "again"], ["world"]) == [1, 5, 6, 7]


def test_chat_rejects_bad_calls_and_broken_targets(tmp_path):
    target = _tokenizer_dir(tmp_path, TEMPLATE)
    with pytest.raises(ValueError, match="need n >= 1 user turns and n - 1 replies, got 2 turns and 0"):
        chat.encode_turn(target, ["hello", "again"], [])
    with pytest.raises(ValueError):
        chat.encode_turn(target, [], [])
    strict = _tokenizer_dir(
        tmp_path / "strict",
        "{% if messages | length > 1 %}{{ raise_exception('single turn only') }}"
        "{% endif %}{{ messages[0]['content'] }}",
    )
    assert chat.encode_turn(strict, ["hello"], []) == [5]
    with pytest.raises(EaglehubError) as exc:
        chat.encode_turn(strict, ["hello", "again"], ["world"])
    assert "fails on a 2-turn chat: single turn only" in exc.value.message and "\n" not in exc.value.message
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(EaglehubError, match="cannot load the tokenizer of target"):
        chat.encode_chat(empty, ["hello"])


@pytest.mark.real
def test_smollm2_renders_mtbench_two_turns():
    """The real target's template (ChatML with a default system prompt) on a fixture question."""
    from eaglehub.target import resolve_target

    target = resolve_target("smollm2")
    p = load_prompts(MTBENCH, categories=["math"], limit=1)[0]
    tok = chat.ChatTokenizer(target)
    text = tok.render(p.turns, ["30 minutes."])
    assert text == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        f"<|im_start|>user\n{p.turns[0]}<|im_end|>\n<|im_start|>assistant\n30 minutes.<|im_end|>\n"
        f"<|im_start|>user\n{p.turns[1]}<|im_end|>\n<|im_start|>assistant\n"
    )
    ids = tok.encode_turn(p.turns, ["30 minutes."])
    assert (
        ids[:1] == [tok.tokenizer.convert_tokens_to_ids("<|im_start|>")] and tok.decode(ids).count("30 minutes.") == 1
    )
    assert chat.encode_chat(target, [p.text])[0] == tok.encode_turn([p.text])
