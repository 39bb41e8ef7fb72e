"""``eaglehub convert SRC DST --to 3.1 --calibrate --target T``: a 3 → 3.1 upgrade that keeps acceptance.

EAGLE 3.1's ``fc_norm`` rescales each aux chunk ``x`` (one target layer's hidden state, ``[Ht]``) to
unit RMS before ``fc``; ``fc`` was trained on raw magnitudes, which differ by layer (mean per-token RMS
2.90 / 6.54 / 21.99 for SmolLM2-135M's aux layers 2, 15, 27 on the bundled prompts). Steps:

1. **Calibration data**: the target continues each calibration prompt greedily (``max_new_tokens``),
   then one forward over prompt + continuation gives the aux states of every position
   (:func:`collect`); the bundled set is ``eaglehub/data/prompts/calibration.jsonl`` (72 hand-written chat
   prompts of at most 200 characters, 6 categories, disjoint from the evaluation prompts: a drafter is
   calibrated for the requests it will serve, and labels from its own templated training distribution
   teach it nothing new). Per category the last ``held_out`` prompts are held out for the acceptance
   measurements.
2. **Closed-form gains** (:func:`fit_gains`): per chunk ``i`` and channel ``c``, the gain ``g`` that
   makes ``g · n`` best match ``x`` in least squares over the calibration tokens, where
   ``n = x / sqrt(mean(x²) + eps)`` is the RMS-normalised state: ``g_c = Σ_t n_tc x_tc / Σ_t n_tc²``.
   Each sequence's first position is left out: it carries the attention-sink's massive activations
   (RMS ≈ 1,000), which would dominate the sums.
3. **norm_output** (unless forced): both settings with the fitted gains, acceptance measured on the
   held-out prompts in the reference engine; the higher AL wins, a tie keeps the source's behaviour
   (off: switching it on changes the state fed back to every later draft step).
4. **Fine-tuning** (default ``DEFAULT_STEPS`` = 20 steps of every weight; ``--steps 0`` skips it):
   training-time test (:mod:`eaglehub.model.ttt`, 3 unrolled steps) on the calibration sequences, loss
   ``0.1 · CE(target's greedy tokens) + 0.9 · KL(source drafter ‖ upgraded)`` (``label_weight``):
   distilling the source teaches the upgraded drafter, per token, what the closed-form gains cannot
   (the lost per-token RMS), at every position including the prompt's, while the small label term lets
   it correct the source where the target disagrees. ``train="norms"`` trains the ``fc_norm`` gains
   only (every other tensor stays bit-exact), ``"all"`` every drafter weight (``d2t``/``t2d``
   excepted). Drafters TTT cannot unroll (several layers, MLA) keep the closed-form gains, and the
   report says so.
5. **Acceptance before/after** on the held-out prompts: the source (3.0), the plain upgrade (unit
   gains, ``norm_output`` on, what ``convert --to 3.1`` writes), the closed-form gains and the result, each decoded greedily
   by the reference engine's loop over the target's recorded greedy continuation of those prompts
   (:class:`eaglehub.engines.reference.ReplayTarget`: the target runs once, every candidate costs
   drafter passes only).

AL = 1 + accepted / drafts (tokens per verify pass, bonus included), greedy, k = ``num_speculative_tokens``.
"""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from eaglehub.convert.finetune import DEFAULT_LABEL_WEIGHT, finetune, finetune_support
from eaglehub.convert.gains import SINK_POSITIONS, collect, fit_gains
from eaglehub.drafter.canonical import rms_norm_eps
from eaglehub.errors import EaglehubError
from eaglehub.io.resources import calibration_prompts
from eaglehub.measure import acceptance

TRAIN_SCOPES = ("norms", "all")
# Defaults of the fine-tuning after the closed-form fit, chosen on prompts neither calibrated on nor used
# for the project's evaluation figure (benchmarks/calibration_variants.py: the dev sets).
DEFAULT_STEPS = 20
DEFAULT_TRAIN = "all"


def default_calibration_prompts() -> Path:
    """The bundled calibration set, ``eaglehub/data/prompts/calibration.jsonl``."""
    return calibration_prompts()


