"""Replay of the target's recorded greedy continuation: drafter passes only (calibration, probes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from eaglehub.engines.base import RunSpec, SpecCounters
from eaglehub.engines.decode import Decode
from eaglehub.engines.reference import LoadedDrafter, ReferenceEngine, ReferenceTarget, load_drafter


class _Positions:
    """The cache of a :class:`ReplayTarget`: only how many positions have been read."""

    def __init__(self):
        self.length = 0

    def get_seq_length(self) -> int:
        return self.length

    def crop(self, n: int) -> None:
        self.length += n if n < 0 else n - self.length


class ReplayTarget:
    """A recorded greedy target run standing in for :class:`ReferenceTarget` in the decode loop.

    Greedy decoding is deterministic, so the target's outputs at every position of its own greedy
    continuation are known after one forward over prompt + continuation: the next token (the
    continuation) and the aux states. Replaying them, the reference engine's drafting and verification
    run with drafter passes only, giving the acceptance the engine would measure (up to the float
    differences between one full forward and incremental ones). ``sequence``: prompt + continuation ids;
    ``aux``: ``[N, A·Ht]`` of that forward; ``eos``, ``config``, ``model`` (for embeddings) from the
    live target. Only the recorded ids can be read: drafts are compared, never fed to the target.
    """

    def __init__(self, live: ReferenceTarget, sequence: list[int], aux):
        self.live, self.sequence, self.aux = live, sequence, aux
        self.device, self.config, self.num_layers, self.eos = (
            live.device,
            live.config,
            live.num_layers,
            live.eos,
        )
        self.model = live.model
        self.torch = live.torch

    def new_cache(self) -> _Positions:
        return _Positions()

    def embed(self, ids):
        return self.live.embed(ids)

    def forward(self, ids: list[int], cache: _Positions, aux_ids):
        """Logits whose argmax is the recorded next token at each position (one-hot rows), and the
        recorded aux states; ``ids`` after the first position may be drafts that differ from the record."""
        torch = self.torch
        start = cache.length
        cache.length += len(ids)
        rows = range(start, start + len(ids))
        logits = torch.zeros(len(ids), self.config.vocab_size)
        for r, p in enumerate(rows):
            if p + 1 < len(self.sequence):
                logits[r, self.sequence[p + 1]] = 1.0
        aux = self.aux[start : start + len(ids)] if aux_ids is not None else None
        return logits, aux


def replay_acceptance(
    engine: ReferenceEngine,
    live: ReferenceTarget,
    drafter_path: Path,
    records: list[dict],
    k: int,
    drafter: LoadedDrafter | None = None,
) -> SpecCounters:
    """Greedy counters of ``drafter_path`` over recorded target runs (:class:`ReplayTarget`); ``drafter``,
    when given, is that drafter already loaded (``probe`` loads each reading with its own config edits).

    ``records``: ``{"ids": [N] prompt + continuation, "aux": [N, A·Ht], "answer_start": prompt length}``
    (:func:`eaglehub.convert.calibrate.collect`). Each is decoded from its prompt for as many tokens as the
    continuation holds, so outputs equal the record and only the drafter is computed.
    """
    import torch

    drafter = drafter or load_drafter(drafter_path, live, "float32")
    total = SpecCounters(accepted_per_pos=(0,) * k)
    for rec in records:
        seq = [int(t) for t in rec["ids"]]
        start = rec["answer_start"]
        if len(seq) - start < 2:
            continue
        replay = ReplayTarget(live, seq, rec["aux"].to(drafter.model.fc.weight.dtype))
        spec = RunSpec(Path("."), drafter_path, k, len(seq) - start)
        decode = Decode(engine, replay, drafter, spec, torch.Generator().manual_seed(0), np.random.default_rng(0), None)
        _out, counters = decode.run(seq[:start])
        total = total + counters
    return total
