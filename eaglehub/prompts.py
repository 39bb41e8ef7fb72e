"""Evaluation prompts: load, validate and filter the JSONL prompt sets used by ``eaglehub verify``.

A prompt file holds one JSON object per line, each valid against ``schemas/prompts.schema.json``
(``id``, ``category``, ``prompt``: a single-turn user message). Ids are unique within a file. The
project's own set is ``fixtures/prompts/eval.jsonl`` (48 prompts, 6 categories x 8), written for
eaglehub and disjoint from any benchmark and from the drafter's training data.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import jsonio
from .errors import EaglehubError
from .schemas import schema_errors

PROMPTS_SCHEMA = "prompts"


def default_prompts_path() -> Path:
    """The project's evaluation set, ``fixtures/prompts/eval.jsonl`` in the checkout."""
    return Path(__file__).resolve().parent.parent / "fixtures" / "prompts" / "eval.jsonl"


@dataclass(frozen=True)
class Prompt:
    """One evaluation prompt: ``id`` (unique), ``category`` and the user message ``text``."""

    id: str
    category: str
    text: str


def load_prompts(
    path: Path | str | None = None,
    categories: list[str] | tuple[str, ...] | None = None,
    limit: int | None = None,
) -> list[Prompt]:
    """Load and validate a prompt file, then filter it.

    Args:
        path: a JSONL file; ``None`` means :func:`default_prompts_path`.
        categories: keep only these categories (``None`` or empty: all).
        limit: keep at most this many prompts *per category* (file order), so a quick run still
            covers every category; ``None``: all.

    Returns:
        The prompts in file order.

    Raises:
        EaglehubError: the file is missing or empty, a line is not JSON or breaks the schema
            (message names the line), an id repeats, a requested category does not exist, or
            ``limit`` < 1.
    """
    path = Path(path) if path is not None else default_prompts_path()
    if not path.is_file():
        raise EaglehubError(f"prompt file {path} not found", hint="pass --prompts FILE (JSONL, one {id, category, prompt} per line)")
    prompts: list[Prompt] = []
    seen: set[str] = set()
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = jsonio.loads(line)
        except ValueError as exc:
            raise EaglehubError(f"{path}:{lineno}: not valid JSON ({str(exc).splitlines()[0]})") from exc
        errors = schema_errors(row, PROMPTS_SCHEMA)
        if errors:
            where, message = errors[0]
            raise EaglehubError(f"{path}:{lineno}: {'row' if where == '$' else where}: {message}",
                                hint=f"see schemas/{PROMPTS_SCHEMA}.schema.json")
        if row["id"] in seen:
            raise EaglehubError(f"{path}:{lineno}: duplicate prompt id {row['id']!r}", hint="prompt ids must be unique")
        seen.add(row["id"])
        prompts.append(Prompt(row["id"], row["category"], row["prompt"]))
    if not prompts:
        raise EaglehubError(f"prompt file {path} holds no prompts")
    return filter_prompts(prompts, categories, limit)


def filter_prompts(
    prompts: list[Prompt], categories: list[str] | tuple[str, ...] | None = None, limit: int | None = None
) -> list[Prompt]:
    """Keep ``categories`` (all if empty) and at most ``limit`` prompts per category, in order.

    Raises:
        EaglehubError: an unknown category is requested, or ``limit`` < 1.
    """
    if limit is not None and limit < 1:
        raise EaglehubError(f"--limit must be at least 1, got {limit}")
    known = {p.category for p in prompts}
    if categories:
        unknown = sorted(set(categories) - known)
        if unknown:
            raise EaglehubError(f"unknown categor{'y' if len(unknown) == 1 else 'ies'}: {', '.join(unknown)}",
                                hint=f"available: {', '.join(sorted(known))}")
        prompts = [p for p in prompts if p.category in set(categories)]
    if limit is None:
        return list(prompts)
    counts: dict[str, int] = {}
    kept = []
    for p in prompts:
        counts[p.category] = counts.get(p.category, 0) + 1
        if counts[p.category] <= limit:
            kept.append(p)
    return kept