@dataclass
class CalibrationOptions:
    """Inputs of a calibrated upgrade (see ``eaglehub convert --help`` for units and defaults)."""

    target: str
    prompts_file: str | None = None
    limit: int | None = None
    """At most this many prompts per category (held-out ones included)."""
    held_out: int = 2
    """Prompts per category kept out of the fit for the acceptance measurements."""
    max_new_tokens: int = 64
    steps: int | None = None
    """Fine-tuning steps; None: ``DEFAULT_STEPS`` where TTT can unroll the drafter, else 0 (said in the report)."""
    train: str = DEFAULT_TRAIN
    lr: float | None = None
    label_weight: float = DEFAULT_LABEL_WEIGHT
    """Weight of the target's greedy tokens in the fine-tuning loss; the rest distils the source drafter."""
    norm_output: bool | None = None
    k: int = 3
    eval_tokens: int = 48
    device: str = "cpu"
    seed: int = 0


@dataclass
class Calibration:
    """What the upgrade writes: ``gains`` (A tensors ``[Ht]``, float32), the ``norm_output`` choice,
    ``weights`` (canonical name → new value, only with ``train="all"``) and the report section."""

    gains: list | None  # None: the fold to EAGLE-3 writes no gains
    norm_output: bool
    weights: dict = field(default_factory=dict)
    report: dict = field(default_factory=dict)


def check_options(opts: CalibrationOptions) -> None:
    """Raises: EaglehubError (exit 2) for values out of range or a calibration prompt file that is not there."""
    if opts.prompts_file and not Path(opts.prompts_file).is_file():
        raise EaglehubError(
            f"calibration prompt file {opts.prompts_file} not found",
            hint="pass --calibration-prompts FILE (eaglehub JSONL, MT-Bench question.jsonl or text), or "
            "drop it for the bundled set",
        )
    if opts.train not in TRAIN_SCOPES:
        raise EaglehubError(f"--train must be one of {', '.join(TRAIN_SCOPES)}, got {opts.train!r}")
    if not 0.0 <= opts.label_weight <= 1.0:
        raise EaglehubError(f"--label-weight must be in [0, 1], got {opts.label_weight}")
    if (opts.steps or 0) < 0 or opts.max_new_tokens < 1 or opts.held_out < 1 or opts.k < 1 or opts.eval_tokens < 1:
        raise EaglehubError("--steps must be >= 0; --calibration-tokens, -k and the held-out count must be >= 1")
    if opts.lr is not None and not (opts.lr > 0 and math.isfinite(opts.lr)):
        raise EaglehubError(
            f"--lr must be a finite number > 0, got {opts.lr}",
            hint="e.g. --lr 1e-4 (the default for --train all)",
        )


# --- data -----------------------------------------------------------------------------------------------


# --- measurement ----------------------------------------------------------------------------------------


def measure(engine, live, drafter: Path, records: list[dict], k: int) -> dict:
    """Greedy acceptance of ``drafter`` on the held-out records (AL, rate per position, drafts): the
    reference engine's decode loop over the target's recorded greedy continuations
    (:func:`eaglehub.engines.reference.replay_acceptance`: drafter passes only)."""
    from eaglehub.engines.replay import replay_acceptance

    stats = acceptance.acceptance_stats(replay_acceptance(engine, live, drafter, records, k))
    return {
        "acceptance_length": stats["acceptance_length"],
        "acceptance_rate_per_position": stats["acceptance_rate_per_position"],
        "num_drafts": stats["num_drafts"],
    }


# --- fine-tuning ----------------------------------------------------------------------------------------


# --- orchestration --------------------------------------------------------------------------------------


def _split(prompts, held_out: int):
    """Per category: the last ``held_out`` prompts are held out, the rest fit."""
    by_cat: dict[str, list] = {}
    for p in prompts:
        by_cat.setdefault(p.category, []).append(p)
    fit, held = [], []
    for ps in by_cat.values():
        cut = max(1, len(ps) - held_out) if len(ps) > 1 else len(ps)
        fit += ps[:cut]
        held += ps[cut:]
    return fit, held


