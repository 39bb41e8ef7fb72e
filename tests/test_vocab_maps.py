"""Property tests for the d2t/t2d rules (formats.md §2) on random vocabulary subsets."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import vocab_maps
from eaglehub.checks.vocab import check_vocab_maps


@st.composite
def subsets(draw):
    vocab = draw(st.integers(4, 300))
    used = draw(st.lists(st.integers(0, vocab - 1), min_size=2, max_size=min(vocab - 1, 64), unique=True))
    return vocab, sorted(used)


def codes(findings):
    return {f.code for f in findings}


@settings(max_examples=60, deadline=None)
@given(subsets())
def test_maps_from_sorted_subset_are_clean(sub):
    vocab, used = sub
    d2t, t2d = vocab_maps(used, vocab)
    assert check_vocab_maps(d2t, t2d, vocab, len(used)) == []
    assert torch.equal(torch.arange(len(used)) + d2t, torch.tensor(used))
    assert bool((d2t[1:] >= d2t[:-1]).all()) and int(d2t.min()) >= 0


@settings(max_examples=60, deadline=None)
@given(subsets(), st.data())
def test_absolute_ids_or_swaps_are_errors(sub, data):
    vocab, used = sub
    d2t, t2d = vocab_maps(used, vocab)
    i = data.draw(st.integers(0, len(used) - 2))
    swapped = d2t.clone()
    ids = torch.arange(len(used)) + d2t
    swapped[i], swapped[i + 1] = ids[i + 1] - i, ids[i] - (i + 1)  # swap two target ids
    assert "E-D2T-ORDER" in codes(check_vocab_maps(swapped, t2d, vocab, len(used)))
    absolute = torch.tensor(used)  # ids stored instead of offsets
    found = codes(check_vocab_maps(absolute, t2d, vocab, len(used)))
    if bool(absolute.any()) and used[-1] + len(used) - 1 >= vocab:
        assert "E-D2T-RANGE" in found
    elif bool(absolute.any()):
        assert "E-T2D-MISMATCH" in found or "E-D2T-RANGE" in found


@settings(max_examples=40, deadline=None)
@given(subsets(), st.integers(1, 5))
def test_t2d_count_mismatch_names_both_numbers(sub, extra):
    vocab, used = sub
    d2t, t2d = vocab_maps(used, vocab)
    t2d = t2d.clone()
    t2d[: min(vocab, len(used) + extra)] = True
    marked = int(t2d.sum())
    found = check_vocab_maps(d2t, t2d, vocab, len(used))
    if marked != len(used):
        f = next(f for f in found if f.code == "E-T2D-COUNT")
        assert f.message == f"t2d marks {marked} target ids but draft_vocab_size is {len(used)}"


def test_unpruned_identity_maps_warn_only():
    d2t, t2d = vocab_maps(list(range(16)), 16)
    assert [f.code for f in check_vocab_maps(d2t, t2d, 16, 16)] == ["W-D2T-UNPRUNED"]
    assert check_vocab_maps(None, None, 16, 16) == []
