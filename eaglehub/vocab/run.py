"""`eaglehub vocab`: the draft vocabulary's coverage of the target's own output on a prompt set (docs/vocab.md)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from eaglehub import __version__
from eaglehub.errors import EaglehubError
from eaglehub.findings import Finding, count_by_severity, finding
from eaglehub.io.schemas import check_output
from eaglehub.vocab.coverage import LOW_COVERAGE_RATIO, coverage, draft_token_ids, is_identity_map

REPORT_SCHEMA = "eaglehub.vocab-report/1"
DEFAULT_LIMIT = 4
"""Prompts per category: 24 of the project's 48 (the target's continuations are the cost)."""
DEFAULT_MAX_TOKENS = 64


@dataclass
class VocabOptions:
    """Inputs of a coverage measurement (``eaglehub vocab --help`` gives units and defaults)."""

    target: str
    prompts_file: str | None = None
    limit: int | None = DEFAULT_LIMIT
    max_tokens: int = DEFAULT_MAX_TOKENS
    device: str = "cpu"

    def check(self) -> None:
        """Raises: EaglehubError (exit 2) for values out of range."""
        if self.max_tokens < 1 or (self.limit is not None and self.limit < 1):
            raise EaglehubError("--limit and --max-tokens must be >= 1", hint="e.g. --limit 4 --max-tokens 64")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def coverage_findings(drafter, section: dict) -> list[Finding]:
    """W-VOCAB-IDENTITY (an untrained identity map) or W-VOCAB-COVERAGE (a map far from the best), with the figures."""
    o = section["overall"]
    if o["coverage"] is None:
        return []
    vd = drafter.dims.Vd
    figures = (
        f"it holds {_pct(o['coverage'])} of the target's {o['output_tokens']} output tokens on these prompts, "
        f"the best {vd}-token vocabulary for the same text {_pct(o['best_coverage'])}"
    )
    if section["identity_map"]:
        return [
            finding(
                "W-VOCAB-IDENTITY",
                "d2t",
                f"d2t is all zeros: the draft vocabulary is the target's first {vd} ids, an untrained map; {figures}",
            )
        ]
    if o["best_coverage"] and o["coverage"] < LOW_COVERAGE_RATIO * o["best_coverage"]:
        return [
            finding(
                "W-VOCAB-COVERAGE",
                "d2t",
                f"the draft vocabulary covers the target's output poorly: {figures}; every token outside it is a "
                "draft that cannot be accepted",
            )
        ]
    return []


def measure_coverage(drafter, target_path: Path, opts: VocabOptions, progress=None) -> dict:
    """The report's ``coverage`` part for a read drafter (also ``validate --prompts``): the target's greedy
    continuations of the prompts (reference engine), the share of their tokens the draft vocabulary holds,
    overall and per category, against the best Vd-token vocabulary, and the tokens it misses most."""
    from eaglehub.convert.gains import greedy_continuations
    from eaglehub.engines.chat import ChatTokenizer, encode_chat
    from eaglehub.engines.reference import ReferenceEngine
    from eaglehub.measure.prompts import default_prompts_path, load_prompts

    opts.check()
    if drafter.dims.V is None or drafter.dims.Vd is None:
        raise EaglehubError(
            "the drafter's config gives no vocab_size / draft_vocab_size", hint="eaglehub validate DRAFTER says why"
        )
    say = progress or (lambda _text: None)
    prompts = load_prompts(opts.prompts_file, None, opts.limit)
    say("loading the target")
    live = ReferenceEngine(device=opts.device).target(target_path, "float32")
    say(f"the target's greedy continuations of {len(prompts)} prompts")
    answers = greedy_continuations(live, encode_chat(target_path, [p.text for p in prompts]), opts.max_tokens)
    section = coverage([(p.category, a) for p, a in zip(prompts, answers)], draft_token_ids(drafter), drafter.dims.Vd)
    tokenizer = ChatTokenizer(target_path).tokenizer
    for m in section["missing"]:
        m["text"] = tokenizer.decode([m["token_id"]])  # special tokens too: an end-of-turn token may be missed
    return {
        "vocab_size": drafter.dims.V,
        "draft_vocab_size": drafter.dims.Vd,
        "pruned": drafter.dims.Vd < drafter.dims.V,
        "identity_map": is_identity_map(drafter),
        "prompts": {
            "file": str(Path(opts.prompts_file) if opts.prompts_file else default_prompts_path()),
            "count": len(prompts),
            "limit_per_category": opts.limit,
            "max_tokens": opts.max_tokens,
        },
        **section,
    }


def vocab_report(drafter: str | Path, opts: VocabOptions, progress=None) -> dict:
    """Measure the draft vocabulary's coverage (module doc); the report (``vocab-report.schema.json``).

    Raises:
        EaglehubError: bad options, an unusable drafter, target or prompt file (exit 2).
    """
    from eaglehub.engines.reference import ReferenceEngine
    from eaglehub.formats.registry import read_drafter
    from eaglehub.target import resolve_target

    t0 = time.perf_counter()
    path = Path(drafter)
    d = read_drafter(path)
    target_path = resolve_target(opts.target)
    section = measure_coverage(d, target_path, opts, progress)
    findings = coverage_findings(d, section)
    engine = ReferenceEngine(device=opts.device)
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
