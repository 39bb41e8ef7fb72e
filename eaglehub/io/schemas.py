"""JSON Schema helpers: every ``--json`` output and every drafter config is checked against ``schemas/``."""

from __future__ import annotations

import functools
import json

from eaglehub.errors import EaglehubError
from eaglehub.io.resources import schemas_dir


@functools.cache
def load_schema(name: str) -> dict:
    """``schemas/<name>.schema.json`` as a dict. Raises EaglehubError if missing."""
    path = schemas_dir() / f"{name}.schema.json"
    if not path.is_file():
        raise EaglehubError(f"schema {path} is missing", hint="reinstall eaglehub from a full checkout")
    return json.loads(path.read_text())


@functools.cache
def _registry():
    """Every schema under its ``$id`` (``eaglehub/<name>.schema.json``), so one schema can ``$ref``
    another by file name (the per-layout drafter configs share ``drafter-config.schema.json#/$defs``)."""
    from referencing import Registry, Resource

    schemas = [json.loads(p.read_text()) for p in sorted(schemas_dir().glob("*.schema.json"))]
    return Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in schemas if "$id" in s)


@functools.cache
def _validator_class():
    """Draft 2020-12 where ``integer`` means a JSON integer literal: the standard also counts ``576.0``,
    but the configs' readers (vLLM, transformers, eaglehub) take such a value as a float, not a size."""
    from jsonschema import Draft202012Validator, validators

    checker = Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, x: isinstance(x, int) and not isinstance(x, bool)
    )
    return validators.extend(Draft202012Validator, type_checker=checker)


@functools.cache
def _validator(name: str):
    # the schemas themselves are meta-validated by the test suite; skipping it here keeps start-up fast
    return _validator_class()(load_schema(name), registry=_registry())


def schema_errors(obj, name: str) -> list[tuple[str, str]]:
    """``[(json path, message)]`` for every violation of schema ``name`` (empty when valid)."""
    errors = sorted(_validator(name).iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
    return [(e.json_path.removeprefix("$.") if e.absolute_path else "$", e.message) for e in errors]


def validate_json(obj, name: str) -> None:
    """Raise ``jsonschema.ValidationError`` if ``obj`` violates ``schemas/<name>.schema.json``."""
    from jsonschema.exceptions import best_match

    err = best_match(_validator(name).iter_errors(obj))
    if err is not None:
        raise err


def check_output(obj, name: str, what: str) -> None:
    """Check a JSON document eaglehub built (``what``: e.g. "verify report") against ``schemas/<name>``.

    Raises:
        EaglehubError: it breaks the schema — a bug in eaglehub (exit code 1; the first violation, one line).
    """
    errors = schema_errors(obj, name)
    if errors:
        where, message = errors[0]
        raise EaglehubError(
            f"internal error: {what} breaks its schema at {where}: {' '.join(message.split())[:200]}",
            exit_code=1,
        )


def write_output(obj, path, name: str, what: str):
    """:func:`check_output`, then write ``obj`` as indented JSON to ``path`` atomically; returns the path.

    Raises:
        EaglehubError: schema violation (exit 1) or the file cannot be written (exit 2).
    """
    from pathlib import Path

    from eaglehub.io.atomic import atomic_file

    check_output(obj, name, what)
    path = Path(path)
    try:
        with atomic_file(path) as tmp:
            tmp.write_text(json.dumps(obj, indent=2) + "\n")
    except OSError as exc:
        raise EaglehubError(f"cannot write {what} {path}: {exc.strerror or exc}") from exc
    return path
