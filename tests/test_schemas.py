"""Every JSON Schema in schemas/ is itself a valid Draft 2020-12 schema (the tool skips this
meta-validation at run time to start fast, so it is checked here)."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from eaglehub.io.resources import schemas_dir

SCHEMAS = sorted(schemas_dir().glob("*.schema.json"))


def test_schemas_exist():
    assert {p.name for p in SCHEMAS} >= {
        "drafter-config.schema.json",
        "convert-report.schema.json",
        "provenance.schema.json",
        "inspect-report.schema.json",
        "validate-report.schema.json",
        "verify-report.schema.json",
    }


@pytest.mark.parametrize("path", SCHEMAS, ids=lambda p: p.name)
def test_schema_is_valid(path):
    schema = json.loads(path.read_text())
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize("path", SCHEMAS, ids=lambda p: p.name)
def test_modules_a_schema_names_exist(path):
    """A schema's descriptions name the module that writes a section; after a move they must follow it."""
    import re

    root = schemas_dir().parents[2]
    named = set(re.findall(r"eaglehub/[a-z_/]+\.py", path.read_text()))
    assert [m for m in sorted(named) if not (root / m).is_file()] == []


def test_the_top_level_schemas_are_the_package_schemas():
    """schemas/ (where the docs and --help point) is a copy of the schemas the package ships and validates with."""
    from pathlib import Path

    top = Path(__file__).resolve().parent.parent / "schemas"
    assert {p.name: p.read_bytes() for p in top.glob("*.schema.json")} == {p.name: p.read_bytes() for p in SCHEMAS}, (
        "schemas/ is stale: cp eaglehub/data/schemas/*.schema.json schemas/"
    )