def calibrate(src: Path, opts: CalibrationOptions, write_candidate, console=None) -> Calibration:
    """Run steps 1–5 of the module doc for drafter ``src`` (a local directory).

    ``write_candidate(dst, gains, norm_output, weights)`` writes an upgraded checkpoint (the caller's
    :func:`eaglehub.convert.run.convert`), used for the candidates measured in the reference engine.

    Raises:
        EaglehubError: bad options, an unusable target or prompt file, a drafter the reference engine
            cannot run (quantized, inconsistent), or fine-tuning an unsupported drafter.
    """
    import torch

    from eaglehub.drafter.canonical import default_aux_ids
    from eaglehub.engines.chat import encode_chat
    from eaglehub.engines.reference import ReferenceEngine, load_drafter
    from eaglehub.formats.registry import read_drafter
    from eaglehub.measure.prompts import load_prompts
    from eaglehub.target import resolve_target

    check_options(opts)
    t_start = time.perf_counter()
    torch.manual_seed(opts.seed)
    d = read_drafter(src)
    target_path = resolve_target(opts.target)
    file = Path(opts.prompts_file) if opts.prompts_file else default_calibration_prompts()
    prompts = load_prompts(file, None, opts.limit)
    fit, held = _split(prompts, opts.held_out)
    if not held:
        raise EaglehubError(
            "every calibration category has a single prompt: nothing left to measure acceptance on",
            hint="give at least two prompts per category",
        )
    engine = ReferenceEngine(device=opts.device)
    target = engine.target(target_path, "float32")
    aux_ids = sorted(d.aux.c_in) if d.aux.c_in else default_aux_ids(target.num_layers)
    status = console.status if console is not None else None

    def phase(text: str):
        return status(text) if status else _Null()

    with phase(f"calibration data: {len(fit)} prompts x {opts.max_new_tokens} target tokens"):
        t0 = time.perf_counter()
        shards = collect(target, encode_chat(target_path, [p.text for p in fit]), aux_ids, opts.max_new_tokens)
        collect_s = time.perf_counter() - t0
    gains, stats = fit_gains(shards, d.dims.A, rms_norm_eps(d.config))
    with phase(f"held-out records: {len(held)} prompts x {opts.eval_tokens} target tokens"):
        held_records = collect(target, encode_chat(target_path, [p.text for p in held]), aux_ids, opts.eval_tokens)

    def al(path: Path) -> dict:
        return measure(engine, target, path, held_records, opts.k)

    with tempfile.TemporaryDirectory(prefix="eaglehub-calibrate-") as tmp_name:
        tmp = Path(tmp_name)
        with phase("measuring the source and the plain upgrade on held-out prompts"):
            source_al = al(src)
            write_candidate(tmp / "plain", None, True, {})
            plain_al = al(tmp / "plain")
        candidates = {}
        choices = [opts.norm_output] if opts.norm_output is not None else [False, True]
        for choice in choices:
            with phase(f"measuring fitted gains with norm_output {'on' if choice else 'off'}"):
                write_candidate(tmp / f"fit-{choice}", gains, choice, {})
                candidates[choice] = al(tmp / f"fit-{choice}")
        chosen, why = _choose(candidates, opts.norm_output)
        tune, weights, result_al = None, {}, candidates[chosen]
        loaded = load_drafter(tmp / f"fit-{chosen}", target, "float32")
        steps, skipped = _steps(opts, loaded.model)
        if steps:
            with phase(f"fine-tuning ({opts.train}, {steps} steps, distilling the source)"):
                t0 = time.perf_counter()
                teacher = load_drafter(src, target, "float32").model
                tune = finetune(
                    loaded, target, shards, steps, opts.train, opts.lr, opts.seed, teacher, opts.label_weight
                )
                tune["seconds"] = round(time.perf_counter() - t0, 1)
                gains = [cast("torch.Tensor", n.weight).detach().float().cpu() for n in loaded.model.fc_norm]
                for st, g in zip(stats, gains):  # the summary describes the gains written
                    st.update(gain_mean=float(g.mean()), gain_min=float(g.min()), gain_max=float(g.max()))
                if opts.train == "all":
                    weights = {
                        k: v.detach().cpu()
                        for k, v in loaded.model.state_dict().items()
                        if k not in ("d2t", "t2d") and not k.startswith("fc_norm.")
                    }
            with phase("measuring the fine-tuned drafter"):
                write_candidate(tmp / "tuned", gains, chosen, weights)
                result_al = al(tmp / "tuned")
        elif skipped:
            tune = {"skipped": skipped}
    report = {
        "target": str(target_path),
        "prompts": {
            "file": str(file),
            "fit": len(fit),
            "held_out": len(held),
            "max_new_tokens": opts.max_new_tokens,
            "tokens": int(sum(s["ids"].shape[0] for s in shards)),
            "answer_tokens": int(sum(s["ids"].shape[0] - s["answer_start"] for s in shards)),
        },
        "aux_layer_ids": aux_ids,
        "gains": stats,
        "norm_output": {
            "chosen": chosen,
            "reason": why,
            "candidates": [{"norm_output": c, **m} for c, m in candidates.items()],
        },
        "fine_tuning": tune,
        "acceptance": {
            "engine": engine.name,
            "engine_version": engine.version(),
            "num_speculative_tokens": opts.k,
            "max_tokens": opts.eval_tokens,
            "source": source_al,
            "plain_upgrade": plain_al,
            "closed_form": candidates[chosen],
            "calibrated": result_al,
        },
        "definitions": {
            "acceptance_length": acceptance.AL_DEFINITION + "; greedy, on the held-out calibration prompts, "
            "replaying the target's recorded greedy continuation through the reference "
            "engine's decode loop",
            "gain": "per channel: argmin_g sum_t (g * n_t - x_t)^2 with n_t = x_t / rms(x_t) over the calibration "
            "tokens (first position of each sequence excluded), then fine-tuned when fine_tuning ran; "
            "gain_mean/min/max describe the gains written",
            "mean_rms": "mean over calibration tokens of sqrt(mean_c x_c^2 + eps) of one aux chunk",
        },
        "seconds": {
            "calibration_data": round(collect_s, 1),
            "total": round(time.perf_counter() - t_start, 1),
        },
    }
    return Calibration(gains, chosen, weights, report)


