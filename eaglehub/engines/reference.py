"""The embedded reference engine: PyTorch + transformers, CPU or GPU, no vLLM.

The target is a transformers causal LM whose aux hidden states are ``hidden_states[i]`` of a forward
with ``output_hidden_states`` (vLLM's convention for Llama/Qwen and DeepSeek/Kimi targets: id ``i`` is
the input of layer ``i``, vllm.md §7), concatenated in ascending id order. The drafter is
:class:`eaglehub.drafter_model.Eagle3Drafter` loaded from any layout through the canonical
:class:`eaglehub.drafter.Drafter` (every EAGLE-3 / 3.1 switch, several layers, pruned vocabulary via
``d2t``, MLA attention via :mod:`eaglehub.drafter_mla`).

Chain drafting mirrors vLLM's EAGLE proposer (``vllm/v1/spec_decode/eagle.py``), one request at a time:

* prefill: the target reads the prompt ``t_0..t_{n−1}`` and emits ``x``; the drafter reads token
  ``t_{p+1}`` (``x`` at the last position) with the fused target state of position ``p``, for every
  ``p < n``, and drafts from the last position;
* draft step ``j ≥ 1``: the previous draft token at the next position, with the drafter's own
  fed-back state (pre-norm, or post-norm with ``norm_output``); ``k`` draft tokens in all;
* verify: the target reads ``[x, d_1..d_k]`` in one pass; greedy accepts ``d_i`` while it equals the
  target's argmax, sampling applies the standard rule (:class:`eaglehub.sampling.AcceptanceRule`)
  with its residual; the bonus token comes from the first rejected or the last position;
* the target's cache keeps ``x`` and the accepted drafts; the drafter's cache drops its chain and
  reads the accepted tokens (+ bonus) with the target states of the verify pass.

Counters are vLLM's (vllm.md §9): per verify step ``num_drafts += 1``, ``num_draft_tokens += k``,
``num_accepted_tokens += accepted``, ``accepted_per_pos[i] += 1`` for ``i < accepted``; drafting does
not shrink near ``max_tokens`` (outputs are truncated afterwards, as vLLM does). Decoding stops at
``max_tokens`` or at an end-of-sequence id (the config's and generation config's), which is kept in
the output.
"""

from __future__ import annotations

import importlib.metadata
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import EaglehubError
from ..sampling import STANDARD_RULE, AcceptanceRule
from .base import ProgressFn, RunResult, RunSpec, SpecCounters

if TYPE_CHECKING:
    import torch

    from ..drafter_model import Eagle3Drafter

SINK_TOKENS = 4
"""Attention-sink diagnostics: mass on the first this many positions (StreamingLLM's 4 sink tokens,
Xiao et al. 2023, arXiv 2309.17453)."""
_DTYPES = ("float32", "bfloat16", "float16")


def _torch_dtype(name: str):
    import torch

    if name not in _DTYPES:
        raise EaglehubError(f"the reference engine runs {', '.join(_DTYPES)}, not {name}", hint="pass --dtype float32")
    return getattr(torch, name)


def check_device(device: str) -> None:
    """Raises: EaglehubError (exit 2) for a device torch does not know or this machine lacks."""
    import torch

    try:
        kind = torch.device(device).type
    except (RuntimeError, TypeError) as exc:
        raise EaglehubError(f"unknown device {device!r}", hint="use --device cpu or --device cuda") from exc
    if kind not in ("cpu", "cuda"):
        raise EaglehubError(f"the reference engine runs on cpu or cuda, not {device!r}", hint="use --device cpu")
    if kind == "cuda" and not torch.cuda.is_available():
        raise EaglehubError(
            f"--device {device}: this torch build or machine has no CUDA device", hint="use --device cpu"
        )


