"""Fine-tuning of a calibrated upgrade: training-time test over the unrolled draft steps, distilling the source drafter."""

from __future__ import annotations

import math
import random

from eaglehub.errors import EaglehubError

DEFAULT_LABEL_WEIGHT = 0.1


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

    Loss (:func:`eaglehub.model.ttt.ttt_loss`): with ``teacher`` (the source drafter's module),
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

    from eaglehub.model.ttt import ttt_loss

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
