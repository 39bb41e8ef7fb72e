"""PNG charts of a verify report (matplotlib, headless Agg backend)."""

from __future__ import annotations

from pathlib import Path

from eaglehub.io.atomic import atomic_file


def plot_acceptance(report: dict, path: str | Path) -> Path:
    """Two panels per report: mean acceptance length per prompt category (one bar per drafter) and
    the unconditional acceptance rate per draft position (accepted_per_pos[i] / num_drafts).

    Written atomically to ``path`` (PNG, 150 dpi). Definitions as in the report's ``definitions``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drafters = report["drafters"]
    cats = list(drafters[0]["acceptance"]["per_category"]) + ["overall"]
    k = report["settings"]["num_speculative_tokens"]
    fig, (ax_al, ax_pos) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [2, 1]})
    width = 0.8 / len(drafters)
    for n, d in enumerate(drafters):
        per_cat = dict(d["acceptance"]["per_category"], overall=d["acceptance"]["overall"])
        label = Path(d["drafter"]).name
        al = [per_cat[c]["acceptance_length"] or 1.0 for c in cats]
        ax_al.bar([i + n * width for i in range(len(cats))], al, width, label=label)
        rates = [r or 0.0 for r in d["acceptance"]["overall"]["acceptance_rate_per_position"]]
        ax_pos.bar([i + n * width for i in range(k)], rates, width, label=label)
    ax_al.set_xticks([i + 0.4 - width / 2 for i in range(len(cats))], cats, rotation=20, ha="right")
    ax_al.axhline(1.0, color="grey", lw=0.8)
    ax_al.set_ylabel("mean acceptance length (1 + accepted / drafts)")
    ax_al.set_title(f"acceptance length per category (k = {k}, greedy)")
    ax_al.legend(fontsize=8)
    ax_pos.set_xticks([i + 0.4 - width / 2 for i in range(k)], [str(i + 1) for i in range(k)])
    ax_pos.set_xlabel("draft position")
    ax_pos.set_ylabel("acceptance rate (unconditional)")
    ax_pos.set_ylim(0, 1)
    ax_pos.set_title("acceptance rate per position, overall")
    fig.suptitle(
        f"target {Path(report['target']['path']).name} · {report['engine']['name']} "
        f"{report['engine']['version']} · max_tokens {report['settings']['max_tokens']}",
        fontsize=10,
    )
    fig.tight_layout()
    with atomic_file(Path(path)) as tmp:
        fig.savefig(tmp, dpi=150, format="png")
    plt.close(fig)
    return Path(path)