class ReferenceTarget:
    """A transformers causal LM with its aux hidden states and a croppable KV cache."""

    def __init__(self, path: Path, dtype: str = "float32", device: str = "cpu"):
        import torch
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # verify draws its own progress bar
        try:
            self.model = AutoModelForCausalLM.from_pretrained(str(path), dtype=_torch_dtype(dtype)).to(device).eval()  # type: ignore[arg-type]  # functools.wraps on PreTrainedModel.to: mypy does not bind self
        except (OSError, ValueError) as exc:
            raise EaglehubError(
                f"cannot load target {path} with transformers: {str(exc).splitlines()[0]}",
                hint="the reference engine needs a transformers checkpoint (config.json + weights)",
            ) from exc
        self.device = device
        self.config = self.model.config
        self.num_layers = int(self.config.num_hidden_layers)
        eos = set()
        for src in (self.config, getattr(self.model, "generation_config", None)):
            e = getattr(src, "eos_token_id", None) if src is not None else None
            eos |= set(e if isinstance(e, (list, tuple)) else [] if e is None else [e])
        self.eos = {int(i) for i in eos}
        self.torch = torch

    def new_cache(self):
        from transformers import DynamicCache

        return DynamicCache(config=self.config)

    def embed(self, ids):
        """Input embeddings ``[T, Ht]`` of token ids ``[T]``."""
        return self.model.get_input_embeddings()(ids)

    def forward(self, ids: list[int], cache, aux_ids: list[int] | None):
        """Process ``ids`` after the cached positions: (logits float32 ``[T, V]``, aux ``[T, A·Ht]`` or ``None``)."""
        torch = self.torch
        t = torch.tensor([ids], dtype=torch.long, device=self.device)
        start = cache.get_seq_length()
        pos = torch.arange(start, start + len(ids), device=self.device)[None]
        with torch.inference_mode():  # never part of a graph: calibration trains the drafter on these as data
            out = self.model(
                input_ids=t,
                past_key_values=cache,
                use_cache=True,
                position_ids=pos,
                output_hidden_states=aux_ids is not None,
            )
        aux = None
        if aux_ids is not None:
            aux = torch.cat([out.hidden_states[i][0] for i in aux_ids], dim=-1)
        return out.logits[0].float(), aux


@dataclass
class LoadedDrafter:
    """The drafter module plus what the engine needs around it."""

    model: Eagle3Drafter
    aux_ids: list[int]
    embed: torch.Tensor | None  # the drafter's own embedding table, or None (the target's is used)
    shared_head: torch.nn.Module | None  # the target's lm_head when the drafter ships none


def load_drafter(path: Path, target: ReferenceTarget, dtype: str = "float32") -> LoadedDrafter:
    """Build the PyTorch drafter from any supported layout (canonical names, :mod:`eaglehub.layouts`).

    Raises:
        EaglehubError: a quantized drafter other than compressed-tensors FP8 (per channel, tensor or block:
            those are dequantized, :func:`eaglehub.quantize.dequantize_tensors`), or tensors the module has
            but the checkpoint lacks (``eaglehub validate`` names them).
    """
    from functools import partial

    from ..drafter import MLA, default_aux_ids
    from ..drafter_model import DrafterDims, Eagle3Drafter
    from ..layouts import read_drafter

    d = read_drafter(Path(path))
    cfg = d.config
    factory = None
    if d.layer_kind == MLA:
        from ..drafter_mla import MLAAttention

        factory = partial(MLAAttention, cfg)
    dims = DrafterDims.from_config(cfg)
    model = Eagle3Drafter(dims, attention_factory=factory)
    from ..quantize import dequantize_tensors

    tensors = dequantize_tensors(d, d.load_all())  # compressed-tensors FP8: weights dequantized, activations stay float
    embed = tensors.pop("embed_tokens.weight", None)
    if not hasattr(model, "t2d"):  # vLLM skips t2d (vllm.md §4): a full-vocabulary drafter may ship one
        tensors.pop("t2d", None)
    has_head = "lm_head.weight" in tensors
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    missing = [m for m in missing if m != "t2d" and not (m == "lm_head.weight" and not has_head)]
    if missing or unexpected:
        what = ", ".join((missing + unexpected)[:4])
        raise EaglehubError(
            f"drafter {path} does not match its config: {'missing' if missing else 'unexpected'} {what}",
            hint=f"run `eaglehub validate {path}` for the findings",
            exit_code=1,
        )
    tdtype = _torch_dtype(dtype)
    model = model.to(device=target.device, dtype=tdtype).eval()
    if hasattr(model, "d2t"):
        model.d2t = model.d2t.long()
    ids = d.aux.c_in if d.aux.c_in else default_aux_ids(target.num_layers)
    shared = None
    if not has_head:
        shared = target.model.get_output_embeddings()
    return LoadedDrafter(model, sorted(ids), None if embed is None else embed.to(target.device, tdtype), shared)


