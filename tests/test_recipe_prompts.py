"""The drafter recipe's training prompts: seeded, balanced, and disjoint from the evaluation prompts."""

from __future__ import annotations

from collections import Counter

import pytest
from helpers.checkpoints import load_recipe

from eaglehub.measure.prompts import load_prompts


def _recipe():
    return load_recipe("train_prompts")


def test_training_prompts_are_seeded_unique_and_cover_the_eval_categories():
    mod = _recipe()
    a, b = mod.build_prompts(600, seed=0), mod.build_prompts(600, seed=0)
    assert a == b
    assert len({r["prompt"] for r in a}) == 600
    per_cat = Counter(r["category"] for r in a)
    assert set(per_cat) == {p.category for p in load_prompts()}
    assert min(per_cat.values()) >= 90


@pytest.mark.slow
def test_eval_prompts_are_excluded_from_the_training_prompts():
    """The recipe's generator would produce an eval prompt verbatim; the exclusion list must stop it."""
    mod = _recipe()
    evals = frozenset(mod.normalise(p.text) for p in load_prompts())
    unguarded = {mod.normalise(r["prompt"]) for r in mod.build_prompts(8000, seed=0)}
    assert evals & unguarded, "the guard below would be untested"
    guarded = mod.build_prompts(8000, seed=0, exclude=evals)
    assert evals.isdisjoint(mod.normalise(r["prompt"]) for r in guarded)
    # Prompts before the first collision are unchanged, so data generated earlier stays valid.
    first = min(i for i, r in enumerate(mod.build_prompts(8000, seed=0)) if mod.normalise(r["prompt"]) in evals)
    assert mod.build_prompts(first, seed=0) == guarded[:first]
