"""``eaglehub speedup``: output tokens/s with and without an EAGLE-3 drafter at several concurrencies,
and the speedup that the measured acceptance predicts.

Throughput: two engine runs (target alone, target + drafter), same prompt token ids, greedy, same
batches. Each concurrency level c decodes its prompts in batches of exactly c (one engine group =
one ``llm.generate`` call, labels ``c{c}-{i}``), with ``max_num_seqs`` = the largest level, so
concurrency is c. A level's output tokens/s = its output tokens / the wall seconds of its batches
(:attr:`~eaglehub.engines.base.RunResult.group_seconds`); a one-prompt warm-up batch runs first and
is left out, so one-time start-up work does not land on the first level.

Prediction (Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding",
arXiv 2211.17192, §3.1 and Theorem 3.8; Chen et al. 2023, arXiv 2302.01318;
docs/speedup.md §1), with α the per-token acceptance rate, k = ``num_speculative_tokens`` and
AL = 1 + accepted / drafts (bonus token included, :mod:`eaglehub.measure.acceptance`):

* E[AL] = (1 − α^{k+1}) / (1 − α)                         (:func:`expected_al`; inverse :func:`implied_alpha`)
* S = (1 − α^{k+1}) / ((1 − α)(k·c + 1)), c = T_draft / T_target   (:func:`leviathan_speedup`)
* S = AL · T_target(1) / (T_verify(k+1) + k · T_draft(1))        (:func:`general_speedup`)
* S ≤ (k + 1) / (v + k·c), v = T_verify(k+1) / T_target(1)         (:func:`speedup_bound`)

The costs T are measured in PyTorch in this process (:func:`measure_costs`, batch 1). Leviathan's
formula assumes a (k+1)-token verify costs one target forward (v = 1, a memory-bound GPU); on a CPU
v ≈ 1.7 (docs/speedup.md §1), so CPU speedups are not GPU speedups.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from eaglehub import __version__
from eaglehub.engines.base import Engine, RunResult, RunSpec, SpecCounters
from eaglehub.errors import EaglehubError
from eaglehub.formats.registry import read_drafter
from eaglehub.io.schemas import check_output, write_output
from eaglehub.measure import acceptance
from eaglehub.measure.prompts import default_prompts_path, load_prompts
from eaglehub.speedup.costs import DEFAULT_PREFIX_TOKENS, DEFAULT_REPEATS, Costs, measure_costs
from eaglehub.speedup.model import PAPER, general_speedup, implied_alpha, leviathan_speedup, speedup_bound

REPORT_SCHEMA = "speedup-report"
REPORT_VERSION = 1
DEFAULT_CONCURRENCY = (1, 4, 16)
WARMUP_GROUP = "warmup"

DEFINITIONS = {
    "concurrency": "prompts decoded together: each batch of a level is one llm.generate call of exactly that many "
    "prompts (max_num_seqs = the largest level); prompts are cycled to fill the last batch",
    "output_tokens_per_second": "output tokens of a level's batches / wall seconds of their generate calls "
    "(model loading and the warm-up batch excluded); tokens per second",
    "measured_speedup": "output_tokens_per_second with the drafter / without it (dimensionless); greedy outputs are "
    "token-identical, so this is the ratio of generate wall times",
    "acceptance_length": acceptance.AL_DEFINITION,
    "implied_alpha": "per-token acceptance rate alpha in [0, 1] solving (1 - alpha^(k+1)) / (1 - alpha) = AL "
    f"(i.i.d. acceptance, {PAPER}); scipy.optimize.brentq",
    "expected_speedup_leviathan": "S = (1 - alpha^(k+1)) / ((1 - alpha)(k*c + 1)) with the implied alpha and the "
    f"measured c ({PAPER}, Theorem 3.8); assumes a (k+1)-token verify costs one target "
    "forward (v = 1)",
    "expected_speedup_general": "S = AL * T_target(1) / (T_verify(k+1) + k * T_draft(1)) with the measured AL and costs "
    "(docs/verification.md section 6)",
    "speedup_bound": "(k + 1) / (v + k*c): the expected speedup of a perfect drafter (AL = k + 1)",
    "t_target_1_ms": "median wall milliseconds of one target forward of 1 new token on a KV cache of prefix_tokens "
    "tokens (PyTorch, batch 1, logits included)",
    "t_verify_k1_ms": "median wall milliseconds of one target forward of k + 1 new tokens on the same KV cache",
    "t_draft_1_ms": "median wall milliseconds of one drafter step: fc fusion of the aux hidden states, the decoder "
    "layer over the prefix_tokens-token KV cache, lm_head, argmax, d2t (PyTorch, batch 1)",
    "c": "T_draft(1) / T_target(1) (dimensionless)",
    "v": "T_verify(k+1) / T_target(1) (dimensionless): about 1 on a memory-bound GPU",
}


# --- formulas --------------------------------------------------------------------------------------


# --- cost measurement (PyTorch) --------------------------------------------------------------------


# --- throughput plan and assembly ------------------------------------------------------------------


MAX_CONCURRENCY = 1024
"""Far above vLLM's default ``max_num_seqs`` (256): a larger level would only queue."""


