"""The part of ``eaglehub convert``'s text output that says what each engine builds from the output: the
profiles checked, the changes per profile (profiles with the same changes on one line), what only one side
can be read by, and the source files left out."""

from __future__ import annotations

import json
import shlex

from rich.console import Console
from rich.markup import escape

from eaglehub.views.common import print_prose, printable_report

#: stands for the --profile flags of the profiles a line is printed for (known once lines are grouped)
PROFILE_FLAGS = "\0profiles\0"


def _value(v) -> str:
    return "absent" if v is None else json.dumps(v)


def _change(c: dict) -> str:
    if c["field"] == "weights":
        shown = ", ".join([f"-{w}" for w in c["source"]] + [f"+{w}" for w in c["output"]])
        return f"weights {shown} ({c['why']})"
    return f"{c['field']} {_value(c['source'])} → {_value(c['output'])} ({c['why']})"


def _status(e: dict, dst: str) -> tuple[str, ...]:
    if e["source_reads"] and e["output_reads"]:
        lines = tuple(_change(c) for c in e["changes"]) or ("builds the same drafter",)
    elif e["source_reads"]:
        lines = (f"reads the source, not the output: {e['output_failure']}",)
    elif e["output_reads"]:
        lines = (f"reads the output, not the source: {e['source_failure']}",)
    else:
        lines = (f"reads neither: {e['output_failure']}",)
    if e.get("output_errors"):
        listed = ", ".join(f"{x['code']} {x['subject']}" for x in e["output_errors"])
        lines += (f"will not serve it: {listed} (`eaglehub validate {dst}{PROFILE_FLAGS}` says why)",)
    if e["unread_settings"]:
        lines += (f"does not read --set {', '.join(e['unread_settings'])} (it builds the same without it)",)
    return lines


def print_readings(report: dict, console: Console) -> None:
    report = printable_report(report)
    section = report.get("profiles")
    if section:
        how = "every named profile; --profile to choose" if section["default"] else "as given with --profile"
        console.print(f"  what each engine builds, source → output ({how}):", highlight=False)
        groups: dict[tuple[str, ...], list[str]] = {}
        for e in section["readings"]:
            groups.setdefault(_status(e, shlex.quote(report["destination"])), []).append(e["profile"])
        for lines, profiles in groups.items():
            flags = "".join(f" --profile {p}" for p in profiles)
            lines = tuple(line.replace(PROFILE_FLAGS, flags) for line in lines)
            print_prose(console, f"{', '.join(profiles)}: {lines[0]}", indent=4)
            for line in lines[1:]:  # a line that names `eaglehub validate …` prints whole, never wrapped
                print_prose(console, line, indent=6)
    if report.get("skipped_files"):
        console.print(
            f"  left out (not part of a served drafter): {escape(', '.join(report['skipped_files']))}", highlight=False
        )
