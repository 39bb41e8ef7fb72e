"""Cross-engine agreement: the same pair and prompt token ids through two engines, differences reported.

The primary engine's report is the verify report; each further engine (``--engine`` given twice,
e.g. vLLM and the embedded reference engine) runs the same baseline and drafters with identical
inputs, its drafter sections are kept under ``cross_engine.engines`` and compared with the primary's:

* relative AL difference = (AL_other − AL_primary) / AL_primary (AL = 1 + accepted / drafts);
  beyond the tolerance (default 5 %, vLLM's CI rtol, docs/verification.md §2) ⇒ ``E-VERIFY-ENGINES-DISAGREE``;
* prompts whose outputs are token-identical across the two engines (baseline and with the drafter):
  a numerical near-tie may flip one greedy token between engines, so this is reported, not judged.

The other engine's own error findings (a losslessness failure inside that engine, say) are added to
the drafter's findings with the subject prefixed ``engines.<name>.``, so a drafter passes only when it
passes in every engine.
"""

from __future__ import annotations

from eaglehub.engines.base import RunResult
from eaglehub.findings import Finding, finding
from eaglehub.measure import acceptance

DEFINITION = (
    "relative_difference = (AL_engine - AL_primary) / AL_primary, AL = 1 + accepted / drafts per engine; "
    "outputs_identical = prompts whose greedy output token ids are equal in both engines"
)


def _same(a: RunResult, b: RunResult) -> int:
    return sum(x == y for x, y in zip(a.outputs, b.outputs))


def compare(
    primary: dict, other: dict, primary_runs: list[RunResult], other_runs: list[RunResult], tolerance: float
) -> tuple[list[dict], list[list[Finding]]]:
    """Compare an engine's drafter sections ``other["drafters"]`` with the primary's.

    ``primary_runs`` / ``other_runs``: ``[baseline, drafter 1, …]`` of each engine. Returns per drafter
    the comparison row and the findings to add to that drafter (disagreement, the other engine's errors).
    """
    name = other["engine"]["name"]
    rows, extra = [], []
    for i, (mine, theirs) in enumerate(zip(primary["drafters"], other["drafters"])):
        al_p = mine["acceptance"]["overall"]["acceptance_length"]
        al_o = theirs["acceptance"]["overall"]["acceptance_length"]
        diff = acceptance.relative_change(al_o, al_p) if al_p and al_o is not None else None
        agree = diff is not None and abs(diff) <= tolerance
        rows.append(
            {
                "drafter": mine["drafter"],
                "engine": name,
                "acceptance_length": {primary["engine"]["name"]: al_p, name: al_o},
                "relative_difference": diff,
                "tolerance": tolerance,
                "agree": agree,
                "outputs_identical": _same(primary_runs[i + 1], other_runs[i + 1]),
                "baseline_outputs_identical": _same(primary_runs[0], other_runs[0]),
                "num_prompts": len(primary_runs[0].outputs),
            }
        )
        found = [
            Finding(f["code"], f["severity"], f"engines.{name}.{f['subject']}", f["message"], f["hint"])
            for f in theirs["findings"]
            if f["severity"] == "error"
        ]
        if not agree:
            what = "undefined (no drafts)" if diff is None else f"{diff:+.1%}"
            found.append(
                finding(
                    "E-VERIFY-ENGINES-DISAGREE",
                    f"engines.{name}.acceptance_length",
                    f"AL {al_p} ({primary['engine']['name']} {primary['engine']['version']}) vs {al_o} "
                    f"({name} {other['engine']['version']}): relative difference {what}, tolerance {tolerance:.0%}",
                )
            )
        extra.append(found)
    return rows, extra
