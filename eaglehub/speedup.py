"""``eaglehub speedup``: output tokens/s with and without an EAGLE-3 drafter at several concurrencies,
and the speedup that the measured acceptance predicts.

Throughput: two engine runs (target alone, target + drafter), same prompt token ids, greedy, same
batches. Each concurrency level c decodes its prompts in batches of exactly c (one engine group =
one ``llm.generate`` call, labels ``c{c}-{i}``), with ``max_num_seqs`` = the largest level, so
concurrency is c. A level's output tokens/s = its output tokens / the wall seconds of its batches
(:attr:`~eaglehub.engines.base.RunResult.group_seconds`); a one-prompt warm-up batch runs first and
is left out, so one-time start-up work does not land on the first level.

Prediction (Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding",
arXiv 2211.17192, §3.1 and Theorem 3.8; Chen et al. 2023, arXiv 2302.01318; shared/reference/
benchmarks.md §6), with α the per-token acceptance rate, k = ``num_speculative_tokens`` and
AL = 1 + accepted / drafts (bonus token included, :mod:`eaglehub.acceptance`):

* E[AL] = (1 − α^{k+1}) / (1 − α)                         (:func:`expected_al`; inverse :func:`implied_alpha`)
* S = (1 − α^{k+1}) / ((1 − α)(k·c + 1)), c = T_draft / T_target   (:func:`leviathan_speedup`)
* S = AL · T_target(1) / (T_verify(k+1) + k · T_draft(1))        (:func:`general_speedup`)
* S ≤ (k + 1) / (v + k·c), v = T_verify(k+1) / T_target(1)         (:func:`speedup_bound`)

The costs T are measured in PyTorch in this process (:func:`measure_costs`, batch 1). Leviathan's
formula assumes a (k+1)-token verify costs one target forward (v = 1, a memory-bound GPU); on a CPU
v ≈ 1.7 (benchmarks.md §6), so CPU speedups are not GPU speedups.
"""

from __future__ import annotations

import copy
import hashlib
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import __version__, acceptance, jsonio
from .atomic import atomic_file
from .engines.base import Engine, RunResult, RunSpec, SpecCounters
from .errors import EaglehubError
from .prompts import default_prompts_path, load_prompts
from .schemas import check_output, write_output

REPORT_SCHEMA = "speedup-report"
REPORT_VERSION = 1
DEFAULT_CONCURRENCY = (1, 4, 16)
DEFAULT_PREFIX_TOKENS = 256
DEFAULT_REPEATS = 10
WARMUP_REPEATS = 2
WARMUP_GROUP = "warmup"
PAPER = "Leviathan et al. 2023, arXiv 2211.17192"

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
    "(benchmarks.md section 6)",
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

    Solves (1 − α^{k+1}) / (1 − α) = AL (benchmarks.md §6; e.g. AL 2.60 at k = 3 ⇒ α ≈ 0.71) with
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
    """Expected speedup S = AL · T_target(1) / (T_verify(k+1) + k · T_draft(1)) (benchmarks.md §6).

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
    with v = T_verify(k+1) / T_target(1) > 0 and c = T_draft(1) / T_target(1) ≥ 0 (benchmarks.md §6).

    Raises:
        ValueError: ``k`` < 1, ``v`` ≤ 0 or ``c`` < 0.
    """
    _check_k(k)
    if not (v > 0.0 and c >= 0.0):
        raise ValueError(f"v must be > 0 and c >= 0, got v={v!r}, c={c!r}")
    return (k + 1) / (v + k * c)


# --- cost measurement (PyTorch) --------------------------------------------------------------------


@dataclass(frozen=True)
class Costs:
    """Median wall milliseconds of the three forwards the formulas need (batch 1, see ``DEFINITIONS``),
    and how they were measured: ``prefix_tokens`` cached, ``repeats`` timed runs each, on ``device``
    (``cpu`` or ``cuda``) with ``threads`` torch intra-op threads and ``dtype``."""

    t_target_1_ms: float
    t_verify_k1_ms: float
    t_draft_1_ms: float
    prefix_tokens: int
    repeats: int
    device: str
    threads: int
    dtype: str

    @property
    def c(self) -> float:
        """T_draft(1) / T_target(1)."""
        return self.t_draft_1_ms / self.t_target_1_ms

    @property
    def v(self) -> float:
        """T_verify(k+1) / T_target(1)."""
        return self.t_verify_k1_ms / self.t_target_1_ms

    def to_dict(self) -> dict:
        return {**asdict(self), "c": self.c, "v": self.v}


