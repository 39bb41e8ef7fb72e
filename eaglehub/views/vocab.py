"""Terminal table and PNG of a vocab report: the draft vocabulary's coverage per category, next to the best."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from eaglehub.views.common import print_report_findings, titled_table
from eaglehub.views.plots import save_figure, stamp_text
from eaglehub.vocab.coverage import percent


def render_report(report: dict, console: Console) -> None:
    """The coverage per category and overall (draft vocabulary, best vocabulary of its size), the tokens it
    misses most, the findings."""
    c = report["coverage"]
    p = c["prompts"]
    console.print(
        f"[bold]{escape(report['drafter'])}[/]  target {escape(report['target'])}  ·  draft vocabulary "
        f"{c['draft_vocab_size']} of {c['vocab_size']} ids{' (identity d2t)' if c['identity_map'] else ''}  ·  "
        f"{p['count']} prompts × {p['max_tokens']} tokens",
        highlight=False,
    )
    t = titled_table(
        "coverage of the target's output tokens",
        ["category", "tokens", "distinct", "coverage", f"best {c['draft_vocab_size']}-token"],
        "numbers",
    )
    rows = [*c["per_category"].items(), ("overall", c["overall"])]
    for name, share in rows:
        t.add_row(
            name,
            str(share["output_tokens"]),
            str(share["distinct_tokens"]),
            percent(share["coverage"]),
            percent(share["best_coverage"]),
        )
    console.print(t)
    if c["missing"]:
        missed = ", ".join(f"{m['text']!r} ×{m['count']}" for m in c["missing"])
        console.print(f"missed most: {escape(missed)}", highlight=False)
    print_report_findings(report, console)


def print_coverage_line(c: dict, console: Console) -> None:
    """One line of a coverage section (``validate --prompts``): overall coverage against the best."""
    o = c["overall"]
    console.print(
        f"draft vocabulary coverage: {percent(o['coverage'])} of the target's {o['output_tokens']} output tokens on "
        f"{c['prompts']['count']} prompts (best {c['draft_vocab_size']}-token vocabulary {percent(o['best_coverage'])})",
        highlight=False,
    )


def plot_vocab(report: dict, path: str | Path) -> Path:
    """Coverage per category and overall: the draft vocabulary's bar beside the best same-size vocabulary's,
    with the figure's date, machine and versions (:func:`stamp_text`). Written atomically to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c = report["coverage"]
    rows = [*c["per_category"].items(), ("overall", c["overall"])]
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(rows) + 2), 4))
    xs = range(len(rows))
    have = [100 * (s["coverage"] or 0) for _, s in rows]
    best = [100 * (s["best_coverage"] or 0) for _, s in rows]
    ax.bar([x - 0.2 for x in xs], have, 0.4, label="draft vocabulary", color="#1f4e79")
    ax.bar([x + 0.2 for x in xs], best, 0.4, label=f"best {c['draft_vocab_size']}-token vocabulary", color="#9bbbd9")
    for x, v in zip(xs, have):
        ax.text(x - 0.2, v, f"{v:.0f}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(list(xs), [name for name, _ in rows], rotation=20, fontsize=8)
    ax.set_ylim(0, 105)
    ax.set_ylabel("% of the target's output tokens")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(
        f"draft vocabulary of {Path(report['drafter']).name} ({c['draft_vocab_size']} of {c['vocab_size']} ids) on "
        f"{c['prompts']['count']} prompts × {c['prompts']['max_tokens']} tokens",
        fontsize=9,
    )
    return save_figure(fig, path, stamp_text(report))
