"""Report math on hand-built counters: AL, per-position rates, aggregation, first divergence."""

import pytest

from eaglehub.engines.base import SpecCounters
from eaglehub.engines.vllm_engine import counters_from_metrics
from eaglehub.measure import acceptance

# 10 verify steps at k = 3; accepted lengths per step: 3,3,2,2,1,1,1,0,0,0 -> 13 accepted tokens.
TEN_STEPS = SpecCounters(num_drafts=10, num_draft_tokens=30, num_accepted_tokens=13, accepted_per_pos=(7, 4, 2))


def test_acceptance_length_includes_bonus_token():
    s = acceptance.acceptance_stats(TEN_STEPS)
    assert s["acceptance_length"] == pytest.approx(2.3)  # 1 + 13/10
    assert s["draft_acceptance_rate"] == pytest.approx(13 / 30)


def test_per_position_unconditional_sums_to_al_minus_one():
    s = acceptance.acceptance_stats(TEN_STEPS)
    assert s["acceptance_rate_per_position"] == pytest.approx([0.7, 0.4, 0.2])
    assert 1 + sum(s["acceptance_rate_per_position"]) == pytest.approx(s["acceptance_length"])


def test_per_position_conditional():
    s = acceptance.acceptance_stats(TEN_STEPS)
    assert s["conditional_acceptance_rate_per_position"] == pytest.approx([0.7, 4 / 7, 0.5])


def test_zero_denominators_are_undefined_not_zero():
    s = acceptance.acceptance_stats(SpecCounters(0, 0, 0, (0, 0, 0)))
    assert s["acceptance_length"] is None
    assert s["draft_acceptance_rate"] is None
    assert s["acceptance_rate_per_position"] == [None, None, None]
    assert s["conditional_acceptance_rate_per_position"] == [None, None, None]


def test_category_aggregation_is_token_weighted():
    a = SpecCounters(10, 30, 13, (7, 4, 2))  # AL 2.3
    b = SpecCounters(30, 90, 6, (6, 0, 0))  # AL 1.2
    t = acceptance.total([a, b])
    assert t == SpecCounters(40, 120, 19, (13, 4, 2))
    assert acceptance.acceptance_stats(t)["acceptance_length"] == pytest.approx(1 + 19 / 40)  # not (2.3 + 1.2) / 2


def test_counter_difference_of_two_readings():
    before = SpecCounters(5, 15, 4, (3, 1, 0))
    after = SpecCounters(15, 45, 17, (10, 5, 2))
    assert after - before == TEN_STEPS


def test_first_divergence():
    assert acceptance.first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert acceptance.first_divergence([1, 2, 3], [1, 9, 3]) == 1
    assert acceptance.first_divergence([1, 2, 3], [7, 2, 3]) == 0
    assert acceptance.first_divergence([1, 2, 3], [1, 2]) == 2  # early stop
    assert acceptance.first_divergence([1, 2], [1, 2, 3]) == 2
    assert acceptance.first_divergence([], []) is None


def test_drafter_not_wired():
    assert acceptance.drafter_not_wired(SpecCounters(100, 300, 0, (0, 0, 0)))
    assert acceptance.drafter_not_wired(SpecCounters(100, 300, 1, (1, 0, 0)))  # 0.01 < 0.02
    assert acceptance.drafter_not_wired(SpecCounters())  # nothing drafted at all
    assert not acceptance.drafter_not_wired(TEN_STEPS)


def test_consistency_checks():
    assert acceptance.check_consistency(TEN_STEPS, 3) == []
    assert acceptance.check_consistency(SpecCounters(1, 3, 4, (1, 1, 2)), 3) == [
        "accepted 4 > drafted 3",
        "accepted_per_pos [1, 1, 2] increases with position",
    ]
    assert acceptance.check_consistency(SpecCounters(2, 3, 2, (1, 0, 0)), 3) == [
        "sum of accepted_per_pos 1 != accepted 2"
    ]
    assert acceptance.check_consistency(SpecCounters(1, 4, 0, (0, 0, 0)), 3) == ["draft tokens 4 > k·drafts 3"]
    assert acceptance.check_consistency(SpecCounters(1, 3, 1, (1, 0, 0, 0)), 3) == [
        "accepted_per_pos has 4 positions > k 3"
    ]


def test_acceptance_length_and_low_al_bar():
    assert acceptance.acceptance_length(TEN_STEPS) == pytest.approx(2.3)
    assert acceptance.acceptance_length(SpecCounters()) is None
    assert acceptance.LOW_AL_THRESHOLD == 1.3  # docs/failure-kinds.md F13: "warn below 1.3"
    assert acceptance.low_acceptance_length(1.29) and not acceptance.low_acceptance_length(1.3)
    assert not acceptance.low_acceptance_length(None)  # undefined is not low


def test_regression_is_relative_to_the_reference():
    assert acceptance.DEFAULT_AL_TOLERANCE == 0.05  # vLLM's test_acceptance_length.py rtol
    assert acceptance.relative_change(1.8, 2.0) == pytest.approx(-0.1)
    assert not acceptance.regressed(1.9, 2.0)  # exactly 5 % lower: at the bar, not below it
    assert acceptance.regressed(1.89, 2.0) and not acceptance.regressed(2.5, 2.0)
    assert acceptance.regressed(1.95, 2.0, tolerance=0.01) and not acceptance.regressed(2.0, 2.0, tolerance=0.0)


class _M:
    def __init__(self, name, value=None, values=None):
        self.name, self.value, self.values = name, value, values


def test_counters_from_metrics_sums_engines_and_ignores_others():
    snap = [
        _M("vllm:spec_decode_num_drafts", 4),
        _M("vllm:spec_decode_num_drafts", 6),
        _M("vllm:spec_decode_num_draft_tokens", 30),
        _M("vllm:spec_decode_num_accepted_tokens", 13),
        _M("vllm:spec_decode_num_accepted_tokens_per_pos", values=[5, 4, 2]),
        _M("vllm:spec_decode_num_accepted_tokens_per_pos", values=[2, 0, 0]),
        _M("vllm:generation_tokens", 999),
    ]
    assert counters_from_metrics(snap) == TEN_STEPS
    assert counters_from_metrics([]) == SpecCounters(0, 0, 0, ())


def test_a_handful_of_drafts_is_no_evidence_of_a_dead_drafter():
    few = SpecCounters(acceptance.MIN_DRAFTS_TO_JUDGE - 1, 3 * (acceptance.MIN_DRAFTS_TO_JUDGE - 1), 0, (0, 0, 0))
    assert not acceptance.drafter_not_wired(few)
    enough = SpecCounters(acceptance.MIN_DRAFTS_TO_JUDGE, 3 * acceptance.MIN_DRAFTS_TO_JUDGE, 0, (0, 0, 0))
    assert acceptance.drafter_not_wired(enough)
