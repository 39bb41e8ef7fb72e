"""Terminal tables and the PNG plot of a speedup report."""

from __future__ import annotations

from pathlib import Path

from eaglehub.views.common import print_prose
from eaglehub.views.plots import save_figure


def _f(x: float | None, digits: int = 2, suffix: str = "") -> str:
    return "—" if x is None else f"{x:.{digits}f}{suffix}"


def sample_line(levels: list[dict]) -> str:
    """What each level's speedup was measured on: its prompts and batches, the output tokens of each run, and
    that each run was timed once (a speedup from one short timed run is a sample of one, not a steady rate)."""
    parts = []
    for lv in levels:
        alone, spec = lv["target_alone"]["output_tokens"], lv["with_drafter"]["output_tokens"]
        tokens = f"{alone} output tokens" if alone == spec else f"{alone} / {spec} output tokens (alone / +drafter)"
        batches = lv["batches"]
        parts.append(
            f"conc. {lv['concurrency']}: {lv['prompts']} prompt{'s' * (lv['prompts'] != 1)} in {batches} "
            f"batch{'es' * (batches != 1)}, {tokens}"
        )
    return "sample: each speedup is one timed run without and one with the drafter; " + "; ".join(parts)


def render_report(report: dict, console) -> None:
    """The table (per level: tok/s without and with the drafter, measured speedup, AL, expected
    speedups), the costs, the notes and the serve line. Never prints prompt text or tokens."""
    from rich.markup import escape
    from rich.table import Table

    s, c = report["settings"], report["costs"]
    t = Table(
        title=f"speedup of {escape(report['drafter'])} (k = {s['num_speculative_tokens']}, max_tokens "
        f"{s['max_tokens']}, {s['dtype']}, {report['engine']['name']} {report['engine']['version']})",
        title_justify="left",
    )
    # short headers: the table must fit an 80-column terminal; the report's definitions spell them out
    for col in (
        "conc.",
        "tok/s alone",
        "tok/s +drafter",
        "speedup",
        "AL",
        "α",
        "exp. Leviathan",
        "exp. general",
    ):
        t.add_column(col, justify="right")
    for lv in report["levels"]:
        t.add_row(
            str(lv["concurrency"]),
            _f(lv["target_alone"]["output_tokens_per_second"], 1),
            _f(lv["with_drafter"]["output_tokens_per_second"], 1),
            _f(lv["measured_speedup"], 2, "×"),
            _f(lv["acceptance"]["acceptance_length"], 3),
            _f(lv["implied_alpha"], 3),
            _f(lv["expected_speedup_leviathan"], 2, "×"),
            _f(lv["expected_speedup_general"], 2, "×"),
        )
    console.print(t)
    print_prose(console, sample_line(report["levels"]))
    console.print(
        "[dim]conc.: concurrency, prompts per batch; α: the per-token acceptance rate the AL implies; "
        "exp. Leviathan: the speedup expected from α and the draft cost c (Leviathan et al.); exp. general: "
        "the speedup expected from AL and the measured costs, AL · T_target(1) / (T_verify(k+1) + k · "
        "T_draft(1))[/]",
        highlight=False,
    )
    console.print(
        f"costs ({c['device']}, {c['threads']} threads, {c['prefix_tokens']}-token prefix, median of "
        f"{c['repeats']}): T_target(1) {c['t_target_1_ms']:.2f} ms, T_verify(k+1) {c['t_verify_k1_ms']:.2f} ms, "
        f"T_draft(1) {c['t_draft_1_ms']:.2f} ms; c = {c['c']:.3f}, v = {c['v']:.2f}; bound "
        f"(k+1)/(v+k·c) = {report['speedup_bound']:.2f}×",
        highlight=False,
    )
    for n in report["notes"]:
        console.print(f"[yellow]note:[/] {escape(n)}", highlight=False)
    console.print("serve with:", highlight=False)
    console.print(escape(report["serve_command"]), highlight=False, soft_wrap=True)


def plot_speedup(report: dict, path: str | Path) -> Path:
    """PNG (150 dpi, written atomically): output tokens/s without and with the drafter per
    concurrency (bars), and measured vs expected speedup per concurrency (lines).

    Raises:
        EaglehubError: the file cannot be written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = report["levels"]
    names = [str(lv["concurrency"]) for lv in levels]
    x = range(len(levels))
    fig, (ax_tps, ax_s) = plt.subplots(1, 2, figsize=(11, 4.2))
    for off, key, label in (
        (-0.2, "target_alone", "target alone"),
        (0.2, "with_drafter", "target + drafter"),
    ):
        ax_tps.bar(
            [i + off for i in x],
            [lv[key]["output_tokens_per_second"] or 0.0 for lv in levels],
            0.4,
            label=label,
        )
    ax_tps.set_xticks(list(x), names)
    ax_tps.set_xlabel("concurrency (prompts per batch)")
    ax_tps.set_ylabel("output tokens / s")
    ax_tps.legend(fontsize=8)
    for key, label, style in (
        ("measured_speedup", "measured", "o-"),
        ("expected_speedup_leviathan", "Leviathan", "s--"),
        ("expected_speedup_general", "general (measured costs)", "^:"),
    ):
        ax_s.plot(list(x), [lv[key] if lv[key] is not None else float("nan") for lv in levels], style, label=label)
    ax_s.axhline(1.0, color="grey", lw=0.8)
    ax_s.set_xticks(list(x), names)
    ax_s.set_xlabel("concurrency (prompts per batch)")
    ax_s.set_ylabel("speedup (with / without drafter)")
    ax_s.legend(fontsize=8)
    s = report["settings"]
    fig.suptitle(
        f"{Path(report['drafter']).name} on {Path(report['target']['path']).name} · {report['engine']['name']} "
        f"{report['engine']['version']} · k {s['num_speculative_tokens']} · max_tokens {s['max_tokens']} · "
        f"costs on {report['costs']['device']}",
        fontsize=9,
    )
    return save_figure(fig, path)
