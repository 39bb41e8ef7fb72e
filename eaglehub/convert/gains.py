"""The closed-form part of calibration: the target's aux states collected, fc_norm gains fitted per channel by least squares."""

from __future__ import annotations

from eaglehub.errors import EaglehubError

SINK_POSITIONS = 1


def greedy_continuations(target, prompt_ids: list[list[int]], max_new_tokens: int, batch: int = 16) -> list[list[int]]:
    """The target's greedy continuation of each prompt (up to and including its first end-of-sequence token).

    ``target``: a :class:`~eaglehub.engines.reference.ReferenceTarget`. Generation is batched with left padding
    (transformers ``generate``).
    """
    import torch

    model, out = target.model, []
    pad = min(target.eos) if target.eos else 0
    with torch.inference_mode():
        for start in range(0, len(prompt_ids), batch):
            chunk = prompt_ids[start : start + batch]
            width = max(map(len, chunk))
            ids = torch.tensor([[pad] * (width - len(p)) + p for p in chunk], device=target.device)
            mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in chunk], device=target.device)
            rows = model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=pad,
            )
            out += [_until_eos(row, target.eos) for row in rows[:, width:].tolist()]
    return out


def collect(
    target, prompt_ids: list[list[int]], aux_ids: list[int], max_new_tokens: int, batch: int = 16
) -> list[dict]:
    """The target's greedy continuation of each prompt (:func:`greedy_continuations`), then its aux states over
    prompt + continuation.

    ``target``: a :class:`~eaglehub.engines.reference.ReferenceTarget`. Returns one shard per prompt
    (:mod:`eaglehub.model.ttt` layout): ``ids`` int64 ``[N]``, ``aux`` float32 ``[N, A·Ht]``,
    ``answer_start`` (index of the first generated token). The aux forward runs per sequence, unpadded.
    """
    import torch

    shards = []
    answers = greedy_continuations(target, prompt_ids, max_new_tokens, batch)
    with torch.inference_mode():
        for p, answer in zip(prompt_ids, answers):
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
