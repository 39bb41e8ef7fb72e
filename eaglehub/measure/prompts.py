"""Evaluation prompts: load, validate and filter the prompt sets used by ``eaglehub verify``.

Three file formats, decided per file from its first non-empty line (:func:`read_prompt_file`):

- ``eaglehub``: JSONL, one ``{id, category, prompt}`` per line, each valid against
  ``schemas/prompts.schema.json``; a single user turn. The project's own set is
  ``eaglehub/data/prompts/eval.jsonl`` (48 prompts, 6 categories x 8), written for eaglehub and disjoint
  from any benchmark and from the drafter's training data.
- ``mt-bench``: JSONL in the question layout of MT-Bench (lm-sys/FastChat
  ``fastchat/llm_judge/data/mt_bench/question.jsonl``) and Spec-Bench (hemingkx/Spec-Bench
  ``data/spec_bench/question.jsonl``): ``{question_id, category, turns: [str, ...]}`` plus keys those
  sets carry (``reference``), which are ignored; schema ``schemas/prompts-mtbench.schema.json``.
  The prompt id is ``str(question_id)``; the category is normalised (:func:`normalise_category`) and
  the original string is kept in :attr:`Prompt.original_category`.
- ``text``: one prompt per non-empty line (surrounding whitespace stripped); the category is the
  file's stem normalised, ids ``<category>-<n>`` (n counts prompts from 1). Each prompt must fit
  ``schemas/prompts.schema.json`` like an eaglehub row.

Detection: a first line that parses as a JSON object makes the file JSONL, with the format read
from its keys (``turns``, else ``question_id`` → mt-bench; ``prompt``, else ``id`` → eaglehub);
anything else makes it text. So that a broken JSONL file is never read as text, a first line
starting with ``{`` and any ``*.jsonl`` / ``*.json`` file must be a JSON object. Every row must be of the file's format: a row of the other
format (or, in a text file, a line that is a JSON prompt row) is an error naming the line.
Ids are unique within a file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from eaglehub.errors import EaglehubError
from eaglehub.io import jsonio
from eaglehub.io.resources import default_prompts
from eaglehub.io.schemas import schema_errors

PROMPTS_SCHEMA = "prompts"
MTBENCH_SCHEMA = "prompts-mtbench"
FORMATS = ("eaglehub", "mt-bench", "text")
_ROW_SCHEMA = {"eaglehub": PROMPTS_SCHEMA, "mt-bench": MTBENCH_SCHEMA, "text": PROMPTS_SCHEMA}
_JSON_SUFFIXES = (".jsonl", ".json")
# Spec-Bench, the largest public set verify reads, is 0.7 MB; these caps only stop hostile files
# from being read into memory or quoted back whole.
MAX_FILE_BYTES = 64 * 2**20
MAX_LINE_CHARS = 2**20
_MESSAGE_CHARS = 160


def default_prompts_path() -> Path:
    """The project's evaluation set, shipped in the package (``eaglehub/data/prompts/eval.jsonl``)."""
    return default_prompts()


@dataclass(frozen=True)
class Prompt:
    """One evaluation prompt.

    ``id`` (unique in its file), ``category`` (matches ``^[a-z][a-z0-9_]{0,39}$``), ``turns`` (the
    user messages in order, at least one; a plain ``str`` is taken as one turn, so
    ``Prompt(id, category, text)`` still builds a single-turn prompt), ``original_category`` (the
    file's category string before normalisation; defaults to ``category``) and ``source_format``
    (one of :data:`FORMATS`).
    """

    id: str
    category: str
    turns: tuple[str, ...]
    original_category: str = ""
    source_format: str = "eaglehub"

    def __post_init__(self):
        turns = (self.turns,) if isinstance(self.turns, str) else tuple(self.turns)
        if not turns:
            raise ValueError(f"prompt {self.id!r} has no turns")
        if self.source_format not in FORMATS:
            raise ValueError(f"source_format must be one of {FORMATS}, got {self.source_format!r}")
        object.__setattr__(self, "turns", turns)
        if not self.original_category:
            object.__setattr__(self, "original_category", self.category)

    @property
    def text(self) -> str:
        """The first user turn (the whole prompt for single-turn sets)."""
        return self.turns[0]


