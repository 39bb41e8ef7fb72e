"""Every finding the test session makes, held to the hint standard (docs/validate.md): it names its subject,
it has a hint, and the hint never has the user drop, rename or re-initialise trained tensors.

:func:`install` wraps :class:`eaglehub.findings.Finding` so that every finding made in this process (by a
rule, read back from a report, by an engine comparison) is recorded with the test that made it. At the end
of the session tests/conftest.py prints the rules the session produced and fails the session on any finding
below the standard (:func:`problems`) and, when the whole suite ran, on any rule of the catalogue no test
made a finding of (:func:`missing_rules`): each rule is then shown with its subject and hint on a planted case. Findings of the planted bad-hint cases a test builds on purpose
carry the test's own mark: ``@pytest.mark.bad_hints``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from helpers.hints import DISCARDING


@dataclass
class Audit:
    current: str | None = None
    """The node id of the running test; None outside a test (collection, session fixtures)."""
    exempt: bool = False
    """The running test builds bad findings on purpose (``bad_hints``)."""
    produced: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    """Per finding code: how many findings the session made."""
    bad: list[tuple[str | None, str, str, str, str]] = field(default_factory=list)
    """(test, code, subject, hint, why) of each finding below the standard."""
    deselected: int = 0
    """Tests ``-m`` / ``-k`` deselected."""
    full_suite: bool = False
    """Every test file collected and no test deselected (``make test``): then every rule must be made."""


AUDIT = Audit()


def why_bad(subject: str, hint: str) -> str | None:
    """What the finding lacks, or None when it meets the standard (module doc)."""
    if not subject.strip():
        return "no subject"
    if not hint.strip():
        return "no hint"
    if DISCARDING.search(hint):
        return "the hint discards or renames trained tensors"
    return None


def install() -> None:
    """Record every :class:`Finding` made from now on in :data:`AUDIT` (idempotent)."""
    from eaglehub.findings import Finding

    original = Finding.__init__
    if getattr(original, "_audited", False):
        return

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        AUDIT.produced[self.code] += 1
        problem = why_bad(self.subject, self.hint)
        if problem and not AUDIT.exempt:
            AUDIT.bad.append((AUDIT.current, self.code, self.subject, self.hint, problem))

    init._audited = True  # type: ignore[attr-defined]
    Finding.__init__ = init  # type: ignore[method-assign]


def problems() -> list[str]:
    """One line per finding below the standard, first five per code."""
    seen: dict[str, int] = defaultdict(int)
    lines = []
    for test, code, subject, hint, why in AUDIT.bad:
        seen[code] += 1
        if seen[code] <= 5:
            lines.append(f"{code} ({why}) subject {subject!r}, hint {hint!r}, made by {test or 'a fixture'}")
    return lines


def missing_rules() -> list[str]:
    """The catalogue's rules no finding of the session was made for, in catalogue order."""
    from eaglehub.findings import RULES

    return [r.code for r in RULES if not AUDIT.produced.get(r.code)]
