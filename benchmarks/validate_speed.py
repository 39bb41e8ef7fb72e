"""Validation benchmark: ``eaglehub validate`` on full-size drafters, side by side with the interpreter's
own start-up, in one run.

Run from the repository root (``make bench-validate`` does)::

    .venv/bin/python benchmarks/validate_speed.py [--work DIR] [--repeat N] [--json OUT]

Inputs are the generated drafters of ``convert_speed.py`` (made once under ``WORK/src/``; the same
generator, so both benchmarks share them): the Llama-3.1-8B EAGLE-3 drafter in the research layout
(0.85 GB, ``model.safetensors``) and the Kimi-K2.6 MLA drafter (3.68 GB). The target is a directory
holding the Llama-3.1-8B-Instruct config keys only (``--target`` reads config and tokenizer files,
never weights).

Commands, interleaved within each repetition, each a fresh process through ``_measure.py`` (wall time
with interpreter start-up, peak RSS of that child alone), the source in the page cache:

- ``python -c pass`` — the floor every Python CLI pays;
- ``eaglehub validate SRC`` — headers only (target: under 1 s for the Llama drafter);
- ``eaglehub validate SRC --target VERIFIER`` — plus the target checks;
- ``eaglehub validate SRC --deep`` — every weight streamed (NaN/Inf, untrained-looking tensors).

Prints median wall time, its ratio to ``python -c pass``, peak RSS and the PASS/FAIL of the 1 s target,
and the number of rules in the catalogue; ``--json`` writes every raw number
(schemas/bench-validate.schema.json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from convert_speed import (
    GB,
    REPO,
    all_sources,
    checked_args,
    checkpoint_bytes,
    console,
    generate,
    load_cached,
    measure,
    warm_page_cache,
)

SCHEMA_ID = "eaglehub.bench-validate/1"
HEADERS_ONLY_MAX_S = 1.0  # the target for a Llama-3.1-8B-shaped drafter without --deep
#: Llama-3.1-8B-Instruct config keys the target checks read (meta-llama/Llama-3.1-8B-Instruct config.json)
VERIFIER_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "torch_dtype": "bfloat16",
    "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009],
    "rope_scaling": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
}


def commands(eaglehub: str, src: Path, verifier: Path) -> list[tuple[str, list[str]]]:
    return [
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ("validate (headers)", [eaglehub, "validate", str(src), "--json"]),
        ("validate --target", [eaglehub, "validate", str(src), "--target", str(verifier), "--json"]),
        ("validate --deep", [eaglehub, "validate", str(src), "--deep", "--json"]),
    ]


def rule_count(eaglehub: str, env: dict) -> int:
    import subprocess

    out = subprocess.run(
        [eaglehub, "validate", "--list-rules", "--json"], capture_output=True, text=True, env=env, check=True
    )
    return len(json.loads(out.stdout)["rules"])


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=REPO / ".work" / "bench", help="work dir shared with convert_speed.py")
    ap.add_argument("--repeat", type=int, default=5, help="repetitions per command (default 5)")
    ap.add_argument(
        "--json",
        type=Path,
        dest="json_out",
        help="write all raw numbers here (schemas/bench-validate.schema.json)",
    )
    ap.add_argument("--eaglehub", default=str(Path(sys.executable).parent / "eaglehub"), help="eaglehub executable")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds before one command is killed")
    return checked_args(ap, argv)


def main(argv=None) -> int:
    a = parse_args(argv)
    src_dir, logs = a.work / "src", a.work / "logs"
    for d in (src_dir, logs):
        d.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1", "TERM": "dumb"}
    sources = [s for s in all_sources() if s.weights_format == "safetensors"]
    llama_st = next(s for s in sources if s.id == "llama31-8b-st")
    for s in sources:
        s.path = src_dir / s.id
        if not load_cached(s):
            with console.status(f"generating {s.id} ({s.tensor_bytes / GB:.2f} GB)"):
                generate(s, src_dir, llama_st)
    verifier = a.work / "verifier" / "llama-3.1-8b-instruct-config-only"
    verifier.mkdir(parents=True, exist_ok=True)
    (verifier / "config.json").write_text(json.dumps(VERIFIER_CONFIG, indent=2) + "\n")

    load = os.getloadavg()
    console.print(
        f"[bold]eaglehub validation benchmark[/] · {os.cpu_count()} CPUs · load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        highlight=False,
    )
    rows: dict[tuple[str, str], list[dict]] = {}
    for rep in range(a.repeat):
        for s in sources:
            warm_page_cache(s.path)
            cmds = commands(a.eaglehub, s.path, verifier)
            shift = rep % len(cmds)  # rotate the order so no command always runs first
            for label, argv_ in cmds[shift:] + cmds[:shift]:
                run = measure(argv_, logs / f"validate-{s.id}-{rep}.log", env, a.timeout)
                rows.setdefault((s.id, label), []).append(run)

    report = {
        "schema": SCHEMA_ID,
        "cpus": os.cpu_count(),
        "load_average": list(load),
        "repeat": a.repeat,
        "rules": rule_count(a.eaglehub, env),
        "target_seconds": HEADERS_ONLY_MAX_S,
        "inputs": [],
    }
    table = Table(title=f"eaglehub validate, median of {a.repeat} (fresh process each, start-up included)")
    for col in ("input", "command", "median s", "min s", "× python", "peak RSS MiB", "exit", "target"):
        table.add_column(col)
    for s in sources:
        floor = statistics.median(r["wall_s"] for r in rows[(s.id, "python -c pass")])
        entry = {"id": s.id, "description": s.description, "bytes": checkpoint_bytes(s.path), "commands": []}
        for label, _ in commands(a.eaglehub, s.path, verifier):
            runs = rows[(s.id, label)]
            med = statistics.median(r["wall_s"] for r in runs)
            verdict = ""
            if label == "validate (headers)":
                verdict = "PASS" if med < HEADERS_ONLY_MAX_S else "FAIL"
            entry["commands"].append(
                {
                    "label": label,
                    "runs": runs,
                    "median_s": med,
                    "ratio_to_python": med / floor if floor else None,
                    "verdict": verdict or None,
                }
            )
            table.add_row(
                s.id,
                label,
                f"{med:.3f}",
                f"{min(r['wall_s'] for r in runs):.3f}",
                f"{med / floor:.1f}",
                f"{max(r['peak_rss_kib'] for r in runs) / 1024:.0f}",
                ",".join(sorted({str(r["exit_code"]) for r in runs})),
                verdict,
            )
        report["inputs"].append(entry)
    console.print(table)
    console.print(
        f"{report['rules']} rules in the catalogue; exit 1 = the generated drafters' findings (random values, "
        "research class), not a failure of the run",
        highlight=False,
    )
    if a.json_out:
        from eaglehub.io.schemas import schema_errors

        errors = schema_errors(report, "bench-validate")
        if errors:
            console.print(f"[red]report breaks its schema: {errors[0]}[/]")
            return 1
        a.json_out.parent.mkdir(parents=True, exist_ok=True)
        a.json_out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
