"""The launch plan of ``verify --dry-run`` (schemas/launch-plan.schema.json) as tables and lines."""

from __future__ import annotations

import json

from rich.console import Console
from rich.markup import escape

from eaglehub.views.common import print_prose, printable_report, titled_table

GIB = 2**30


def gib(n: float) -> str:
    return f"{n / GIB:.1f}"


def _layout(lay: dict) -> str:
    parts = [f"TP {lay['tp']}"] + [f"{k.upper()} {lay[k]}" for k in ("pp", "dp") if lay[k] > 1]
    return " x ".join(parts) + (" + EP" if lay["ep"] else "")


ASKED = {
    "tp": "tensor parallel",
    "pp": "pipeline parallel",
    "dp": "data parallel",
    "ep": "expert parallel",
    "backend": "executor backend",
}


def _asked(key: str, value) -> str:
    """One layout option as words: ``expert parallel``, ``tensor parallel 4``."""
    return ASKED.get(key, key) + ("" if value is True else f" {value}")


def _candidates(title: str, candidates: list[dict], console: Console) -> None:
    table = titled_table(
        title, ["layout", "nodes", "weights", "KV", "drafter", "overhead", "total", "fits"], right="all"
    )
    for c in candidates:
        g = c["per_gpu"]
        table.add_row(
            _layout(c),
            str(c["nodes"]),
            gib(g["weights_bytes"]),
            gib(g["kv_cache_bytes"]),
            gib(g["drafter_bytes"] + g["drafter_kv_cache_bytes"]),
            gib(g["overhead_bytes"]),
            gib(g["total_bytes"]),
            "[green]yes[/]" if c["fits"] else "[red]no[/]",
        )
    console.print(table)


def render_plan(report: dict, console: Console) -> None:
    r = printable_report(report)
    q, p, w, m, rules = r["quantization"], r["params"], r["weights_bytes"], r["machine"], r["vllm_rules"]
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
        f"KV {r['kv_bytes_per_token']:,} B/token at TP 1; "
        + (f"k {r['k']}; " if r["k"] is not None else "")
        + "drafter "
        + (f"{escape(drafter['spec'])} ({drafter['weight_bytes'] / 2**20:.0f} MiB)" if drafter else "none"),
        highlight=False,
    )
    console.print(
        f"machine ({m['source']}): {m['nodes']} node(s) x {m['gpus_per_node']} GPU(s) of {gib(m['gpu_memory_bytes'])} "
        f"GiB ({escape(m['read_as'])}); usable {m['utilization']:g} x that = {gib(m['usable_bytes'])} GiB per GPU",
        highlight=False,
    )
    print_prose(
        console,
        f"vLLM {rules['vllm_version']} rules: {rules['pp_rule']}; "
        + ("MoE: data + expert parallelism for serving; " if rules["moe"] else "dense; ")
        + ("--trust-remote-code (the config has auto_map); " if rules["trust_remote_code"] else "")
        + f"overhead {rules['overhead']}",
    )
    if r["requested"]:
        asked = ", ".join(_asked(k, v) for k, v in r["requested"].items())
        console.print(f"layout asked for: {escape(asked)} (used or refused)", highlight=False)
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
    ready = check is None or check["ok"]
    _verify_run(r["verify_run"], m, ready, console)
    _serve(r["serve"], m, ready, console)
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


def _verify_run(run: dict, m: dict, ready: bool, console: Console) -> None:
    console.print(
        f"[bold]verify run[/] (LLM(...) as verify runs it: max_model_len {run['max_model_len']}, "
        f"{run['max_num_seqs']} sequence(s), one replica, the fewest GPUs)",
        highlight=False,
    )
    if run["candidates"]:
        _candidates(
            f"per-GPU memory (GiB; usable {gib(m['usable_bytes'])}) of the layouts tried", run["candidates"], console
        )
    lay = run["layout"]
    if lay is None:
        console.print(f"[bold red]refused:[/] {escape(run['refusal']['message'])}", highlight=False)
        print_prose(console, f"hint: {run['refusal']['hint']}")
        return
    head = "[bold green]plan:[/]" if ready else "[bold red]plan (not ready: the drafter fails the preflight above):[/]"
    console.print(
        f"{head} {_layout(lay)} = {lay['gpus']} GPU(s) on {lay['nodes']} node(s), backend {lay['backend']}; "
        f"{gib(run['per_gpu']['total_bytes'])} GiB per GPU, headroom {gib(run['headroom_bytes'])} GiB; the usable "
        f"memory holds {run['kv_tokens_capacity']:,} tokens of KV",
        highlight=False,
    )
    console.print(f"why: {escape(run['reason'])}", highlight=False)
    console.print("LLM(...) arguments eaglehub's vLLM engine builds (CUDA graphs on):")
    # unwrapped: a long path folded onto the next line would leave JSON no one can paste
    console.print(json.dumps(run["llm_kwargs"], indent=2), highlight=False, markup=False, soft_wrap=True)


def _serve(serve: dict, m: dict, ready: bool, console: Console) -> None:
    console.print(
        f"[bold]serve line[/] (production: the whole machine at max_model_len {serve['max_model_len']}"
        + (f", {serve['max_num_seqs']} sequences" if serve["max_num_seqs"] else "")
        + ")",
        highlight=False,
    )
    if len(serve["candidates"]) > 1:
        _candidates("per-GPU memory (GiB) of the serve layouts tried", serve["candidates"], console)
    lay = serve["layout"]
    if lay is None:
        console.print(f"[bold red]refused:[/] {escape(serve['refusal']['message'])}", highlight=False)
        if serve["refusal"]["hint"]:
            print_prose(console, f"hint: {serve['refusal']['hint']}")
        return
    console.print(
        f"serve on {_layout(lay)} = {lay['gpus']} GPU(s) on {lay['nodes']} node(s): "
        f"{gib(serve['per_gpu']['total_bytes'])} GiB per GPU with one full-length sequence; KV budget "
        f"{serve['kv_tokens_capacity']:,} tokens ({serve['full_length_sequences']} full-length sequences at once)",
        highlight=False,
    )
    print_prose(console, f"layout from: {serve['source']}")
    if serve["k_schedule"] is not None:
        print_prose(console, f"k schedule: {serve['k_schedule']}")
    for note in serve["notes"]:
        print_prose(console, f"note: {note}")
    console.print(
        ("serve:" if ready else "serve (once the drafter passes the preflight):")
        + ("" if serve["serve_has_drafter"] else " (target alone: no --drafter given)")
    )
    console.print(serve["serve_command"], highlight=False, soft_wrap=True, markup=False)
