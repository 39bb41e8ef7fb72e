"""The ``endpoint`` section of a verify report (``verify --endpoint``) as a terminal table."""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table

from eaglehub.verify.served import al_said
from eaglehub.views.verify import fmt_number, rates_text, render_report_and_baseline

MAX_FAILURES_SHOWN = 5


def endpoint_table(ep: dict) -> Table:
    """What was measured where: the server, k, the requests, and the two counter sources side by side."""
    t = Table(title=f"served endpoint {ep['url']}", title_justify="left")
    t.add_column("")
    t.add_column("value", overflow="fold")  # a metric name is folded, never cut
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


SETTING_LABELS = (
    ("engine", "engine"),
    ("version", "version"),
    ("k", "num_speculative_tokens (k)"),
    ("k_schedule", "k schedule"),
    ("rejection_method", "rejection method"),
    ("synthetic", "synthetic acceptance"),
    ("draft_lm_head_quantization", "draft lm_head quantization"),
    ("drafter", "drafter"),
)


def _setting_value(name: str, value, source: str) -> str:
    if source == "unknown":  # an unknown setting has no value, whatever the report's placeholder
        return "?"
    if value is None:
        return "none" if name in ("draft_lm_head_quantization",) else "?"
    if name == "k_schedule":
        return "none (fixed k)" if value == [] else json.dumps(value) if isinstance(value, list) else str(value)
    if name == "synthetic":
        return f"AL {value.get('acceptance_length')}" if isinstance(value, dict) else str(value)
    return str(value)


def served_table(served: dict) -> Table:
    """The settings the server runs, each with where it was read (or that it was assumed, or is unknown), then
    what they let the report claim (eaglehub/verify/served.py)."""
    t = Table(title="served settings", title_justify="left")
    for column in ("setting", "value", "from"):
        t.add_column(column, overflow="fold")
    settings = served["settings"]
    for name, label in SETTING_LABELS:
        s = settings[name]
        if name == "synthetic" and s["value"] is None and s["source"] == "unknown":
            continue
        shown = {
            "server": _short_where(s["where"]),
            "assumed": f"ASSUMED, {s['where']}",
            "unknown": f"unknown ({s['where']})" if s["where"] else "unknown",
        }
        t.add_row(label, _setting_value(name, s["value"], s["source"]), shown[s["source"]])
    claims = served["claims"]
    t.add_row("AL", al_said(claims["acceptance_length"], _one_k(served), _schedule_known(settings)), "")
    lossless = (
        "judged on the outputs" if claims["lossless"] == "judged" else "NOT JUDGED (the method is lossy by design)"
    )
    t.add_row("losslessness", lossless, "")
    for row in served.get("acceptance_by_k") or []:
        t.add_row(
            f"AL at k={row['k']}",
            f"{fmt_number(row['acceptance_length'])} over {row['num_drafts']} steps; per position "
            f"{rates_text(row['acceptance_rate_per_position'])}",
            "per-step counts",
        )
    return t


def _one_k(served: dict) -> int | None:
    """The one k every step drafted (a ``one_k_this_load`` claim): the per-step counts' only k, else k."""
    by_k = served.get("acceptance_by_k") or []
    return by_k[0]["k"] if len(by_k) == 1 else served["settings"]["k"]["value"]


def _schedule_known(settings: dict) -> bool:
    s = settings["k_schedule"]
    return s["source"] != "unknown" and bool(s["value"])


def _short_where(where: str | None) -> str:
    """``GET /server_info vllm_config.speculative_config.rejection_sample_method`` as ``/server_info
    rejection_sample_method``: the page and the field, short enough for a table cell (the report has it whole)."""
    if not where:
        return "the server"
    head, _, rest = where.partition(" (")
    parts = head.split(" ")
    if len(parts) >= 3 and parts[0] == "GET":
        head = f"{parts[1]} {parts[2].rsplit('.', 1)[-1]}"
    return head if not rest else f"{head} ({rest}"


def render_endpoint_report(report: dict, console: Console) -> None:
    """The verify tables, then (for ``verify --endpoint``) the endpoint table and its failures."""
    render_report_and_baseline(report, console)
    ep = report.get("endpoint")
    if not ep:
        return
    console.print()
    console.print(endpoint_table(ep))
    if ep.get("served"):
        console.print(served_table(ep["served"]))
        if ep["served"]["claims"]["acceptance_length"] == "mixed_k":
            console.print(f"rates per position: {ep['served']['claims']['per_position']}", highlight=False)
        unknown = [
            label for name, label in SETTING_LABELS[2:7] if ep["served"]["settings"][name]["source"] == "unknown"
        ]
        unknown = [u for u in unknown if u != "synthetic acceptance"]
        if unknown:
            console.print(
                f"not said by the server: {', '.join(unknown)}; state them with --served-config "
                "'<the server's --speculative-config JSON>'",
                highlight=False,
                markup=False,
            )
    for f in ep["failures"][:MAX_FAILURES_SHOWN]:
        console.print(f"failed ({f['run']}): {f['id']}: {f['message']}", highlight=False, markup=False)
    if len(ep["failures"]) > MAX_FAILURES_SHOWN:
        console.print(f"… {len(ep['failures']) - MAX_FAILURES_SHOWN} more failures in the report", highlight=False)
    for note in ep["notes"]:
        console.print(f"note: {note}", highlight=False, markup=False)
