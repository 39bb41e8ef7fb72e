"""Terminal output of ``eaglehub watch``: the head, one table row per interval (live on a terminal), the
summary and its findings. Reports carry no credentials; strings from the server (labels) are untrusted
and go through :func:`~eaglehub.findings.printable`."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.text import Text

from eaglehub.findings import printable
from eaglehub.views.common import SEVERITY_STYLE, print_prose

STATUS_STYLE = {"ok": "", "restart": "bold cyan", "unreachable": "yellow", "no_spec_metrics": "yellow", "gauge": "dim"}
STATUS_SHOWN = {"no_spec_metrics": "no-spec"}
"""Statuses shortened in the table (the report keeps the names of schemas/watch-interval.schema.json)."""
LEFT = ("UTC", "status", "ref")
WIDTH = {"#": 3, "UTC": 8, "s": 5, "status": 11, "drafts": 6, "AL": 5, "ref": 5}
POS_WIDTH = 4
NOTE_INDENT = 5
LIVE_ROWS = 40
"""Rows kept in the live table (the newest); the JSON lines and the report keep every interval."""


def _f(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _verdict(r: dict) -> str:
    if r.get("drop_confirmed"):
        return "DROP"
    if not r.get("judged"):
        return "–" if r["status"] == "ok" else ""
    return "below" if r["below_reference"] else "ok"


def _bound(head: dict, count: int | None) -> str:
    """What ends the watch, as the head says it: the count, the duration, or both (whichever comes first)."""
    duration = f"{head['duration_seconds']:g} s"
    return f"until {count} interval(s) or {duration}, whichever comes first" if count else f"for {duration}"


def print_head(head: dict, console: Console, count: int | None = None) -> None:
    labels = ", ".join(f"{k}={'/'.join(v)}" for k, v in head["labels"].items())
    console.print(
        f"watching [bold]{escape(printable(head['endpoint']))}[/] ({head['server']}, k={head['num_speculative_tokens'] or '?'}"
        f"{'; ' + escape(printable(labels)) if labels else ''}) every {head['interval_seconds']:g} s "
        f"{_bound(head, count)}; sends no traffic",
        highlight=False,
    )
    served = head.get("served")
    if served:
        said = []
        for name, label in (("k_schedule", "k schedule"), ("rejection_method", "rejection method"),
                            ("draft_lm_head_quantization", "draft lm_head quantization")):  # fmt: skip
            v = served[name]
            value = (
                "none"
                if v["value"] in (None, [])
                else json.dumps(v["value"])
                if isinstance(v["value"], list)
                else v["value"]
            )
            said.append(f"{label} {'?' if v['source'] == 'unknown' else value} ({v['source']})")
        console.print("served settings: " + "; ".join(said), highlight=False, markup=False)
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
        # the rate columns that fit the console (80 columns at least a log's): the rest are in --json / --report
        fixed = sum(WIDTH.values()) - (0 if judged else WIDTH["ref"]) + 2 * (5 + judged)
        self.shown_k = min(self.k, max(1, (max(console.width, 80) - fixed) // (POS_WIDTH + 2)))
        self.rows: list[tuple] = []
        self.live: Live | None = (
            Live(self._table(), console=console, auto_refresh=False) if console.is_terminal else None
        )

    def _columns(self) -> list[str]:
        cols = ["#", "UTC", "s", "status", "drafts", "AL"] + [f"p{i}" for i in range(self.shown_k)]
        return cols + (["ref"] if self.judged else [])

    def _line(self, cells: list[str]) -> str:
        """A fixed-width line (the header's widths, at least WIDTH's): the non-terminal rendering."""
        out = []
        for col, cell in zip(self._columns(), cells):
            width = max(len(col), WIDTH.get(col, POS_WIDTH))
            out.append(cell.ljust(width) if col in LEFT else cell.rjust(width))
        return "  ".join(out).rstrip()

    def _table(self) -> Group:
        """The live view: the same lines as a log gets (a rich Table would squeeze a note into a narrow
        column), the newest :data:`LIVE_ROWS` rows."""
        lines = [Text(self._line(self._columns()), style="bold")]
        for row, note, style in self.rows[-LIVE_ROWS:]:
            lines.append(Text(self._line(row), style=style))
            if note:
                lines.append(Text(" " * NOTE_INDENT + note, style=style))
        return Group(*lines)

    def add(self, r: dict) -> None:
        rates = list(r["acceptance_rate_per_position"]) + [None] * self.k
        status = STATUS_SHOWN.get(r["status"], r["status"])
        row = [str(r["index"]), r["time"][11:19], f"{r['interval_seconds']:.1f}", status, str(r["num_drafts"])]
        row += [_f(r["acceptance_length"])] + [_f(x, 2) for x in rates[: self.shown_k]]
        if self.judged:
            row.append(_verdict(r))
        note = printable(r["error"] or "")
        style = "bold red" if r.get("drop_confirmed") else STATUS_STYLE[r["status"]]
        self.rows.append((row, note, style))
        if self.live is not None:
            self.live.update(self._table(), refresh=True)
            return
        self.console.print(self._line(row), style=style or None, highlight=False, soft_wrap=True, markup=False)
        if note:  # under its row, so the row keeps to the table's width
            print_prose(self.console, note, indent=NOTE_INDENT, style=style or None)

    def legend(self) -> str:
        """The short headings spelled out (printed once, above the rows)."""
        pos = f"p0–p{self.shown_k - 1}" if self.shown_k > 1 else "p0"
        more = f" (of k={self.k}; every position in --json and --report)" if self.shown_k < self.k else ""
        text = (
            "UTC: the poll's time; s: the seconds an interval spans (a failed poll's, until it failed); AL: 1 + "
            f"accepted / drafts in it; {pos}, pos i: the share of its drafts whose token at position i was accepted"
            f"{more}; no-spec: answered without speculative-decoding metrics"
        )
        judged = "; ref: its AL against the drop threshold, ok or below (DROP: a drop confirmed; –: not judged)"
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


def print_summary(report: dict, console: Console, report_path: str | None = None) -> None:
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
    if report_path:
        console.print(f"report: {report_path}", highlight=False)
    console.print(verdict_line(report), highlight=False)  # last: the line that agrees with the exit code


def verdict_line(report: dict) -> str:
    """The last line: what the watch found, in the words its exit code means (docs/watch.md §4)."""
    verdict, n = report["verdict"], report["num_intervals"]
    if verdict == "drop":
        return f"[bold red]FAILED[/]: AL drop ({report['num_judged']} interval(s) judged)"
    if verdict == "no_reading":
        c = report["status_counts"]
        why = "server unreachable" if c["unreachable"] else "no speculative-decoding metrics"
        if not n:
            why = "no poll in the time given"
        elif c["unreachable"] and c["no_spec_metrics"]:
            why = "server unreachable or without speculative-decoding metrics"
        return f"[bold red]FAILED[/]: no reading in {n} poll(s) ({why})"
    if verdict == "inconclusive":
        codes = {f["code"] for f in report["findings"]}
        if "W-WATCH-SETTINGS-DIFFER" in codes:
            return "[bold yellow]INCONCLUSIVE[/]: the server's settings differ from the reference run's (not judged)"
        if "W-WATCH-REFERENCE-MIXED-K" in codes:
            return (
                "[bold yellow]INCONCLUSIVE[/]: the reference AL is over a mix of ks, none at the server's k "
                "(not judged)"
            )
        return (
            f"[bold yellow]INCONCLUSIVE[/]: no interval reached {report['reference']['min_drafts']} drafts "
            "(sample too small to judge)"
        )
    if verdict == "ok":
        return f"[bold green]OK[/]: no AL drop ({report['num_judged']} interval(s) judged)"
    return f"read {n} interval(s); AL not judged (no --reference-report)"


class WatchDisplay:
    """What ``eaglehub watch`` prints while it runs: the head and a live :class:`IntervalTable`, or (with
    ``as_json``) one JSON line per reading and the summary as the last line. ``start`` and ``reading`` are
    :func:`~eaglehub.watch.run.run_watch`'s callbacks; ``close`` ends the live table (also on an error)."""

    def __init__(self, console: Console, as_json: bool, count: int | None = None):
        self.console, self.as_json, self.count = console, as_json, count
        self.table: IntervalTable | None = None

    def start(self, head: dict) -> None:
        if self.as_json:
            return
        print_head(head, self.console, self.count)
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
        print_summary(report, self.console, report_path)
