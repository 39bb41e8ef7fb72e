"""The step-cost model of ``eaglehub tune``: the wall time of one engine step by batch size b and k,
fitted to timings measured on the engine that will serve (:mod:`eaglehub.tune.worker`).

Model (milliseconds; every term is a cost vLLM's step pays, none depends on acceptance)::

    target(b, n) = a + g·b + c·b·(n − 1)        the target's forward over n tokens for each of b requests
    drafter(b)   = d + e·b                      one drafter forward for b requests
    step(b, 0)   = target(b, 1)                 plain decoding
    step(b, k)   = target(b, k + 1) + s + k·drafter(b)        k ≥ 1

a: fixed cost of a step (scheduling, launch); g: per request (its token, sampling, output handling);
c: per extra token a request verifies; s: per speculative step (rejection sampling, draft set-up);
d, e: the drafter's forward, fixed and per request.

Two measurements, both timed step by step:

* **c from the target alone**: the target's forward over n = 1 … K + 1 new tokens for b requests behind a
  cached prefix (:func:`eaglehub.tune.worker.time_extends`), fitted as x0 + x1·b + c·b·n. Without it the
  extra verified tokens and the drafter's rows would both grow as k·b and could not be told apart.
* **a, g, s, d, e from the decode steps** of every engine (k = 0 … K), with c·b·k taken out, fitted by
  non-negative least squares on *relative* residuals (a 20 ms and a 200 ms cell weigh alike; no cost can
  turn negative, which would let the schedule buy throughput by drafting more).

The residual of every cell, decode and target forward, is kept and printed. Costs read from a file that has
no target cells (none measured) keep c at 0 and e carries the verified tokens too; the model says so.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

from eaglehub.errors import EaglehubError

SCHEMA = "tune-costs"
VERSION = 1
PARAMS = ("a", "g", "c", "s", "d", "e")
STEP_PARAMS = ("a", "g", "s", "d", "e")
"""The coefficients fitted on the decode steps (c comes from the target's timed forwards)."""
PARAM_MEANING = {
    "a": "ms per step, fixed (scheduling, launch)",
    "g": "ms per request per step (its token, sampling, output handling)",
    "c": "ms per extra verified token per request (from the target's timed forwards)",
    "s": "ms per speculative step (rejection sampling, draft set-up)",
    "d": "ms per drafter forward, fixed",
    "e": "ms per drafter forward per request",
}
FORMULA = (
    "target(b,n) = a + g*b + c*b*(n-1); drafter(b) = d + e*b; step(b,k) = target(b,k+1) + [k>0]*(s + k*drafter(b)) ms"
)
MIN_STEPS = 3
"""Decode steps a (b, k) cell needs before its mean enters the fit."""


@dataclass(frozen=True)
class Cell:
    """The measured decode steps of one (batch size, k): ``steps`` count, ``mean_ms`` their wall milliseconds
    (:func:`cells_from_steps`), ``predicted_ms`` the fitted model's value (``None`` before the fit)."""

    batch: int
    k: int
    steps: int
    mean_ms: float
    predicted_ms: float | None = None

    @property
    def residual(self) -> float | None:
        """(measured − predicted) / predicted."""
        return None if self.predicted_ms is None else self.mean_ms / self.predicted_ms - 1.0


def features(b: int, k: int) -> list[float]:
    """The decode-step design row for (b, k), in :data:`STEP_PARAMS` order (c·b·k taken out beforehand)."""
    spec = 1.0 if k > 0 else 0.0
    return [1.0, float(b), spec, float(k), float(k * b)]


@dataclass(frozen=True)
class TargetCell:
    """The target's forward over ``tokens`` new tokens for each of ``batch`` requests: ``repeats`` timings,
    ``mean_ms`` their median, ``predicted_ms`` the fit x0 + x1·b + c·b·n."""

    batch: int
    tokens: int
    repeats: int
    mean_ms: float
    predicted_ms: float | None = None

    @property
    def residual(self) -> float | None:
        return None if self.predicted_ms is None else self.mean_ms / self.predicted_ms - 1.0


@dataclass(frozen=True)
class CostModel:
    """Fitted coefficients (ms, :data:`PARAMS`), the cells they were fitted on, and where they were measured:
    ``engine`` ({name, version, profile}), ``machine`` ({device, cpus, ...}), ``context`` (target, drafter,
    prompts, max tokens, dtype: what the step times depend on)."""

    params: dict[str, float]
    cells: tuple[Cell, ...]
    engine: dict = field(default_factory=dict)
    machine: dict = field(default_factory=dict)
    context: dict = field(default_factory=dict)
    target_cells: tuple[TargetCell, ...] = ()
    target_fit: dict = field(default_factory=dict)

    def target_ms(self, b: int, n: int) -> float:
        """The target's forward within a step, over ``n`` tokens for each of ``b`` requests."""
        p = self.params
        return p["a"] + p["g"] * b + p.get("c", 0.0) * b * (n - 1)

    def drafter_ms(self, b: int) -> float:
        """One drafter forward for ``b`` requests."""
        return self.params["d"] + self.params["e"] * b

    def step_ms(self, b: int, k: int) -> float:
        """One engine step at batch size ``b`` with ``k`` draft tokens (0: plain decoding, no drafter loaded)."""
        spec = self.params["s"] + k * self.drafter_ms(b) if k > 0 else 0.0
        return self.target_ms(b, k + 1) + spec

    def scheduled_step_ms(self, b: int, k: int) -> float:
        """A step under a k schedule: as :meth:`step_ms`, except that at k 0 the drafter still runs its first
        forward over the verified tokens, to keep its KV cache in step (vllm 0.32.0
        ``v1/spec_decode/llm_base_proposer.py`` L612-620: "No draft tokens requested (e.g. Dynamic SD decided K=0).
        The prefill forward pass above already ran"): k 0 in a schedule is not the target alone."""
        return self.step_ms(b, k) if k > 0 else self.target_ms(b, 1) + self.drafter_ms(b)

    @property
    def ks(self) -> list[int]:
        return sorted({c.k for c in self.cells})

    @property
    def batches(self) -> list[int]:
        return sorted({c.batch for c in self.cells})

    @property
    def levels(self) -> list[int]:
        """The concurrency levels measured: batch sizes with plain decoding and speculation both timed (a level's
        passes also time the smaller batches of their start and drain)."""
        with_k = {c.batch for c in self.cells if c.k > 0}
        both = sorted({c.batch for c in self.cells if c.k == 0} & with_k)
        return both or self.batches

    def max_abs_residual(self) -> float:
        return max((abs(c.residual) for c in self.cells if c.residual is not None), default=0.0)

    def to_dict(self) -> dict:
        return {
            "schema": SCHEMA,
            "version": VERSION,
            "formula": FORMULA,
            "params_ms": dict(self.params),
            "param_meaning": PARAM_MEANING,
            "cells": [
                {
                    "batch": c.batch,
                    "k": c.k,
                    "steps": c.steps,
                    "mean_ms": c.mean_ms,
                    "predicted_ms": c.predicted_ms,
                    "residual": c.residual,
                }
                for c in self.cells
            ],
            "max_abs_residual": self.max_abs_residual(),
            "target_cells": [
                {
                    "batch": c.batch,
                    "tokens": c.tokens,
                    "repeats": c.repeats,
                    "mean_ms": c.mean_ms,
                    "predicted_ms": c.predicted_ms,
                    "residual": c.residual,
                }
                for c in self.target_cells
            ],
            "target_fit_ms": dict(self.target_fit),
            "engine": self.engine,
            "machine": self.machine,
            "context": self.context,
        }

    @classmethod
    def from_dict(cls, d: dict) -> CostModel:
        cells = tuple(Cell(c["batch"], c["k"], c["steps"], c["mean_ms"], c.get("predicted_ms")) for c in d["cells"])
        targets = tuple(
            TargetCell(c["batch"], c["tokens"], c["repeats"], c["mean_ms"], c.get("predicted_ms"))
            for c in d.get("target_cells", ())
        )
        return cls(
            dict(d["params_ms"]),
            cells,
            d.get("engine", {}),
            d.get("machine", {}),
            d.get("context", {}),
            targets,
            dict(d.get("target_fit_ms", {})),
        )


def cells_from_steps(steps: Iterable[tuple[int, int, int, float]]) -> list[Cell]:
    """Group ``(batch, k, repeat, seconds)`` decode steps into cells: a cell's time is the median over the
    repeats of each repeat's mean step time (the mean within a repeat, as throughput is tokens over total
    time; the median across repeats, so a spell of contention from another process on the machine does not
    become the engine's cost). Cells with fewer than :data:`MIN_STEPS` steps are dropped."""
    grouped: dict[tuple[int, int], dict[int, list[float]]] = {}
    for b, k, rep, seconds in steps:
        grouped.setdefault((b, k), {}).setdefault(rep, []).append(seconds * 1e3)
    cells = []
    for (b, k), reps in sorted(grouped.items()):
        n = sum(len(v) for v in reps.values())
        if n >= MIN_STEPS:
            cells.append(Cell(b, k, n, statistics.median(statistics.fmean(v) for v in reps.values())))
    return cells


def target_cells_from(extends: Iterable[tuple[int, int, int, float]]) -> list[TargetCell]:
    """Group ``(b, n, repeat, seconds)`` target forwards into cells: the median over the repeats."""
    grouped: dict[tuple[int, int], list[float]] = {}
    for b, n, _rep, seconds in extends:
        grouped.setdefault((b, n), []).append(seconds * 1e3)
    return [TargetCell(b, n, len(v), statistics.median(v)) for (b, n), v in sorted(grouped.items())]


def _nnls_relative(rows: list[list[float]], measured: list[float]) -> list[float]:
    import numpy as np
    from scipy.optimize import nnls

    a = np.array([[x / m for x in row] for row, m in zip(rows, measured)])
    coef, _ = nnls(a, np.ones(len(rows)))
    return [float(v) for v in coef]


def fit_target(cells: list[TargetCell]) -> tuple[dict, list[TargetCell]]:
    """x0 + x1·b + c·b·n over the target's timed forwards; ``({}, cells)`` when they cannot fix c (fewer than
    three cells, or one n only)."""
    if len(cells) < 3 or len({c.tokens for c in cells}) < 2:
        return {}, cells
    x0, x1, c = _nnls_relative(
        [[1.0, float(t.batch), float(t.batch * t.tokens)] for t in cells], [t.mean_ms for t in cells]
    )
    fitted = [
        TargetCell(t.batch, t.tokens, t.repeats, t.mean_ms, x0 + x1 * t.batch + c * t.batch * t.tokens) for t in cells
    ]
    return {"x0": x0, "x1": x1, "c": c}, fitted


def fit(
    cells: list[Cell],
    engine: dict | None = None,
    machine: dict | None = None,
    context: dict | None = None,
    target_cells: list[TargetCell] | None = None,
) -> CostModel:
    """Fit the model (module doc) and return the :class:`CostModel` with each cell's prediction.

    Raises:
        EaglehubError: fewer decode cells than coefficients, or none with k = 0 or none with k > 0 (exit 1: the
            measurement did not cover what the model needs).
    """
    if len(cells) < len(STEP_PARAMS) or not any(c.k == 0 for c in cells) or not any(c.k > 0 for c in cells):
        have = ", ".join(f"(b={c.batch}, k={c.k})" for c in cells) or "none"
        raise EaglehubError(
            f"the cost model needs at least {len(STEP_PARAMS)} measured (batch size, k) cells with k = 0 and k > 0; "
            f"measured: {have}",
            hint="measure more concurrency levels (e.g. --concurrency 1,2,4,8) or more prompts (--limit)",
            exit_code=1,
        )
    target_fit, fitted_targets = fit_target(list(target_cells or []))
    c = target_fit.get("c", 0.0)
    coef = _nnls_relative(
        [features(x.batch, x.k) for x in cells],
        [max(x.mean_ms - c * x.batch * x.k, 1e-6) for x in cells],
    )
    params = {**dict(zip(STEP_PARAMS, coef)), "c": c}
    params = {name: params[name] for name in PARAMS}
    model = CostModel(params, (), engine or {}, machine or {}, context or {})
    fitted = tuple(Cell(x.batch, x.k, x.steps, x.mean_ms, model.step_ms(x.batch, x.k)) for x in cells)
    return CostModel(params, fitted, model.engine, model.machine, model.context, tuple(fitted_targets), target_fit)


def finite(x: float) -> bool:
    return isinstance(x, float | int) and math.isfinite(x)
