"""The drafter recipe's training prompts: seeded, balanced, and disjoint from the evaluation prompts."""

from __future__ import annotations

import importlib.util
import re
from collections import Counter
from pathlib import Path

from eaglehub.prompts import load_prompts

RECIPE = Path(__file__).resolve().parent.parent / "fixtures" / "smollm2-eagle3-recipe" / "train_prompts.py"


def _recipe():
    spec = importlib.util.spec_from_file_location("recipe_prompts", RECIPE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def test_training_prompts_are_seeded_unique_and_cover_the_eval_categories():
    mod = _recipe()
    a, b = mod.build_prompts(600, seed=0), mod.build_prompts(600, seed=0)
    assert a == b
    assert len({r["prompt"] for r in a}) == 600
    per_cat = Counter(r["category"] for r in a)
    assert set(per_cat) == {p.category for p in load_prompts()}
    assert min(per_cat.values()) >= 90


def test_eval_prompts_are_not_in_the_training_prompts():
    """All 8,000 prompts the recipe generates (the fixture drafter saw a prefix of them)."""
    train = {_norm(r["prompt"]) for r in _recipe().build_prompts(8000, seed=0)}
    evals = [_norm(p.text) for p in load_prompts()]
    assert [e for e in evals if e in train] == []
