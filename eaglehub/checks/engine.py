"""Serving-side checks: the vLLM version the drafter needs (vllm.md §12) and tensor-parallel
divisibility (failure-kinds.md F21). Placeholder: filled in below."""

from __future__ import annotations

from ..findings import Finding
from .context import Context


def check(ctx: Context) -> list[Finding]:
    return []
