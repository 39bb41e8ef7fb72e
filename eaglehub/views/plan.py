"""The launch plan of ``verify --dry-run`` (schemas/launch-plan.schema.json) as tables and lines."""

from __future__ import annotations

import json

from rich.console import Console
from rich.markup import escape

from eaglehub.views.common import print_prose, printable_report, titled_table

GIB = 2**30


def gib(n: float) -> str:
    return f"{n / GIB:.1f}"


def render_plan(report: dict, console: Console) -> None:
    r = printable_report(report)
    q, p, w, m = r["quantization"], r["params"], r["weights_bytes"], r["machine"]
    quant = "unquantized" if q["scheme"] == "none" else f"{q['scheme']} ({q['bytes_per_param']:g} B/param)"
    console.print(
        f"[bold]{escape(r['target'])}[/]  {escape(r['model_type'])}, {r['attention'].upper()} attention, "
        f"{r['dtype']}, {quant}",
        highlight=False,
    )
    index = f", index {w['index'] / 1e9:.1f} GB ({gib(w['index'])} GiB)" if w["index"] else ", no index"
    console.print(
        f"parameters {p['total']:,} ({p['quantized']:,} quantized); weights computed "
        f"{w['computed'] / 1e9:.1f} GB ({gib(w['computed'])} GiB){index}; using {w['used']}",
        highlight=False,
    )
    drafter = r["drafter"]
    console.print(
        f"context: max_model_len {r['max_model_len']} x {r['max_num_seqs']} sequence(s), KV "
        f"{r['kv_bytes_per_token']:,} B/token at TP 1; k {r['k']}; drafter "
        + (f"{escape(drafter['spec'])} ({drafter['weight_bytes'] / 2**20:.0f} MiB)" if drafter else "none"),
        highlight=False,
    )
    console.print(
        f"machine ({m['source']}): {m['nodes']} node(s) x {m['gpus_per_node']} GPU(s) x {m['gpu_memory_gb']:g} GB "
        f"({gib(m['gpu_memory_bytes'])} GiB); usable {m['utilization']:g} x that = {gib(m['usable_bytes'])} GiB per GPU",
        highlight=False,
    )
    table = titled_table(
        f"per-GPU memory (GiB; usable {gib(m['usable_bytes'])}) of the layouts tried",
        ["TP", "PP", "nodes", "weights", "KV", "drafter", "overhead", "total", "fits"],
        right="all",
    )
    for c in r["candidates"]:
        g = c["per_gpu"]
        table.add_row(
            str(c["tp"]),
            str(c["pp"]),
            str(c["nodes"]),
            gib(g["weights_bytes"]),
            gib(g["kv_cache_bytes"]),
            gib(g["drafter_bytes"] + g["drafter_kv_cache_bytes"]),
            gib(g["overhead_bytes"]),
            gib(g["total_bytes"]),
            "[green]yes[/]" if c["fits"] else "[red]no[/]",
        )
    console.print(table)
    prof = r["profile"]
    console.print(
        f"for {escape(prof['title'])}"
        + (" (the default; choose with --profile)" if prof["default"] else "")
        + f": {escape(prof['runner'])}; lines checked against the {escape(prof['table'])} engine table"
        + (f" ({escape(prof['table_note'])})" if prof["table_note"] else ""),
        highlight=False,
    )
    check = r["drafter_check"]
    if check is not None:
        verdict = "[bold green]passes[/]" if check["ok"] else "[bold red]fails[/]"
        console.print(
            f"drafter on {escape(prof['title'])}: {verdict} the preflight (validate --deep against the target)",
            highlight=False,
        )
        for f in check["findings"]:
            print_prose(console, f"{f['severity']} {f['code']}  {f['subject']}: {f['message']}", indent=2)
            if f["hint"]:
                print_prose(console, f"fix: {f['hint']}", indent=4)
    plan = r["plan"]
    if plan is None:
        refusal = r["refusal"]
        console.print(f"[bold red]refused:[/] {escape(refusal['message'])}", highlight=False)
        print_prose(console, f"hint: {refusal['hint']}")
        return
    capacity = (
        f"; the usable memory holds {plan['kv_tokens_capacity']:,} tokens of KV" if plan["kv_tokens_capacity"] else ""
    )
    ready = check is None or check["ok"]
    head = "[bold green]plan:[/]" if ready else "[bold red]plan (not ready: the drafter fails the preflight above):[/]"
    console.print(
        f"{head} TP {plan['tp']} x PP {plan['pp']} = {plan['gpus']} GPU(s) on {plan['nodes']} node(s), "
        f"backend {plan['backend']}; {gib(plan['per_gpu']['total_bytes'])} GiB per GPU, headroom "
        f"{gib(plan['headroom_bytes'])} GiB{capacity}",
        highlight=False,
    )
    console.print(f"why: {escape(plan['reason'])}", highlight=False)
    console.print(
        ("serve:" if ready else "serve (once the drafter passes the preflight):")
        + ("" if plan["serve_has_drafter"] else " (target alone: no --drafter given)")
    )
    console.print(plan["serve_command"], highlight=False, soft_wrap=True, markup=False)
    console.print("LLM(...) arguments eaglehub's vLLM engine builds:")
    # unwrapped: a long path folded onto the next line would leave JSON no one can paste
    console.print(json.dumps(plan["llm_kwargs"], indent=2), highlight=False, markup=False, soft_wrap=True)
    if not ready:  # the last line agrees with the exit code (1)
        import shlex

        codes = ", ".join(sorted({f["code"] for f in check["findings"] if f["severity"] == "error"}))
        command = shlex.join(
            [
                "eaglehub",
                "validate",
                r["drafter"]["spec"],
                "--target",
                r["target"],
                "--deep",
                "--profile",
                check["profile"],
            ]
        )
        console.print("details and fixes: " + command, highlight=False, soft_wrap=True, markup=False)
        console.print(
            f"[bold red]FAILED:[/] the drafter fails the preflight on {escape(prof['title'])} ({codes})",
            highlight=False,
        )