def _steps(opts: CalibrationOptions, model) -> tuple[int, str | None]:
    """Fine-tuning steps to run, and why the default ones are skipped (a drafter TTT cannot unroll)."""
    if opts.steps is not None:
        return opts.steps, None
    why = finetune_support(model)
    return (
        (0, f"{why}: closed-form gains only (the default --steps {DEFAULT_STEPS} was not run)")
        if why
        else (DEFAULT_STEPS, None)
    )


def _choose(candidates: dict[bool, dict], forced: bool | None) -> tuple[bool, str]:
    if forced is not None:
        return forced, f"forced by --{'' if forced else 'no-'}norm-output"
    off, on = (candidates[c]["acceptance_length"] or 1.0 for c in (False, True))
    if on > off:
        return True, f"held-out AL {on:.3f} with norm_output on > {off:.3f} off"
    return False, (
        f"held-out AL {off:.3f} with norm_output off >= {on:.3f} on; off keeps the state the drafter was "
        "trained to feed back"
    )


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def calibrated_upgrade(
    src: str | Path, dst: str | Path, opts: CalibrationOptions, console=None, **convert_kwargs
) -> dict:
    """``convert --to 3.1 --calibrate``: :func:`calibrate`, then :func:`eaglehub.convert.run.convert` with
    the result; returns the convert report with its ``calibration`` section.

    ``convert_kwargs``: the other convert options (format, overwrite, revision, ...).

    Raises:
        EaglehubError: see :func:`calibrate` and :func:`eaglehub.convert.run.convert`.
    """
    from eaglehub.convert.run import convert
    from eaglehub.convert.write import destination
    from eaglehub.io.source import resolve_source

    path, _ = resolve_source(str(src), convert_kwargs.get("revision"))
    destination(path, Path(dst), convert_kwargs.get("overwrite", False))  # before minutes of calibration, not after
    local = {k: v for k, v in convert_kwargs.items() if k in ("source_format", "aux_convention")}

    def write_candidate(out: Path, gains, norm_output: bool, weights: dict) -> None:
        cal = None if gains is None else Calibration(gains, norm_output, weights)
        convert(path, out, to="3.1", norm_output=norm_output, calibration=cal, **local)

    cal = calibrate(path, opts, write_candidate, console)
    return convert(src, dst, to="3.1", calibration=cal, **convert_kwargs)