def normalise_category(name: str) -> str:
    """A category name that fits ``schemas/prompts.schema.json`` (``^[a-z][a-z0-9_]{0,39}$``).

    Rule: strip, lower-case, replace every character outside ``[a-z0-9_]`` with ``_``, prefix
    ``c_`` when the result does not start with a letter, cut to 40 characters.
    ``"Role Play"`` → ``"role_play"``, ``"2024 set"`` → ``"c_2024_set"``.
    """
    norm = re.sub(r"[^a-z0-9_]", "_", name.strip().lower())
    if not re.match(r"[a-z]", norm):
        norm = "c_" + norm
    return norm[:40]


def _short(message: str) -> str:
    """One line, capped: jsonschema quotes the offending value, which may be a whole article."""
    message = " ".join(message.split())
    return message if len(message) <= _MESSAGE_CHARS else message[:_MESSAGE_CHARS] + " …"


def _row_format(path: Path, lineno: int, row) -> str | None:
    """``"eaglehub"`` / ``"mt-bench"`` from the keys only one format has (text key first: ``prompt`` /
    ``turns``, then id key: ``id`` / ``question_id``); None for a non-object or neither.

    Raises:
        EaglehubError: both ``prompt`` and ``turns`` (no rule could pick the text to use).
    """
    if not isinstance(row, dict):
        return None
    if "prompt" in row and "turns" in row:
        raise EaglehubError(
            f"{path}:{lineno}: a JSON object with both 'prompt' and 'turns': not an eaglehub row "
            "{id, category, prompt} nor an MT-Bench row {question_id, category, turns}",
            hint="keep one of them",
        )
    for ours, theirs in (("prompt", "turns"), ("id", "question_id")):
        if (ours in row) != (theirs in row):
            return "eaglehub" if ours in row else "mt-bench"
    return None


def _parse(path: Path, lineno: int, line: str):
    try:
        return jsonio.loads(line)
    except ValueError as exc:
        raise EaglehubError(
            f"{path}:{lineno}: not valid JSON ({_short(str(exc).splitlines()[0])})",
            hint="a JSONL prompt file holds one JSON object per line",
        ) from exc


def _detect(path: Path, lineno: int, line: str) -> str:
    """The file's format from its first non-empty line (rules in the module docstring)."""
    if not line.lstrip().startswith("{") and path.suffix.lower() not in _JSON_SUFFIXES:
        return "text"
    row = _parse(path, lineno, line)
    if not isinstance(row, dict):
        raise EaglehubError(
            f"{path}:{lineno}: a {path.suffix or 'JSONL'} prompt file holds JSON objects, "
            f"this line is a JSON {type(row).__name__}",
            hint="rename it to .txt to read it as one prompt per line",
        )
    fmt = _row_format(path, lineno, row)
    if fmt is None:
        raise EaglehubError(
            f"{path}:{lineno}: a JSON object with neither 'prompt'/'id' nor 'turns'/'question_id': "
            "not an eaglehub row "
            "{id, category, prompt} nor an MT-Bench row {question_id, category, turns}",
            hint=f"see schemas/{PROMPTS_SCHEMA}.schema.json and schemas/{MTBENCH_SCHEMA}.schema.json",
        )
    return fmt


def _check_schema(path: Path, lineno: int, row, fmt: str) -> None:
    errors = schema_errors(row, _ROW_SCHEMA[fmt])
    if errors:
        where, message = errors[0]
        raise EaglehubError(
            f"{path}:{lineno}: {'row' if where == '$' else where}: {_short(message)}",
            hint=f"see schemas/{_ROW_SCHEMA[fmt]}.schema.json",
        )


