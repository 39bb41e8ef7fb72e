"""Findings and the rule catalogue: every check eaglehub makes has one registered :class:`Rule`.

Code scheme ``<S>-<AREA>-<WHAT>``: the first letter is the severity (``E`` error, ``W`` warning,
``I`` info) and never changes for a code. Codes are stable, so tools and CI may match on them; the
JSON Schemas ``schemas/validate-report.schema.json`` and ``schemas/verify-report.schema.json`` list
them as an enum, and ``docs/rules.md`` is rendered from :data:`RULES`, which is read from the
packaged catalogue ``eaglehub/data/rules.json`` (tests keep all of them in step).

Each rule names the config field or tensor it concerns, a default fix hint (a finding may give a
more specific one), the source of the rule (a section of a page in ``docs/`` or a vLLM module) and
the failure kinds of ``docs/failure-kinds.md`` it covers (``F1`` … ``F26``). ``stage`` says which verb
reports it: ``validate`` (also run by ``convert`` on its source and output, and by ``verify`` as a
preflight), ``verify`` (needs an engine run), ``watch`` (a served endpoint's counters over time) or
``probe`` (the drafter's acceptance under each config reading its tensors allow).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from eaglehub.io.resources import data_path

SEVERITIES = {"E": "error", "W": "warning", "I": "info"}
STAGES = ("validate", "verify", "watch", "probe", "tune")


@dataclass(frozen=True)
class Rule:
    """One check: ``code``, one-line ``title``, what it ``concerns`` (config field or tensor), the
    default fix ``hint``, its ``source`` and the failure ``kinds`` it covers."""

    code: str
    title: str
    concerns: str
    hint: str
    source: str
    kinds: tuple[str, ...] = ()
    stage: str = "validate"

    @property
    def severity(self) -> str:
        return SEVERITIES[self.code[0]]

    def as_dict(self) -> dict:
        return {
            "code": self.code,
            "severity": self.severity,
            "title": self.title,
            "concerns": self.concerns,
            "hint": self.hint,
            "source": self.source,
            "failure_kinds": list(self.kinds),
            "stage": self.stage,
        }


def load_rules() -> tuple[Rule, ...]:
    """The catalogue shipped in the package (``eaglehub/data/rules.json``, the format
    ``validate --list-rules --json`` prints, checked against ``rules.schema.json`` by the tests)."""
    data = json.loads(data_path("rules.json").read_text(encoding="utf-8"))
    return tuple(
        Rule(
            code=r["code"],
            title=r["title"],
            concerns=r["concerns"],
            hint=r["hint"],
            source=r["source"],
            kinds=tuple(r["failure_kinds"]),
            stage=r["stage"],
        )
        for r in data["rules"]
    )


#: The registry, in catalogue order (areas grouped).
RULES: tuple[Rule, ...] = load_rules()

RULES_BY_CODE: dict[str, Rule] = {r.code: r for r in RULES}
#: code -> title (kept for callers that only need the one-liners)
CODES: dict[str, str] = {r.code: r.title for r in RULES}


@dataclass(frozen=True)
class Finding:
    """One finding. ``subject`` names the config field (dotted path) or tensor it concerns."""

    code: str
    severity: str
    subject: str
    message: str
    hint: str
    #: engine profiles (:mod:`eaglehub.profiles`) whose behaviour the finding states; empty for findings
    #: about the files themselves
    profiles: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        out = asdict(self)
        if self.profiles:
            out["profiles"] = list(self.profiles)
        else:
            del out["profiles"]
        return out


def finding(code: str, subject: str, message: str, hint: str | None = None, profiles: tuple[str, ...] = ()) -> Finding:
    """Build a finding; the severity follows from the code's first letter, the hint defaults to the rule's.
    Subject, message and hint go through :func:`printable` (they may quote untrusted config values).

    Raises:
        KeyError: ``code`` is not in the registry (a programming error, caught by the tests).
    """
    rule = RULES_BY_CODE.get(code)
    if rule is None:
        raise KeyError(f"unregistered finding code {code}")
    return Finding(
        code=code,
        severity=rule.severity,
        subject=printable(subject),
        message=printable(message),
        hint=printable(rule.hint if hint is None else hint),
        profiles=tuple(profiles),
    )


def printable(text) -> str:
    """``text`` with every non-printable character (newlines, terminal escapes, lone surrogates) written
    as its backslash escape: findings and tables quote config values and tensor names, which are
    untrusted, and must stay one line that no terminal interprets."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in str(text))


def count_by_severity(findings: list[Finding]) -> dict[str, int]:
    """``{"error": n, "warning": n, "info": n}``."""
    counts = dict.fromkeys(SEVERITIES.values(), 0)
    for f in findings:
        counts[f.severity] += 1
    return counts


def rule_catalogue(stage: str | None = None) -> list[dict]:
    """Every rule (or those of one ``stage``) as JSON-ready dicts (``validate --list-rules``,
    ``schemas/rules.schema.json``), in registry order."""
    return [r.as_dict() for r in RULES if stage is None or r.stage == stage]


def rules_markdown() -> str:
    """``docs/rules.md``: the catalogue as Markdown tables, one per stage (a test keeps the file in step)."""
    lines = [
        "# eaglehub rule catalogue",
        "",
        "Generated from `eaglehub/data/rules.json` (`eaglehub validate --list-rules --markdown`); do not edit by hand.",
        "Severity is the code's first letter: E error (exit 1), W warning (exit 1 with `--strict`), I info.",
        "Failure kinds refer to the entries F1–F26 of [failure-kinds.md](failure-kinds.md).",
        "Sources name the page of `docs/` that states the fact (and its section); vLLM module paths are those of",
        "vLLM 0.32.0 unless a version is named, and `#NNNN` are pull requests or issues of the project named.",
        "",
    ]
    for stage in STAGES:
        rules = [r for r in RULES if r.stage == stage]
        lines += [
            f"## `eaglehub {stage}` ({len(rules)} rules)",
            "",
            "| code | severity | title | concerns | fix hint | source | kinds |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in rules:
            cells = (f"`{r.code}`", r.severity, r.title, r.concerns, r.hint, r.source, " ".join(r.kinds))
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        lines.append("")
    return "\n".join(lines)
