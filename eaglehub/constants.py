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
#: environment variable naming the cache root (the converted SmolLM2 target lives there)
CACHE_ENV = "EAGLEHUB_CACHE"
