"""Property tests for the d2t/t2d rules (docs/formats.md §2) on random vocabulary subsets.

``check_vocab_maps`` takes numpy arrays (validate reads tensors without torch); the maps are built
with conftest's torch helper and handed over as ``.numpy()``.
"""

from __future__ import annotations

import numpy as np
import torch
from helpers.checkpoints import vocab_maps
from hypothesis import given, settings
from hypothesis import strategies as st

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
    assert check_vocab_maps(d2t.numpy(), t2d.numpy(), vocab, len(used)) == []
    assert torch.equal(torch.arange(len(used)) + d2t, torch.tensor(used))
    assert bool((d2t[1:] >= d2t[:-1]).all()) and int(d2t.min()) >= 0


@settings(max_examples=60, deadline=None)
@given(subsets(), st.data())
def test_absolute_ids_or_repeats_are_errors_and_order_is_free(sub, data):
    vocab, used = sub
    d2t, t2d = vocab_maps(used, vocab)
    i = data.draw(st.integers(0, len(used) - 2))
    ids = torch.arange(len(used)) + d2t
    swapped = d2t.clone()
    swapped[i], swapped[i + 1] = ids[i + 1] - i, ids[i] - (i + 1)  # two rows trade target ids
    # the engines scatter draft logits by id (ModelOpt stores frequency order): a permutation is no fault
    assert check_vocab_maps(swapped.numpy(), t2d.numpy(), vocab, len(used)) == []
    repeated = d2t.clone()
    repeated[i + 1] = ids[i] - (i + 1)  # row i+1 names row i's id: one of the two rows is never proposed
    found = check_vocab_maps(repeated.numpy(), t2d.numpy(), vocab, len(used))
    dup = next(f for f in found if f.code == "E-D2T-DUPLICATE")
    assert (
        dup.message
        == f"1 draft row(s) map to a target id another row already has (rows {i} and {i + 1} both map to {int(ids[i])})"
    )
    absolute = torch.tensor(used)  # ids stored instead of offsets
    found = codes(check_vocab_maps(absolute.numpy(), t2d.numpy(), vocab, len(used)))
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
    found = check_vocab_maps(d2t.numpy(), t2d.numpy(), vocab, len(used))
    if marked != len(used):
        f = next(f for f in found if f.code == "E-T2D-COUNT")
        assert f.message == f"t2d marks {marked} target ids but draft_vocab_size is {len(used)}"


def test_unpruned_identity_maps_are_valid_maps():
    """The maps themselves are sound; whether an engine loads them is checks/profiles.py's (E-ENGINE-WEIGHT)."""
    d2t, t2d = vocab_maps(list(range(16)), 16)
    assert check_vocab_maps(d2t.numpy(), t2d.numpy(), 16, 16) == []
    assert check_vocab_maps(None, None, 16, 16) == []


def test_stored_dtype_names_the_finding_not_the_widened_array():
    """A bf16 d2t comes back from load_numpy as float32; the message must name the stored dtype."""
    d2t, t2d = vocab_maps([1, 5, 9], 16)
    found = check_vocab_maps(d2t.numpy().astype(np.float32), t2d.numpy(), 16, 3, d2t_dtype="bfloat16")
    assert [(f.code, f.message) for f in found] == [
        ("E-D2T-DTYPE", "d2t is bfloat16, must be an integer tensor (int64)")
    ]
    found = check_vocab_maps(d2t.numpy(), t2d.numpy().astype(np.uint8), 16, 3)
    assert [(f.code, f.message) for f in found] == [("E-T2D-DTYPE", "t2d is uint8, must be bool")]


def test_uint64_d2t_is_refused_like_before():
    """Only the integer dtypes torch always had are accepted, as when the check ran on torch tensors."""
    d2t, t2d = vocab_maps([1, 5, 9], 16)
    assert [f.code for f in check_vocab_maps(d2t.numpy().astype(np.uint64), t2d.numpy(), 16, 3)] == ["E-D2T-DTYPE"]
    assert check_vocab_maps(d2t.numpy().astype(np.int32), t2d.numpy(), 16, 3) == []
