"""Terminal tables of a manifest run: one row per target / drafter pair."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from eaglehub.verify.pairing import SUMMARY_FILE

if TYPE_CHECKING:
    pass


def summary_table(summary: dict, console):
    """A rich Table, one row per pair: target, drafter, k, lossless (matched/total), AL, acceptance
    rate per position (unconditional), passed, report path; the paths keep their distinguishing ends
    at any width (:func:`eaglehub.views.tables.names_table`)."""
    from rich.markup import escape

    from eaglehub.views.tables import names_table
    from eaglehub.views.verify import fmt_number, rates_text

    columns = ["target", "drafter", "k", "lossless", "AL", "rate per position", "passed", "report"]
    rows = []
    for r in summary["pairs"]:
        lossless = "—" if r["num_prompts"] is None else f"{r['num_prompts_matched']}/{r['num_prompts']}"
        verdict = "[green]PASS[/]" if r["passed"] else "[red]ERROR[/]" if r["error"] else "[red]FAIL[/]"
        rows.append(
            [
                r["target"],
                r["drafter"],
                str(r["settings"]["num_speculative_tokens"]),
                lossless,
                fmt_number(r["acceptance_length"]),
                rates_text(r["acceptance_rate_per_position"]),
                verdict,
                r["report"] or "—",
            ]
        )
    title = f"verify {escape(_source(summary))}: {summary['num_passed']}/{summary['num_pairs']} pairs passed"
    return names_table(console, columns, rows, names=(0, 1, 7), right=("k", "lossless", "AL"), title=title)


def _source(summary: dict) -> str:
    if summary["manifest"] is not None:
        return summary["manifest"]
    d = summary.get("discovery") or {}
    return f"--target {d.get('target')} (drafters found on {d.get('endpoint') or 'the local cache'})"


def render_summary(summary: dict, console) -> None:
    """Print the summary table, then each pair's error or finding codes (the reports have the details)."""
    from rich.markup import escape

    from eaglehub.findings import printable

    console.print(summary_table(summary, console))
    for r in summary["pairs"]:
        name = escape(f"{r['target']}--{r['drafter']}")
        if r["error"]:
            console.print(f"[red]{name}[/]: did not run: {escape(printable(r['error']))}", highlight=False)
        elif r["findings"]:
            console.print(f"{name}: {', '.join(r['findings'])}", highlight=False)
    claims = {d["name"]: d["claim"] for d in (summary.get("discovery") or {}).get("drafters", []) if d["claim"]}
    for r in summary["pairs"]:
        claim = claims.get(r["drafter"])
        if claim and r["acceptance_length"] is not None:
            console.print(
                f"{escape(r['drafter'])}: AL {r['acceptance_length']:.3f} measured, {claim['acceptance_length']:.3f} "
                f"claimed ({escape(claim['source'])}"
                + (f", {claim['engine']}, k {claim['num_speculative_tokens']}" if claim.get("engine") else "")
                + ")",
                highlight=False,
                soft_wrap=True,
            )
    if summary["report_dir"]:
        console.print(f"summary: {Path(summary['report_dir']) / SUMMARY_FILE}", highlight=False)
