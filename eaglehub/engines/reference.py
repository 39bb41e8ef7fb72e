"""The embedded reference engine: PyTorch + transformers, CPU or GPU, no vLLM.

The target is a transformers causal LM whose aux hidden states are ``hidden_states[i]`` of a forward
with ``output_hidden_states`` (vLLM's convention for Llama/Qwen and DeepSeek/Kimi targets: id ``i`` is
the input of layer ``i``, docs/vllm.md §7), concatenated in ascending id order. The drafter is
:class:`eaglehub.model.eagle3.Eagle3Drafter` loaded from any layout through the canonical
:class:`eaglehub.drafter.canonical.Drafter` (every EAGLE-3 / 3.1 switch, several layers, pruned vocabulary via
``d2t``, MLA attention via :mod:`eaglehub.model.mla`).

Chain drafting mirrors vLLM's EAGLE proposer (``vllm/v1/spec_decode/eagle.py``), one request at a time:

* prefill: the target reads the prompt ``t_0..t_{n−1}`` and emits ``x``; the drafter reads token
  ``t_{p+1}`` (``x`` at the last position) with the fused target state of position ``p``, for every
  ``p < n``, and drafts from the last position;
* draft step ``j ≥ 1``: the previous draft token at the next position, with the drafter's own
  fed-back state (pre-norm, or post-norm with ``norm_output``); ``k`` draft tokens in all;
* verify: the target reads ``[x, d_1..d_k]`` in one pass; greedy accepts ``d_i`` while it equals the
  target's argmax, sampling applies the standard rule (:class:`eaglehub.verify.sampling.AcceptanceRule`)
  with its residual; the bonus token comes from the first rejected or the last position. Sampling
  uses ``softmax(logits / T)`` restricted by top-k and top-p as vLLM's sampler does
  (:func:`eaglehub.engines.decode.top_k_top_p`), for the target and the drafter alike;
* the target's cache keeps ``x`` and the accepted drafts; the drafter's cache drops its chain and
  reads the accepted tokens (+ bonus) with the target states of the verify pass.

Counters are vLLM's (docs/vllm.md §9): per verify step ``num_drafts += 1``, ``num_draft_tokens += k``,
``num_accepted_tokens += accepted``, ``accepted_per_pos[i] += 1`` for ``i < accepted`` and
``accepted_histogram[accepted] += 1`` (vLLM's per-request histogram), per prompt; drafting does
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

from eaglehub.engines.base import ProgressFn, RunResult, RunSpec, SpecCounters
from eaglehub.engines.decode import Decode, Diagnostics
from eaglehub.errors import EaglehubError
from eaglehub.verify.sampling import STANDARD_RULE, AcceptanceRule

if TYPE_CHECKING:
    import torch

    from eaglehub.model.eagle3 import Eagle3Drafter

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


def load_drafter(
    path: Path, target: ReferenceTarget, dtype: str = "float32", settings: dict | None = None
) -> LoadedDrafter:
    """Build the PyTorch drafter from any supported layout (canonical names, :mod:`eaglehub.formats.registry`).

    ``settings``: config edits to read the drafter with (:mod:`eaglehub.drafter.settings`; ``probe``'s
    readings); a pre-FC norm weight that the edited config does not use is then left out, since that
    reading is the drafter without it.

    Raises:
        EaglehubError: a quantized drafter other than compressed-tensors FP8 (per channel, tensor or block:
            those are dequantized, :func:`eaglehub.quant.quantize.dequantize_tensors`), or tensors the module has
            but the checkpoint lacks (``eaglehub validate`` names them).
    """
    from functools import partial

    from eaglehub.drafter.canonical import MLA, default_aux_ids
    from eaglehub.formats.registry import read_drafter
    from eaglehub.model.eagle3 import DrafterDims, Eagle3Drafter

    d = read_drafter(Path(path), settings=settings)
    cfg = d.config
    factory = None
    if d.layer_kind == MLA:
        from eaglehub.model.mla import MLAAttention

        factory = partial(MLAAttention, cfg)
    dims = DrafterDims.from_config(cfg)
    model = Eagle3Drafter(dims, attention_factory=factory)
    from eaglehub.quant.weights import dequantize_tensors

    tensors = dequantize_tensors(d, d.load_all())  # compressed-tensors FP8: weights dequantized, activations stay float
    embed = tensors.pop("embed_tokens.weight", None)
    if not hasattr(model, "t2d"):  # vLLM skips t2d (docs/vllm.md §4): a full-vocabulary drafter may ship one
        tensors.pop("t2d", None)
    has_head = "lm_head.weight" in tensors
    if settings:
        model_names = set(model.state_dict())
        for name in [n for n in tensors if n not in model_names and _pre_fc_norm(n)]:
            tensors.pop(name)
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


def _pre_fc_norm(name: str) -> bool:
    """A pre-FC norm weight: ``fc_norm.{i}.weight`` (EAGLE 3.1) or ``input_norm.weight`` (``norm_before_fc``)."""
    return name.startswith("fc_norm.") or name == "input_norm.weight"


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
        from eaglehub import __version__

        return (
            f"eaglehub {__version__} (torch {importlib.metadata.version('torch')}, "
            f"transformers {importlib.metadata.version('transformers')})"
        )

    def profile(self) -> str:
        """The engine profile whose reading this engine runs: vLLM's V1 runner (aux ids from the top-level
        list, else the nested one; the drafter classes are those of 0.32 and 0.33 alike), the profile of the
        vLLM build it is tested against (:data:`eaglehub.profiles.LOCAL_PROFILE`)."""
        from eaglehub.profiles import LOCAL_PROFILE

        return LOCAL_PROFILE

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
        diag = Diagnostics.zeros(spec.k) if spec.diagnostics and drafter else None
        outputs: list = []
        counters: list = []
        group_seconds: dict[str, float] = {}
        for group in dict.fromkeys(groups):
            idx = [i for i, g in enumerate(groups) if g == group]
            t0 = time.perf_counter()
            for i in idx:
                decode = Decode(self, target, drafter, spec, gen, rng, diag)
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
        decode = Decode(
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
