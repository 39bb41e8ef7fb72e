"""Validation checks. Each check is ``check(ctx: Context) -> list[Finding]``; :data:`CHECKS` runs in order.

Every code a check emits is a registered rule of :mod:`eaglehub.findings`. Modules: :mod:`.config`
(schema per layout, class, RoPE, flags and where they live, heads, MLA fields), :mod:`.tensors`
(names, shapes, dtypes, init-looking and unit-gain weights), :mod:`.zeros` (all-zero tensors and FP8 blocks), :mod:`.loaded` (tensors as each profile's loader
takes them), :mod:`.quant` (quantized layouts),
:mod:`.vocab` (``d2t``/``t2d``), :mod:`.aux` (aux-layer ids), :mod:`.target` (drafter ↔ target),
:mod:`.engine` (vLLM version, tensor parallelism). Layout-level rejections (not a drafter,
EAGLE-1/2, unsupported) live in :func:`eaglehub.checks.validate.run_checks`.
"""

from __future__ import annotations

from eaglehub.checks import aux, config, engine, loaded, profiles, quant, target, tensors, values, vocab, windows, zeros
from eaglehub.checks.context import Context, Options, TargetInfo, read_target
from eaglehub.checks.flags import check_flags

CHECKS = [
    config.check_schema,
    config.check_architecture,
    config.check_rope,
    config.check_exported_rope,
    windows.check,
    config.check_misc,
    check_flags,
    config.check_mla,
    loaded.check_prefix,
    tensors.check_expected,
    tensors.check_dtypes,
    tensors.check_fc_norm_unit,
    values.check_finite,
    tensors.check_init,
    zeros.check,
    quant.check,
    vocab.check,
    vocab.check_lm_head_rows,
    aux.check,
    profiles.check,
    target.check,
    engine.check,
]

#: value checks that read weight data (``validate --deep``): non-finite values, untrained-looking weights, all-zero
#: gains, matrices, embeddings and FP8 blocks, lm_head rows cut by offset
STATISTICS_CHECKS = (values.check_finite, tensors.check_init, zeros.check, vocab.check_lm_head_rows)

__all__ = ["CHECKS", "STATISTICS_CHECKS", "Context", "Options", "TargetInfo", "read_target"]
