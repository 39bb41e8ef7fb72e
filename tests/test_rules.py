"""The rule catalogue (eaglehub/findings.py): one registry, its docs page and schemas in step, every rule
complete and exercised by some test."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from eaglehub.cli import main
from eaglehub.findings import RULES, SEVERITIES, STAGES, finding, rule_catalogue, rules_markdown
from eaglehub.io.schemas import validate_json

REPO = Path(__file__).resolve().parent.parent


def test_docs_page_is_the_rendered_catalogue():
    assert (REPO / "docs" / "rules.md").read_text() == rules_markdown(), (
        "docs/rules.md is stale: run `eaglehub validate --list-rules --markdown > docs/rules.md`"
    )


def test_every_rule_is_complete_and_unique():
    codes = [r.code for r in RULES]
    assert len(codes) == len(set(codes))
    for r in RULES:
        assert re.fullmatch(r"[EWI]-[A-Z0-9]+(-[A-Z0-9]+)+", r.code), r.code
        assert r.title and r.concerns and r.hint and r.source, r.code
        assert all(re.fullmatch(r"F([1-9]|1[0-9]|2[0-6])", k) for k in r.kinds), r.code
        assert r.stage in STAGES


def test_every_failure_kind_has_a_rule():
    assert {k for r in RULES for k in r.kinds} == {f"F{i}" for i in range(1, 27)}


def test_every_rule_is_asserted_by_a_test():
    """A code that no test names is a rule nothing proves: each must appear in a test file other than this one."""
    text = "\n".join(p.read_text() for p in (REPO / "tests").glob("test_*.py") if p.name != Path(__file__).name)
    assert [r.code for r in RULES if f'"{r.code}"' not in text] == []


def test_findings_take_severity_from_the_code_and_hint_from_the_rule():
    f = finding("W-AUX-CONVENTION", "s", "m")
    assert f.severity == "warning" and f.hint == next(r.hint for r in RULES if r.code == "W-AUX-CONVENTION")
    assert finding("E-AUX-RANGE", "s", "m", "own hint").hint == "own hint"
    with pytest.raises(KeyError):
        finding("E-NOPE", "x", "y")
    assert {r.severity for r in RULES} == set(SEVERITIES.values())


def test_list_rules_json_and_markdown():
    r = CliRunner().invoke(main, ["validate", "--list-rules", "--json"])
    report = json.loads(r.stdout)
    validate_json(report, "rules")
    assert r.exit_code == 0 and report["rules"] == rule_catalogue()
    md = CliRunner().invoke(main, ["validate", "--list-rules", "--markdown"])
    assert md.exit_code == 0 and md.stdout == rules_markdown()


def test_the_suite_wide_hint_audit_names_what_a_finding_lacks():
    from helpers.finding_audit import AUDIT, why_bad

    assert why_bad("d2t", "eaglehub convert SRC DST --format vllm") is None
    assert why_bad("", "a hint") == "no subject" and why_bad("fc.weight", " ") == "no hint"
    assert why_bad("d2t", "drop d2t and t2d") == "the hint discards or renames trained tensors"
    made = AUDIT.produced["W-AUX-CONVENTION"]
    finding("W-AUX-CONVENTION", "s", "m")  # every Finding made is counted, with the test that made it
    assert AUDIT.produced["W-AUX-CONVENTION"] == made + 1
