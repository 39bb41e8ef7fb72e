"""The terminal table of a quantize report (or its dry-run plan)."""

from __future__ import annotations


def render_report(report: dict, console) -> None:
    """The plan or result as a rich table: one row per tensor (action, reason, bytes), then the totals."""
    from eaglehub.views.common import short_size as size
    from eaglehub.views.tables import names_table

    head = "would quantize" if report["dry_run"] else "quantized"
    console.print(
        f"{head} {report['source']} ({report['source_format']}, EAGLE-{report['version']}, {report['layer_kind']}) "
        f"with {report['scheme']}"
        + (f" → {report['destination']} (vllm-native layout)" if report["destination"] else ""),
        highlight=False,
    )
    # one short key per distinct reason, spelled out under the table: the reasons repeat over rows, and
    # prose in a sixth column leaves the names too little of 80 columns
    reasons = list(dict.fromkeys(t["reason"] for t in report["tensors"]))
    rows = []

    for t in report["tensors"]:
        quantized = t["action"] == "quantized"
        nbytes = f"{size(t['bytes_before'])}→{size(t['bytes_after'])}" if quantized else size(t["bytes_before"])
        shape = "×".join(map(str, t["shape"])) or "scalar"
        action = "fp8" if quantized else "kept"
        rows.append([t["name"], shape, t["dtype"], action, nbytes, f"({reasons.index(t['reason']) + 1})"])
    columns = ["tensor", "shape", "dtype", "stored", "bytes", "why"]
    table = names_table(console, columns, rows, show_edge=False)
    console.print(table)
    console.print(
        "stored: fp8 = quantized to float8_e4m3fn, kept = left in its dtype; bytes: K = KiB, M = MiB, G = GiB",
        highlight=False,
    )
    for i, reason in enumerate(reasons, 1):
        console.print(f"({i}) {reason}", highlight=False, markup=False)
    for x in report["kept_not_block_divisible"]:
        console.print(f"kept (not block-divisible): {x['layer']}: {x['reason']}", highlight=False)
    s = report["sizes"]
    console.print(
        f"tensor bytes {s['tensor_bytes_before']:,} → {s['tensor_bytes_after']:,} (×{s['ratio']})"
        + (f"; files {s['files_bytes_before']:,} → {s['files_bytes_after']:,} bytes" if s["files_bytes_after"] else ""),
        highlight=False,
    )
    console.print(f"ignore: {', '.join(report['quantization_config']['ignore'])}", highlight=False)
    names = "; ".join(p["title"] for p in report["profiles"])
    default = " (the default; choose with --profile)" if any(p["default"] for p in report["profiles"]) else ""
    if report["findings"] is None:
        console.print(f"not judged (dry run: nothing written); the output will be judged for {names}{default}")
        return
    console.print(f"output judged for {names}{default}: no error", highlight=False)
    for f in report["findings"]:
        console.print(f"{f['severity']} {f['code']}  {f['subject']}: {f['message']}", highlight=False, markup=False)
