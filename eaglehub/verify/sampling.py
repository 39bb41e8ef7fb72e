"""Speculative sampling on toy distributions, and a goodness-of-fit test that a sampler is lossless.

The rule (Leviathan, Kalman & Matias 2023, "Fast Inference from Transformers via Speculative
Decoding", ICML 2023, Algorithm 1 and its correctness proof; Chen et al. 2023, "Accelerating Large
Language Model Decoding with Speculative Sampling", arXiv 2302.01318): with target probabilities
``p`` and draft probabilities ``q`` over the same vocabulary of ``V`` tokens,

* draw the draft token ``x ~ q``;
* accept it with probability ``min(1, p[x] / q[x])``;
* on rejection emit a token drawn from the residual ``norm(max(0, p − q))``
  = ``max(0, p − q) / Σ_v max(0, p_v − q_v)``.

The emitted token is then distributed exactly as ``p``, whatever ``q`` is; a draft is accepted with
probability ``β = Σ_v min(p_v, q_v) = 1 − TV(p, q)``. Two ways to break it (docs/failure-kinds.md F24):
the ratio uses a ``q`` other than the distribution the draft was actually sampled from, or the
residual is ``p`` (or anything but ``norm(max(0, p − q))``). Both bias the output (quality loss at
T > 0); :func:`sampling_test` detects them with a chi-square test on the emitted tokens.

Conventions: a distribution is a float array of shape ``[V]`` (non-negative, summing to 1 within
1e-6); token ids are int64 arrays with values in ``[0, V)``; every random draw comes from the
``numpy.random.Generator`` passed in, so a seed reproduces a result exactly. Shape or value errors
raise ``ValueError`` (programming errors: these functions are a library, not user input).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from eaglehub.findings import finding

Sampler = Callable[[np.ndarray, np.ndarray, int, np.random.Generator], np.ndarray]
"""``sampler(p, q, n, rng) -> tokens``: ``n`` independent trials, one emitted token id per trial (shape ``[n]``)."""

_SUM_TOL = 1e-6


def check_distribution(p, name: str = "p") -> np.ndarray:
    """``p`` as a float64 array ``[V]`` after checking it is a probability vector.

    Raises:
        ValueError: not 1-D, empty, non-finite or negative entries, or a sum other than 1 (± 1e-6).
    """
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D probability vector, got shape {p.shape}")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise ValueError(f"{name} must hold finite non-negative probabilities")
    if abs(p.sum() - 1.0) > _SUM_TOL:
        raise ValueError(f"{name} sums to {p.sum():.9g}, not 1")
    return p


def _pair(p, q) -> tuple[np.ndarray, np.ndarray]:
    p, q = check_distribution(p, "p"), check_distribution(q, "q")
    if p.shape != q.shape:
        raise ValueError(f"p and q cover different vocabularies: {p.shape} vs {q.shape}")
    return p, q


def sample_tokens(dist: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` token ids by inverse-CDF sampling.

    ``dist``: ``[V]`` (``n`` draws from one distribution) or ``[n, V]`` (one draw per row; rows are
    non-negative weights, normalised here). Zero-weight tokens are never drawn. Returns int64 ``[n]``.
    """
    cdf = np.cumsum(dist, axis=-1)
    u = rng.random(n) * cdf[..., -1]  # in [0, total): the first index with cdf > u always exists
    if cdf.ndim == 1:
        return np.searchsorted(cdf, u, side="right").astype(np.int64)
    if cdf.shape[0] != n:
        raise ValueError(f"{cdf.shape[0]} rows of weights for {n} draws")
    return (cdf <= u[:, None]).sum(axis=1).astype(np.int64)


