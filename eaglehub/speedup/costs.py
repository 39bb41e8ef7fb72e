"""Forward costs of target and drafter, timed on the canonical drafter of any layout."""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from eaglehub.errors import EaglehubError

DEFAULT_PREFIX_TOKENS = 256
DEFAULT_REPEATS = 10
WARMUP_REPEATS = 2


@dataclass(frozen=True)
class Costs:
    """Median wall milliseconds of the three forwards the formulas need (batch 1, see ``DEFINITIONS``),
    and how they were measured: ``prefix_tokens`` cached, ``repeats`` timed runs each, on ``device``
    (``cpu`` or ``cuda``) with ``threads`` torch intra-op threads and ``dtype``."""

    t_target_1_ms: float
    t_verify_k1_ms: float
    t_draft_1_ms: float
    prefix_tokens: int
    repeats: int
    device: str
    threads: int
    dtype: str

    @property
    def c(self) -> float:
        """T_draft(1) / T_target(1)."""
        return self.t_draft_1_ms / self.t_target_1_ms

    @property
    def v(self) -> float:
        """T_verify(k+1) / T_target(1)."""
        return self.t_verify_k1_ms / self.t_target_1_ms

    def to_dict(self) -> dict:
        return {**asdict(self), "c": self.c, "v": self.v}


def _median_ms(prepare: Callable[[], Callable[[], object]], repeats: int, sync: Callable[[], None]) -> float:
    """Median over ``repeats`` of the wall time (ms) of the call ``prepare()`` returns; preparation
    (copying the KV cache) is not timed, and :data:`WARMUP_REPEATS` untimed calls go first."""
    times = []
    for n in range(WARMUP_REPEATS + repeats):
        call = prepare()
        sync()
        t0 = time.perf_counter()
        call()
        sync()
        if n >= WARMUP_REPEATS:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def measure_costs(
    target: Path,
    drafter_config: dict,
    k: int,
    prefix_tokens: int = DEFAULT_PREFIX_TOKENS,
    repeats: int = DEFAULT_REPEATS,
    dtype: str = "float32",
) -> Costs:
    """Time T_target(1), T_verify(k+1) and T_draft(1) (``DEFINITIONS``) in PyTorch, batch 1.

    The target is loaded with ``transformers.AutoModelForCausalLM`` in ``dtype``; a random prefix of
    ``prefix_tokens`` token ids fills its KV cache once, and every timed forward runs on a fresh copy
    of that cache, so each sees exactly ``prefix_tokens`` cached positions. The drafter step is an
    :class:`eaglehub.model.eagle3.Eagle3Drafter` built from ``drafter_config`` (the canonical config of a
    drafter of any layout, :attr:`eaglehub.drafter.canonical.Drafter.config`) with random weights
    (weights do not change the cost) and a random K/V cache of ``prefix_tokens`` positions. Runs on
    CUDA when torch sees a GPU, else on the CPU; all under ``torch.inference_mode``.

    Raises:
        EaglehubError: ``dtype`` is not a torch floating dtype, or the target cannot be loaded (exit 2).
    """
    import torch

    from eaglehub.model.eagle3 import DrafterDims, Eagle3Drafter, attention

    torch_dtype = getattr(torch, dtype, None)
    if not isinstance(torch_dtype, torch.dtype) or not torch_dtype.is_floating_point:
        raise EaglehubError(
            f"--dtype {dtype!r} is not a torch floating-point dtype", hint="use float32, bfloat16 or float16"
        )
    device = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    try:
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(str(target), dtype=torch_dtype).to(device).eval()  # type: ignore[arg-type]  # functools.wraps on PreTrainedModel.to: mypy does not bind self
    except (OSError, ValueError) as exc:
        raise EaglehubError(
            f"cannot load target {target} in transformers to time its forwards: {exc}",
            hint="the target directory needs its weights (safetensors) and config.json",
        ) from exc
    gen = torch.Generator().manual_seed(0)

    def ids(n: int):
        return torch.randint(model.config.vocab_size, (1, n), generator=gen).to(device)

    dims = DrafterDims.from_config(drafter_config)
    drafter = Eagle3Drafter(dims).to(device=device, dtype=torch_dtype).eval()
    aux = torch.randn(1, dims.num_aux * dims.target_hidden_size, generator=gen).to(device, torch_dtype)
    embed = torch.randn(1, dims.hidden_size, generator=gen).to(device, torch_dtype)
    k_cache, v_cache = (
        torch.randn(prefix_tokens, dims.num_kv_heads, dims.head_dim, generator=gen).to(device, torch_dtype)
        for _ in range(2)
    )
    position = torch.tensor([prefix_tokens], device=device)

    def draft_step():
        q, key, value, residual = drafter.layer_qkv(drafter.combine(aux), embed, position)
        attn = attention(q, torch.cat([k_cache, key]), torch.cat([v_cache, value]), None)
        normed, _ = drafter.layer_out(attn, residual)
        return drafter.to_target_ids(drafter.logits(normed).argmax(-1))

    with torch.inference_mode():
        prefix_cache = model(ids(prefix_tokens), use_cache=True).past_key_values

        def target_forward(q: int):
            def prepare():
                new, cache = ids(q), copy.deepcopy(prefix_cache)
                return lambda: model(new, past_key_values=cache, use_cache=True)

            return prepare

        t1 = _median_ms(target_forward(1), repeats, sync)
        tv = _median_ms(target_forward(k + 1), repeats, sync)
        td = _median_ms(lambda: draft_step, repeats, sync)
    return Costs(t1, tv, td, prefix_tokens, repeats, device, torch.get_num_threads(), dtype)
