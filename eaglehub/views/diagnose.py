"""Terminal tables of a diagnose report and its PNG plots."""

from __future__ import annotations

from pathlib import Path

from eaglehub.errors import EaglehubError


def write_plots(report: dict, plot_dir: str | Path) -> list[Path]:
    """PNG plots of the report in ``plot_dir`` (:func:`eaglehub.views.diagnose_plots.plot_all`).

    Raises:
        EaglehubError: a plot cannot be written.
    """
    from eaglehub.views.diagnose_plots import plot_all

    try:
        return plot_all(report, Path(plot_dir))
    except OSError as exc:
        raise EaglehubError(f"cannot write plots to {plot_dir}: {exc.strerror or exc}") from exc


def _f(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def render_report(report: dict, console) -> None:
    """Rich tables: AL per context side by side for every drafter, then per drafter the conditional
    acceptance rate per draft position per context, and the per-depth diagnostics where the engine
    gave them. Numbers and paths only, never prompt text or tokens."""
    from rich.markup import escape
    from rich.table import Table

    drafters, k = report["drafters"], report["settings"]["num_speculative_tokens"]
    console.print(
        f"target {escape(report['target']['path'])} · engine {escape(report['engine']['name'])} "
        f"{escape(report['engine']['version'])} · k = {k} · max_tokens {report['settings']['max_tokens']} · "
        f"{report['prompts']['count']} prompts",
        highlight=False,
    )
    console.print("acceptance length (1 + accepted / drafts) per context length", highlight=False)
    al = Table()
    al.add_column("context (tokens)", justify="right")
    al.add_column("prompt tokens", justify="right")
    for d in drafters:
        al.add_column(escape(d["label"]), justify="right")
    by_context = [{r["context_tokens"]: r for r in d["runs"]} for d in drafters]
    for c in report["contexts"]:
        if c["status"] == "skipped":
            al.add_row(str(c["context_tokens"]), "skipped", *["—"] * len(drafters), style="dim")
            continue
        span = f"{min(c['prompt_tokens'])}–{max(c['prompt_tokens'])}"
        al.add_row(
            str(c["context_tokens"]),
            span,
            *[_f(runs[c["context_tokens"]]["acceptance"]["acceptance_length"]) for runs in by_context],
        )
    console.print(al)
    for d in drafters:
        # headings as lines, not table titles: rich wraps a title to the (narrow) table's width
        console.print(f"[bold]{escape(d['label'])}[/] [dim]{escape(d['drafter'])}[/]", highlight=False)
        console.print(
            "conditional acceptance rate per draft position: accepted at i / accepted at i − 1 (the share "
            "accepted given the position before was)",
            highlight=False,
        )
        t = Table()
        t.add_column("context", justify="right")
        for i in range(k):
            t.add_column(str(i + 1), justify="right")
        for r in d["runs"]:
            t.add_row(
                str(r["context_tokens"]),
                *[_f(x, 2) for x in r["acceptance"]["conditional_acceptance_rate_per_position"]],
            )
        console.print(t)
        diag = [r for r in d["runs"] if r["diagnostics"]]
        if diag:
            console.print(
                f"per draft depth: hidden-state norm / attention mass on the first "
                f"{diag[0]['diagnostics']['sink_tokens']} tokens",
                highlight=False,
            )
            t = Table()
            t.add_column("context", justify="right")
            for i in range(k):
                t.add_column(str(i + 1), justify="right")
            for r in diag:
                g = r["diagnostics"]
                pairs = zip(g["hidden_state_norm"], g["sink_attention_mass"])
                t.add_row(str(r["context_tokens"]), *[f"{n:.2f} / {s:.3f}" for n, s in pairs])
            console.print(t)
        s = d["drift"]
        if s["acceptance_length_relative_change"] is not None:
            console.print(
                f"{escape(d['label'])}: AL {s['acceptance_length_shortest']:.3f} at {s['shortest_context']} → "
                f"{s['acceptance_length_longest']:.3f} at {s['longest_context']} tokens "
                f"({s['acceptance_length_relative_change']:+.1%})",
                highlight=False,
            )
    for c in report["contexts"]:
        if c["status"] == "skipped":
            console.print(f"[yellow]skipped[/] context {c['context_tokens']}: {escape(c['note'])}", highlight=False)