def read_prompt_file(path: Path | str | None = None) -> tuple[str, list[Prompt]]:
    """Read and validate a whole prompt file, unfiltered.

    Args:
        path: a prompt file in one of :data:`FORMATS`; ``None`` means :func:`default_prompts_path`.

    Returns:
        ``(format, prompts)``: the detected format and every prompt in file order.

    Raises:
        EaglehubError (exit 2), one line naming the file and line where there is one: the file is
            missing, larger than :data:`MAX_FILE_BYTES`, not UTF-8 or holds no prompts; a line is
            longer than :data:`MAX_LINE_CHARS`, not JSON (JSONL files), of the other format, or
            breaks its schema (blank or non-string turns, ``turns`` not a list, a text prompt over
            4,000 characters, ...); an id or ``question_id`` repeats; two category names normalise
            to the same name.
    """
    path = Path(path) if path is not None else default_prompts_path()
    if not path.is_file():
        raise EaglehubError(
            f"prompt file {path} not found",
            hint="pass --prompts FILE (eaglehub JSONL, MT-Bench/Spec-Bench question.jsonl, or text)",
        )
    if path.stat().st_size > MAX_FILE_BYTES:
        raise EaglehubError(
            f"prompt file {path} is {path.stat().st_size:,} bytes, more than {MAX_FILE_BYTES:,}",
            hint="split it or pick a subset",
        )
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise EaglehubError(f"prompt file {path} is not UTF-8 text (byte {exc.start})") from exc
    # split on "\n" only: str.splitlines also splits on U+2028 and friends, which JSON strings may hold raw
    lines = [(n, line) for n, line in enumerate(text.split("\n"), 1) if line.strip()]
    if not lines:
        raise EaglehubError(f"prompt file {path} holds no prompts")
    for lineno, line in lines:
        if len(line) > MAX_LINE_CHARS:
            raise EaglehubError(
                f"{path}:{lineno}: line of {len(line):,} characters, more than {MAX_LINE_CHARS:,}",
                hint="one prompt per line; long inputs belong in an MT-Bench row's turns",
            )
    first = lines[0][0]
    fmt = _detect(path, *lines[0])
    stem_category = normalise_category(path.stem)
    prompts: list[Prompt] = []
    seen: set[str] = set()
    originals: dict[str, str] = {}
    for lineno, line in lines:
        if fmt == "text":
            line = line.strip()
            if line.startswith("{"):
                try:
                    other = _row_format(path, lineno, jsonio.loads(line))
                except ValueError:
                    other = None
                if other:
                    raise EaglehubError(
                        f"{path}:{lineno}: an {other} JSON row in a plain-text prompt file "
                        f"(format decided by line {first})",
                        hint="one format per file",
                    )
            row = {"id": f"{stem_category}-{len(prompts) + 1}", "category": stem_category, "prompt": line}
            _check_schema(path, lineno, row, fmt)
            prompt = Prompt(row["id"], stem_category, (line,), path.stem, "text")
        else:
            row = _parse(path, lineno, line)
            other = _row_format(path, lineno, row)
            if other is not None and other != fmt:
                raise EaglehubError(
                    f"{path}:{lineno}: an {other} row in an {fmt} file (format decided by line {first})",
                    hint="one format per file: eaglehub rows {id, category, prompt} or MT-Bench rows "
                    "{question_id, category, turns}",
                )
            _check_schema(path, lineno, row, fmt)
            if fmt == "eaglehub":
                prompt = Prompt(row["id"], row["category"], (row["prompt"],), source_format="eaglehub")
            else:
                category = normalise_category(row["category"])
                prompt = Prompt(str(row["question_id"]), category, tuple(row["turns"]), row["category"], "mt-bench")
            if prompt.id in seen:
                what = f"prompt id {row['id']!r}" if fmt == "eaglehub" else f"question_id {row['question_id']!r}"
                raise EaglehubError(f"{path}:{lineno}: duplicate {what}", hint="prompt ids must be unique")
        if any(_unencodable(t) for t in prompt.turns):
            raise EaglehubError(
                f"{path}:{lineno}: a prompt holds a lone surrogate (an escape like \\ud800 that is no "
                "character), which no tokenizer can encode",
                hint="fix or remove that escape",
            )
        if originals.setdefault(prompt.category, prompt.original_category) != prompt.original_category:
            raise EaglehubError(
                f"{path}:{lineno}: categories {originals[prompt.category]!r} and "
                f"{prompt.original_category!r} both normalise to {prompt.category!r}",
                hint="rename one of them",
            )
        seen.add(prompt.id)
        prompts.append(prompt)
    return fmt, prompts


