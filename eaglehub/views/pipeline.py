"""The terminal table of a pipeline summary."""

from __future__ import annotations

from eaglehub.pipeline import STEPS


def render_summary(summary: dict, console) -> None:
    """One table row per drafter: each step's status, the AL measured, where it was (or would be) published."""
    from rich.markup import escape
    from rich.table import Table

    table = Table("drafter", *STEPS, "AL", "published", title=f"pipeline {escape(summary['manifest'])}")
    for r in summary["drafters"]:
        by = {s["name"]: s for s in r["steps"]}
        cells = []
        for name in STEPS:
            s = by.get(name)
            cells.append(
                "—"
                if s is None
                else {"ok": "[green]ok[/]", "failed": "[red]failed[/]", "skipped": "[dim]skipped[/]"}[s["status"]]
            )
        v = by.get("verify", {}).get("summary", {})
        al = " vs ".join(
            f"{d['acceptance_length']:.3f}" for d in v.get("drafters", []) if d["acceptance_length"] is not None
        )
        p = by.get("publish", {}).get("summary", {})
        where = (
            ""
            if not p
            else f"{'dry run: ' if p['dry_run'] else ''}{escape(p['repo'])}@{escape(p['revision'])}"
            + (f" {escape(p['result']['pr_url'] or '')}" if p.get("result") else "")
        )
        table.add_row(f"{escape(r['target'])}--{escape(r['drafter'])}", *cells, al or "—", where)
    console.print(table)
    for r in summary["drafters"]:
        for s in r["steps"]:
            if s["error"]:
                console.print(
                    f"[red]{escape(r['drafter'])} {s['name']}:[/] {escape(s['error'])}",
                    highlight=False,
                    soft_wrap=True,
                )
