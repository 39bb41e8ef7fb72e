"""One speculative decode of the reference engine: drafts, verification and acceptance per step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from eaglehub.engines.base import RunSpec, SpecCounters

SINK_TOKENS = 4

if TYPE_CHECKING:  # annotations only: the reference engine imports this module
    import torch

    from eaglehub.engines.reference import LoadedDrafter, ReferenceEngine, ReferenceTarget
    from eaglehub.engines.replay import ReplayTarget


def _crop(cache, keep: int) -> None:
    """Keep the first ``keep`` positions of a transformers cache (negative ``crop``: remove that many)."""
    extra = cache.get_seq_length() - keep
    if extra > 0:
        cache.crop(-extra)


def top_k_top_p(p: np.ndarray, top_k: int, top_p: float) -> np.ndarray:
    """``p`` (a distribution over the vocabulary) restricted as vLLM's sampler restricts it
    (``apply_top_k_top_p``): the ``top_k`` most likely tokens (0: all; ties at the k-th kept), then of
    those, renormalised, the most likely ones whose probability sums to at least ``top_p`` (1: all;
    the most likely token always stays); renormalised. Returned as is when both are off."""
    if top_k <= 0 and top_p >= 1.0:
        return p
    p = p.astype(np.float64, copy=True)
    if 0 < top_k < p.size:
        p[p < np.partition(p, -top_k)[-top_k]] = 0.0
    if top_p < 1.0:
        order = np.argsort(p, kind="stable")  # ascending, as vLLM masks from the least likely up
        cum = np.cumsum(p[order]) / p.sum()
        drop = cum <= 1.0 - top_p
        drop[-1] = False
        p[order[drop]] = 0.0
    return p / p.sum()


class Decode:
    """One request's decoding state (module docstring for the algorithm)."""

    def __init__(
        self,
        engine: ReferenceEngine,
        target: ReferenceTarget | ReplayTarget,
        drafter: LoadedDrafter | None,
        spec: RunSpec,
        gen,
        rng: np.random.Generator,
        diag: Diagnostics | None,
    ):
        from eaglehub.model.eagle3 import KVCache

        self.engine, self.target, self.drafter, self.spec = engine, target, drafter, spec
        self.gen, self.rng, self.diag = gen, rng, diag
        self.tcache = target.new_cache()
        self.dcache = KVCache(drafter.model.dims.num_layers) if drafter else None
        self.greedy = spec.temperature <= 0
        self.last_normed: torch.Tensor | None = None
        self.last_fed: torch.Tensor | None = None
        self.last_hidden_in: torch.Tensor | None = None
        self.last_probs: list = []

    # --- pieces -------------------------------------------------------------------------------

    def target_probs(self, logits) -> np.ndarray:
        import torch

        p = torch.softmax(logits.double() / self.spec.temperature, dim=-1).cpu().numpy()
        return top_k_top_p(p, self.spec.top_k, self.spec.top_p)

    def draft_probs(self, normed) -> np.ndarray:
        """Draft distribution over target ids ``[V]`` from one ``normed`` row ``[H]``."""
        import torch

        assert self.drafter is not None  # drafting runs with a drafter only
        m = self.drafter.model
        logits = self._draft_logits(normed)
        qd = torch.softmax(logits.double() / self.spec.temperature, dim=-1)
        q = torch.zeros(self.target.config.vocab_size, dtype=torch.float64)
        q[m.to_target_ids(torch.arange(qd.shape[0], device=qd.device)).cpu()] = qd.cpu()
        # the drafter samples under the same settings as the target (the rule is lossless for any q)
        return top_k_top_p(q.numpy(), self.spec.top_k, self.spec.top_p)

    def _draft_logits(self, normed):
        assert self.drafter is not None  # drafting runs with a drafter only
        m = self.drafter.model
        if self.drafter.shared_head is not None:
            return self.drafter.shared_head(normed).float()
        return m.logits(normed).float()

    def _embed(self, ids: list[int]):
        import torch

        t = torch.tensor(ids, dtype=torch.long, device=self.target.device)
        assert self.drafter is not None  # drafting runs with a drafter only
        table = self.drafter.embed
        return table[t] if table is not None else self.target.embed(t)

    def _drafter_pass(self, tokens: list[int], hidden, start: int) -> None:
        """Drafter over positions ``start..start+T−1`` (tokens after each position, states ``[T, H]``);
        keeps the last row's normed / fed-back state (and, for diagnostics, its attention)."""
        import torch

        assert self.drafter is not None  # drafting runs with a drafter only
        assert self.dcache is not None  # created with the drafter
        m = self.drafter.model
        positions = torch.arange(start, start + len(tokens), device=self.target.device)
        embeds = self._embed(tokens)
        want = self.diag is not None
        if want and len(tokens) > 1:  # probabilities only for the row that drafts: keeps long prefills cheap
            m.forward_step(embeds[:-1], hidden[:-1], positions[:-1], self.dcache)
            embeds, hidden, positions = embeds[-1:], hidden[-1:], positions[-1:]
        normed, fed, probs = m.forward_step(embeds, hidden, positions, self.dcache, return_probs=want)
        self.last_normed, self.last_fed, self.last_hidden_in, self.last_probs = (
            normed[-1],
            fed[-1:],
            hidden[-1],
            probs,
        )

    def _pick_draft(self) -> tuple[int, np.ndarray | None]:
        """Next draft token (target id) from the last drafter row, and its distribution when sampling."""
        import torch

        assert self.drafter is not None  # drafting runs with a drafter only
        if self.greedy:
            draft_id = int(self._draft_logits(self.last_normed).argmax())
            return int(self.drafter.model.to_target_ids(torch.tensor(draft_id, device=self.target.device))), None
        q = self.draft_probs(self.last_normed)
        return int(self.rng.choice(q.size, p=q / q.sum())), q

    def prefill(self, prompt: list[int], greedy: bool | None = None) -> tuple[int, object]:
        """Target and drafter over the prompt; returns the target's first token and the aux states."""
        aux_ids = self.drafter.aux_ids if self.drafter else None
        logits, aux = self.target.forward(prompt, self.tcache, aux_ids)
        x = self._emit(logits[-1], greedy)
        if self.drafter:
            m = self.drafter.model
            self._drafter_pass(prompt[1:] + [x], m.combine(aux.to(m.fc.weight.dtype)), 0)
        return x, aux

    def _emit(self, logits, greedy: bool | None = None) -> int:
        if self.greedy if greedy is None else greedy:
            return int(logits.argmax())
        p = self.target_probs(logits)
        return int(self.rng.choice(p.size, p=p / p.sum()))

    # --- the loop -----------------------------------------------------------------------------

    def run(self, prompt: list[int]) -> tuple[list[int], SpecCounters]:
        import torch

        spec = self.spec
        with torch.inference_mode():
            x, _ = self.prefill(prompt)
            out = [x]
            if not self.drafter:
                while len(out) < spec.max_tokens and out[-1] not in self.target.eos:
                    logits, _ = self.target.forward([out[-1]], self.tcache, None)
                    out.append(self._emit(logits[-1]))
                return out, SpecCounters()
            counters = SpecCounters(accepted_per_pos=(0,) * spec.k, accepted_histogram=(0,) * (spec.k + 1))
            while len(out) < spec.max_tokens and out[-1] not in self.target.eos:
                accepted, emitted = self._step(out[-1])
                counters = counters + SpecCounters(
                    1,
                    spec.k,
                    accepted,
                    tuple(int(i < accepted) for i in range(spec.k)),
                    tuple(int(j == accepted) for j in range(spec.k + 1)),
                )
                for tok in emitted:
                    out.append(tok)
                    if len(out) >= spec.max_tokens or tok in self.target.eos:
                        break
        return out, counters

    def _step(self, x: int) -> tuple[int, list[int]]:
        """One draft + verify step from the last emitted token ``x``; returns (accepted, emitted ids)."""
        assert self.drafter is not None  # drafting runs with a drafter only
        assert self.dcache is not None  # created with the drafter
        m, k = self.drafter.model, self.spec.k
        n = self.tcache.get_seq_length()  # position of x
        base = self.dcache.length  # == n: the drafter has read positions 0..n−1
        drafts: list[int] = []
        qs: list[np.ndarray | None] = []
        for j in range(k):
            if j:
                self._drafter_pass([drafts[-1]], self.last_fed, base + j - 1)
            if self.diag is not None:
                self.diag.add(j, self.last_hidden_in, self.last_probs)
            d, q = self._pick_draft()
            drafts.append(d)
            qs.append(q)
        self.dcache.crop(base)
        logits, aux = self.target.forward([x] + drafts, self.tcache, self.drafter.aux_ids)
        accepted, emitted = self._verify(drafts, qs, logits)
        _crop(self.tcache, n + 1 + accepted)  # x and the accepted drafts; the bonus token is read next step
        self._drafter_pass(emitted, m.combine(aux[: accepted + 1].to(m.fc.weight.dtype)), base)
        return accepted, emitted

    def _verify(self, drafts: list[int], qs: list, logits) -> tuple[int, list[int]]:
        """Greedy match or the speculative-sampling rule over the ``k`` drafts; emitted = accepted + 1."""
        if self.greedy:
            target_ids = logits.argmax(-1).tolist()
            a = 0
            while a < len(drafts) and drafts[a] == target_ids[a]:
                a += 1
            return a, drafts[:a] + [target_ids[a]]
        rule = self.engine.rule
        for i, (d, q) in enumerate(zip(drafts, qs)):
            p = self.target_probs(logits[i])
            if self.rng.random() < float(rule.acceptance_probability(p, q, np.array([d]))[0]):
                continue
            res = rule.residual(p, q)
            return i, drafts[:i] + [int(self.rng.choice(res.size, p=res / res.sum()))]
        p = self.target_probs(logits[len(drafts)])
        return len(drafts), drafts + [int(self.rng.choice(p.size, p=p / p.sum()))]


@dataclass
class Diagnostics:
    """Running sums per draft depth (see :attr:`RunResult.diagnostics`)."""

    norm: np.ndarray
    sink: np.ndarray
    count: np.ndarray

    @classmethod
    def zeros(cls, k: int) -> Diagnostics:
        return cls(np.zeros(k), np.zeros(k), np.zeros(k, dtype=np.int64))

    def add(self, depth: int, hidden, probs) -> None:
        self.norm[depth] += float(hidden.float().norm())
        if probs:
            # the query row that produced this draft: last row of each layer's [nh, T, L]
            self.sink[depth] += float(np.mean([p[:, -1, :SINK_TOKENS].sum(-1).mean().item() for p in probs]))
        self.count[depth] += 1

    def to_dict(self) -> dict:
        n = np.maximum(self.count, 1)
        return {
            "hidden_state_norm": [float(x) for x in self.norm / n],
            "sink_attention_mass": [float(x) for x in self.sink / n],
            "sink_tokens": SINK_TOKENS,
            "samples": [int(c) for c in self.count],
        }
