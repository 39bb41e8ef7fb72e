"""The speedup model: expected acceptance length and speedup from the per-token acceptance rate and forward costs (docs/speedup.md §1)."""

from __future__ import annotations

import math

PAPER = "Leviathan et al. 2023, arXiv 2211.17192"


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k (num_speculative_tokens) must be an integer >= 1, got {k!r}")


def _check_alpha(alpha: float) -> None:
    if not 0.0 <= alpha <= 1.0:  # also refuses NaN
        raise ValueError(f"alpha must be an acceptance rate in [0, 1], got {alpha!r}")


def expected_al(alpha: float, k: int) -> float:
    """Expected acceptance length E[AL] = (1 − α^{k+1}) / (1 − α) for i.i.d. acceptance rate ``alpha``.

    Leviathan et al. 2023 (arXiv 2211.17192), eq. (1): the expected number of tokens one verify pass
    produces with γ = ``k`` draft tokens, bonus token included, so 1 ≤ E[AL] ≤ k + 1.

    Raises:
        ValueError: ``alpha`` outside [0, 1] or ``k`` < 1.
    """
    _check_alpha(alpha)
    _check_k(k)
    # the geometric sum equals the closed form and stays exact at alpha = 1, where the latter is 0/0
    return math.fsum(alpha**i for i in range(k + 1))


def implied_alpha(al: float, k: int) -> float:
    """The acceptance rate α ∈ [0, 1] whose :func:`expected_al` is the measured ``al``.

    Solves (1 − α^{k+1}) / (1 − α) = AL (docs/speedup.md §1; e.g. AL 2.60 at k = 3 ⇒ α ≈ 0.71) with
    ``scipy.optimize.brentq``; E[AL] is strictly increasing in α, so the root is unique. AL = 1 ⇒ 0,
    AL = k + 1 ⇒ 1.

    Raises:
        ValueError: ``al`` outside [1, k + 1] (or NaN), or ``k`` < 1.
    """
    from scipy.optimize import brentq

    _check_k(k)
    if not 1.0 <= al <= k + 1:
        raise ValueError(f"acceptance length must be in [1, k + 1] = [1, {k + 1}], got {al!r}")
    if al == 1.0:
        return 0.0
    if al == k + 1:
        return 1.0
    return float(brentq(lambda a: expected_al(a, k) - al, 0.0, 1.0, xtol=1e-14, rtol=1e-14))


def leviathan_speedup(alpha: float, k: int, c: float) -> float:
    """Expected walltime speedup S = (1 − α^{k+1}) / ((1 − α)(k·c + 1)).

    Leviathan et al. 2023 (arXiv 2211.17192), Theorem 3.8: γ = ``k`` drafts per verify, ``c`` =
    T_draft / T_target (cost of one drafter step over one target forward, ≥ 0), assuming the
    (k+1)-token verify costs one target forward. Example: α 0.8, k 3, c 0.05 ⇒ 2.57.

    Raises:
        ValueError: ``alpha`` outside [0, 1], ``k`` < 1, or ``c`` negative.
    """
    if not c >= 0.0:
        raise ValueError(f"c = T_draft / T_target must be >= 0, got {c!r}")
    return expected_al(alpha, k) / (k * c + 1.0)


def general_speedup(al: float, k: int, t_target_1: float, t_verify_k1: float, t_draft_1: float) -> float:
    """Expected speedup S = AL · T_target(1) / (T_verify(k+1) + k · T_draft(1)) (docs/speedup.md §1).

    The generalisation of :func:`leviathan_speedup` to a verify that costs other than one forward:
    plain decoding spends T_target(1) per token; speculation spends one (k+1)-token verify and k
    drafter steps per AL tokens. ``al``: measured acceptance length (tokens per verify, ≥ 1); the
    times in any one unit (they cancel), T_target(1) and T_verify(k+1) positive, T_draft(1) ≥ 0.

    Raises:
        ValueError: ``al`` < 1, ``k`` < 1, or a non-positive target / verify time, a negative draft time.
    """
    _check_k(k)
    if not al >= 1.0:
        raise ValueError(f"acceptance length must be >= 1, got {al!r}")
    if not (t_target_1 > 0.0 and t_verify_k1 > 0.0 and t_draft_1 >= 0.0):
        raise ValueError(f"times must be positive (draft: >= 0), got {t_target_1!r}, {t_verify_k1!r}, {t_draft_1!r}")
    return al * t_target_1 / (t_verify_k1 + k * t_draft_1)


def speedup_bound(k: int, v: float, c: float) -> float:
    """Upper bound S ≤ (k + 1) / (v + k·c): :func:`general_speedup` of a perfect drafter (AL = k + 1),
    with v = T_verify(k+1) / T_target(1) > 0 and c = T_draft(1) / T_target(1) ≥ 0 (docs/speedup.md §1).

    Raises:
        ValueError: ``k`` < 1, ``v`` ≤ 0 or ``c`` < 0.
    """
    _check_k(k)
    if not (v > 0.0 and c >= 0.0):
        raise ValueError(f"v must be > 0 and c >= 0, got v={v!r}, c={c!r}")
    return (k + 1) / (v + k * c)