@dataclass
class _Diag:
    """Running sums per draft depth (see :attr:`RunResult.diagnostics`)."""

    norm: np.ndarray
    sink: np.ndarray
    count: np.ndarray

    @classmethod
    def zeros(cls, k: int) -> _Diag:
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


class ReferenceEngine:
    """:class:`eaglehub.engines.base.Engine` in plain PyTorch + transformers (module docstring).

    ``rule``: the accept/reject rule used at temperature > 0 (a test swaps in a broken one to prove
    the sampling test catches it); ``device``: ``cpu`` or ``cuda``.
    """

    name = "reference"

    def __init__(self, device: str = "cpu", rule: AcceptanceRule = STANDARD_RULE):
        check_device(device)
        self.device = device
        self.rule = rule
        self._targets: dict[tuple, ReferenceTarget] = {}

    def version(self) -> str:
        """eaglehub's version with the torch and transformers versions it runs on."""
        from .. import __version__

        return (
            f"eaglehub {__version__} (torch {importlib.metadata.version('torch')}, "
            f"transformers {importlib.metadata.version('transformers')})"
        )

    def target(self, path: Path, dtype: str) -> ReferenceTarget:
        """The loaded target (cached per path and dtype: the baseline and drafter runs share it)."""
        key = (str(Path(path).resolve()), dtype)
        if key not in self._targets:
            self._targets[key] = ReferenceTarget(Path(path), dtype, self.device)
        return self._targets[key]

    def run(
        self,
        spec: RunSpec,
        prompt_token_ids: list[list[int]],
        groups: list[str],
        progress: ProgressFn | None = None,
    ) -> RunResult:
        """See :meth:`eaglehub.engines.base.Engine.run`; also fills ``prompt_counters`` and, with
        ``spec.diagnostics``, ``diagnostics``.

        Raises:
            EaglehubError: the target or drafter cannot be loaded (see :func:`load_drafter`).
        """
        import torch

        t0 = time.perf_counter()
        target = self.target(spec.target, spec.dtype)
        drafter = load_drafter(spec.drafter, target, spec.dtype) if spec.drafter else None
        load_seconds = time.perf_counter() - t0
        gen = torch.Generator(device="cpu").manual_seed(spec.seed)
        rng = np.random.default_rng(spec.seed)
        diag = _Diag.zeros(spec.k) if spec.diagnostics and drafter else None
        outputs: list = []
        counters: list = []
        group_seconds: dict[str, float] = {}
        for group in dict.fromkeys(groups):
            idx = [i for i, g in enumerate(groups) if g == group]
            t0 = time.perf_counter()
            for i in idx:
                decode = _Decode(self, target, drafter, spec, gen, rng, diag)
                out, c = decode.run(prompt_token_ids[i])
                outputs.append((i, out))
                counters.append((i, c))
            group_seconds[group] = time.perf_counter() - t0
            if progress:
                progress(group, len(idx))
        outputs = [o for _, o in sorted(outputs)]
        per_prompt = [c for _, c in sorted(counters)]
        group_counters: dict[str, SpecCounters] = {}
        if drafter:
            for g, c in zip(groups, per_prompt):
                group_counters[g] = group_counters.get(g, SpecCounters(accepted_per_pos=(0,) * spec.k)) + c
        return RunResult(
            outputs=outputs,
            group_counters=group_counters,
            generate_seconds=sum(group_seconds.values()),
            load_seconds=load_seconds,
            engine=self.name,
            engine_version=self.version(),
            group_seconds=group_seconds,
            prompt_counters=per_prompt if drafter else None,
            diagnostics=diag.to_dict() if diag is not None else None,
        )

    def first_step_distributions(self, spec: RunSpec, prompt_ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """The target and draft distributions of the first verify step after ``prompt_ids``, at
        ``spec.temperature``: the prefix is the prompt plus the target's greedy first token ``x``;
        ``p`` = target softmax at the next position, ``q`` = the drafter's first draft distribution
        mapped to target ids (zero outside the draft vocabulary). Both float64 ``[V]``."""
        import torch

        target = self.target(spec.target, spec.dtype)
        assert spec.drafter is not None  # a first draft step needs a drafter
        drafter = load_drafter(spec.drafter, target, spec.dtype)
        decode = _Decode(
            self,
            target,
            drafter,
            spec,
            torch.Generator().manual_seed(spec.seed),
            np.random.default_rng(spec.seed),
            None,
        )
        with torch.inference_mode():
            x, _aux = decode.prefill(prompt_ids, greedy=True)
            logits, _ = target.forward([x], decode.tcache, None)
            p = decode.target_probs(logits[-1])
            q = decode.draft_probs(decode.last_normed)
        return p, q


def _crop(cache, keep: int) -> None:
    """Keep the first ``keep`` positions of a transformers cache (negative ``crop``: remove that many)."""
    extra = cache.get_seq_length() - keep
    if extra > 0:
        cache.crop(-extra)


class _Decode:
    """One request's decoding state (module docstring for the algorithm)."""

    def __init__(
        self,
        engine: ReferenceEngine,
        target: ReferenceTarget | ReplayTarget,
        drafter: LoadedDrafter | None,
        spec: RunSpec,
        gen,
        rng: np.random.Generator,
        diag: _Diag | None,
    ):
        from ..drafter_model import KVCache

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

        return torch.softmax(logits.double() / self.spec.temperature, dim=-1).cpu().numpy()

    def draft_probs(self, normed) -> np.ndarray:
        """Draft distribution over target ids ``[V]`` from one ``normed`` row ``[H]``."""
        import torch

        assert self.drafter is not None  # drafting runs with a drafter only
        m = self.drafter.model
        logits = self._draft_logits(normed)
        qd = torch.softmax(logits.double() / self.spec.temperature, dim=-1)
        q = torch.zeros(self.target.config.vocab_size, dtype=torch.float64)
        q[m.to_target_ids(torch.arange(qd.shape[0], device=qd.device)).cpu()] = qd.cpu()
        return q.numpy()

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
            counters = SpecCounters(accepted_per_pos=(0,) * spec.k)
            while len(out) < spec.max_tokens and out[-1] not in self.target.eos:
                accepted, emitted = self._step(out[-1])
                counters = counters + SpecCounters(1, spec.k, accepted, tuple(int(i < accepted) for i in range(spec.k)))
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
    engine: ReferenceEngine, live: ReferenceTarget, drafter_path: Path, records: list[dict], k: int
) -> SpecCounters:
    """Greedy counters of ``drafter_path`` over recorded target runs (:class:`ReplayTarget`).

    ``records``: ``{"ids": [N] prompt + continuation, "aux": [N, A·Ht], "answer_start": prompt length}``
    (:func:`eaglehub.calibrate.collect`). Each is decoded from its prompt for as many tokens as the
    continuation holds, so outputs equal the record and only the drafter is computed.
    """
    import torch

    drafter = load_drafter(drafter_path, live, "float32")
    total = SpecCounters(accepted_per_pos=(0,) * k)
    for rec in records:
        seq = [int(t) for t in rec["ids"]]
        start = rec["answer_start"]
        if len(seq) - start < 2:
            continue
        replay = ReplayTarget(live, seq, rec["aux"].to(drafter.model.fc.weight.dtype))
        spec = RunSpec(Path("."), drafter_path, k, len(seq) - start)
        decode = _Decode(
            engine, replay, drafter, spec, torch.Generator().manual_seed(0), np.random.default_rng(0), None
        )
        _out, counters = decode.run(seq[:start])
        total = total + counters
    return total
