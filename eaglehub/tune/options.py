"""What one ``eaglehub tune`` run is asked for, and the checks made before any model work."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from eaglehub.errors import UsageError

DEFAULT_CONCURRENCY = (1, 2, 4, 8)
DEFAULT_MAX_K = 4
MAX_K = 16
DEFAULT_SCHEDULE_MARGIN = 0.05
"""The predicted gain a k schedule must add over the best static choice before it is served: less is not told apart
by the measurement (passes of one configuration spread by up to ±10 % on this project's CPU, interleaved), and a
schedule's k 0 still runs the drafter (docs/tune.md §4)."""


@dataclass
class TuneOptions:
    """Inputs of one tune run (``eaglehub tune --help`` for units and defaults)."""

    target: str
    drafter: str
    max_k: int = DEFAULT_MAX_K
    concurrency: list[int] = field(default_factory=lambda: list(DEFAULT_CONCURRENCY))
    repeats: int = 3
    max_tokens: int = 64
    prompts_file: str | None = None
    categories: tuple[str, ...] = ()
    limit: int | None = None
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    dtype: str = "float32"
    seed: int = 0
    max_model_len: int = 2048
    max_batch: int | None = None
    costs: str | None = None
    acceptance: str | None = None
    check: bool = False
    schedule_margin: float = DEFAULT_SCHEDULE_MARGIN
    interleave: bool | None = None
    """All engines live at once, one cell each in turn (:mod:`eaglehub.tune.engine`); None: on vLLM's CPU
    build only. A finished run's report holds what was done (None: no engine ran)."""
    log_dir: Path | None = None


def check_options(opts: TuneOptions) -> None:
    """Refuse bad options before any model work.

    Raises:
        UsageError: (exit 2) a --max-k outside 1..16, a --max-batch below the largest level, repeats below 1,
            fewer than 3 repeats with --check (no spread), or --check with --costs (the check measures here).
    """
    if not 1 <= opts.max_k <= MAX_K:
        raise UsageError(f"--max-k {opts.max_k} is outside 1..{MAX_K}", hint="e.g. --max-k 4")
    if opts.repeats < 1:
        raise UsageError(f"--repeats {opts.repeats} must be at least 1", hint="e.g. --repeats 3")
    if opts.max_batch is not None and opts.max_batch < max(opts.concurrency):
        raise UsageError(
            f"--max-batch {opts.max_batch} is below the largest --concurrency level {max(opts.concurrency)}",
            hint=f"--max-batch {max(opts.concurrency)} or more",
        )
    if opts.check and opts.repeats < 3:
        raise UsageError(
            f"--check with --repeats {opts.repeats}: a spread needs at least 3 repeats", hint="--repeats 3"
        )
    if opts.check and (opts.costs or opts.acceptance):
        raise UsageError(
            "--check measures the schedule on this machine's engine; it cannot check costs or acceptance "
            "measured elsewhere (--costs, --acceptance)",
            hint="drop --check, or drop --costs / --acceptance to measure both here",
        )


def check_ks(max_k: int) -> list[int]:
    """The two k below K whose direct runs check AL(k) predicted from the run at K: 1 and K/2 (at least 2);
    only 1 when K is 2, none when K is 1."""
    return sorted({1, max(2, max_k // 2)} - {max_k}) if max_k > 1 else []