def parse_concurrency(text: str) -> list[int]:
    """``"1,4,16"`` → ``[1, 4, 16]``: distinct integers ≥ 1, in ascending order.

    Raises:
        EaglehubError: an empty list, a part that is not an integer, a level below 1 or a repeat (exit 2).
    """
    hint = "give a comma-separated list of concurrency levels, e.g. --concurrency 1,4,16"
    parts = [p.strip() for p in str(text).split(",")]
    if not any(parts):
        raise EaglehubError("--concurrency is empty", hint=hint)
    levels = []
    for p in parts:
        if not (p.isascii() and p.isdigit()) or not 1 <= int(p) <= MAX_CONCURRENCY:
            raise EaglehubError(f"--concurrency {text!r}: {p!r} is not an integer in [1, {MAX_CONCURRENCY}]", hint=hint)
        levels.append(int(p))
    if len(set(levels)) != len(levels):
        raise EaglehubError(f"--concurrency {text!r} repeats a level", hint=hint)
    return sorted(levels)


@dataclass(frozen=True)
class Plan:
    """The engine input of a speedup run: ``order[i]`` is the prompt index of engine input i,
    ``groups[i]`` its batch label (:data:`WARMUP_GROUP`, then ``c{c}-{j}``); ``levels`` maps each
    concurrency to its batch labels, in order."""

    order: list[int]
    groups: list[str]
    levels: dict[int, list[str]] = field(default_factory=dict)

    def positions(self, level: int) -> list[int]:
        """Engine input indices of ``level``'s batches."""
        labels = set(self.levels[level])
        return [i for i, g in enumerate(self.groups) if g in labels]


