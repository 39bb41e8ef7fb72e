"""Render a verify report (see :mod:`eaglehub.verify.run`) as rich tables for the terminal.

Prints ids, categories, counts and rates only — never prompt text or tokens.
"""

from __future__ import annotations

import json

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from eaglehub.views.common import print_prose, titled_table
from eaglehub.views.tables import names_table


def fmt_number(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def rates_text(xs: list[float | None]) -> str:
    return " / ".join(fmt_number(x, 2) for x in xs) or "—"


def acceptance_table(d: dict, k: int, width: int | None = None) -> Table:
    """Per-category and overall: prompts matched, AL, per-position rates, draft acceptance rate (untitled:
    :func:`render_report` prints the drafter's path above it on one line, which a title would wrap). The
    rates are written without spaces and never wrap; where the table would not fit ``width`` (80 columns)
    the rates given the one before are left out (the report has them), not squeezed onto three lines."""
    rates_width = max(4, 5 * k - 1)
    # category ≤ 12, matched 7, drafts 6, AL 5, the rates, drafts accepted 8; " │ " between, "│ " / " │" at the edges
    needed = 12 + 7 + 6 + 5 + rates_width + 8 + 3 * 5 + 4
    given = width is None or needed + rates_width + 3 <= width
    t = Table()
    t.add_column("category", max_width=12, no_wrap=True, overflow="ellipsis")
    for col in ("matched", "drafts", "AL", "accepted per position", "given the one before", "drafts accepted"):
        if col != "given the one before" or given:
            t.add_column(col, justify="right", no_wrap=col not in ("accepted per position", "given the one before"))
    matched: dict[str, list[int]] = {}
    for r in d["prompts"]:
        m = matched.setdefault(r["category"], [0, 0])
        m[0] += r["match"]
        m[1] += 1
    rows = list(d["acceptance"]["per_category"].items()) + [("overall", d["acceptance"]["overall"])]
    for name, a in rows:
        ok, n = matched.get(name, [d["num_prompts_matched"], d["num_prompts"]])
        cells = [name, f"{ok}/{n}", str(a["num_drafts"]), fmt_number(a["acceptance_length"])]
        cells.append(_compact_rates(a["acceptance_rate_per_position"]))
        if given:
            cells.append(_compact_rates(a["conditional_acceptance_rate_per_position"]))
        cells.append(fmt_number(a["draft_acceptance_rate"]))
        t.add_row(*cells, style="bold" if name == "overall" else None)
    return t


def _compact_rates(xs: list[float | None]) -> str:
    return "/".join(fmt_number(x, 2) for x in xs) or "—"


ACCEPTANCE_LEGEND = (
    "matched: prompts token-identical to the target alone; AL: tokens per target step (1 + accepted / "
    "drafts); accepted per position: share of drafts whose token at each position was accepted (AL = 1 + "
    "their sum); given the one before: that share among drafts whose previous position was accepted; "
    "drafts accepted: accepted / drafted tokens"
)


def _histogram_text(h: dict | None) -> str:
    return "—" if not h else "/".join(f"{100 * share:.0f}" for share in h["shares"])


def _percentiles_text(pr: dict | None) -> str:
    if not pr or pr["p50"] is None:
        return "—"
    return f"{pr['p10']:.2f}/{pr['p50']:.2f}/{pr['p90']:.2f}"


def _shares_text(xs: list[float | None]) -> str:
    return "/".join("—" if x is None else f"{100 * x:.0f}" for x in xs) or "—"


def _sampled_label(sa: dict) -> str:
    top_k = sa["top_k"] or "off"
    return f"T={sa['temperature']:g} p={sa['top_p']:g} k={top_k} x{sa['samples']}"


def distribution_legend(d: dict, k: int) -> str:
    """The line under :func:`distribution_table`: the sampled run's settings, then what each heading means."""
    sampled = d.get("sampled_acceptance")
    settings = (
        f"sampled: {_sampled_label(sampled)} (T: temperature, p: top-p, k: top-k, xN: samples a prompt); "
        if sampled
        else ""
    )
    return (
        f"{settings}reqs: requests; AL 95% CI: the sampled AL's 95 % confidence interval; pos. %: accepted per "
        "position, in %; AL p10/50/90: the per-request AL's 10th, 50th and 90th percentiles; steps %: the "
        f"share of verify steps that accepted {'/'.join(map(str, range(k + 1)))} draft tokens, in %"
    )


def distribution_table(d: dict, k: int) -> Table | None:
    """Greedy and (with ``--temperature``) sampled acceptance side by side: AL, its 95 % CI (sampled),
    per-position rates, the per-request AL's p10 / p50 / p90 and the shares of verify steps that accepted
    0..k draft tokens. None when the run has neither per-request counters nor a sampled run. Each cell is one
    word and each heading short (:func:`distribution_legend` defines them), so the table fits 80 columns."""
    greedy = d["acceptance"].get("per_request")
    sampled = d.get("sampled_acceptance")
    if greedy is None and sampled is None:
        return None
    columns = ["run", "reqs", "AL", "AL 95% CI", "pos. %", "AL p10/50/90", "steps %"]
    t = titled_table("acceptance distribution", columns, "numbers")
    t.show_edge = False
    overall = d["acceptance"]["overall"]
    t.add_row(
        "greedy",
        str(greedy["num_requests"]) if greedy else "—",
        fmt_number(overall["acceptance_length"]),
        "—",
        _shares_text(overall["acceptance_rate_per_position"]),
        _percentiles_text(greedy),
        _histogram_text(greedy["accepted_histogram"] if greedy else None),
    )
    if sampled is not None:
        a, ci, pr = sampled["acceptance"]["overall"], sampled["acceptance_length_ci"], sampled["per_request"]
        interval = "—" if not ci or ci["low"] is None else f"{ci['low']:.3f}–{ci['high']:.3f}"
        t.add_row(
            "sampled",
            str(sampled["num_requests"]),
            fmt_number(a["acceptance_length"]),
            interval,
            _shares_text(a["acceptance_rate_per_position"]),
            _percentiles_text(pr),
            _histogram_text(pr["accepted_histogram"] if pr else None),
        )
    return t


def divergence_table(d: dict) -> Table | None:
    """Prompts whose output differs from the target alone (None when all match)."""
    bad = [r for r in d["prompts"] if not r["match"]]
    if not bad:
        return None
    columns = [
        "id",
        "category",
        "first divergent token",
        "output tokens (drafter / target)",
        "target top-2 gap",
        "forensics",
    ]
    t = titled_table("prompts not token-identical to the target alone", columns)
    for r in bad:
        f = r.get("forensics")
        t.add_row(
            r["id"],
            r["category"],
            "—" if r["first_divergence"] is None else str(r["first_divergence"]),
            f"{r['num_output_tokens']} / {r['num_output_tokens_target']}",
            fmt_number(f["gap"], 4) if f else "—",
            escape(f"{f['classification']}: {f['reason']}") if f else "—",
        )
    return t


def print_sampling_test(d: dict, console: Console) -> None:
    """One line on the T > 0 sampling test (nothing without ``--sampling-trials``)."""
    st = d.get("sampling_test")
    if st:
        c = st["combined"]
        verdict = "[green]passed[/]" if c["passed"] else "[red]failed[/]"
        console.print(
            f"sampling test (T={st['temperature']}, {st['trials_per_prefix']} trials x {len(st['prefixes'])} "
            f"prefixes, {st['engine']} engine, {escape(st['rule'])} rule): chi-square {c['statistic']:.1f} "
            f"({c['dof']} dof), p-value {c['p_value']:.3g} {verdict} at alpha {c['alpha']:g}",
            highlight=False,
        )


_SEVERITY_STYLE = {"error": "red", "warning": "yellow", "info": "cyan"}


def print_findings(d: dict, console: Console) -> None:
    """The verdict line of one drafter section, then each finding (code, subject, message, hint)."""
    counts = {s: sum(f["severity"] == s for f in d["findings"]) for s in _SEVERITY_STYLE}
    extra = ", ".join(f"{n} {s}{'s' if n > 1 and s != 'info' else ''}" for s, n in counts.items() if n and s != "error")
    verdict = "[bold green]PASS[/]" if d["passed"] else "[bold red]FAIL[/]"
    # a served method that does not keep the target's outputs gets no losslessness verdict (verify/served.py)
    lossless = "not judged (lossy by design), " if d["lossless"] is None else ""
    console.print(
        f"{verdict}{f' ({extra})' if extra else ''} · lossless: {lossless}{d['num_prompts_matched']}/"
        f"{d['num_prompts']} prompts token-identical",
        highlight=False,
    )
    said: set[str] = set()
    for f in d["findings"]:
        style = _SEVERITY_STYLE[f["severity"]]
        console.print(f"  [{style}]{f['code']}[/] ({escape(f['subject'])})", highlight=False)
        print_prose(console, f["message"], indent=4)
        # W-VERIFY-LOW-AL gives the overall AL and each low category the same fix: said once, not once a category
        if f["hint"] in said:
            print_prose(console, "hint: as above", indent=4, style="dim")
        else:
            print_prose(console, f"hint: {f['hint']}", indent=4, style="dim")
            said.add(f["hint"])


def print_reference(d: dict, console: Console) -> None:
    """One line on the comparison with the reference report (nothing without ``--reference-report``)."""
    r = d["reference"]
    if r is not None:
        e = r["engine"]
        console.print(
            f"reference {escape(r['report'])} ({e['name']} {e['version']}, k={r['num_speculative_tokens']}): "
            f"{r['status']}: {escape(r['note'])}",
            highlight=False,
        )


def cross_engine_table(report: dict, console: Console) -> Table | None:
    """AL per engine and their relative difference, per drafter (None with one engine)."""
    section = report.get("cross_engine")
    if not section:
        return None
    primary = report["engine"]["name"]
    columns = ["drafter", "engine", f"AL {primary}", "AL engine", "relative difference", "outputs identical", "agree"]
    rows = []
    for e in section["engines"]:
        for row in e["comparison"]:
            name = row["engine"]
            rows.append(
                [
                    row["drafter"],
                    f"{name} {e['engine']['version']}",
                    fmt_number(row["acceptance_length"][primary]),
                    fmt_number(row["acceptance_length"][name]),
                    "—" if row["relative_difference"] is None else f"{row['relative_difference']:+.2%}",
                    f"{row['outputs_identical']}/{row['num_prompts']}",
                    "yes" if row["agree"] else "[red]no[/]",
                ]
            )
    return names_table(console, columns, rows, title=f"engines compared (tolerance {section['tolerance']:.0%})")


def context_line(c: dict) -> str:
    """``verify --context``: the measured prompt length, how it came from the request, and the text."""
    p = c["padding"]
    source = f"{p['title']} ({p['package']} {p['package_version']})" if "title" in p else "Python docstrings"
    asked = f", asked {c['requested']}: the longest the target holds" if c["context_tokens"] != c["requested"] else ""
    return (
        f"context: every prompt padded to {c['context_tokens']} tokens{asked} "
        f"({min(c['prompt_tokens'])}–{max(c['prompt_tokens'])}), the text before each question from {source}"
    )


def features_lines(section: dict, num_requests: int) -> list[str]:
    """``settings.production_features``: what the vLLM runs ran with, read from the engine's config, as one line
    (a second when the target-alone run differs, a third after a numerics rerun)."""

    def line(r: dict, n: int) -> str:
        onoff = {True: "on", False: "off"}
        n_hit = r["prompts_hitting_cache"]
        hits = f"{r['prefix_cache_hit_tokens']} prompt tokens from the cache in {n_hit} prompt{'s' * (n_hit != 1)}"
        parts = [
            f"prefix caching {onoff[r['enable_prefix_caching']]}"
            + (f" (block {r['block_size']} tokens; {hits})" if r["enable_prefix_caching"] else ""),
            f"chunked prefill {onoff[r['enable_chunked_prefill']]}"
            + (f" ({r['prompts_split']} of {n} prompts split)" if r["enable_chunked_prefill"] else ""),
            f"max_num_batched_tokens {r['max_num_batched_tokens']}",
            f"max_num_seqs {r['max_num_seqs']}",
        ]
        schedule = r.get("num_speculative_tokens_per_batch_size")
        if schedule:
            parts.append(f"k schedule {json.dumps(schedule)}")
        return ", ".join(parts)

    runs = section["runs"]
    n = num_requests
    shown = runs[1] if len(runs) > 1 else runs[0]
    batching = "every prompt in one batch" if section["one_batch"] else "one batch per category"
    out = [f"vLLM features (from the engine's config): {line(shown, n)}; {batching}"]
    keys = ("enable_prefix_caching", "enable_chunked_prefill", "max_num_batched_tokens", "max_num_seqs")
    if any(runs[0][k] != shown[k] for k in keys):
        out.append(f"  target alone: {line(runs[0], n)}")
    check = section.get("numerics_check")
    if check:
        changed = ", ".join(f"{c['id']}@{c['first_divergence']}" for c in check["prompts_changed"]) or "none"
        out.append(f"  target alone rerun without the features (near-tie check): prompts it changes: {changed}")
    return out


def k_heading(report: dict) -> str:
    """``k = 3``, or for a served k schedule ``k ≤ 3, schedule [[1, 1, 3], [2, 256, 1]]``: the heading over
    a drafter's acceptance table."""
    k = report["settings"]["num_speculative_tokens"]
    served = (report.get("endpoint") or {}).get("served")
    if not served:
        return f"k = {k}"
    schedule = served["settings"]["k_schedule"]
    if schedule["source"] != "unknown" and isinstance(schedule["value"], list) and schedule["value"]:
        return f"k ≤ {k}, schedule {json.dumps(schedule['value'])}"
    if schedule["value"] == "adaptive":
        return f"k ≤ {k}, adaptive"
    if served["claims"]["acceptance_length"] == "mixed_k":
        return f"k ≤ {k}, a mix of ks"
    return f"k = {k}"


def curve_lines(d: dict) -> list[str]:
    """The drafter's acceptance curves in one line each (greedy, then sampled): AL(k) predicted for every k up to
    the run's from its rates per position (eaglehub.measure.curve)."""
    from eaglehub.measure.curve import AcceptanceCurve

    out = []
    for c in (d.get("acceptance_curve"), (d.get("sampled_acceptance") or {}).get("acceptance_curve")):
        if c:
            curve = AcceptanceCurve.from_dict(c)
            out.append(
                f"acceptance curve: {curve.line()} (predicted from the rates at k={curve.k}; prompts sha256 "
                f"{curve.prompts_sha256[:12]}…)"
            )
    return out


def render_report(report: dict, console: Console) -> None:
    """Print the whole report: settings, one table per drafter, findings, reference comparison, timings, serve line."""
    s, e = report["settings"], report["engine"]
    console.print(
        f"[bold]verify[/] target {report['target']['path']}  ·  engine {e['name']} {e['version']}  ·  "
        f"k={s['num_speculative_tokens']}  max_tokens={s['max_tokens']}  dtype={s['dtype']}  greedy"
        + (" + sampled" if s.get("sampled") else "")
        + (f"  chat template {escape(json.dumps(s['chat_template_kwargs']))}" if s.get("chat_template_kwargs") else "")
        + "  ·  "
        f"{report['prompts']['count']} prompts in {len(report['prompts']['categories'])} categories"
        + (f" ({report['prompts']['requests']} requests: one per turn)" if report["prompts"].get("multi_turn") else ""),
        highlight=False,
    )
    if s.get("context"):
        console.print(context_line(s["context"]), highlight=False)
    if s.get("production_features"):
        for text in features_lines(s["production_features"], report["prompts"]["requests"]):
            console.print(escape(text), highlight=False)
    if report.get("profiles"):
        from eaglehub.verify.preflight import profiles_line

        console.print(f"[dim]{escape(profiles_line(report['profiles']))}[/]", highlight=False)
    console.print(f"[dim]{report['definitions']['acceptance_length']}[/]", highlight=False)
    b = report["baseline"]
    figures = report.get("speed_figures") or {}
    cpu = figures.get("device") == "cpu"
    console.print(
        f"target alone: {b['output_tokens']} output tokens in {b['generate_seconds']:.1f} s (load "
        f"{b['load_seconds']:.1f} s); {'on a CPU ' if cpu else ''}{b['output_tokens_per_second']:.1f} tok/s",
        highlight=False,
    )
    if cpu:
        console.print(f"[yellow]note:[/] {escape(figures['note'])}", highlight=False)
    for d in report["drafters"]:
        console.print()
        console.print(Text(f"{d['drafter']}  ({k_heading(report)})", style="bold"), soft_wrap=True)
        acc = acceptance_table(d, s["num_speculative_tokens"], console.width)
        console.print(acc)
        legend = ACCEPTANCE_LEGEND
        if len(acc.columns) < 7:
            legend += "; the rates given the one before are in the report (a wider terminal shows them)"
        console.print(f"[dim]{legend}[/]", highlight=False)
        for line in curve_lines(d):
            print_prose(console, line)
        dist = distribution_table(d, s["num_speculative_tokens"])
        if dist is not None:
            console.print(dist)
            print_prose(console, distribution_legend(d, s["num_speculative_tokens"]), style="dim")
        note = (d.get("sampled_acceptance") or {}).get("note")
        if note:
            console.print(f"[dim]sampled run: {escape(note)}[/]", highlight=False)
        div = divergence_table(d)
        if div is not None:
            console.print(div)
        t = d["timing"]
        console.print(
            f"with drafter: {t['output_tokens']} output tokens in {t['generate_seconds']:.1f} s (load "
            f"{t['load_seconds']:.1f} s); {'on a CPU, not a speedup claim: ' if cpu else ''}"
            f"{t['output_tokens_per_second']:.1f} tok/s, {fmt_number(d['speed_ratio'], 2)} × the target alone's",
            highlight=False,
        )
        print_findings(d, console)
        if d.get("probe"):  # verify --probe: the probe's own tables and findings
            from eaglehub.views.probe import render_report as render_probe

            console.print("[bold]probe[/] (config readings, reference engine):", highlight=False)
            render_probe(d["probe"], console)
        print_sampling_test(d, console)
        print_reference(d, console)
        if d["serve_command"]:  # None for a served drafter (verify --endpoint): it is served already
            console.print("serve with:", highlight=False)
            console.print(d["serve_command"], highlight=False, soft_wrap=True, markup=False)
    table = cross_engine_table(report, console)
    if table is not None:
        console.print()
        console.print(table)


def render_baseline(report: dict, console) -> None:
    """One table row per drafter against the baseline (AL, ratio, bytes on disk)."""
    section = report.get("baseline_drafter")
    if not section:
        return

    def num(x, fmt):
        return "n/a" if x is None else format(x, fmt)

    rows = [
        [
            r["drafter"],
            num(r["acceptance_length"], ".3f"),
            num(r["al_ratio"], ".4f"),
            f"{r['weight_bytes']:,}",
            num(r["size_ratio"], ".4f"),
            "yes" if r["lossless"] else "no",
        ]
        for r in section["comparisons"]
    ]
    columns = ["drafter", "AL", "AL / baseline", "weight bytes", "size / baseline", "lossless"]
    heading = (
        f"against baseline {section['drafter']} (AL {num(section['acceptance_length'], '.3f')}, "
        f"{section['weight_bytes']:,} bytes)"
    )
    console.print(Text(heading), soft_wrap=True)  # a line, not a title: a title folds a long path
    console.print(names_table(console, columns, rows))


def render_report_and_baseline(report: dict, console) -> None:
    """The verify tables, then the baseline comparison when the run had a baseline drafter."""
    render_report(report, console)
    render_baseline(report, console)
