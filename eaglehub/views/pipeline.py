"""The terminal table of a pipeline summary."""

from __future__ import annotations

from eaglehub.pipeline import STEPS


def render_summary(summary: dict, console) -> None:
    """One table row per drafter: each step's status, the AL measured, where it was (or would be) published."""
    from rich.markup import escape
    from rich.text import Text

    from eaglehub.views.tables import names_table

    rows, published = [], []
    style = {"ok": "[green]ok[/]", "failed": "[red]failed[/]", "skipped": "[dim]skipped[/]"}
    for r in summary["drafters"]:
        by = {s["name"]: s for s in r["steps"]}
        # one cell of steps (wrapped at words), not a column each: eight columns leave a name no room at 80
        steps = ", ".join(f"{name} {style[by[name]['status']] if name in by else '—'}" for name in STEPS)
        v = by.get("verify", {}).get("summary", {})
        al = " vs ".join(
            f"{d['acceptance_length']:.3f}" for d in v.get("drafters", []) if d["acceptance_length"] is not None
        )
        label = f"{r['target']}--{r['drafter']}"
        rows.append([label, steps, al or "—"])
        p = by.get("publish", {}).get("summary", {})
        if p:
            where = f"{'dry run: ' if p['dry_run'] else ''}{p['repo']}@{p['revision']}"
            published.append(
                f"{label} published: {where}" + (f" {p['result']['pr_url'] or ''}" if p.get("result") else "")
            )
    # the manifest's path as a line of its own: a table title folds a long path
    console.print(Text(f"pipeline {summary['manifest']}", style="bold"), soft_wrap=True)
    table = names_table(console, ["drafter", "steps", "AL"], rows)
    console.print(table)
    for line in published:
        console.print(Text(line.rstrip()), soft_wrap=True)
    for r in summary["drafters"]:
        for s in r["steps"]:
            if s["error"]:
                console.print(
                    f"[red]{escape(r['drafter'])} {s['name']}:[/] {escape(s['error'])}",
                    highlight=False,
                    soft_wrap=True,
                )
