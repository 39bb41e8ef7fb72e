"""`eaglehub vocab`: the draft vocabulary's coverage of the target's own output on a prompt set (docs/vocab.md)."""

from __future__ import annotations

import time
from pathlib import Path

from eaglehub import __version__
from eaglehub.findings import count_by_severity
from eaglehub.io.schemas import check_output
from eaglehub.vocab.coverage import DEFAULT_LIMIT, DEFAULT_MAX_TOKENS, VocabOptions, coverage_findings, measure_coverage

__all__ = ["DEFAULT_LIMIT", "DEFAULT_MAX_TOKENS", "VocabOptions", "vocab_report", "write_report"]

REPORT_SCHEMA = "eaglehub.vocab-report/1"


def vocab_report(drafter: str | Path, opts: VocabOptions, progress=None) -> dict:
    """Measure the draft vocabulary's coverage (module doc); the report (``vocab-report.schema.json``).

    Raises:
        EaglehubError: bad options, an unusable drafter, target or prompt file (exit 2).
    """
    from eaglehub.checks.validate import preflight
    from eaglehub.engines.reference import ReferenceEngine
    from eaglehub.formats.registry import read_drafter
    from eaglehub.target import resolve_target

    t0 = time.perf_counter()
    path = Path(drafter)
    opts.check()
    d = read_drafter(path)
    target_path = resolve_target(opts.target)
    engine = ReferenceEngine(device=opts.device)
    # a wrong draft_vocab_size would be measured as if it were right; judged as the engine that measures reads it
    preflight(path, target_path, (engine.profile(),))
    section = measure_coverage(d, target_path, opts, progress)
    findings = coverage_findings(d, section)
    report = {
        "schema": REPORT_SCHEMA,
        "tool": {"name": "eaglehub", "version": __version__},
        "drafter": str(path.resolve()),
        "format": d.format,
        "target": str(target_path),
        "engine": {"name": engine.name, "version": engine.version()},
        "coverage": section,
        "passed": not any(f.severity == "error" for f in findings),
        "findings": [f.as_dict() for f in findings],
        "counts": count_by_severity(findings),
        "definitions": {
            "coverage": "share of the target's output tokens (its greedy continuations of the prompts, every "
            "occurrence counted) that are in the draft vocabulary (arange(Vd) + d2t; every id when not pruned)",
            "best_coverage": "the same share for the Vd most frequent tokens of the same text: the most any "
            "Vd-token vocabulary can cover there",
        },
        "seconds": round(time.perf_counter() - t0, 1),
    }
    check_output(report, "vocab-report", "vocab report")
    return report


def write_report(report: dict, path: str | Path) -> None:
    """Validate, then write the vocab ``report`` to ``path`` atomically (``schemas/vocab-report.schema.json``)."""
    from eaglehub.io.schemas import write_output

    write_output(report, str(path), "vocab-report", "vocab report")