def acceptance_probability(p: np.ndarray, q: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``min(1, p[x] / q[x])`` per draft token ``x`` (int ``[n]``), float ``[n]`` in [0, 1].

    Where ``q[x] = 0`` (only possible when ``x`` was not drawn from ``q``) the ratio is taken as
    infinite when ``p[x] > 0`` (accept) and 0 when ``p[x] = 0`` (never emit an impossible token).
    """
    px, qx = p[x], q[x]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(qx > 0, px / np.where(qx > 0, qx, 1.0), np.where(px > 0, np.inf, 0.0))
    return np.minimum(1.0, ratio)


def residual_distribution(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``norm(max(0, p − q))`` ``[V]``, the distribution a rejected draft is replaced from.

    When ``p == q`` the residual has no mass; rejection then has probability 0 in exact arithmetic
    (float rounding of ``p/q`` can still reject rarely), so ``p`` itself is returned, which keeps
    the output distributed as ``p``.
    """
    r = np.maximum(0.0, p - q)
    mass = r.sum()
    return r / mass if mass > 0 else p.copy()


def accept_or_resample(
    x: np.ndarray, accept_prob: np.ndarray, residual: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """The accept/reject step: keep draft ``x[i]`` with probability ``accept_prob[i]``, else draw a
    replacement from ``residual`` (``[V]``, or ``[n, V]``: one residual per trial).

    Returns ``(tokens int64 [n], accepted bool [n])``.
    """
    accepted = rng.random(x.shape[0]) < accept_prob
    tokens = x.astype(np.int64, copy=True)
    rejected = ~accepted
    if rejected.any():
        weights = residual if residual.ndim == 1 else residual[rejected]
        tokens[rejected] = sample_tokens(weights, int(rejected.sum()), rng)
    return tokens, accepted


class AcceptanceRule:
    """The accept/reject step an engine applies at temperature > 0: the standard rule of the module
    doc. The reference engine calls :meth:`acceptance_probability` and :meth:`residual` per draft
    position; :meth:`sample` applies the same two methods to ``n`` independent trials (a
    :data:`Sampler`), which is what :func:`sampling_test` checks. Subclasses that change either
    method model broken engines (tests plant a bias this way)."""

    name = "standard"

    def acceptance_probability(self, p: np.ndarray, q: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``min(1, p[x] / q[x])`` (:func:`acceptance_probability`)."""
        return acceptance_probability(p, q, x)

    def residual(self, p: np.ndarray, q: np.ndarray) -> np.ndarray:
        """``norm(max(0, p − q))`` (:func:`residual_distribution`)."""
        return residual_distribution(p, q)

    def sample(self, p, q, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` trials of one draft token ``x ~ q`` through this rule; emitted ids int64 ``[n]``."""
        p, q = _pair(p, q)
        x = sample_tokens(q, n, rng)
        return accept_or_resample(x, self.acceptance_probability(p, q, x), self.residual(p, q), rng)[0]


STANDARD_RULE = AcceptanceRule()


def speculative_sample(p, q, n: int, rng: np.random.Generator) -> np.ndarray:
    """The standard rule (module doc) for ``n`` independent trials of one draft token.

    ``p``, ``q``: target and draft distributions ``[V]``. Returns the emitted token ids, int64 ``[n]``,
    each distributed as ``p``. A :data:`Sampler`.
    """
    p, q = _pair(p, q)
    x = sample_tokens(q, n, rng)
    return accept_or_resample(x, acceptance_probability(p, q, x), residual_distribution(p, q), rng)[0]


def speculative_chain(ps, qs, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One verify step of a chain of ``k`` draft tokens, for ``n`` independent trials.

    ``ps``: target distributions ``[k + 1, V]`` for draft positions 0..k−1 and the bonus position k;
    ``qs``: draft distributions ``[k, V]``. Fixed per position (a toy: a real model conditions them on
    the prefix). Positions are verified in order with the rule of the module doc; the first rejection
    emits a residual token and ends the step; when all ``k`` are accepted a bonus token ``~ ps[k]``
    is emitted. Conditional on being reached, the token emitted at position ``i`` is ``~ ps[i]``.

    Returns ``(accepted, tokens)``: ``accepted`` int64 ``[n]`` in 0..k (vLLM's
    ``num_accepted_tokens`` per step, so AL = 1 + mean(accepted)); ``tokens`` int64 ``[n, k + 1]``,
    the ``accepted + 1`` emitted ids of each trial followed by −1.
    """
    ps, qs = np.asarray(ps, dtype=np.float64), np.asarray(qs, dtype=np.float64)
    if qs.ndim != 2 or ps.shape != (qs.shape[0] + 1, qs.shape[1]):
        raise ValueError(f"need ps [k+1, V] and qs [k, V], got {ps.shape} and {qs.shape}")
    k = qs.shape[0]
    tokens = np.full((n, k + 1), -1, dtype=np.int64)
    alive = np.ones(n, dtype=bool)  # every earlier position accepted
    for i in range(k):
        p, q = _pair(ps[i], qs[i])
        x = sample_tokens(q, n, rng)  # drawn for every trial, used where alive: keeps the step vectorised
        emitted, ok = accept_or_resample(x, acceptance_probability(p, q, x), residual_distribution(p, q), rng)
        tokens[alive, i] = emitted[alive]
        alive &= ok
    tokens[alive, k] = sample_tokens(check_distribution(ps[k], f"ps[{k}]"), int(alive.sum()), rng)
    accepted = (tokens >= 0).sum(axis=1) - 1
    return accepted, tokens


def expected_acceptance_length(ps, qs) -> float:
    """Expected AL of :func:`speculative_chain` (tokens per verify pass, bonus included).

    Position ``i`` is accepted with probability ``β_i = Σ_v min(ps[i, v], qs[i, v])`` given that it is
    reached, so AL = 1 + Σ_{i<k} Π_{j≤i} β_j; with every β_i = β this is Leviathan et al.'s expected
    number of tokens per step, (1 − β^{k+1}) / (1 − β).
    """
    betas = np.minimum(np.asarray(ps, dtype=np.float64)[: len(qs)], np.asarray(qs, dtype=np.float64)).sum(axis=1)
    return float(1.0 + np.cumprod(betas).sum())


def goodness_of_fit(tokens: np.ndarray, p, alpha: float = 1e-3) -> dict:
    """Chi-square goodness-of-fit of emitted ``tokens`` (int ``[n]``) against distribution ``p`` ``[V]``.

    Pearson's statistic Σ (observed − n·p)² / (n·p) over the tokens with ``p > 0``
    (``scipy.stats.chisquare``, ``V⁺ − 1`` degrees of freedom); a token with ``p = 0`` that was
    emitted is an outright failure (statistic inf, p-value 0). Also the total-variation distance
    TV = ½ Σ |observed/n − p| (a probability, 0–1; sampling noise alone gives about
    ½ Σ √(2 p (1 − p) / (π n))). The chi-square approximation wants every n·p ≳ 5.

    Returns a JSON-ready dict: ``statistic``, ``dof``, ``p_value``, ``tv``, ``trials`` (n),
    ``alpha``, ``passed`` (p-value ≥ alpha).

    Raises:
        ValueError: ``p`` is not a distribution, ``tokens`` is empty or holds ids outside [0, V).
    """
    from scipy.stats import chisquare

    p = check_distribution(p)
    tokens = np.asarray(tokens)
    n = int(tokens.size)
    if n == 0 or tokens.min() < 0 or tokens.max() >= p.size:
        raise ValueError(f"need at least one token id in [0, {p.size})")
    observed = np.bincount(tokens, minlength=p.size).astype(np.float64)
    tv = 0.5 * float(np.abs(observed / n - p).sum())
    support = p > 0
    dof = int(support.sum()) - 1
    if observed[~support].any():
        statistic, p_value = float("inf"), 0.0
    elif dof == 0:  # one possible token, always emitted
        statistic, p_value = 0.0, 1.0
    else:
        expected = n * p[support] / p[support].sum()
        statistic, p_value = (float(v) for v in chisquare(observed[support], expected))
    return {
        "statistic": statistic,
        "dof": dof,
        "p_value": p_value,
        "tv": tv,
        "trials": n,
        "alpha": alpha,
        "passed": p_value >= alpha,
    }


def sampling_test(
    sampler: Sampler,
    p,
    q,
    trials: int,
    rng: np.random.Generator,
    alpha: float = 1e-3,
    subject: str | None = None,
) -> dict:
    """Run ``sampler(p, q, trials, rng)`` and test that its emitted tokens are distributed as ``p``.

    ``alpha`` is the false-alarm probability of a correct sampler (with a fixed seed the outcome is
    deterministic). The power against a bias δ = emitted − p grows with ``trials`` · Σ δ²/p (the
    non-centrality of the chi-square): a 1 % change of the acceptance probability on the F24 toy
    needs ~10⁶ trials to be found reliably; 2·10⁵ trials find it only 20–40 % of the time.

    Returns :func:`goodness_of_fit`'s dict plus ``finding``: ``None`` when it passes, else an
    ``E-SAMPLING-BIASED`` finding as a dict (``subject``: the given one, else the sampler's name).
    """
    p, q = _pair(p, q)
    result = goodness_of_fit(sampler(p, q, trials, rng), p, alpha)
    result["finding"] = None
    if not result["passed"]:
        name = subject or str(getattr(sampler, "__name__", type(sampler).__name__))
        result["finding"] = finding(
            "E-SAMPLING-BIASED",
            name,
            f"emitted tokens are not distributed as the target p over {trials} trials: chi-square {result['statistic']:.1f} "
            f"({result['dof']} dof), p-value {result['p_value']:.3g} < alpha {alpha:g}; total variation {result['tv']:.4f}",
        ).as_dict()
    return result


BINNED_TEST = (
    "Pearson chi-square goodness of fit of the emitted tokens against the target p, on a partition of the "
    "vocabulary fixed before sampling: the {top} tokens of highest p each alone, the rest pooled by the sign "
    "of q - p (where a broken acceptance rule or residual moves mass); prefixes combined by summing "
    "statistics and degrees of freedom"
)


def vocabulary_bins(p, q, top: int = 8) -> np.ndarray:
    """Bin index per token ``[V]`` for :func:`binned_goodness_of_fit`: ``0..top−1`` the ``top``
    tokens of highest ``p``, then ``top`` for the other tokens with ``q > p`` and ``top + 1`` for
    the rest. Pooling keeps every expected count large (the chi-square approximation holds) and
    keeps the power of the test against a biased rule, which moves mass across ``q = p``."""
    p, q = _pair(p, q)
    bins = np.where(q > p, top, top + 1)
    bins[np.argsort(-p, kind="stable")[:top]] = np.arange(min(top, p.size))
    return bins


def binned_goodness_of_fit(tokens: np.ndarray, p, q, top: int = 8, alpha: float = 1e-3) -> dict:
    """Chi-square goodness of fit of ``tokens`` against ``p`` over :func:`vocabulary_bins` (bins
    with zero expected mass are dropped; a token emitted there is an outright failure).

    Returns :func:`goodness_of_fit`'s keys (``tv`` over the bins) plus ``bins`` (the count used).
    """
    p, q = _pair(p, q)
    bins = vocabulary_bins(p, q, top)
    nbins = int(bins.max()) + 1
    p_bin = np.bincount(bins, weights=p, minlength=nbins)
    tok_bin = bins[np.asarray(tokens)]
    result = goodness_of_fit(tok_bin, p_bin / p_bin.sum(), alpha)
    result["bins"] = int((p_bin > 0).sum())
    return result


def combine_tests(results: list[dict], alpha: float = 1e-3) -> dict:
    """Independent chi-square tests combined: statistic and dof summed, one p-value (scipy ``chi2.sf``)."""
    from scipy.stats import chi2

    statistic = float(sum(r["statistic"] for r in results))
    dof = int(sum(r["dof"] for r in results))
    p_value = 0.0 if not np.isfinite(statistic) else (float(chi2.sf(statistic, dof)) if dof else 1.0)
    return {
        "statistic": statistic,
        "dof": dof,
        "p_value": p_value,
        "alpha": alpha,
        "passed": p_value >= alpha,
    }
