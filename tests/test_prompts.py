"""The project's evaluation prompts and the prompt loader."""

import json
from collections import Counter

import jsonschema
import pytest

from eaglehub.errors import EaglehubError
from eaglehub.paths import schemas_dir
from eaglehub.prompts import default_prompts_path, load_prompts

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
    assert [p.category for p in one_each] == ["coding", "math", "writing", "question_answering", "summarisation",
                                              "explanation"]
    maths = load_prompts(categories=["math"], limit=3)
    assert [p.id for p in maths] == ["math-01", "math-02", "math-03"]


def _write(tmp_path, lines):
    f = tmp_path / "p.jsonl"
    f.write_text("\n".join(lines) + "\n")
    return f


@pytest.mark.parametrize("lines, needle", [
    (['{"id": "a", "category": "math", "prompt": "1+1?"}', '{"id": "a", "category": "math", "prompt": "2+2?"}'],
     "duplicate prompt id 'a'"),
    (['{"id": "a", "category": "math"}'], ":1: row: 'prompt' is a required property"),
    (['{"id": "a", "category": "math", "prompt": "x"}', "{not json"], ":2: not valid JSON"),
    (['{"id": "a", "category": "Math!", "prompt": "x"}'], ":1: category:"),
    ([""], "holds no prompts"),
])
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
