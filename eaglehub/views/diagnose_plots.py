"""PNG charts of a diagnose report (:mod:`eaglehub.diagnose.run`; matplotlib, headless Agg backend).

Draft positions are drawn 1..k (the report's per-depth lists are indexed 0..k-1); undefined rates
(null: nothing reached that position) are gaps, never zeros. Definitions as in the report's
``definitions``.
"""

from __future__ import annotations

from pathlib import Path

from eaglehub.views.plots import save_figure

CONDITIONAL = "conditional_acceptance.png"
AL_VS_CONTEXT = "acceptance_length_vs_context.png"
HIDDEN_NORM = "hidden_state_norm.png"
SINK_MASS = "sink_attention_mass.png"


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _nan(xs):
    return [float("nan") if x is None else x for x in xs]


def _title(report: dict) -> str:
    e, s = report["engine"], report["settings"]
    return (
        f"target {Path(report['target']['path']).name} · {e['name']} {e['version']} · k = {s['num_speculative_tokens']} · "
        f"max_tokens {s['max_tokens']} · greedy"
    )


def _save(fig, path: Path) -> Path:
    return save_figure(fig, path)


def _per_drafter_panels(report: dict, path: Path, values, ylabel: str, title: str, ylim=None) -> Path:
    """One panel per drafter, one line per context length, x = draft position 1..k; ``values(run)``
    gives the run's per-depth list (or ``None`` to leave that context out)."""
    plt = _plt()
    drafters = report["drafters"]
    k = report["settings"]["num_speculative_tokens"]
    fig, axes = plt.subplots(1, len(drafters), figsize=(5.5 * len(drafters), 4.2), sharey=True, squeeze=False)
    for ax, d in zip(axes[0], drafters):
        for r in d["runs"]:
            ys = values(r)
            if ys is not None:
                ax.plot(range(1, len(ys) + 1), _nan(ys), marker="o", label=f"context {r['context_tokens']}")
        ax.set_xticks(range(1, k + 1))
        ax.set_xlabel("draft position (depth)")
        ax.set_title(d["label"], fontsize=10)
        if ylim:
            ax.set_ylim(*ylim)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel(ylabel)
    fig.suptitle(f"{title}\n{_title(report)}", fontsize=9)
    return _save(fig, path)


def plot_conditional_acceptance(report: dict, path: str | Path) -> Path:
    """(a) Conditional acceptance rate (accepted_per_pos[i] / accepted_per_pos[i-1]) vs draft
    position, one line per context length, one panel per drafter. Written atomically (PNG, 150 dpi)."""
    return _per_drafter_panels(
        report,
        Path(path),
        lambda r: r["acceptance"]["conditional_acceptance_rate_per_position"],
        "conditional acceptance rate",
        "acceptance of draft i given draft i-1 accepted",
        (0, 1.02),
    )


def plot_al_vs_context(report: dict, path: str | Path) -> Path:
    """(b) Acceptance length (1 + accepted / drafts) vs context length in prompt tokens, one line
    per drafter. Written atomically (PNG, 150 dpi)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 4.5))  # wide enough for the engine-version subtitle
    for d in report["drafters"]:
        xs = [r["context_tokens"] for r in d["runs"]]
        ax.plot(xs, _nan([r["acceptance"]["acceptance_length"] for r in d["runs"]]), marker="o", label=d["label"])
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xlabel("context length (prompt tokens after the chat template)")
    ax.set_ylabel("acceptance length (1 + accepted / drafts)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle(f"acceptance length vs context length\n{_title(report)}", fontsize=9)
    return _save(fig, Path(path))


def plot_depth_metric(report: dict, key: str, path: str | Path) -> Path:
    """(c) ``hidden_state_norm`` or (d) ``sink_attention_mass`` vs draft depth, one line per context
    length, one panel per drafter (runs without diagnostics are left out). Written atomically."""
    ylabel = {
        "hidden_state_norm": "mean L2 norm of the drafter hidden state",
        "sink_attention_mass": "attention mass on the first tokens",
    }[key]
    sink = next(
        (r["diagnostics"]["sink_tokens"] for d in report["drafters"] for r in d["runs"] if r["diagnostics"]),
        None,
    )
    title = (
        "drafter hidden-state norm per draft depth"
        if key == "hidden_state_norm"
        else f"attention mass on the first {sink} tokens per draft depth"
    )
    return _per_drafter_panels(
        report,
        Path(path),
        lambda r: r["diagnostics"][key] if r["diagnostics"] else None,
        ylabel,
        title,
        (0, None),
    )  # sink mass is often a few %: a 0–1 axis would flatten it


def plot_all(report: dict, plot_dir: Path) -> list[Path]:
    """Every plot of the report into ``plot_dir`` (created): :data:`CONDITIONAL`, :data:`AL_VS_CONTEXT`
    and, when any run has engine diagnostics (reference engine), :data:`HIDDEN_NORM` and
    :data:`SINK_MASS`. Returns the paths written. Raises: OSError (cannot write)."""
    plot_dir = Path(plot_dir)
    plot_dir.mkdir(parents=True, exist_ok=True)
    paths = [
        plot_conditional_acceptance(report, plot_dir / CONDITIONAL),
        plot_al_vs_context(report, plot_dir / AL_VS_CONTEXT),
    ]
    if any(r["diagnostics"] for d in report["drafters"] for r in d["runs"]):
        paths += [
            plot_depth_metric(report, "hidden_state_norm", plot_dir / HIDDEN_NORM),
            plot_depth_metric(report, "sink_attention_mass", plot_dir / SINK_MASS),
        ]
    return paths
