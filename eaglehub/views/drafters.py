"""Terminal table of ``eaglehub drafters``: one row per drafter found for the target."""

from __future__ import annotations

from rich.console import Console

from eaglehub.views.common import human_size


def claim_text(claim: dict) -> str:
    where = [claim["source"]]
    where.append(f"k {claim['num_speculative_tokens']}" if claim.get("num_speculative_tokens") else None)
    where.append(f"{claim['max_tokens']} tokens" if claim.get("max_tokens") else None)
    where.append(f"{claim['num_prompts']} prompts" if claim.get("num_prompts") else None)
    where.append(claim["engine"] if claim.get("engine") else None)
    return f"claimed AL {claim['acceptance_length']:.3f} ({', '.join(w for w in where if w)})"


def render_drafters(report: dict, console: Console) -> None:
    from rich.markup import escape
    from rich.table import Table

    lineage = " → ".join(
        s["repo_id"] + (f" ({s['relation']} of {s['of']})" if s["relation"] else "") for s in report["lineage"]
    )
    where = "the local cache (offline)" if report["offline"] else report["endpoint"] or "the manifest"
    t = Table(
        title=f"drafters for {escape(report['target'])}: {report['num_drafters']} found on {escape(str(where))}",
        title_justify="left",
    )
    for col in ("drafter", "format", "EAGLE", "k", "size", "AL", "from"):
        t.add_column(col, justify="right" if col in ("k", "size", "AL") else "left", overflow="fold")
    for d in report["drafters"]:
        t.add_row(
            escape(d["repo_id"] or d["path"] or d["name"]),
            d["format"],
            d["eagle_version"],
            "—" if d["num_speculative_tokens"] is None else str(d["num_speculative_tokens"]),
            "—" if d["size_bytes"] is None else human_size(d["size_bytes"]),
            "—" if not d["claim"] else f"{d['claim']['acceptance_length']:.3f}",
            d["source"],
        )
    console.print(t if report["drafters"] else t.title)
    for d in report["drafters"]:
        base = f"base {d['base_model']}" + (f" ({d['relation']})" if d["relation"] else "")
        claim = f"; {claim_text(d['claim'])}" if d["claim"] else "; no claimed AL"
        console.print(f"{escape(d['name'])}: {escape(base)}{escape(claim)}", highlight=False, soft_wrap=True)
    if lineage:
        console.print(f"lineage: {escape(lineage)}", highlight=False, soft_wrap=True)
    definitions = {d["claim"]["definition"] for d in report["drafters"] if d["claim"]}
    for text in sorted(definitions):
        console.print(f"claimed AL: {escape(text)}", highlight=False, soft_wrap=True)
    for note in report["notes"]:
        console.print(f"[yellow]note:[/] {escape(note)}", highlight=False, soft_wrap=True)
    if report["drafters"]:
        console.print(
            f"verify them: eaglehub verify --target {escape(report['target'])}", highlight=False, soft_wrap=True
        )
