"""Human-readable output (rich) for the inspect, validate and convert reports. Never prints secrets."""

from __future__ import annotations

import contextlib
import json
import re

from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from eaglehub.findings import printable
from eaglehub.views.tables import names_table

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def printable_report(obj):
    """The report with every string made :func:`~eaglehub.findings.printable`: tables show config values
    and tensor names, which are untrusted (terminal escapes, newlines, lone surrogates)."""
    if isinstance(obj, str):
        return printable(obj)
    if isinstance(obj, dict):
        return {printable_report(k): printable_report(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [printable_report(x) for x in obj]
    return obj


def titled_table(title: str, columns: list[str], right: tuple[str, ...] | str = ()) -> Table:
    """A table with a left-aligned ``title`` and ``columns``; those in ``right`` (or every column when
    ``right`` is ``"all"``, or all but the first when it is ``"numbers"``) are right-justified."""
    t = Table(title=title, title_justify="left")
    for i, col in enumerate(columns):
        justified = right == "all" or (right == "numbers" and i > 0) or (isinstance(right, tuple) and col in right)
        t.add_column(col, justify="right" if justified else "left")
    return t


_COMMAND = re.compile(
    r"(?:^|[\s`(])(?:eaglehub|vllm serve|python -m|pip install|huggingface-cli|[A-Z_]+=\S+ eaglehub) "
    r"|`[\w./=-]+ [^`]+`"
)
"""Where a text holds a command someone will paste: a hint's ``eaglehub convert … --set …``, or anything in
backticks with an argument, anywhere in the text (a producer's own ``python tools/convert_to_hf.py …``)."""


def holds_command(text: str) -> bool:
    return _COMMAND.search(text) is not None


def print_prose(console: Console, text: str, indent: int = 0, style: str | None = None) -> None:
    """``text`` (plain, not markup) indented by ``indent``: wrapped at words to the console's width, unless it
    holds a command (:func:`holds_command`): then on one line, unwrapped, so the command is never split
    (a terminal folds it for the eye; a copy or a log keeps it whole)."""
    if holds_command(text):
        console.print(Text(" " * indent + text, style=style or ""), soft_wrap=True)
    else:
        console.print(Padding(Text(text, style=style or ""), (0, 0, 0, indent), expand=False))


def show_value(value) -> str:
    """A config value as text: a string as it is, ``unset`` for an absent one, anything else as JSON
    (``true``, ``[2, 15, 27]``), never a Python repr (``None``, ``True``, ``['a']``)."""
    if value is None:
        return "unset"
    return value if isinstance(value, str) else json.dumps(value)


def human_size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def short_size(n: float) -> str:
    """``n`` bytes as one short word: ``128B``, ``1.1K``, ``432K``, ``1.9M``, ``250M`` (K, M, G: KiB, MiB, GiB)."""
    if n < 1024:
        return f"{n:.0f}B"
    for unit in ("K", "M", "G"):
        n /= 1024
        if n < 1024 or unit == "G":
            break
    return f"{n:.1f}{unit}" if n < 9.95 else f"{n:.0f}{unit}"


def print_inspect(report: dict, console: Console) -> None:
    report = printable_report(report)
    d, v, a = report["dims"], report["vocab"], report["aux"]
    flags = ", ".join(f"{k}={'true' if x else 'false'}" for k, x in report["flags"].items())
    dtype = f"weights {report['dtype']}"
    if report.get("config_dtype") and report["config_dtype"] != report["dtype"]:
        dtype += f" (config torch_dtype {report['config_dtype']})"
    console.print(
        f"[bold]{escape(report['path'])}[/]  format [bold]{report['format']}[/] ({escape(report['architecture'] or 'no architecture')}, "
        f"{report['layer_kind']}), EAGLE-{report['eagle_version']}, {report['weights_format']}, {escape(dtype)}",
        highlight=False,
    )
    console.print(f"evidence: {escape('; '.join(report['format_evidence']))}", highlight=False)
    if report["target"]:
        console.print(f"target: {escape(show_value(report['target'].get('name_or_path')))}", highlight=False)
    # an MLA drafter's attention is sized by its ranks: head_dim is not one of its dimensions
    mla = report.get("mla")
    console.print(
        f"dims: H={d['H']} Ht={d['Ht']} A={d['A']} heads={d['nh']}/{d['nkv']} "
        + ("" if mla else f"head_dim={d['head_dim']} ")
        + f"I={d['I']} layers={d['layers']}",
        highlight=False,
    )
    if mla:
        console.print("MLA: " + " ".join(f"{k}={v}" for k, v in mla.items()), highlight=False)
    windows = report.get("attention_windows") or []
    if any(windows):
        shown = ", ".join(str(w) if w else "full" for w in windows)
        console.print(f"attention: sliding window per layer {shown} (positions)", highlight=False)
    console.print(
        f"vocab: Vd={v['Vd']} / V={v['V']} ({'pruned' if v['pruned'] else 'full'}; d2t {'yes' if v['d2t'] else 'no'}, "
        f"t2d {'yes' if v['t2d'] else 'no'})",
        highlight=False,
    )
    ids = (
        f"{a['raw']} from {a['key']} ({a['convention']}: {a['reason']}); C-in {a['c_in']}"
        if a["raw"] is not None
        else a["reason"]
    )
    console.print(f"aux ids: {ids}", highlight=False)
    console.print(f"flags: {flags}", highlight=False)
    if report["stripped_prefix"]:
        console.print(f"names stored with prefix {report['stripped_prefix']!r} (read without it)", highlight=False)
    # the names as the file stores them (layers.0.* where the producer wrote that), in the file's order of names
    # shapes and sizes one word each (576×1536, 1.9M): a row stays one line at 80 columns whatever the shapes
    rows = [
        [t["stored_name"], "×".join(map(str, t["shape"])) or "scalar", escape(t["dtype"]), short_size(t["bytes"])]
        for t in sorted(report["tensors"], key=lambda t: t["stored_name"])
    ]
    console.print(names_table(console, ["tensor", "shape", "dtype", "size"], rows, right=("size",), show_edge=False))
    console.print("size: B = bytes, K = KiB, M = MiB, G = GiB", highlight=False)
    console.print(f"{report['parameters']:,} parameters, {human_size(report['bytes'])}", highlight=False)


def print_findings(report: dict, console: Console, verdict: str | None = None) -> None:
    """One block per finding (severity, code, subject; then the message and the fix hint, indented), so
    long messages stay readable at any terminal width; then the verdict line (``verdict``, rich markup: a
    verb's own last line where OK / FAILED would not say what its exit code says)."""
    report = printable_report(report)
    console.print(
        f"[bold]{escape(report['drafter'])}[/]  layout [bold]{report['layout']}[/]"
        + (f"  target {escape(report['target'])}" if report["target"] else ""),
        highlight=False,
    )
    judged = report.get("profiles") or []
    if judged:
        names = "; ".join(p["title"] for p in judged)
        note = " (the default; choose with --profile)" if any(p["default"] for p in judged) else ""
        console.print(Text(f"judged for {names}{note}", style="dim"), highlight=False)
    for f in report["findings"]:
        style = SEVERITY_STYLE[f["severity"]]
        console.print(f"[{style}]{f['severity']:<7}[/] [bold]{f['code']}[/]  {escape(f['subject'])}", highlight=False)
        print_prose(console, f["message"], indent=8)
        if f["hint"]:
            print_prose(console, f"fix: {f['hint']}", indent=8, style="dim")
    c = report["counts"]
    if verdict is not None:
        console.print(verdict, highlight=False)
        return
    verdict = "[bold green]OK[/]" if report["ok"] else "[bold red]FAILED[/]"
    if report["ok"] and report.get("values_read") is False:  # validate without --deep: OK says nothing of values
        verdict += " (weight values not read: add --deep)"
    console.print(f"{verdict}: {c['error']} error(s), {c['warning']} warning(s), {c['info']} info", highlight=False)


def print_report_findings(report: dict, console: Console, verdict: str | None = None) -> None:
    """:func:`print_findings` for a measuring report (probe, vocab): its ``format`` is the layout, ``passed`` the
    verdict."""
    print_findings(
        {
            "drafter": report["drafter"],
            "layout": report["format"],
            "target": report["target"],
            "findings": report["findings"],
            "counts": report["counts"],
            "ok": report["passed"],
        },
        console,
        verdict,
    )


def print_rules(rules: list[dict], console: Console) -> None:
    table = Table(show_edge=False, show_lines=False)
    table.add_column("code", no_wrap=True)  # codes are what people grep for: never split one
    for col in ("severity", "stage", "title", "concerns", "fix hint"):
        table.add_column(col, overflow="fold")
    for r in rules:
        table.add_row(
            r["code"],
            f"[{SEVERITY_STYLE[r['severity']]}]{r['severity']}[/]",
            r["stage"],
            escape(r["title"]),
            escape(r["concerns"]),
            escape(r["hint"]),
        )
    console.print(table)
    console.print(f"{len(rules)} rules (docs/rules.md lists their sources and failure kinds)", highlight=False)


def print_convert(report: dict, console: Console, err_console: Console) -> None:
    report = printable_report(report)
    console.print(
        f"converted {report['source']} ({report['source_format']}) → {report['destination']} "
        f"({report['format']}, EAGLE-{report['version']})",
        highlight=False,
    )
    cal = report.get("calibration")
    for t in report["added_tensors"]:
        console.print(f"  + {t['name']} {t['shape']} {t['dtype']} ({'fitted' if cal else 'ones'})", highlight=False)
    for n in report["synthesized_tensors"]:
        console.print(f"  + {n} (derived: the format stores it)", highlight=False)
    for n in report["omitted_tensors"]:
        console.print(f"  - {n} (derivable: the format leaves it out)", highlight=False)
    for c in report["config_changes"]:
        console.print(f"  config {c['key']}: {show_value(c['old'])} → {show_value(c['new'])}", highlight=False)
    aux = report["aux"]
    if aux["source_key"] and aux["source_key"] != aux["output_key"]:
        console.print(
            f"  aux-layer ids: {aux['source_key']} ({aux['source_convention']}) → {aux['output_key']} "
            f"{aux['output_ids']} (C-in {aux['c_in']})",
            highlight=False,
        )
    console.print(
        f"  {report['copied_tensors']} tensors copied byte for byte ({human_size(report['bytes_copied'])}), "
        f"{len(report['copied_files'])} other file(s) copied → {', '.join(report['files'])}",
        highlight=False,
    )
    if report.get("replaced_tensors"):
        console.print(
            f"  {len(report['replaced_tensors'])} tensor(s) recomputed (calibration / fold): "
            f"{', '.join(report['replaced_tensors'])}",
            highlight=False,
        )
    if cal:
        print_calibration(cal, console)
    for w in report["warnings"]:
        err_console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False, soft_wrap=True)


def print_calibration(cal: dict, console: Console) -> None:
    """The calibration section of a convert report: data, gains, norm_output choice, acceptance before/after."""
    p, acc = cal["prompts"], cal["acceptance"]
    console.print(
        f"  calibration: {p['fit']} prompts, {p['tokens']} target tokens ({p['answer_tokens']} generated), "
        f"{cal['seconds']['total']:.0f} s",
        highlight=False,
    )
    for i, g in enumerate(cal["gains"]):
        console.print(
            f"    fc_norm.{i}: mean RMS {g['mean_rms']:.2f}, gains {g['gain_mean']:.2f} "
            f"({g['gain_min']:.2f}–{g['gain_max']:.2f})",
            highlight=False,
        )
    console.print(
        f"  norm_output {'on' if cal['norm_output']['chosen'] else 'off'}: {escape(cal['norm_output']['reason'])}",
        highlight=False,
    )
    tune = cal["fine_tuning"]
    if tune and "skipped" in tune:
        console.print(f"  fine-tuning skipped: {escape(tune['skipped'])}", highlight=False)
    elif tune:
        console.print(
            f"  fine-tuned {tune['train']} for {tune['steps']} steps (lr {tune['lr']:g}; {escape(tune['objective'])}): "
            f"loss {tune['loss_first']:.3f} → {tune['loss_last']:.3f}, {tune['seconds']:.0f} s",
            highlight=False,
        )
    t = Table(
        title=f"acceptance on {p['held_out']} held-out prompts ({acc['engine']} engine, k = {acc['num_speculative_tokens']}, "
        f"{acc['max_tokens']} tokens, greedy; AL = 1 + accepted / drafts)",
        title_justify="left",
    )
    for col in ("drafter", "AL", "rate per position"):
        t.add_column(col)
    rows = [("source (EAGLE-3)", "source"), ("plain upgrade (unit gains)", "plain_upgrade")]
    if tune and "skipped" not in tune:
        rows.append(("closed-form gains", "closed_form"))
    for label, key in rows + [("calibrated", "calibrated")]:
        m = acc[key]
        t.add_row(
            label,
            "—" if m["acceptance_length"] is None else f"{m['acceptance_length']:.3f}",
            " / ".join("—" if r is None else f"{r:.2f}" for r in m["acceptance_rate_per_position"]),
        )
    console.print(t)


@contextlib.contextmanager
def byte_progress(console: Console, label: str, min_bytes: int = 64 << 20):
    """Yield ``progress(total) -> advance(n)`` that shows a byte progress bar on ``console`` (stderr)
    for work of at least ``min_bytes``; smaller jobs finish before a bar would help."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

    bar = Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )

    def start(total: int):
        if total < min_bytes:
            return lambda n: None
        if not console.is_terminal:  # a log: a line at the start and at each further quarter
            return _plain_bytes(console, label, total)
        bar.start()
        task = bar.add_task(label, total=total)
        return lambda n: bar.advance(task, n)

    try:
        yield start
    finally:
        if bar.live.is_started:
            bar.stop()


def _plain_bytes(console: Console, label: str, total: int):
    """``advance(n)`` of :func:`byte_progress` off a terminal: a line on ``console`` now and per quarter done."""

    def print_progress(line: str) -> None:
        console.print(line, highlight=False, markup=False, soft_wrap=True)

    done, shown = 0, 0
    print_progress(f"{label}: {human_size(total)}")

    def advance(n: int) -> None:
        nonlocal done, shown
        done += n
        quarter = 4 * done // total
        if quarter > shown:
            shown = quarter
            print_progress(f"{label}: {human_size(done)} of {human_size(total)} ({25 * quarter} %)")

    return advance
