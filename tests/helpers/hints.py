"""What a fix hint must never say (docs/validate.md: a config edit, never the trained tensors)."""

from __future__ import annotations

import re

DISCARDING = re.compile(
    r"\b(drop|delete|remove|rename|re-?initiali[sz]e)\w*\s+(it|them|the\s+)?\s*"
    r"(tensors?|weights?|maps?|d2t|t2d|fc_norm|input_norm|q_norm|k_norm|lm_head|embed|layers?|[a-z_.]+\.weight)",
    re.IGNORECASE,
)
"""Words of a hint that would have the user discard or rename tensors (issue standard: edit the config instead)."""