def _median_ms(prepare: Callable[[], Callable[[], object]], repeats: int, sync: Callable[[], None]) -> float:
    """Median over ``repeats`` of the wall time (ms) of the call ``prepare()`` returns; preparation
    (copying the KV cache) is not timed, and :data:`WARMUP_REPEATS` untimed calls go first."""
    times = []
    for n in range(WARMUP_REPEATS + repeats):
        call = prepare()
        sync()
        t0 = time.perf_counter()
        call()
        sync()
        if n >= WARMUP_REPEATS:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def measure_costs(
    target: Path,
    drafter_config: dict,
    k: int,
    prefix_tokens: int = DEFAULT_PREFIX_TOKENS,
    repeats: int = DEFAULT_REPEATS,
    dtype: str = "float32",
) -> Costs:
    """Time T_target(1), T_verify(k+1) and T_draft(1) (``DEFINITIONS``) in PyTorch, batch 1.

    The target is loaded with ``transformers.AutoModelForCausalLM`` in ``dtype``; a random prefix of
    ``prefix_tokens`` token ids fills its KV cache once, and every timed forward runs on a fresh copy
    of that cache, so each sees exactly ``prefix_tokens`` cached positions. The drafter step is an
    :class:`eaglehub.drafter_model.Eagle3Drafter` built from ``drafter_config`` with random weights
    (weights do not change the cost) and a random K/V cache of ``prefix_tokens`` positions. Runs on
    CUDA when torch sees a GPU, else on the CPU; all under ``torch.inference_mode``.

    Raises:
        EaglehubError: ``dtype`` is not a torch floating dtype, or the target cannot be loaded (exit 2).
    """
    import torch

    from .drafter_model import DrafterDims, Eagle3Drafter, attention

    torch_dtype = getattr(torch, dtype, None)
    if not isinstance(torch_dtype, torch.dtype) or not torch_dtype.is_floating_point:
        raise EaglehubError(
            f"--dtype {dtype!r} is not a torch floating-point dtype", hint="use float32, bfloat16 or float16"
        )
    device = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    try:
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(str(target), dtype=torch_dtype).to(device).eval()  # type: ignore[arg-type]  # functools.wraps on PreTrainedModel.to: mypy does not bind self
    except (OSError, ValueError) as exc:
        raise EaglehubError(
            f"cannot load target {target} in transformers to time its forwards: {exc}",
            hint="the target directory needs its weights (safetensors) and config.json",
        ) from exc
    gen = torch.Generator().manual_seed(0)

    def ids(n: int):
        return torch.randint(model.config.vocab_size, (1, n), generator=gen).to(device)

    dims = DrafterDims.from_config(drafter_config)
    drafter = Eagle3Drafter(dims).to(device=device, dtype=torch_dtype).eval()
    aux = torch.randn(1, dims.num_aux * dims.target_hidden_size, generator=gen).to(device, torch_dtype)
    embed = torch.randn(1, dims.hidden_size, generator=gen).to(device, torch_dtype)
    k_cache, v_cache = (
        torch.randn(prefix_tokens, dims.num_kv_heads, dims.head_dim, generator=gen).to(device, torch_dtype)
        for _ in range(2)
    )
    position = torch.tensor([prefix_tokens], device=device)

    def draft_step():
        q, key, value, residual = drafter.layer_qkv(drafter.combine(aux), embed, position)
        attn = attention(q, torch.cat([k_cache, key]), torch.cat([v_cache, value]), None)
        normed, _ = drafter.layer_out(attn, residual)
        return drafter.to_target_ids(drafter.logits(normed).argmax(-1))

    with torch.inference_mode():
        prefix_cache = model(ids(prefix_tokens), use_cache=True).past_key_values

        def target_forward(q: int):
            def prepare():
                new, cache = ids(q), copy.deepcopy(prefix_cache)
                return lambda: model(new, past_key_values=cache, use_cache=True)

            return prepare

        t1 = _median_ms(target_forward(1), repeats, sync)
        tv = _median_ms(target_forward(k + 1), repeats, sync)
        td = _median_ms(lambda: draft_step, repeats, sync)
    return Costs(t1, tv, td, prefix_tokens, repeats, device, torch.get_num_threads(), dtype)


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
            :func:`~eaglehub.acceptance.check_consistency` (exit 1).
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
    """What the numbers do not say: the CPU caveat (benchmarks.md §6), batch-1 costs, prefix caching."""
    out = []
    if costs.device == "cpu":
        out.append(
            f"CPU speedups are not GPU speedups: here a (k+1)-token verify costs v = {costs.v:.2f} single-token "
            "forwards (benchmarks.md section 6: about 1.7 on a 2-core CPU, about 1 on a memory-bound GPU), so "
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
    from .verify import serve_command

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
            drafter that fails validation (exit 1, :func:`eaglehub.verify.preflight`), or an engine
            failure (exit 1).
    """
    from .engines.chat import encode_chat
    from .target import resolve_target
    from .verify import _resolve_drafter, _run_all, preflight

    check_options(opts)
    if engine is None:
        from .engines.vllm_engine import VllmEngine

        engine = VllmEngine()
    engine.version()  # fail fast, before any model work, when the engine is missing
    drafter = _resolve_drafter(opts.drafter)
    target = resolve_target(opts.target)
    preflight(drafter, target)
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
            jsonio.read_object(drafter / "config.json") or {},
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
    baseline, run = _run_all(engine, specs, ids, plan.groups, console)
    report = build_report(opts, target, drafter, prompts_file.resolve(), prompts, plan, baseline, run, costs)
    validate_report(report)
    return report


def write_report(report: dict, path: Path) -> None:
    """Validate, then write ``report`` as JSON to ``path`` atomically.

    Raises:
        EaglehubError: schema violation (exit 1) or the file cannot be written.
    """
    write_output(report, path, REPORT_SCHEMA, "speedup report")


# --- output ------------------------------------------------------------------------------------------


def _f(x: float | None, digits: int = 2, suffix: str = "") -> str:
    return "—" if x is None else f"{x:.{digits}f}{suffix}"


def render_report(report: dict, console) -> None:
    """The table (per level: tok/s without and with the drafter, measured speedup, AL, expected
    speedups), the costs, the notes and the serve line. Never prints prompt text or tokens."""
    from rich.markup import escape
    from rich.table import Table

    s, c = report["settings"], report["costs"]
    t = Table(
        title=f"speedup of {escape(report['drafter'])} (k = {s['num_speculative_tokens']}, max_tokens "
        f"{s['max_tokens']}, {s['dtype']}, {report['engine']['name']} {report['engine']['version']})",
        title_justify="left",
    )
    # short headers: the table must fit an 80-column terminal; the report's definitions spell them out
    for col in (
        "conc.",
        "tok/s alone",
        "tok/s +drafter",
        "speedup",
        "AL",
        "α",
        "exp. Leviathan",
        "exp. general",
    ):
        t.add_column(col, justify="right")
    for lv in report["levels"]:
        t.add_row(
            str(lv["concurrency"]),
            _f(lv["target_alone"]["output_tokens_per_second"], 1),
            _f(lv["with_drafter"]["output_tokens_per_second"], 1),
            _f(lv["measured_speedup"], 2, "×"),
            _f(lv["acceptance"]["acceptance_length"], 3),
            _f(lv["implied_alpha"], 3),
            _f(lv["expected_speedup_leviathan"], 2, "×"),
            _f(lv["expected_speedup_general"], 2, "×"),
        )
    console.print(t)
    console.print(
        f"costs ({c['device']}, {c['threads']} threads, {c['prefix_tokens']}-token prefix, median of "
        f"{c['repeats']}): T_target(1) {c['t_target_1_ms']:.2f} ms, T_verify(k+1) {c['t_verify_k1_ms']:.2f} ms, "
        f"T_draft(1) {c['t_draft_1_ms']:.2f} ms; c = {c['c']:.3f}, v = {c['v']:.2f}; bound "
        f"(k+1)/(v+k·c) = {report['speedup_bound']:.2f}×",
        highlight=False,
    )
    for n in report["notes"]:
        console.print(f"[yellow]note:[/] {escape(n)}", highlight=False)
    console.print("serve with:", highlight=False)
    console.print(escape(report["serve_command"]), highlight=False, soft_wrap=True)


def plot_speedup(report: dict, path: str | Path) -> Path:
    """PNG (150 dpi, written atomically): output tokens/s without and with the drafter per
    concurrency (bars), and measured vs expected speedup per concurrency (lines).

    Raises:
        EaglehubError: the file cannot be written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = report["levels"]
    names = [str(lv["concurrency"]) for lv in levels]
    x = range(len(levels))
    fig, (ax_tps, ax_s) = plt.subplots(1, 2, figsize=(11, 4.2))
    for off, key, label in (
        (-0.2, "target_alone", "target alone"),
        (0.2, "with_drafter", "target + drafter"),
    ):
        ax_tps.bar(
            [i + off for i in x],
            [lv[key]["output_tokens_per_second"] or 0.0 for lv in levels],
            0.4,
            label=label,
        )
    ax_tps.set_xticks(list(x), names)
    ax_tps.set_xlabel("concurrency (prompts per batch)")
    ax_tps.set_ylabel("output tokens / s")
    ax_tps.legend(fontsize=8)
    for key, label, style in (
        ("measured_speedup", "measured", "o-"),
        ("expected_speedup_leviathan", "Leviathan", "s--"),
        ("expected_speedup_general", "general (measured costs)", "^:"),
    ):
        ax_s.plot(list(x), [lv[key] if lv[key] is not None else float("nan") for lv in levels], style, label=label)
    ax_s.axhline(1.0, color="grey", lw=0.8)
    ax_s.set_xticks(list(x), names)
    ax_s.set_xlabel("concurrency (prompts per batch)")
    ax_s.set_ylabel("speedup (with / without drafter)")
    ax_s.legend(fontsize=8)
    s = report["settings"]
    fig.suptitle(
        f"{Path(report['drafter']).name} on {Path(report['target']['path']).name} · {report['engine']['name']} "
        f"{report['engine']['version']} · k {s['num_speculative_tokens']} · max_tokens {s['max_tokens']} · "
        f"costs on {report['costs']['device']}",
        fontsize=9,
    )
    fig.tight_layout()
    try:
        with atomic_file(Path(path)) as tmp:
            fig.savefig(tmp, dpi=150, format="png")
    except OSError as exc:
        raise EaglehubError(f"cannot write plot {path}: {exc}") from exc
    finally:
        plt.close(fig)
    return Path(path)
