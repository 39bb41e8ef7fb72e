"""Terminal output of ``eaglehub watch``: the head, one table row per interval (live on a terminal), the
summary and its findings. Reports carry no credentials; strings from the server (labels) are untrusted
and go through :func:`~eaglehub.findings.printable`."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from eaglehub.findings import printable
from eaglehub.views.common import SEVERITY_STYLE, print_prose

STATUS_STYLE = {"ok": "", "restart": "bold cyan", "unreachable": "yellow", "no_spec_metrics": "yellow", "gauge": "dim"}
LEFT = ("time (UTC)", "status", "vs ref", "note")
WIDTH = {"#": 4, "time (UTC)": 10, "s": 6, "status": 15, "drafts": 7, "AL": 6, "vs ref": 10}
LIVE_ROWS = 40
"""Rows kept in the live table (the newest); the JSON lines and the report keep every interval."""


def _f(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _verdict(r: dict) -> str:
    if r.get("drop_confirmed"):
        return "DROP"
    if not r.get("judged"):
        return "not judged" if r["status"] == "ok" else ""
    return "below" if r["below_reference"] else "ok"


def print_head(head: dict, console: Console) -> None:
    labels = ", ".join(f"{k}={'/'.join(v)}" for k, v in head["labels"].items())
    console.print(
        f"watching [bold]{escape(printable(head['endpoint']))}[/] ({head['server']}, k={head['num_speculative_tokens'] or '?'}"
        f"{'; ' + escape(printable(labels)) if labels else ''}) every {head['interval_seconds']:g} s for "
        f"{head['duration_seconds']:g} s; sends no traffic",
        highlight=False,
    )
    ref = head["reference"]
    if ref:
        console.print(
            f"reference AL {ref['acceptance_length']:.3f} ({escape(printable(ref['drafter']))}: {ref['chosen_by']}); "
            f"a drop: AL < {ref['threshold']:.3f} in {ref['patience']} judged intervals in a row "
            f"(judged: ≥ {ref['min_drafts']} drafts)",
            highlight=False,
        )


class IntervalTable(AbstractContextManager):
    """One row per reading: live on a terminal (the newest :data:`LIVE_ROWS`), a printed line per reading
    otherwise (a log file fills as the watch goes)."""

    def __init__(self, console: Console, k: int | None, judged: bool):
        self.console, self.k, self.judged = console, k or 0, judged
        self.rows: list[tuple] = []
        self.live: Live | None = (
            Live(self._table(), console=console, auto_refresh=False) if console.is_terminal else None
        )

    def _columns(self) -> list[str]:
        cols = ["#", "time (UTC)", "s", "status", "drafts", "AL"] + [f"pos {i}" for i in range(self.k)]
        return cols + (["vs ref"] if self.judged else []) + ["note"]

    def _line(self, cells: list[str]) -> str:
        """A fixed-width line (the header's widths, at least WIDTH's): the non-terminal rendering."""
        out = []
        for col, cell in zip(self._columns(), cells):
            width = max(len(col), WIDTH.get(col, 6))
            out.append(cell if col == "note" else cell.ljust(width) if col in LEFT else cell.rjust(width))
        return "  ".join(out).rstrip()

    def _table(self) -> Table:
        table = Table(show_edge=False, pad_edge=False)
        for c in self._columns():
            table.add_column(c, justify="left" if c in LEFT else "right")
        for row, style in self.rows[-LIVE_ROWS:]:
            table.add_row(*(Text(c) for c in row), style=style)
        return table

    def add(self, r: dict) -> None:
        rates = list(r["acceptance_rate_per_position"]) + [None] * self.k
        row = [str(r["index"]), r["time"][11:19], f"{r['interval_seconds']:.1f}", r["status"], str(r["num_drafts"])]
        row += [_f(r["acceptance_length"])] + [_f(x, 2) for x in rates[: self.k]]
        if self.judged:
            row.append(_verdict(r))
        row.append(printable(r["error"] or ""))
        style = "bold red" if r.get("drop_confirmed") else STATUS_STYLE[r["status"]]
        self.rows.append((row, style))
        if self.live is not None:
            self.live.update(self._table(), refresh=True)
        else:
            self.console.print(self._line(row), style=style or None, highlight=False, soft_wrap=True, markup=False)

    def legend(self) -> str:
        """The short headings spelled out (printed once, above the rows)."""
        text = (
            "s: the seconds an interval spans; AL: 1 + accepted / drafts in it; pos i: the share of its drafts "
            "whose token at position i was accepted"
        )
        judged = "; vs ref: its AL against the drop threshold, ok or below (DROP: a drop confirmed)"
        return text + (judged if self.judged else "")

    def __enter__(self) -> IntervalTable:
        self.console.print(self.legend(), style="dim", highlight=False, markup=False)
        if self.live is not None:
            self.live.start()
        else:
            self.console.print(self._line(self._columns()), style="bold", highlight=False, soft_wrap=True)
        return self

    def __exit__(self, *exc) -> None:
        if self.live is not None:
            self.live.stop()


def print_summary(report: dict, console: Console) -> None:
    o, c = report["overall"], report["status_counts"]
    extra = ", ".join(f"{n} {s}" for s, n in c.items() if n and s != "ok")
    console.print(
        f"{report['num_intervals']} interval(s) ({c['ok']} ok{', ' + extra if extra else ''}; stopped: {report['stopped']}); "
        f"over the ok intervals: {o['num_drafts']} drafts, AL {_f(o['acceptance_length'])}, per position "
        f"{' '.join(_f(x, 2) for x in o['acceptance_rate_per_position']) or '–'}",
        highlight=False,
    )
    for f in report["findings"]:
        style = SEVERITY_STYLE[f["severity"]]
        console.print(f"[{style}]{f['severity']:<7}[/] [bold]{f['code']}[/]  {escape(f['subject'])}", highlight=False)
        print_prose(console, f["message"], indent=8)
        print_prose(console, f"fix: {f['hint']}", indent=8, style="dim")
    if report["reference"]:
        verdict = "[bold green]OK[/]: no AL drop" if report["passed"] else "[bold red]FAILED[/]: AL drop"
        console.print(f"{verdict} ({report['num_judged']} interval(s) judged)", highlight=False)


class WatchDisplay:
    """What ``eaglehub watch`` prints while it runs: the head and a live :class:`IntervalTable`, or (with
    ``as_json``) one JSON line per reading and the summary as the last line. ``start`` and ``reading`` are
    :func:`~eaglehub.watch.run.run_watch`'s callbacks; ``close`` ends the live table (also on an error)."""

    def __init__(self, console: Console, as_json: bool):
        self.console, self.as_json = console, as_json
        self.table: IntervalTable | None = None

    def start(self, head: dict) -> None:
        if self.as_json:
            return
        print_head(head, self.console)
        self.table = IntervalTable(self.console, head["num_speculative_tokens"], head["reference"] is not None)
        self.table.__enter__()

    def reading(self, reading: dict) -> None:
        if self.as_json:
            print(json.dumps(reading), flush=True)
        elif self.table is not None:
            self.table.add(reading)

    def close(self) -> None:
        if self.table is not None:
            self.table.__exit__(None, None, None)
            self.table = None

    def summary(self, report: dict, report_path: str | None) -> None:
        if self.as_json:
            print(json.dumps(report), flush=True)
            return
        print_summary(report, self.console)
        if report_path:
            self.console.print(f"report: {report_path}", highlight=False)