def _unencodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def load_prompts(
    path: Path | str | None = None,
    categories: list[str] | tuple[str, ...] | None = None,
    limit: int | None = None,
) -> list[Prompt]:
    """Load and validate a prompt file (any of :data:`FORMATS`, detected), then filter it.

    Args:
        path: a prompt file; ``None`` means :func:`default_prompts_path`.
        categories: keep only these categories, by normalised or original name (``None`` or
            empty: all).
        limit: keep at most this many prompts *per category* (file order), so a quick run still
            covers every category; ``None``: all.

    Returns:
        The prompts in file order.

    Raises:
        EaglehubError: everything :func:`read_prompt_file` raises, a requested category that does
            not exist, or ``limit`` < 1.
    """
    return filter_prompts(read_prompt_file(path)[1], categories, limit)


def filter_prompts(
    prompts: list[Prompt], categories: list[str] | tuple[str, ...] | None = None, limit: int | None = None
) -> list[Prompt]:
    """Keep ``categories`` (all if empty; a category may be named by its normalised or its original
    string) and at most ``limit`` prompts per category, in order.

    Raises:
        EaglehubError: an unknown category is requested, or ``limit`` < 1.
    """
    if limit is not None and limit < 1:
        raise EaglehubError(f"--limit must be at least 1, got {limit}")
    known = {p.category for p in prompts}
    aliases = {p.original_category: p.category for p in prompts}
    if categories:
        unknown = sorted(c for c in set(categories) if c not in known and c not in aliases)
        if unknown:
            raise EaglehubError(
                f"unknown categor{'y' if len(unknown) == 1 else 'ies'}: {', '.join(unknown)}",
                hint=f"available: {', '.join(sorted(known))}",
            )
        wanted = {c if c in known else aliases[c] for c in categories}
        prompts = [p for p in prompts if p.category in wanted]
    if limit is None:
        return list(prompts)
    counts: dict[str, int] = {}
    kept = []
    for p in prompts:
        counts[p.category] = counts.get(p.category, 0) + 1
        if counts[p.category] <= limit:
            kept.append(p)
    return kept


def describe_prompts(prompts: list[Prompt]) -> dict:
    """The turn structure of a prompt selection, for the verify report.

    Returns a dict valid against ``schemas/prompts-description.schema.json``: ``format`` (of the
    first prompt; one file has one), ``count``, ``max_turns``, ``multi_turn``, ``categories``
    (prompts per normalised category, first-seen order) and ``category_names`` (normalised →
    original, only where they differ).

    Raises:
        ValueError: ``prompts`` is empty (a loaded file never is).
    """
    if not prompts:
        raise ValueError("no prompts to describe")
    categories: dict[str, int] = {}
    names: dict[str, str] = {}
    for p in prompts:
        categories[p.category] = categories.get(p.category, 0) + 1
        if p.original_category != p.category:
            names[p.category] = p.original_category
    max_turns = max(len(p.turns) for p in prompts)
    return {
        "format": prompts[0].source_format,
        "count": len(prompts),
        "max_turns": max_turns,
        "multi_turn": max_turns > 1,
        "categories": categories,
        "category_names": names,
    }


def describe_prompt_file(path: Path | str | None = None) -> dict:
    """:func:`describe_prompts` of the whole file ``path`` (``None``: the default set).

    Raises:
        EaglehubError: as :func:`read_prompt_file`.
    """
    return describe_prompts(read_prompt_file(path)[1])
