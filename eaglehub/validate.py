"""``eaglehub validate``: check a drafter directory (and optionally its pairing with a target).

Exit codes (CLI): 0 no error finding, 1 at least one, 2 usage errors (unreadable input). Finding
codes and their meaning: :mod:`eaglehub.findings`. Report layout: ``schemas/validate-report.schema.json``.
"""

from __future__ import annotations

from pathlib import Path

from .checks import CHECKS, STATISTICS_CHECKS, Context, TargetInfo, read_target
from .drafter import Drafter
from .findings import Finding, count_by_severity, finding
from .layouts import FORMATS, architecture, read_drafter
from .source import resolve_source

REPORT_SCHEMA = "eaglehub.validate-report/1"


def _layout_findings(d: Drafter) -> list[Finding]:
    """Layouts the checks cannot run on: a full LM (F3), EAGLE-1/2, unsupported layouts."""
    if d.layout == "not-a-drafter":
        layers = d.config.get("num_hidden_layers")
        return [finding("E-NOT-A-DRAFTER", "config.json",
                        f"not an EAGLE-3 drafter: {architecture(d.config)} with {layers} layers, no fc.weight, no draft_vocab_size "
                        "(a target model given as drafter?)",
                        "pass the drafter directory; give the target with --target")]
    if d.layout == "eagle1":
        return [finding("E-LAYOUT-EAGLE1", "fc.weight", "EAGLE-1/2 checkpoint (fc reads 2H, no hidden_norm): not usable as an EAGLE-3 drafter",
                        "train an EAGLE-3 drafter (method eagle3 needs aux hidden states)")]
    if d.format not in FORMATS:
        return [finding("E-LAYOUT-UNSUPPORTED", "config.json", f"{'; '.join(d.evidence)}: recognised but not checked by this version",
                        "export it to the vLLM-native layout (LlamaForCausalLMEagle3 + midlayer.*)")]
    return []


def run_checks(drafter: Drafter, target: TargetInfo | None = None, deep: bool = False) -> list[Finding]:
    """All findings for an already-read drafter (layout rejections short-circuit the tensor checks).
    Without ``deep`` nothing but ``d2t``/``t2d`` (and 1-D norms) is read from the tensor data;
    ``deep`` adds the value checks (:data:`eaglehub.checks.STATISTICS_CHECKS`: NaN/Inf, untrained-looking
    weights), which stream every float tensor."""
    rejected = _layout_findings(drafter)
    if rejected:
        return rejected
    ctx = Context(drafter, target)
    return [f for check in CHECKS if deep or check not in STATISTICS_CHECKS for f in check(ctx)]


def make_report(drafter: Drafter, findings: list[Finding], target: TargetInfo | None, deep: bool = False) -> dict:
    """The JSON report (``schemas/validate-report.schema.json``)."""
    counts = count_by_severity(findings)
    return {
        "schema": REPORT_SCHEMA,
        "drafter": str(drafter.path),
        "target": str(target.path) if target else None,
        "layout": drafter.format,
        "format_evidence": drafter.evidence,
        "ok": counts["error"] == 0,
        "deep": deep,
        "counts": counts,
        "findings": [f.as_dict() for f in findings],
    }


def validate(drafter_dir: str | Path, target: str | Path | None = None, source_format: str | None = None,
             revision: str | None = None, deep: bool = False) -> dict:
    """Validate ``drafter_dir`` (headers plus the small tensors the checks need: norms, ``d2t``, ``t2d``;
    ``deep``: every float tensor's values too).

    ``target``: anything :func:`eaglehub.target.resolve_target` accepts. Returns the report dict.
    Raises: EaglehubError for unreadable input (missing dir, bad JSON, truncated weights; exit 2).
    """
    path, _ = resolve_source(str(drafter_dir), revision)
    drafter = read_drafter(path, fmt=source_format)
    tinfo = read_target(target) if target is not None else None
    return make_report(drafter, run_checks(drafter, tinfo, deep=deep), tinfo, deep)
