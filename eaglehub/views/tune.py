"""Terminal output and the PNG plot of a tune report."""

from __future__ import annotations

from pathlib import Path

from eaglehub.tune.costs import CostModel
from eaglehub.views.common import print_prose
from eaglehub.views.plots import save_figure, stamp_text


def _table(console, title: str, columns: list[str]):
    """A table whose title is a line of its own: a table only as wide as its numbers would wrap a longer one."""
    from rich.table import Table

    console.print(f"[bold]{title}[/]", highlight=False)
    t = Table()
    for col in columns:
        t.add_column(col, justify="right")
    return t


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:+.1%}"


def render_report(report: dict, console) -> None:
    """Acceptance (rates, AL(k), the prediction check), the cost model with its residuals, measured against
    predicted throughput, the schedule in its three forms, the check, findings. Fits 80 columns; the serve
    line prints whole."""
    from rich.markup import escape

    acc, sched, s = report["acceptance"], report["schedule"], report["settings"]
    source, costs = report["costs"]["source"], report["costs"]["model"]
    curve = acc["curve"]
    t = _table(
        console,
        f"acceptance at k={curve['k']}: {curve['num_drafts']} drafts, {curve['prompts']} prompts, "
        f"T={curve['settings'].get('temperature', s['temperature']):g}",
        ["k", "rate@k", "AL(k)", "direct", "error"],
    )
    direct = {row["k"]: row for row in acc["check"]}
    for k in range(curve["k"] + 1):
        row = direct.get(k)
        t.add_row(
            str(k),
            "—" if k == 0 else f"{curve['rates'][k - 1]:.3f}",
            f"{curve['al_by_k'][k]:.3f}",
            f"{row['direct']:.3f}" if row else "",
            _pct(row["error"]) if row else "",
        )
    console.print(t)
    print_prose(
        console,
        "rate@k: unconditional acceptance rate at draft position k; AL(k) = 1 + the rates up to k, predicted "
        "from the one run at the largest k; direct: AL measured by a run at that k; error: predicted / direct - 1",
        style="dim",
    )
    if not acc["check"]:
        why = "no k below 1" if curve["k"] == 1 else f"read from {acc['source']}, which has no direct runs"
        print_prose(console, f"AL(k) prediction not checked: {why}", style="yellow")
    eng = costs.get("engine") or {}
    mach = costs.get("machine") or {}
    t = _table(
        console,
        f"step cost (ms), {eng.get('name', '?')} {eng.get('version', '')} on {mach.get('device', '?')}",
        ["batch", "k", "steps", "measured", "model", "residual"],
    )
    for c in costs["cells"]:
        t.add_row(
            str(c["batch"]),
            str(c["k"]),
            str(c["steps"]),
            f"{c['mean_ms']:.2f}",
            "—" if c["predicted_ms"] is None else f"{c['predicted_ms']:.2f}",
            _pct(c["residual"]),
        )
    console.print(t)
    if costs["target_cells"]:
        t = _table(
            console, "target forward (ms): n new tokens per request", ["batch", "n", "measured", "fit", "residual"]
        )
        for c in costs["target_cells"]:
            t.add_row(
                str(c["batch"]),
                str(c["tokens"]),
                f"{c['mean_ms']:.2f}",
                "—" if c["predicted_ms"] is None else f"{c['predicted_ms']:.2f}",
                _pct(c["residual"]),
            )
        console.print(t)
    p = costs["params_ms"]
    print_prose(
        console,
        f"model: {costs['formula']}; a {p['a']:.3f}, g {p['g']:.3f}, c {p['c']:.3f}, s {p['s']:.3f}, "
        f"d {p['d']:.3f}, e {p['e']:.3f} ms; largest residual {costs['max_abs_residual']:.1%}",
    )
    if not costs["target_cells"]:
        print_prose(
            console,
            "no target forwards were timed: c is 0 and e carries the verified tokens as well as the drafter's rows",
            style="yellow",
        )
    parts = _table(
        console,
        "the parts (ms) by batch size",
        ["batch", "target n=1", f"target n={curve['k'] + 1}", "drafter", f"step k={curve['k']}"],
    )
    model = CostModel.from_dict(costs)
    for b in sorted({c["batch"] for c in costs["cells"]}):
        parts.add_row(
            str(b),
            f"{model.target_ms(b, 1):.2f}",
            f"{model.target_ms(b, curve['k'] + 1):.2f}",
            f"{model.drafter_ms(b):.2f}",
            f"{model.step_ms(b, curve['k']):.2f}",
        )
    console.print(parts)
    print_prose(console, f"acceptance: {acc['source']}; costs: {source}", style="dim")
    if report["grid"]:
        t = _table(
            console,
            f"decode tokens/s: median of {s['repeats']} vs model",
            ["k", "conc.", "measured", "spread", "predicted", "error"],
        )
        for g in report["grid"]:
            m = g["measured"]
            t.add_row(
                str(g["k"]),
                str(g["concurrency"]),
                f"{m['median']:.1f}",
                f"{m['min']:.0f}-{m['max']:.0f}",
                f"{g['predicted']:.1f}",
                _pct(g["error"]),
            )
        console.print(t)
        worst = max(abs(g["error"]) for g in report["grid"])
        print_prose(console, f"largest prediction error {worst:.1%} over {len(report['grid'])} cells", style="dim")
    ranges = ", ".join(f"{a}-{b}: k={k}" for a, b, k in sched["ranges"])
    console.print(f"schedule (batch size: k): {ranges}", highlight=False)
    rec = sched["recommendation"]
    kept = f"{rec['static_worst_ratio']:.1%} of the best at its worst batch size"
    if rec["kind"] == "schedule":
        what = f"serve the schedule: no static choice comes within {rec['margin']:.0%} of it everywhere"
        what += f" (the best, k={rec['static_k']}, keeps {kept})"
    else:
        choice = "the target alone" if rec["kind"] == "target_alone" else f"static k={rec['static_k']}"
        what = f"serve {choice}: it keeps {kept}, within the {rec['margin']:.0%} a schedule must gain"
    print_prose(console, what)
    if max(sched["best_k"]) == 0:
        console.print(
            f"speculation does not pay at any batch size up to {len(sched['best_k'])}: serve the target alone",
            highlight=False,
        )
    elif sched["break_even_batch_size"] is not None:
        console.print(f"speculation stops paying from batch size {sched['break_even_batch_size']}", highlight=False)
    else:
        console.print(f"speculation pays up to batch size {len(sched['best_k'])}, the largest planned", highlight=False)
    if len(sched["best_k"]) > sched["measured_up_to"]:
        print_prose(
            console,
            f"batch sizes above {sched['measured_up_to']} are extrapolated from the cost model (measured up to "
            f"{sched['measured_up_to']})",
            style="yellow",
        )
    trt = sched["trtllm_draft_len_schedule"]
    if max(sched["best_k"]) > 0:
        console.print(
            "TensorRT-LLM draft_len_schedule: "
            + (
                "{" + ", ".join(f"{b}: {k}" for b, k in trt.items()) + "}"
                if trt
                else "not expressible (it must start at its largest draft length)"
            ),
            highlight=False,
        )
    chk = report["check"]
    if chk:
        t = _table(
            console,
            "check: decode tokens/s, schedule vs static k",
            ["conc.", "sched k", "schedule", "best k", "best", "ok"],
        )
        for lv in chk["levels"]:
            best = lv["static"][str(lv["best_static_k"])]
            t.add_row(
                str(lv["concurrency"]),
                str(lv["schedule_k"]),
                f"{lv['schedule']['median']:.1f}",
                str(lv["best_static_k"]),
                f"{best['median']:.1f}",
                "yes" if lv["at_least_best_static"] else "NO",
            )
        console.print(t)
        loss = chk["lossless"]
        console.print(
            f"lossless under the schedule: {loss['identical']} of {loss['compared']} outputs identical to the "
            "target alone's",
            highlight=False,
        )
    for n in report["notes"]:
        print_prose(console, f"note: {n}", style="yellow")
    for f in report["findings"]:
        console.print(f"{f['severity']} {f['code']}  {escape(f['subject'])}", highlight=False)
        print_prose(console, f["message"], indent=8)
        print_prose(console, f"fix: {f['hint']}", indent=8, style="dim")
    console.print("serve with:", highlight=False)
    console.print(escape(sched["serve_command"]), highlight=False, soft_wrap=True)
    errors = sum(f["severity"] == "error" for f in report["findings"])
    warnings = len(report["findings"]) - errors
    checked = "schedule checked" if chk else "schedule predicted, not checked (add --check)"
    verdict = "[bold green]OK[/]" if report["ok"] else "[bold red]FAILED[/]"
    console.print(f"{verdict}: {checked}; {errors} error(s), {warnings} warning(s)", highlight=False)


