"""The one runner verify, diagnose, speedup and calibrate share: drafter resolution and engine runs with a progress bar."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from eaglehub.engines.base import Engine, RunResult, RunSpec
from eaglehub.errors import EaglehubError


def resolve_drafter(spec: str) -> Path:
    path = Path(spec).expanduser()
    if not (path / "config.json").is_file():
        raise EaglehubError(
            f"drafter {spec} is not a directory with config.json",
            hint="pass a local EAGLE-3 / EAGLE-3.1 drafter checkpoint directory",
        )
    return path.resolve()


def run_all(engine: Engine, specs: list[RunSpec], ids: list[list[int]], groups: list[str], console) -> list[RunResult]:
    """Run every spec in order, with a rich progress bar (one task per run, in requests)."""
    with progress_runner(console) as run:
        return [run(engine, s, ids, groups, run_label(s)) for s in specs]


def run_label(spec: RunSpec, turn: int | None = None) -> str:
    if spec.drafter:
        return f"target + drafter {spec.drafter.name} (k={spec.k})"
    return "target alone" if turn is None else f"target alone (turn {turn})"


@contextmanager
def progress_runner(console):
    """Yields ``run(engine, spec, ids, groups, label) -> RunResult``, each call one task of a rich
    progress bar on ``console`` (in requests); ``console`` None: no display."""
    if console is None:
        yield lambda engine, spec, ids, groups, label: engine.run(spec, ids, groups)
        return
    if not console.is_terminal:  # a log: one plain line per finished batch, no bar drawn over itself
        yield lambda engine, spec, ids, groups, label: _plain_run(console, engine, spec, ids, groups, label)
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as bar:

        def run(engine, spec, ids, groups, label):
            task = bar.add_task(label, total=len(ids))
            return engine.run(spec, ids, groups, progress=lambda _g, n: bar.advance(task, n))

        yield run


def _plain_run(console, engine, spec, ids, groups, label):
    """One run of :func:`progress_runner` off a terminal: a line on ``console`` (stderr for a command) as it
    starts and per finished batch."""
    import time

    start, done = time.monotonic(), 0

    def say(line: str) -> None:
        console.print(line, highlight=False, markup=False, soft_wrap=True)

    say(f"{label}  {len(ids)} requests")

    def step(group, n):
        nonlocal done
        done += n
        say(f"{label}  {done}/{len(ids)} requests ({group} done, {time.monotonic() - start:.0f} s)")

    return engine.run(spec, ids, groups, progress=step)
