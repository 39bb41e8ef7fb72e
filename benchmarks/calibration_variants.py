"""Acceptance of 3 → 3.1 upgrade variants side by side, in the reference engine (replay, greedy).

Why it exists: the calibrated upgrade's acceptance sits within a few accepted tokens of the source's,
so every alternative to the closed-form per-channel gains (an fc-output-space least-squares fit,
fine-tuning the gains or every weight on the target's greedy tokens, distilling the source drafter)
is measured here in one run, on the same recorded target continuations of four prompt sets: the
held-out calibration prompts (what ``convert --calibrate`` selects norm_output on); two dev sets the
fine-tuning defaults were chosen on, ``chat_dev`` (fixtures/prompts/calibration-dev.jsonl: 48
hand-written chat prompts written with the calibration set, never calibrated on) and ``templated_dev``
(96 prompts of the fixture drafter's own training distribution: its recipe's generator, prompts
7,000–7,095, never trained on); and the project's evaluation prompts (what the issue's vLLM figure
uses; not used for choosing). Not a test; about 30 minutes of CPU.

    .venv/bin/python benchmarks/calibration_variants.py --target smollm2 [--calibration-tokens 64]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

from eaglehub.convert import calibrate as C
from eaglehub.convert.run import convert
from eaglehub.engines.chat import encode_chat
from eaglehub.engines.reference import ReferenceEngine, load_drafter
from eaglehub.formats.registry import read_drafter
from eaglehub.measure.prompts import load_prompts
from eaglehub.target import resolve_target

ROOT = Path(__file__).resolve().parent.parent


def fc_space_gains(d, shards, eps: float) -> list:
    """argmin_g Σ_t ‖W (g ⊙ n_t) − W x_t‖²: (WᵀW ⊙ Σ n nᵀ) g = Σ n ⊙ (WᵀW x), a small ridge for rank."""
    w = d.load("fc.weight").double()
    x = torch.cat([s["aux"][C.SINK_POSITIONS :].double() for s in shards])
    n = torch.cat([c / torch.sqrt(c.pow(2).mean(-1, keepdim=True) + eps) for c in x.chunk(d.dims.A, -1)], -1)
    a = w.T @ w
    m = a * (n.T @ n)
    g = torch.linalg.solve(m + 1e-6 * m.diagonal().mean() * torch.eye(m.shape[0], dtype=m.dtype), (n * (x @ a)).sum(0))
    return [c.float() for c in g.chunk(d.dims.A)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="smollm2")
    ap.add_argument("--drafter", default=str(ROOT / "fixtures" / "smollm2-eagle3"))
    ap.add_argument("--calibration-tokens", type=int, default=64)
    ap.add_argument("--eval-tokens", type=int, default=128)
    args = ap.parse_args()
    src, target_path = Path(args.drafter), resolve_target(args.target)
    d = read_drafter(src)
    eps = float(d.config.get("rms_norm_eps", 1e-5))
    engine = ReferenceEngine()
    target = engine.target(target_path, "float32")
    aux_ids = sorted(d.aux.c_in)
    fit, held = C._split(load_prompts(C.default_calibration_prompts(), None, None), 2)
    evals = load_prompts(ROOT / "eaglehub" / "data" / "prompts" / "eval.jsonl", None, None)
    sys.path.insert(0, str(ROOT / "fixtures" / "smollm2-eagle3-recipe"))
    from train_prompts import build_prompts, normalise

    dev = [
        r["prompt"] for r in build_prompts(8000, seed=0, exclude=frozenset(normalise(p.text) for p in evals))[7000:7096]
    ]

    def records(texts, tokens):
        return C.collect(target, encode_chat(target_path, texts), aux_ids, tokens)

    shards = records([p.text for p in fit], args.calibration_tokens)
    chat_dev = load_prompts(ROOT / "fixtures" / "prompts" / "calibration-dev.jsonl", None, None)
    sets = {
        "held_out": records([p.text for p in held], args.eval_tokens),
        "chat_dev": records([p.text for p in chat_dev], args.eval_tokens),
        "templated_dev": records(dev, args.eval_tokens),
        "project": records([p.text for p in evals], args.eval_tokens),
    }
    tmp = Path(tempfile.mkdtemp(prefix="eaglehub-variants-"))
    rows = []

    def row(name: str, path: Path, seconds: float = 0.0) -> Path:
        al = {k: C.measure(engine, target, path, recs, 3)["acceptance_length"] for k, recs in sets.items()}
        rows.append(
            {
                "variant": name,
                **{f"al_{k}": round(v, 4) for k, v in al.items()},
                "fit_seconds": round(seconds, 1),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
        return path

    def upgraded(name: str, gains, weights=None) -> Path:
        cal = None if gains is None else C.Calibration(gains, False, weights or {})
        convert(src, tmp / name, to="3.1", norm_output=gains is None, calibration=cal)
        return tmp / name

    row("source (3.0)", src)
    row("plain upgrade (unit gains, norm_output on)", upgraded("plain", None))
    gains, _ = C.fit_gains(shards, d.dims.A, eps)
    closed = row("closed-form per-channel gains", upgraded("closed", gains))
    t0 = time.perf_counter()
    row(
        "fc-output-space least-squares gains",
        upgraded("fcspace", fc_space_gains(d, shards, eps)),
        time.perf_counter() - t0,
    )
    teacher = load_drafter(src, target, "float32").model
    # (steps, scope, lr, label weight or None for CE alone)
    for steps, train, lr, lw in (
        (30, "norms", 3e-3, None),
        (20, "all", 1e-4, None),
        (20, "all", 1e-4, 0.0),
        (20, "all", 1e-4, 0.05),
        (20, "all", 1e-4, C.DEFAULT_LABEL_WEIGHT),
        (20, "all", 1e-4, 0.3),
    ):
        loaded = load_drafter(closed, target, "float32")
        t0 = time.perf_counter()
        C.finetune(
            loaded,
            target,
            shards,
            steps,
            train,
            lr,
            0,
            None if lw is None else teacher,
            1.0 if lw is None else lw,
        )
        tuned = [m.weight.detach().float().cpu() for m in loaded.model.fc_norm]
        weights = (
            {
                k: v.detach().cpu()
                for k, v in loaded.model.state_dict().items()
                if k not in ("d2t", "t2d") and not k.startswith("fc_norm.")
            }
            if train == "all"
            else None
        )
        loss = "CE" if lw is None else f"{lw:g} CE + {1 - lw:g} KL(source)"
        row(
            f"closed form + {steps} TTT steps ({train}, lr {lr:g}, {loss})",
            upgraded(f"{train}{steps}-{lw}", tuned, weights),
            time.perf_counter() - t0,
        )


if __name__ == "__main__":
    main()
