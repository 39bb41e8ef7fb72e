"""Quantized drafters (quantize-publish.md §2, §3, §5; failure-kinds.md F20). Placeholder: filled in below."""

from __future__ import annotations

from ..findings import Finding
from .context import Context


def check(ctx: Context) -> list[Finding]:
    return []
