"""Validation checks. Each check is ``check(ctx: Context) -> list[Finding]``; :data:`CHECKS` runs in order.

Modules: :mod:`.config` (schema, class, RoPE, flags aliases, MLA fields), :mod:`.tensors` (names, shapes, dtypes,
init-looking weights), :mod:`.vocab` (``d2t``/``t2d``), :mod:`.aux` (aux-layer ids), :mod:`.target`
(drafter ↔ target). Layout-level rejections (not a drafter, EAGLE-1/2, unsupported) live in
:func:`eaglehub.validate.run_checks`.
"""

from __future__ import annotations

from . import aux, config, target, tensors, vocab
from .context import Context, TargetInfo, read_target

CHECKS = [
    config.check_schema, config.check_architecture, config.check_rope, config.check_misc, config.check_mla,
    tensors.check_prefix, tensors.check_expected, tensors.check_dtypes, tensors.check_finite, tensors.check_init,
    vocab.check, aux.check, target.check,
]

#: value checks that read weight data (``validate --deep``): non-finite values, untrained-looking weights
STATISTICS_CHECKS = (tensors.check_finite, tensors.check_init)

__all__ = ["STATISTICS_CHECKS", "CHECKS", "Context", "TargetInfo", "read_target"]
