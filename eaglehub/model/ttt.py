"""Training-time test (TTT) for EAGLE-3 drafters: unrolled drafting during training, as vLLM drafts.

Used by ``eaglehub convert --calibrate --steps N`` (:mod:`eaglehub.convert.calibrate`) and by the fixture
drafter's recipe (``fixtures/smollm2-eagle3-recipe/train.py``). EAGLE-3 (arXiv 2503.01840, §3.2):
step 1 reads the target's fused aux states; step ``j > 1`` reads the drafter's own output state of
step ``j − 1`` at the same base position, one token further on, and attends to the step-1 keys of the
positions up to its base plus its own chain — what vLLM's proposer feeds it (docs/vllm.md §3).

Data layout: ``shards`` is a list of ``{"ids": int [N], "aux": float [N, A·Ht]}`` (token ids and the
target's aux states of one or more concatenated sequences); a batch is a list of
``(shard index, start, end, answer_start)`` spans; positions before ``answer_start`` are context only.
Single-layer Llama drafters (:meth:`~eaglehub.model.eagle3.Eagle3Drafter.layer_qkv`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from eaglehub.model.eagle3 import Eagle3Drafter


def unroll(
    model: Eagle3Drafter,
    embed: torch.Tensor,
    ids: torch.Tensor,
    aux: torch.Tensor,
    lens: torch.Tensor,
    steps: int,
) -> list[torch.Tensor]:
    """Training-time-test forward: post-norm drafter states ``[B, L, H]`` for steps 1..``steps``.

    ``ids [B, L + steps + 1]`` token ids (padded), ``aux [B, L, A·Ht]`` target aux states,
    ``lens [B]`` real lengths. Step j at base position i reads token ``ids[:, i + j]`` at RoPE
    position ``i + j − 1`` and attends to step-1 keys of positions ≤ i plus its own keys of
    steps 2..j (what vLLM's drafter attends to while drafting), within layer 0's sliding window when
    it has one (the query sits at position ``i + j − 1``).
    """
    d = model.dims
    B, L = aux.shape[:2]
    pos = torch.arange(L)
    causal = (pos[None, :] <= pos[:, None])[None] & (pos[None, :] < lens[:, None])[:, None, :]  # [B, Lq, Lk]
    window = d.window(0)
    scale = 1.0 / math.sqrt(d.head_dim)
    rep = d.num_heads // d.num_kv_heads
    hidden = model.combine(aux)
    keys, vals, outs = [], [], []
    for j in range(1, steps + 1):
        q, k, v, resid = model.layer_qkv(hidden, embed[ids[:, j : j + L]], pos + (j - 1))
        keys.append(k.repeat_interleave(rep, dim=2))  # [B, L, nh, hd]
        vals.append(v.repeat_interleave(rep, dim=2))
        s_main = (q.transpose(1, 2) @ keys[0].permute(0, 2, 3, 1)) * scale  # [B, nh, L, L]
        allowed = causal if window is None else causal & (pos[None, :] > pos[:, None] + (j - 1) - window)[None]
        if window is not None and j == 1:
            # a padded query more than a window past the real tokens would see no key at all, and its
            # softmax NaN would reach every gradient; its own position keeps the row finite (masked in the loss)
            allowed = allowed | torch.eye(L, dtype=torch.bool)[None]
        s_main = s_main.masked_fill(~allowed[:, None], float("-inf"))
        # step m + 2's key sits at position i + m + 1, the query at i + j - 1
        s_diag = [
            ((q * kk).sum(-1) * scale).transpose(1, 2)[..., None]
            if window is None or m + 1 > j - 1 - window
            else torch.full((B, d.num_heads, L, 1), float("-inf"))
            for m, kk in enumerate(keys[1:])
        ]  # [B, nh, L, 1]
        p = torch.softmax(torch.cat([s_main] + s_diag, dim=-1), dim=-1)
        out = p[..., :L] @ vals[0].transpose(1, 2)
        for m, vv in enumerate(vals[1:]):
            out = out + p[..., L + m : L + m + 1] * vv.transpose(1, 2)
        normed, hidden = model.layer_out(out.transpose(1, 2).reshape(B, L, -1), resid)
        outs.append(normed)
    return outs


def collate(shards, batch, width: int, steps: int):
    """Padded ``ids [B, L+steps+1]``, ``aux [B, L, width]``, ``valid`` (label is an answer token), ``lens``."""
    L = max(e - s for _, s, e, _ in batch)
    B = len(batch)
    ids = torch.zeros(B, L + steps + 1, dtype=torch.long)
    aux = torch.zeros(B, L, width)
    valid = torch.zeros(B, L + steps + 1, dtype=torch.bool)
    lens = torch.zeros(B, dtype=torch.long)
    for b, (si, s, e, a) in enumerate(batch):
        n = e - s
        ids[b, :n] = shards[si]["ids"][s:e].long()
        aux[b, :n] = shards[si]["aux"][s:e].float()
        valid[b, a - s : n] = True
        lens[b] = n
    return ids, aux, valid, lens


def ttt_loss(
    model: Eagle3Drafter,
    embed: torch.Tensor,
    shards,
    batch,
    t2d_index: torch.Tensor,
    steps: int,
    weights: list[float],
    teacher: Eagle3Drafter | None = None,
    label_weight: float = 1.0,
):
    """Weighted mean over unrolled steps of the cross-entropy against the labels, plus per-step CE and
    top-1 accuracy.

    With ``teacher`` (a drafter over the same draft vocabulary, unrolled the same way without gradients)
    the loss is ``label_weight · CE + (1 − label_weight) · KL(teacher ‖ model)``: the KL (nats, mean per
    position, step weights as for CE) covers every position after the first whose step-j input token
    exists, prompt positions included, so the model learns the teacher's drafts where it has no label.
    Knowledge distillation (Hinton et al., arXiv 1503.02531) applied to the TTT unroll.
    """
    d = model.dims
    ids, aux, valid, lens = collate(shards, batch, d.num_aux * d.target_hidden_size, steps)
    L = aux.shape[1]
    pos = torch.arange(L)
    t_outs = None
    if teacher is not None:
        with torch.no_grad():
            t_outs = unroll(teacher, embed, ids, aux, lens, steps)
    losses, accs, kls = [], [], []
    for j, normed in enumerate(unroll(model, embed, ids, aux, lens, steps), start=1):
        label = t2d_index[ids[:, j + 1 : j + 1 + L]]
        m = valid[:, j + 1 : j + 1 + L] & (label >= 0)
        seen = m if t_outs is None else m | ((pos[None] >= 1) & (pos[None] + j < lens[:, None]))
        logits = model.logits(
            normed[seen]
        )  # only where there is a label or a teacher: the head is the costliest matmul
        at_label = m[seen]
        losses.append(F.cross_entropy(logits[at_label], label[m]))
        accs.append((logits[at_label].argmax(-1) == label[m]).float().mean().item())
        if t_outs is not None:
            assert teacher is not None  # t_outs is the teacher's unroll
            with torch.no_grad():
                teacher_logp = F.log_softmax(teacher.logits(t_outs[j - 1][seen]), -1)
            kls.append(F.kl_div(F.log_softmax(logits, -1), teacher_logp, log_target=True, reduction="batchmean"))
    norm = sum(weights[:steps])
    loss = sum(w * l for w, l in zip(weights, losses)) / norm
    if t_outs is not None:
        loss = label_weight * loss + (1.0 - label_weight) * sum(w * k for w, k in zip(weights, kls)) / norm
    return loss, [l.item() for l in losses], accs