def fold_to_eagle3(src: str | Path, dst: str | Path, opts: CalibrationOptions, **convert_kwargs) -> dict:
    """``convert --to 3 --force --target T``: the nearest EAGLE-3 approximation of a 3.1 drafter.

    ``fc_norm`` computes ``g ⊙ x / rms(x)`` per token; with the token's RMS replaced by the chunk's mean
    RMS ``r̄_i`` over calibration tokens (the target's continuations of the calibration prompts),
    ``fc(g ⊙ x / r̄)`` is linear in ``x``, so chunk ``i``'s columns of ``fc.weight`` become
    ``W[:, i] · g_i / r̄_i``; ``fc_norm.*`` and both flags go. Not equivalent (tokens whose RMS is far
    from the mean change most; ``norm_output`` cannot be kept): the report's warning says so.

    Raises:
        EaglehubError: the source is not 3.1, or the target / prompts cannot be used.
    """
    import torch

    from eaglehub.convert.run import convert
    from eaglehub.convert.write import destination
    from eaglehub.drafter.canonical import default_aux_ids
    from eaglehub.engines.chat import encode_chat
    from eaglehub.engines.reference import ReferenceEngine
    from eaglehub.formats.registry import read_drafter
    from eaglehub.io.source import resolve_source
    from eaglehub.measure.prompts import load_prompts
    from eaglehub.target import resolve_target

    check_options(opts)
    path, _ = resolve_source(str(src), convert_kwargs.get("revision"))
    destination(path, Path(dst), convert_kwargs.get("overwrite", False))
    d = read_drafter(path)
    if not d.is_31:
        raise EaglehubError(f"{path} is already an EAGLE-3 drafter", hint="drop --to to change only the format")
    target_path = resolve_target(opts.target)
    target = ReferenceEngine(device=opts.device).target(target_path, "float32")
    prompts = load_prompts(
        Path(opts.prompts_file) if opts.prompts_file else default_calibration_prompts(), None, opts.limit or 4
    )
    aux_ids = sorted(d.aux.c_in) if d.aux.c_in else default_aux_ids(target.num_layers)
    shards = collect(target, encode_chat(target_path, [p.text for p in prompts]), aux_ids, opts.max_new_tokens)
    eps = rms_norm_eps(d.config)
    x = torch.cat([s["aux"][SINK_POSITIONS:].double() for s in shards if s["aux"].shape[0] > SINK_POSITIONS])
    rms = [float(torch.sqrt(c.pow(2).mean(-1) + eps).mean()) for c in x.chunk(d.dims.A, dim=-1)]
    fc = d.load("fc.weight").double()
    Ht = d.dims.Ht
    if Ht is None:  # as convert would (E-CONFIG findings): without it the unit gains cannot be built
        raise EaglehubError(
            f"{path} has no usable target_hidden_size or hidden_size; refusing to convert",
            hint=f"run `eaglehub validate {path}` and fix it first",
            exit_code=1,
        )
    gains = [
        d.load(f"fc_norm.{i}.weight").double()
        if f"fc_norm.{i}.weight" in d.names
        else torch.ones(Ht, dtype=torch.float64)
        for i in range(d.dims.A)
    ]
    folded = torch.cat([w * (g / r)[None, :] for w, g, r in zip(fc.chunk(d.dims.A, dim=1), gains, rms)], dim=1)
    report = convert(
        src,
        dst,
        to="3",
        calibration=Calibration(None, False, {"fc.weight": folded.float()}),
        **convert_kwargs,
    )
    report["warnings"].append(
        "nearest EAGLE-3 approximation, not equivalent: fc columns scaled by fc_norm gain / mean RMS per aux chunk "
        f"({', '.join(f'{r:.2f}' for r in rms)}, over {x.shape[0]} calibration tokens of {target_path.name})"
        + ("; norm_output (the post-norm state fed back) cannot be kept" if d.flags.norm_output else "")
        + "; re-measure acceptance with eaglehub verify"
    )
    return report
