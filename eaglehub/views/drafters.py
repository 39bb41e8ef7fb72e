"""Terminal table of ``eaglehub drafters``: one row per drafter found for the target."""

from __future__ import annotations

from rich.console import Console

from eaglehub.views.common import human_size
from eaglehub.views.tables import names_table


def claim_text(claim: dict) -> str:
    where = [claim["source"]]
    where.append(f"k {claim['num_speculative_tokens']}" if claim.get("num_speculative_tokens") else None)
    where.append(f"{claim['max_tokens']} tokens" if claim.get("max_tokens") else None)
    where.append(f"{claim['num_prompts']} prompts" if claim.get("num_prompts") else None)
    where.append(claim["engine"] if claim.get("engine") else None)
    return f"claimed AL {claim['acceptance_length']:.3f} ({', '.join(w for w in where if w)})"


def curve_text(data: dict) -> str:
    """``AL(k) 1.70 / 2.00 / 2.10 at k=1..3, T=0 (prompts sha256 3f2a…)``: the AL the drafter's measured rates
    predict at each k up to the measured one (eaglehub.measure.curve)."""
    from eaglehub.measure.curve import AcceptanceCurve

    curve = AcceptanceCurve.from_dict(data)
    return f"{curve.line()} (prompts sha256 {curve.prompts_sha256[:12]}…)"


def render_drafters(report: dict, console: Console) -> None:
    from rich.markup import escape

    lineage = " → ".join(
        s["repo_id"] + (f" ({s['relation']} of {s['of']})" if s["relation"] else "") for s in report["lineage"]
    )
    where = "the local cache (offline)" if report["offline"] else report["endpoint"] or "the manifest"
    title = f"drafters for {escape(report['target'])}: {report['num_drafters']} found on {escape(str(where))}"
    rows = [
        [
            d["repo_id"] or d["path"] or d["name"],
            d["format"],
            d["eagle_version"],
            "—" if d["num_speculative_tokens"] is None else str(d["num_speculative_tokens"]),
            "—" if d["size_bytes"] is None else human_size(d["size_bytes"]),
            "—" if not d["claim"] else f"{d['claim']['acceptance_length']:.3f}",
            d["source"],
        ]
        for d in report["drafters"]
    ]
    columns = ["drafter", "format", "EAGLE", "k", "size", "AL", "from"]
    t = names_table(console, columns, rows, right=("k", "size", "AL"), title=title)
    console.print(t if report["drafters"] else t.title)
    for d in report["drafters"]:
        base = f"base {d['base_model']}" + (f" ({d['relation']})" if d["relation"] else "")
        claim = f"; {claim_text(d['claim'])}" if d["claim"] else "; no claimed AL"
        claim += f"; {curve_text(d['acceptance_curve'])}" if d.get("acceptance_curve") else ""
        console.print(f"{escape(d['name'])}: {escape(base)}{escape(claim)}", highlight=False, soft_wrap=True)
    if lineage:
        console.print(f"lineage: {escape(lineage)}", highlight=False, soft_wrap=True)
    definitions = {d["claim"]["definition"] for d in report["drafters"] if d["claim"]}
    for text in sorted(definitions):
        console.print(f"claimed AL: {escape(text)}", highlight=False, soft_wrap=True)
    _render_profiles(report, console)
    for note in report["notes"]:
        console.print(f"[yellow]note:[/] {escape(note)}", highlight=False, soft_wrap=True)
    if report["drafters"]:
        env = "HF_HUB_OFFLINE=1 " if report["offline"] else ""  # found offline: verified offline too
        # the Hub they were found on: without it verify would look them up on huggingface_hub's default one
        hub = f" --hub-endpoint {escape(report['endpoint'])}" if report.get("endpoint") else ""
        console.print(
            f"verify them: {env}eaglehub verify --target {escape(report['target'])}{hub}",
            highlight=False,
            soft_wrap=True,
        )


def _render_profiles(report: dict, console: Console) -> None:
    """Per judged profile: the target's architecture in that release, then the drafters its engine builds (from
    their config.json; the weights are not read)."""
    from rich.markup import escape

    default = any(p["default"] for p in report["profiles"])
    console.print(
        f"judged for {'; '.join(p['title'] for p in report['profiles'])}"
        + (" (the default; choose with --profile)" if default else "")
        + " from the config files only",
        highlight=False,
        soft_wrap=True,
    )
    arch = report["target_architecture"] or "the target"
    for p in report["profiles"]:
        target = {True: "feeds EAGLE-3 drafters", False: "cannot feed EAGLE-3 drafters", None: "not known"}[
            p["target_eagle3"]
        ]
        line = f"{p['title']}: {arch} {target}" + (f" ({p['target_note']})" if p["target_note"] else "")
        builds = [
            d["name"] for d in report["drafters"] for e in d["engines"] if e["profile"] == p["id"] and e["builds"]
        ]
        fails = [
            f"{d['name']} ({e['error']})"
            for d in report["drafters"]
            for e in d["engines"]
            if e["profile"] == p["id"] and e["builds"] is False
        ]
        if builds:
            line += f"; builds {', '.join(builds)}"
        if fails:
            line += f"; cannot build {'; '.join(fails)}"
        console.print(escape(line), highlight=False, soft_wrap=True)
