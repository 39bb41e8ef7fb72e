"""The step-cost model of ``eaglehub tune``: the wall time of one engine step by batch size b and k,
fitted to step timings measured on the engine that will serve (:mod:`eaglehub.tune.worker`).

Model (milliseconds; every term is a cost vLLM's step pays, none depends on acceptance)::

    step(b, 0) = a + g·b                                  plain decoding: one target forward, 1 token each
    step(b, k) = a + g·b + s + k·(d + e·b)                k ≥ 1

a: fixed cost of a step (scheduling, launch); g: per request (one target token, sampling, output
handling); s: per speculative step (rejection sampling, draft set-up); d: per draft token, fixed (one
drafter forward's launch and weights); e: per draft token and request (one more verified token in the
target forward, one more drafter row). A step with k draft tokens verifies k + 1 tokens per request and
runs k drafter forwards: the target's extra tokens and the drafter's rows both grow as k·b, so step times
alone cannot tell them apart, and the model does not pretend to; e is their sum.

The five coefficients are fitted by non-negative least squares on *relative* residuals over the step time
of each measured (b, k) cell (:func:`cells_from_steps`) (``scipy.optimize.nnls``), so a 20 ms cell and a 200 ms cell weigh alike,
and no coefficient can turn negative (a negative cost would let the schedule buy throughput by drafting
more). The residual of every cell is kept and printed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

from eaglehub.errors import EaglehubError

SCHEMA = "tune-costs"
VERSION = 1
PARAMS = ("a", "g", "s", "d", "e")
PARAM_MEANING = {
    "a": "ms per step, fixed (scheduling, launch)",
    "g": "ms per request per step (one target token, sampling, output handling)",
    "s": "ms per speculative step (rejection sampling, draft set-up)",
    "d": "ms per draft token, fixed (one drafter forward)",
    "e": "ms per draft token per request (one more verified token, one more drafter row)",
}
FORMULA = "step(b,k) = a + g*b + [k>0]*(s + k*(d + e*b)) ms"
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
    """The model's design row for (b, k), in :data:`PARAMS` order."""
    spec = 1.0 if k > 0 else 0.0
    return [1.0, float(b), spec, float(k), float(k * b)]


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

    def plain_ms(self, b: int) -> float:
        """One plain decoding step (the target alone, one token for each of ``b`` requests)."""
        return self.params["a"] + self.params["g"] * b

    def draft_token_ms(self, b: int) -> float:
        """What one more draft token adds to a step of ``b`` requests."""
        return self.params["d"] + self.params["e"] * b

    def step_ms(self, b: int, k: int) -> float:
        """One engine step at batch size ``b`` with ``k`` draft tokens (0: plain decoding)."""
        spec = self.params["s"] + k * self.draft_token_ms(b) if k > 0 else 0.0
        return self.plain_ms(b) + spec

    @property
    def ks(self) -> list[int]:
        return sorted({c.k for c in self.cells})

    @property
    def batches(self) -> list[int]:
        return sorted({c.batch for c in self.cells})

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
            "engine": self.engine,
            "machine": self.machine,
            "context": self.context,
        }

    @classmethod
    def from_dict(cls, d: dict) -> CostModel:
        cells = tuple(Cell(c["batch"], c["k"], c["steps"], c["mean_ms"], c.get("predicted_ms")) for c in d["cells"])
        return cls(dict(d["params_ms"]), cells, d.get("engine", {}), d.get("machine", {}), d.get("context", {}))


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


def fit(cells: list[Cell], engine: dict | None = None, machine: dict | None = None, context: dict | None = None):
    """Fit :data:`PARAMS` to ``cells`` (module doc) and return the :class:`CostModel` with each cell's prediction.

    Raises:
        EaglehubError: fewer cells than coefficients, or no cell with k = 0 and none with k > 0 (exit 1:
            the measurement did not cover what the model needs).
    """
    import numpy as np
    from scipy.optimize import nnls

    if len(cells) < len(PARAMS) or not any(c.k == 0 for c in cells) or not any(c.k > 0 for c in cells):
        have = ", ".join(f"(b={c.batch}, k={c.k})" for c in cells) or "none"
        raise EaglehubError(
            f"the cost model needs at least {len(PARAMS)} measured (batch size, k) cells with k = 0 and k > 0; "
            f"measured: {have}",
            hint="measure more concurrency levels (e.g. --concurrency 1,2,4,8) or more prompts (--limit)",
            exit_code=1,
        )
    a = np.array([[x / c.mean_ms for x in features(c.batch, c.k)] for c in cells])
    coef, _ = nnls(a, np.ones(len(cells)))
    params = {name: float(v) for name, v in zip(PARAMS, coef)}
    model = CostModel(params, (), engine or {}, machine or {}, context or {})
    fitted = tuple(Cell(c.batch, c.k, c.steps, c.mean_ms, model.step_ms(c.batch, c.k)) for c in cells)
    return CostModel(params, fitted, model.engine, model.machine, model.context)


def finite(x: float) -> bool:
    return isinstance(x, float | int) and math.isfinite(x)