def plan_batches(num_prompts: int, concurrency: Sequence[int]) -> Plan:
    """Batches of exactly c prompts per level c: the prompts, cycled to ⌈n / c⌉ · c (≥ c) so the last
    batch is full, after a warm-up batch of prompt 0.

    Raises:
        ValueError: ``num_prompts`` < 1 or a level < 1.
    """
    if num_prompts < 1 or any(c < 1 for c in concurrency):
        raise ValueError(f"need at least one prompt and levels >= 1, got {num_prompts}, {list(concurrency)}")
    order, groups, levels = [0], [WARMUP_GROUP], {}
    for c in concurrency:
        n = math.ceil(num_prompts / c) * c
        levels[c] = [f"c{c}-{j}" for j in range(n // c)]
        order += [j % num_prompts for j in range(n)]
        groups += [f"c{c}-{j // c}" for j in range(n)]
    return Plan(order, groups, levels)


def _throughput(result: RunResult, labels: list[str], positions: list[int]) -> dict:
    missing = [g for g in labels if g not in result.group_seconds]
    if missing:
        raise EaglehubError(
            f"engine {result.engine or '?'} did not time batch {missing[0]}",
            hint="speedup needs an engine that records RunResult.group_seconds (the vLLM engine does)",
            exit_code=1,
        )
    seconds = math.fsum(result.group_seconds[g] for g in labels)
    tokens = sum(len(result.outputs[i]) for i in positions)
    return {
        "generate_seconds": seconds,
        "output_tokens": tokens,
        "output_tokens_per_second": tokens / seconds if seconds > 0 else None,
    }


def level_report(level: int, plan: Plan, baseline: RunResult, run: RunResult, k: int, costs: Costs) -> dict:
    """One concurrency level: throughput without / with the drafter, measured speedup, acceptance
    (over the level's batches) and the expected speedups (``DEFINITIONS``).

    Raises:
        EaglehubError: an engine did not time the level's batches, or its counters break
            :func:`~eaglehub.measure.acceptance.check_consistency` (exit 1).
    """
    labels, positions = plan.levels[level], plan.positions(level)
    alone, spec = _throughput(baseline, labels, positions), _throughput(run, labels, positions)
    counters = acceptance.total(run.group_counters.get(g, SpecCounters()) for g in labels)
    problems = acceptance.check_consistency(counters, k)
    if problems:
        raise EaglehubError(
            f"concurrency {level}: the engine's speculative-decoding counters are inconsistent: " + "; ".join(problems),
            hint="an engine bug: report it with the engine version",
            exit_code=1,
        )
    al = acceptance.acceptance_length(counters)
    alpha = None if al is None else implied_alpha(al, k)
    a, b = alone["output_tokens_per_second"], spec["output_tokens_per_second"]
    return {
        "concurrency": level,
        "batches": len(labels),
        "prompts": len(positions),
        "prompts_token_identical": sum(baseline.outputs[i] == run.outputs[i] for i in positions),
        "target_alone": alone,
        "with_drafter": spec,
        "measured_speedup": b / a if a and b is not None else None,
        "acceptance": acceptance.acceptance_stats(counters),
        "implied_alpha": alpha,
        "expected_speedup_leviathan": None if alpha is None else leviathan_speedup(alpha, k, costs.c),
        "expected_speedup_general": None
        if al is None
        else general_speedup(al, k, costs.t_target_1_ms, costs.t_verify_k1_ms, costs.t_draft_1_ms),
    }


def notes(costs: Costs, k: int) -> list[str]:
    """What the numbers do not say: the CPU caveat (docs/speedup.md §1), batch-1 costs, prefix caching."""
    out = []
    if costs.device == "cpu":
        out.append(
            f"CPU speedups are not GPU speedups: here a (k+1)-token verify costs v = {costs.v:.2f} single-token "
            "forwards (docs/verification.md section 6: about 1.7 on a 2-core CPU, about 1 on a memory-bound GPU), so "
            f"even a perfect drafter gets at most {speedup_bound(k, costs.v, costs.c):.2f}x at k = {k} here; use CPU "
            "runs for correctness and acceptance length, not speedup claims"
        )
    out.append(
        "the costs T are batch-1 forwards; at concurrency > 1 the expected speedups are that batch-1 "
        "prediction, while a larger batch makes the target more compute-bound and speculation less profitable"
    )
    out.append(
        "prompts repeat across levels (and within a level when it has more slots than prompts); engine "
        "prefix caching can make their prefill cheaper, equally for both runs"
    )
    return out


# --- the verb --------------------------------------------------------------------------------------


@dataclass
class SpeedupOptions:
    """Inputs of one speedup run (see ``eaglehub speedup --help`` for units and defaults)."""

    target: str
    drafter: str
    k: int = 3
    concurrency: list[int] = field(default_factory=lambda: list(DEFAULT_CONCURRENCY))
    max_tokens: int = 64
    prompts_file: str | None = None
    limit: int | None = None
    dtype: str = "float32"
    seed: int = 0
    max_model_len: int = 2048
    prefix_tokens: int = DEFAULT_PREFIX_TOKENS
    repeats: int = DEFAULT_REPEATS


def check_options(opts: SpeedupOptions) -> None:
    """Refuse bad options before any model work.

    Raises:
        EaglehubError: k, max tokens, repeats or prefix tokens below 1, an empty or bad concurrency
            list, or a prefix that does not fit ``max_model_len`` with k + 1 more tokens (exit 2).
    """
    for name, value in (
        ("-k", opts.k),
        ("--max-tokens", opts.max_tokens),
        ("--repeats", opts.repeats),
        ("--prefix-tokens", opts.prefix_tokens),
    ):
        if value < 1:
            raise EaglehubError(f"{name} must be at least 1, got {value}")
    if (
        not opts.concurrency
        or any(c < 1 for c in opts.concurrency)
        or len(set(opts.concurrency)) != len(opts.concurrency)
    ):
        raise EaglehubError(
            f"concurrency levels must be distinct integers >= 1, got {opts.concurrency}",
            hint="e.g. --concurrency 1,4,16",
        )
    if opts.prefix_tokens + opts.k + 1 > opts.max_model_len:
        raise EaglehubError(f"--prefix-tokens {opts.prefix_tokens} + k + 1 exceeds max_model_len {opts.max_model_len}")


def build_report(
    opts: SpeedupOptions,
    target: Path,
    drafter: Path,
    prompts_file: Path,
    prompts: list,
    plan: Plan,
    baseline: RunResult,
    run: RunResult,
    costs: Costs,
) -> dict:
    """Assemble the report (schema ``schemas/speedup-report.schema.json``)."""
    from eaglehub.engines.vllm_engine import serve_command

    levels = sorted(plan.levels)
    categories: dict[str, int] = {}
    for p in prompts:
        categories[p.category] = categories.get(p.category, 0) + 1
    return {
        "report_version": REPORT_VERSION,
        "tool": {"name": "eaglehub", "version": __version__},
        "engine": {"name": baseline.engine, "version": baseline.engine_version},
        "target": {"spec": opts.target, "path": str(target)},
        "drafter": str(drafter),
        "settings": {
            "num_speculative_tokens": opts.k,
            "max_tokens": opts.max_tokens,
            "dtype": opts.dtype,
            "temperature": 0.0,
            "seed": opts.seed,
            "max_model_len": opts.max_model_len,
            "concurrency": levels,
            "max_num_seqs": max(levels),
            "batching": "per level c, batches of exactly c prompts, one generate call each, after a "
            "one-prompt warm-up batch; identical for both runs",
        },
        "prompts": {
            "file": str(prompts_file),
            "sha256": hashlib.sha256(prompts_file.read_bytes()).hexdigest(),
            "count": len(prompts),
            "categories": categories,
        },
        "costs": costs.to_dict(),
        "speedup_bound": speedup_bound(opts.k, costs.v, costs.c),
        "levels": [level_report(c, plan, baseline, run, opts.k, costs) for c in levels],
        "load_seconds": {"target_alone": baseline.load_seconds, "with_drafter": run.load_seconds},
        "definitions": DEFINITIONS,
        "notes": notes(costs, opts.k),
        "serve_command": serve_command(target, drafter, opts.k),
    }


def validate_report(report: dict) -> None:
    """Raises: EaglehubError (exit 1) when ``report`` breaks its schema (a bug in eaglehub)."""
    check_output(report, REPORT_SCHEMA, "speedup report")


def run_speedup(opts: SpeedupOptions, engine: Engine | None = None, console=None, costs: Costs | None = None) -> dict:
    """Measure throughput with and without the drafter per concurrency level, and the costs; return
    the validated report.

    ``engine``: default :class:`~eaglehub.engines.vllm_engine.VllmEngine`; ``console``: a rich
    Console for progress (``None``: none); ``costs``: already measured costs (``None``:
    :func:`measure_costs` on the target and drafter config).

    Raises:
        EaglehubError: bad options, target, drafter or prompts (exit 2), engine missing (exit 2), a
            drafter that fails validation (exit 1, :func:`eaglehub.checks.validate.preflight`), or an engine
            failure (exit 1).
    """
    from eaglehub.checks.validate import preflight
    from eaglehub.engines.chat import encode_chat
    from eaglehub.measure.runner import resolve_drafter, run_all
    from eaglehub.target import resolve_target
    from eaglehub.verify.preflight import engine_profile

    check_options(opts)
    if engine is None:
        from eaglehub.engines.vllm_engine import VllmEngine

        engine = VllmEngine()
    engine.version()  # fail fast, before any model work, when the engine is missing
    drafter = resolve_drafter(opts.drafter)
    target = resolve_target(opts.target)
    preflight(drafter, target, (engine_profile(engine).id,))  # as the engine that runs it reads it
    prompts_file = Path(opts.prompts_file) if opts.prompts_file else default_prompts_path()
    prompts = load_prompts(prompts_file, None, opts.limit)
    plan = plan_batches(len(prompts), opts.concurrency)
    encoded = encode_chat(target, [p.text for p in prompts])
    ids = [encoded[i] for i in plan.order]
    if costs is None:
        if console is not None:
            console.print(f"timing target and drafter forwards in PyTorch ({opts.repeats} repeats) …", highlight=False)
        costs = measure_costs(
            target,
            read_drafter(drafter).config,  # the canonical config: any layout eaglehub reads
            opts.k,
            opts.prefix_tokens,
            opts.repeats,
            opts.dtype,
        )
    engine_options = {"max_num_seqs": max(opts.concurrency)}
    specs = [
        RunSpec(
            target,
            d,
            opts.k,
            opts.max_tokens,
            opts.dtype,
            opts.seed,
            opts.max_model_len,
            engine_options=engine_options,
        )
        for d in (None, drafter)
    ]
    baseline, run = run_all(engine, specs, ids, plan.groups, console)
    report = build_report(opts, target, drafter, prompts_file.resolve(), prompts, plan, baseline, run, costs)
    validate_report(report)
    return report


def write_report(report: dict, path: str | Path) -> None:
    """Validate, then write ``report`` as JSON to ``path`` atomically.

    Raises:
        EaglehubError: schema violation (exit 1) or the file cannot be written.
    """
    write_output(report, path, REPORT_SCHEMA, "speedup report")


# --- output ------------------------------------------------------------------------------------------
