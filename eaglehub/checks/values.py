"""``--deep``: weights judged by their values, not only their shapes (NaN / Inf here; zeros in
:mod:`eaglehub.checks.zeros`)."""

from __future__ import annotations

from eaglehub.checks.context import Context, drafter_array
from eaglehub.findings import Finding, finding

NONFINITE_ROWS_BYTES = 16 << 20  # rows read per step: bounded memory on multi-GB tensors


def check_finite(ctx: Context) -> list[Finding]:
    """``--deep``: every float tensor is finite, read in row blocks of about 16 MiB (bf16/fp8 widened
    to float32 by :meth:`TensorIndex.load_numpy`). One finding per tensor, with the count."""
    import numpy as np

    d, out = ctx.drafter, []
    for name, info in d.tensors.items():
        if not info.is_float or not info.numel:
            continue
        rows = info.shape[0] if info.shape else 1
        step = max(1, NONFINITE_ROWS_BYTES // max(1, info.nbytes // rows))
        bad = 0
        for start in range(0, rows, step):
            block = (
                d.index.load_numpy(d.names[name], max_rows=step, start_row=start)
                if info.shape
                else drafter_array(d, name)
            )
            bad += int(block.size - np.count_nonzero(np.isfinite(block)))
        if bad:
            out.append(
                finding(
                    "E-TENSOR-NONFINITE",
                    name,
                    f"{name} holds {bad} NaN/Inf value(s) of {info.numel}",
                    "re-export the weights from a healthy training checkpoint",
                )
            )
    return out
