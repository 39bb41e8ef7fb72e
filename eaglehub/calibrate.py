"""``eaglehub convert SRC DST --to 3.1 --calibrate --target T``: a 3 → 3.1 upgrade that keeps acceptance.

EAGLE 3.1's ``fc_norm`` rescales each aux chunk ``x`` (one target layer's hidden state, ``[Ht]``) to
unit RMS before ``fc``; ``fc`` was trained on raw magnitudes, which differ by layer (mean per-token RMS
2.90 / 6.54 / 21.99 for SmolLM2-135M's aux layers 2, 15, 27 on the bundled prompts). Steps:

1. **Calibration data**: the target continues each calibration prompt greedily (``max_new_tokens``),
   then one forward over prompt + continuation gives the aux states of every position
   (:func:`collect`); the bundled set is ``fixtures/prompts/calibration.jsonl`` (72 hand-written chat
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
   training-time test (:mod:`eaglehub.ttt`, 3 unrolled steps) on the calibration sequences, loss
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
import random
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from . import acceptance
from .errors import EaglehubError

TRAIN_SCOPES = ("norms", "all")
# Defaults of the fine-tuning after the closed-form fit, chosen on prompts neither calibrated on nor used
# for the project's evaluation figure (benchmarks/calibration_variants.py: the dev sets).
DEFAULT_STEPS = 20
DEFAULT_TRAIN = "all"
DEFAULT_LABEL_WEIGHT = 0.1
SINK_POSITIONS = 1


def default_calibration_prompts() -> Path:
    """The bundled calibration set, ``fixtures/prompts/calibration.jsonl``."""
    return Path(__file__).resolve().parent.parent / "fixtures" / "prompts" / "calibration.jsonl"


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


def collect(
    target, prompt_ids: list[list[int]], aux_ids: list[int], max_new_tokens: int, batch: int = 16
) -> list[dict]:
    """The target's greedy continuation of each prompt, then its aux states over prompt + continuation.

    ``target``: a :class:`~eaglehub.engines.reference.ReferenceTarget`. Returns one shard per prompt
    (:mod:`eaglehub.ttt` layout): ``ids`` int64 ``[N]``, ``aux`` float32 ``[N, A·Ht]``,
    ``answer_start`` (index of the first generated token). Generation is batched with left padding
    (transformers ``generate``); the aux forward runs per sequence, unpadded.
    """
    import torch

    model, shards = target.model, []
    pad = min(target.eos) if target.eos else 0
    with torch.inference_mode():
        for start in range(0, len(prompt_ids), batch):
            chunk = prompt_ids[start : start + batch]
            width = max(map(len, chunk))
            ids = torch.tensor([[pad] * (width - len(p)) + p for p in chunk], device=target.device)
            mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in chunk], device=target.device)
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=pad,
            )
            for p, row in zip(chunk, out[:, width:].tolist()):
                answer = _until_eos(row, target.eos)
                seq = p + answer
                _, aux = target.forward(seq, target.new_cache(), aux_ids)
                shards.append({"ids": torch.tensor(seq), "aux": aux.float().cpu(), "answer_start": len(p)})
    return shards


def _until_eos(row: list[int], eos: set[int]) -> list[int]:
    for i, t in enumerate(row):
        if t in eos:
            return row[: i + 1]
    return row


def fit_gains(shards: list[dict], num_aux: int, eps: float) -> tuple[list, list[dict]]:
    """Per-channel least-squares ``fc_norm`` gains (module doc, step 2).

    ``shards[i]["aux"]``: ``[N, A·Ht]``. Returns (A float32 tensors ``[Ht]``, per chunk a summary:
    tokens used, mean per-token RMS of the raw state, and the gains' mean / min / max).

    Raises:
        EaglehubError: no calibration token left (every sequence has a single position).
    """
    import torch

    rows = [s["aux"][SINK_POSITIONS:].double() for s in shards if s["aux"].shape[0] > SINK_POSITIONS]
    if not rows:
        raise EaglehubError(
            "no calibration tokens: every calibration sequence is a single token",
            hint="use longer prompts or more --calibration-tokens",
        )
    x = torch.cat(rows)
    gains, stats = [], []
    for chunk in x.chunk(num_aux, dim=-1):
        rms = torch.sqrt(chunk.pow(2).mean(-1, keepdim=True) + eps)
        n = chunk / rms
        g = (n * chunk).sum(0) / n.pow(2).sum(0).clamp_min(1e-30)
        gains.append(g.float())
        stats.append(
            {
                "tokens": int(chunk.shape[0]),
                "mean_rms": float(rms.mean()),
                "gain_mean": float(g.mean()),
                "gain_min": float(g.min()),
                "gain_max": float(g.max()),
            }
        )
    return gains, stats


# --- measurement ----------------------------------------------------------------------------------------


def measure(engine, live, drafter: Path, records: list[dict], k: int) -> dict:
    """Greedy acceptance of ``drafter`` on the held-out records (AL, rate per position, drafts): the
    reference engine's decode loop over the target's recorded greedy continuations
    (:func:`eaglehub.engines.reference.replay_acceptance`: drafter passes only)."""
    from .engines.reference import replay_acceptance

    stats = acceptance.acceptance_stats(replay_acceptance(engine, live, drafter, records, k))
    return {
        "acceptance_length": stats["acceptance_length"],
        "acceptance_rate_per_position": stats["acceptance_rate_per_position"],
        "num_drafts": stats["num_drafts"],
    }


# --- fine-tuning ----------------------------------------------------------------------------------------


def finetune_support(model) -> str | None:
    """Why TTT cannot unroll this drafter (several layers, MLA, ``norm_before_residual``), or None."""
    d = model.dims
    if d.num_layers != 1 or d.norm_before_residual or type(model.midlayer.self_attn).__name__ != "_Attention":
        return "fine-tuning supports single-layer Llama drafters without norm_before_residual"
    return None


def finetune(
    loaded,
    target,
    shards: list[dict],
    steps: int,
    train: str,
    lr: float | None,
    seed: int,
    teacher=None,
    label_weight: float = DEFAULT_LABEL_WEIGHT,
    token_budget: int = 2048,
) -> dict:
    """Train ``loaded.model`` (a :class:`~eaglehub.engines.reference.LoadedDrafter`'s drafter, 3.1 flags
    set) in place with TTT (3 unrolled steps) on ``shards``. Returns steps, lr, losses.

    Loss (:func:`eaglehub.ttt.ttt_loss`): with ``teacher`` (the source drafter's module),
    ``label_weight · CE(target's greedy tokens) + (1 − label_weight) · KL(source ‖ upgraded)`` over the
    unrolled drafts; without, CE only. Distilling the source keeps the upgrade close to what it computed
    where the few calibration labels would otherwise be memorised (benchmarks/calibration_variants.py:
    cross-entropy-dominated tuning of every weight lowers acceptance on fresh prompts). ``train``: ``"norms"`` (``fc_norm``
    gains; lr default 1e-2) or ``"all"`` (every weight but ``d2t``/``t2d``; lr default 1e-4); AdamW,
    cosine decay to 10 %, gradient clipping at 1 (the fixture recipe's optimiser).

    Raises:
        EaglehubError: a drafter TTT cannot unroll (:func:`finetune_support`).
    """
    import torch

    from .ttt import ttt_loss

    model, d = loaded.model, loaded.model.dims
    why = finetune_support(model)
    if why:
        raise EaglehubError(why, hint="use --steps 0 (closed-form gains only) for this drafter")
    model.float().train()
    for p in model.parameters():
        p.requires_grad_(train == "all")
    params = list(model.fc_norm.parameters()) if train == "norms" else list(model.parameters())
    for p in params:
        p.requires_grad_(True)
    lr = lr or (1e-2 if train == "norms" else 1e-4)
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    embed = (loaded.embed if loaded.embed is not None else target.model.get_input_embeddings().weight).detach().float()
    if teacher is not None:
        teacher.float().eval().requires_grad_(False)
    t2d_index = torch.full((d.vocab_size,), -1, dtype=torch.long)
    used = (
        model.to_target_ids(torch.arange(d.draft_vocab_size)) if hasattr(model, "d2t") else torch.arange(d.vocab_size)
    )
    t2d_index[used] = torch.arange(len(used))
    spans = [(i, 0, int(s["ids"].shape[0]), s["answer_start"]) for i, s in enumerate(shards)]
    rng = random.Random(seed)
    losses = []
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / max(1, steps))))
        batch: list[tuple[int, int, int, int]] = []
        used_tokens = 0
        for span in rng.sample(spans, len(spans)):
            if batch and used_tokens + span[2] > token_budget:
                break
            batch.append(span)
            used_tokens += span[2]
        loss, _, _ = ttt_loss(model, embed, shards, batch, t2d_index, 3, [1.0, 0.8, 0.6], teacher, label_weight)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(float(loss.detach()))
    model.eval()
    if not all(math.isfinite(x) for x in losses) or not all(bool(torch.isfinite(p).all()) for p in params):
        raise EaglehubError(
            f"fine-tuning diverged (loss {losses[0]:.3g} → {losses[-1]:.3g}, non-finite weights): nothing written",
            hint="lower --lr, or use --steps 0 for the closed-form gains only",
        )
    return {
        "steps": steps,
        "train": train,
        "lr": lr,
        "label_weight": label_weight if teacher is not None else 1.0,
        "objective": (
            f"{label_weight:g} x cross-entropy on the target's greedy tokens + {1 - label_weight:g} x "
            "KL(source drafter || upgraded) over 3 unrolled draft steps"
            if teacher is not None
            else "cross-entropy on the target's greedy tokens over 3 unrolled draft steps"
        ),
        "loss_first": losses[0] if losses else None,
        "loss_last": losses[-1] if losses else None,
    }


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
    :func:`eaglehub.convert.convert`), used for the candidates measured in the reference engine.

    Raises:
        EaglehubError: bad options, an unusable target or prompt file, a drafter the reference engine
            cannot run (quantized, inconsistent), or fine-tuning an unsupported drafter.
    """
    import torch

    from .drafter import default_aux_ids
    from .engines.chat import encode_chat
    from .engines.reference import ReferenceEngine, load_drafter
    from .layouts import read_drafter
    from .prompts import load_prompts
    from .target import resolve_target

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
    gains, stats = fit_gains(shards, d.dims.A, float(d.config.get("rms_norm_eps", 1e-5)))
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
    """``convert --to 3.1 --calibrate``: :func:`calibrate`, then :func:`eaglehub.convert.convert` with
    the result; returns the convert report with its ``calibration`` section.

    ``convert_kwargs``: the other convert options (format, overwrite, revision, ...).

    Raises:
        EaglehubError: see :func:`calibrate` and :func:`eaglehub.convert.convert`.
    """
    from .convert import convert, destination
    from .source import resolve_source

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

    from .convert import convert, destination
    from .drafter import default_aux_ids
    from .engines.chat import encode_chat
    from .engines.reference import ReferenceEngine
    from .layouts import read_drafter
    from .prompts import load_prompts
    from .source import resolve_source
    from .target import resolve_target

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
    eps = float(d.config.get("rms_norm_eps", 1e-5))
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