def plot_tune(report: dict, path: str | Path) -> Path:
    """PNG: predicted decode throughput against batch size for each static k and for the schedule, with the
    measured points (median, spread as error bars) on it.

    Raises:
        EaglehubError: the file cannot be written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sched = report["schedule"]
    pred = sched["predicted_throughput"]
    batches = list(range(1, len(pred["schedule"]) + 1))
    fig, ax = plt.subplots(figsize=(8, 4.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (k, values) in enumerate(pred["static"].items()):
        color = colors[i % len(colors)]
        ax.plot(batches, values, "-", color=color, lw=1, label=f"k={k}" + (" (no drafter)" if k == "0" else ""))
        pts = [g for g in report["grid"] if str(g["k"]) == k]
        if pts:
            med = [g["measured"]["median"] for g in pts]
            ax.errorbar(
                [g["concurrency"] for g in pts],
                med,
                yerr=[
                    [m - g["measured"]["min"] for m, g in zip(med, pts)],
                    [g["measured"]["max"] - m for m, g in zip(med, pts)],
                ],
                fmt="o",
                color=color,
                ms=4,
                capsize=2,
            )
    rec = sched["recommendation"]
    served = "the schedule" if rec["kind"] == "schedule" else (
        "the target alone" if rec["kind"] == "target_alone" else f"static k={rec['static_k']}"
    )  # fmt: skip
    ax.plot(batches, pred["schedule"], "k--", lw=2.5, alpha=0.6, label=f"schedule (served: {served})", zorder=1)
    chk = report.get("check")
    if chk:
        ax.plot(
            [lv["concurrency"] for lv in chk["levels"]],
            [lv["schedule"]["median"] for lv in chk["levels"]],
            "k*",
            ms=10,
            label="served, measured (--check)",
        )
    ax.set_xscale("log", base=2)
    # throughput grows about with the batch: on a linear axis the small batches, where the ks differ, flatten
    ax.set_yscale("log")
    ax.set_xlabel("batch size (requests in flight)")
    ax.set_ylabel("decode tokens / s")
    ax.legend(fontsize=8)
    eng = report["costs"]["model"].get("engine") or {}
    fig.suptitle(
        f"{Path(report['drafter']).name} on {Path(report['target']['path']).name} · lines: predicted, points: "
        f"measured · {eng.get('name', '?')} {eng.get('version', '')} on {report['costs']['model']['machine'].get('device', '?')}",
        fontsize=9,
    )
    stamp = stamp_text(
        {"engine": {"name": eng.get("name", "?"), "version": eng.get("version", "?")}, "tool": report["tool"]}
    )
    return save_figure(fig, path, stamp)
