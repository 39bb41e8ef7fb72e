"""The ``endpoint`` section of a verify report (``verify --endpoint``) as a terminal table."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from eaglehub.views.verify import fmt_number, rates_text, render_report_and_baseline

MAX_FAILURES_SHOWN = 5


def endpoint_table(ep: dict) -> Table:
    """What was measured where: the server, k, the requests, and the two counter sources side by side."""
    t = Table(title=f"served endpoint {ep['url']}", title_justify="left")
    t.add_column("")
    t.add_column("value")
    base = ep["baseline"]
    shown = base["endpoint"]["url"] if base["kind"] == "endpoint" else f"local {base['engine']['name']}"
    rows = [
        ("model", ep["model"]),
        ("server", f"{ep['server']} {ep['version']} ({ep['api']} API)"),
        ("num_speculative_tokens (k)", f"{ep['num_speculative_tokens'] or '?'} ({ep['k_source'] or 'not said'})"),
        ("concurrency", str(ep["concurrency"])),
        ("requests sent / answered / compared", "{sent} / {answered} / {compared}".format(**ep["requests"])),
        ("baseline (target alone)", shown),
    ]
    fields = ep["counters"].get("fields") or {}
    for label, key in (("per-request metrics", "per_request"), ("/metrics delta", "prometheus")):
        c = ep["counters"][key]
        read = fields.get(key)
        where = f" (read from {read if isinstance(read, str) else ', '.join(read)})" if c is not None and read else ""
        rows.append(
            (
                f"AL from {label}",
                "-"
                if c is None
                else f"{fmt_number(c['acceptance_length'])} over {c['num_drafts']} drafts; per position "
                f"{rates_text(c['acceptance_rate_per_position'])}{where}",
            )
        )
    agree = ep["counters"]["agree"]
    rows.append(("counters agree", "-" if agree is None else "yes" if agree else "NO"))
    for label, value in rows:
        t.add_row(label, value)
    return t


def render_endpoint_report(report: dict, console: Console) -> None:
    """The verify tables, then (for ``verify --endpoint``) the endpoint table and its failures."""
    render_report_and_baseline(report, console)
    ep = report.get("endpoint")
    if not ep:
        return
    console.print()
    console.print(endpoint_table(ep))
    for f in ep["failures"][:MAX_FAILURES_SHOWN]:
        console.print(f"failed ({f['run']}): {f['id']}: {f['message']}", highlight=False, markup=False)
    if len(ep["failures"]) > MAX_FAILURES_SHOWN:
        console.print(f"… {len(ep['failures']) - MAX_FAILURES_SHOWN} more failures in the report", highlight=False)
    for note in ep["notes"]:
        console.print(f"note: {note}", highlight=False, markup=False)
