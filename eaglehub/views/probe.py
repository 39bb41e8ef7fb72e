"""Terminal tables and the PNG of a probe report: the AL of every reading of every probed field."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from eaglehub.views.common import print_prose, print_report_findings, printable_report, titled_table
from eaglehub.views.plots import save_figure, stamp_text


def _value(v) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def _rate(rates: list) -> str:
    return "/".join("-" if r is None else f"{r:.2f}" for r in rates)


PROBE_LEGEND = (
    "status: configured = the reading the config gives; trained = the one the weights were trained for (the "
    "best, at 95 % confidence); kept = the configured one, kept where the sample cannot decide. "
    "AL: 1 + accepted / drafts; rate per position: the share of drafts accepted at each position"
)


def render_report(report: dict, console: Console) -> None:
    """One table per field (best reading first, the configured and trained ones marked), the AL as
    configured and as trained, the findings and the config edits a ``--write`` makes."""
    report = printable_report(report)
    p = report["prompts"]
    console.print(
        f"[bold]{escape(report['drafter'])}[/]  target {escape(report['target'])}  "
        f"k {report['num_speculative_tokens']} · {p['count']} prompts · {p['max_tokens']} tokens · "
        f"{report['readings_measured']} readings measured in {report['seconds']['total']:.0f} s "
        f"({report['engine']['name']} engine {report['engine']['version']})",
        highlight=False,
    )
    if not report["fields"]:
        console.print("no field of this drafter has more than one reading its tensors allow", highlight=False)
    for f in report["fields"]:
        t = titled_table(
            f"{f['field']} ({f['config_keys']}): {f['verdict']}",
            ["reading", "status", "AL", "rate per position", "drafts"],
            "numbers",
        )
        for r in f["readings"]:
            # an inconclusive field names no trained reading
            chosen = "trained" if f["verdict"] != "inconclusive" else "kept"
            # one word a cell (configured,trained), so a row stays one line at 80 columns
            mark = ",".join((["configured"] if r["configured"] else []) + ([chosen] if r["trained"] else []))
            al = r["acceptance_length"]
            t.add_row(
                f"{escape(_value(r['value']))}  [dim]{escape(r['label'])}[/]",
                mark or "—",
                "-" if al is None else f"{al:.3f}",
                _rate(r["acceptance_rate_per_position"]),
                str(r["num_drafts"]),
            )
        console.print(t)
    if report["fields"]:
        print_prose(console, PROBE_LEGEND, style="dim")
    a = report["acceptance"]
    changed = f"; with the trained readings {a['trained']['acceptance_length'] or 1:.3f}" if report["settings"] else ""
    console.print(f"AL as configured {a['configured']['acceptance_length'] or 1:.3f}{changed}", highlight=False)
    print_report_findings(report, console, verdict_line(report))


def probe_exit_code(report: dict) -> int:
    """0 when every configured reading is the trained one, or ``--write`` wrote the drafter with the trained
    readings; 1 when a reading is beaten and nothing was written, or a field is inconclusive."""
    return 0 if report["passed"] or report.get("written") else 1


def verdict_line(report: dict) -> str:
    """The last line of the text output, saying what the exit code (:func:`probe_exit_code`) says."""
    p = report["prompts"]
    size = f"{p['count']} prompts x {p['max_tokens']} tokens"
    undecided = [f["field"] for f in report["fields"] if f["verdict"] == "inconclusive"]
    pending = f"; still inconclusive: {', '.join(undecided)}" if undecided else ""
    written = report.get("written")
    if written:
        edits = ", ".join(f"{c['key']} {_value(c['old'])} -> {_value(c['new'])}" for c in written["config_changes"])
        return (
            f"[bold green]WRITTEN:[/] {escape(written['destination'])} with the trained readings ({escape(edits)}); "
            f"the source is unchanged{pending}"
        )
    if report["verdict"] == "beaten":
        beaten = [f["field"] for f in report["fields"] if f["verdict"] == "beaten"]
        return (
            f"[bold red]FAILED:[/] the configured reading of {', '.join(beaten)} is beaten on {size}; "
            f"--write DST writes the fix{pending}"
        )
    if undecided:
        return (
            f"[bold yellow]INCONCLUSIVE:[/] {size} cannot decide {', '.join(undecided)} at 95 % confidence; "
            "nothing is called trained (the warnings give the command that measures more)"
        )
    if not report["fields"]:
        return "[bold green]OK:[/] no field has a second reading its tensors allow"
    return f"[bold green]OK:[/] every configured reading is the trained one on {size} (95 % confidence)"


def plot_probe(report: dict, path: str | Path) -> Path:
    """One panel per probed field: a horizontal bar of AL per reading (the configured one hatched, the
    trained one dark), with the figure's date, machine and versions (:func:`stamp_text`). Written
    atomically to ``path`` (PNG, 150 dpi)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fields = report["fields"] or []
    n = max(1, len(fields))
    height = 1.2 + sum(0.6 + 0.35 * len(f["readings"]) for f in fields) if fields else 2.5
    fig, grid = plt.subplots(n, 1, figsize=(9, height), squeeze=False)
    axes = [row[0] for row in grid]
    for ax, f in zip(axes, fields):
        rows = list(reversed(f["readings"]))
        als = [r["acceptance_length"] or 1.0 for r in rows]
        colors = ["#1f4e79" if r["trained"] else "#9bbbd9" for r in rows]
        bars = ax.barh(range(len(rows)), als, color=colors)
        for bar, r in zip(bars, rows):
            if r["configured"]:
                bar.set_hatch("//")
                bar.set_edgecolor("black")
        ax.set_yticks(range(len(rows)), [f"{_value(r['value'])}  ({r['label']})" for r in rows], fontsize=8)
        for i, al in enumerate(als):
            ax.text(al, i, f" {al:.3f}", va="center", fontsize=8)
        ax.set_xlim(1.0, max(als) * 1.15)
        ax.set_title(f"{f['field']} ({f['config_keys']})", fontsize=9, loc="left")
    if not fields:
        axes[0].text(0.5, 0.5, "no field with more than one reading", ha="center", va="center")
        axes[0].set_axis_off()
    axes[-1].set_xlabel("acceptance length (1 + accepted / drafts); hatched: configured, dark: trained")
    fig.suptitle(
        f"probe of {Path(report['drafter']).name} on {Path(report['target']).name} · k {report['num_speculative_tokens']}"
        f" · {report['prompts']['count']} prompts × {report['prompts']['max_tokens']} tokens",
        fontsize=10,
    )
    return save_figure(fig, path, stamp_text(report))
