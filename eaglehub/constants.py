"""Defaults and names shared across eaglehub: one place to read what a flag defaults to."""

from __future__ import annotations

#: draft tokens per verify step (``num_speculative_tokens``) when a command is not told
DEFAULT_K = 3
#: output tokens per prompt when a command is not told
DEFAULT_MAX_TOKENS = 64
#: engine compute dtype; float32 keeps greedy losslessness free of half-precision near-ties on CPU
DEFAULT_DTYPE = "float32"
DTYPES = ("float32", "bfloat16", "float16")
"""The compute dtypes every engine runs (--dtype): a bad one is refused by the CLI, not inside a vLLM worker."""
#: the verify report ``publish`` uploads beside a drafter's weights (that one drafter); discovery reads
#: the acceptance it claims from it
VERIFY_FILE = "eaglehub-verify.json"
#: the share of each GPU's memory vLLM may use (vLLM 0.32's ``gpu_memory_utilization`` default)
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
#: environment variable naming the cache root (the converted SmolLM2 target lives there)
CACHE_ENV = "EAGLEHUB_CACHE"
