"""Terminal view of a publish report (rich): the plan's files and the result."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from eaglehub.views.common import human_size


def render_publish(doc: dict, console) -> None:
    """Print the plan (target repo, revision, parent, gate, files with status and size), on a dry run the
    model card it would upload, and after a real run the commit and pull request."""
    repo, gate = doc["repo"], doc["gate"]
    mode = "pull request against" if doc["create_pr"] else "commit to"
    head = doc["parent_commit"] or "(new repo)"
    console.print(
        f"[bold]{'plan (dry run)' if doc['dry_run'] else 'publish'}[/]: {escape(doc['source'])} → "
        f"{escape(repo['id'])} on {escape(repo['endpoint'])}, {mode} {escape(doc['revision'])} "
        f"at {head}"
        + (f", tag {escape(doc['tag'])}" if doc["tag"] else "")
        + (
            ""
            if repo["exists"]
            else " (offline: the Hub was not read)"
            if repo["exists"] is None
            else f" (repo will be created{', private' if repo['private'] else ''})"
        ),
        highlight=False,
        soft_wrap=True,
    )
    v = gate["verify"]
    al = f"AL {v['acceptance_length']:.3f}" if v["acceptance_length"] is not None else "no AL"
    judged = "; ".join(p["title"] for p in gate["profiles"])
    default = " (the default; choose with --profile)" if any(p["default"] for p in gate["profiles"]) else ""
    console.print(
        f"gate: validate for {escape(judged)}{default} "
        f"{'ok' if gate['validate']['ok'] else 'errors ' + ', '.join(gate['validate']['errors'])}; "
        f"verify {'passed' if v['passed'] else 'not passed'} ({al}); {escape(v['note'])}",
        highlight=False,
        soft_wrap=True,
    )
    if gate["forced"]:
        console.print(f"[yellow]forced[/] past: {escape('; '.join(gate['reasons']))}", highlight=False, soft_wrap=True)
    table = Table("file", "status", "size", "sha256", "from")
    for f in doc["files"]:
        style = {"unchanged": "dim", "deleted": "red"}.get(f["status"], "")
        table.add_row(
            escape(f["path"]),
            f"[{style}]{f['status']}[/]" if style else f["status"],
            human_size(f["size"]),
            (f["sha256"] or "")[:12],
            f["origin"],
        )
    console.print(table)
    console.print(
        f"to upload: {human_size(doc['bytes_to_upload'])}; card base_model {doc['card']['base_model'] or 'none'}, tags "
        f"{', '.join(doc['card']['tags'])}",
        highlight=False,
        soft_wrap=True,
    )
    if doc["card"]["base_model"] is None:
        console.print(
            "[yellow]warning:[/] the card has no base_model (the target is not a known Hub id): pass "
            "--base-model ORG/NAME",
            highlight=False,
            soft_wrap=True,
        )
    if doc["dry_run"]:  # the card is part of what is reviewed before publishing
        card = doc["card"]["text"].rstrip("\n")
        console.print(
            f"model card (uploaded as README.md, {len(card.splitlines())} lines):", highlight=False, soft_wrap=True
        )
        console.print(card, markup=False, highlight=False, soft_wrap=True, emoji=False)
    r = doc["result"]
    if r:
        if r["commit_oid"] is None:
            console.print(escape(r["note"]), highlight=False, soft_wrap=True)
        else:
            console.print(
                f"[green]published[/]: commit {r['commit_oid']} on {escape(r['revision'])}"
                + (f"; pull request {escape(r['pr_url'])}" if r["pr_url"] else "")
                + (f"; tag {escape(r['tag'])}" if r["tag"] else ""),
                highlight=False,
                soft_wrap=True,
            )
