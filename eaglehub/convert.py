"""``eaglehub convert SRC DST --to 3.1``: upgrade an EAGLE-3 drafter to EAGLE-3.1 (formats.md §7).

Adds ``fc_norm.{i}.weight`` = ones ``[Ht]`` in the checkpoint dtype for ``i < A`` (ascending layer
order), sets ``fc_norm: true`` and ``norm_output`` (default true), keeps every other config key and
copies every other tensor bit-exact (verified by sha256). The write is atomic
(:func:`eaglehub.atomic.atomic_dir`); the source is never modified; the result must validate clean.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from .atomic import atomic_dir
from .drafter import Drafter
from .errors import EaglehubError
from .layouts import READERS, read_drafter, stored_prefix
from .tensorio import PYTORCH_BIN, SINGLE_SAFETENSORS
from .validate import run_checks

REPORT_SCHEMA = "eaglehub.convert-report/1"
TARGETS = ("3.1",)
NOT_EQUIVALENT = (
    "the 3.1 drafter is not numerically equivalent to the source: unit-weight fc_norm still rescales each aux "
    "chunk per token{extra}; re-measure acceptance (eaglehub verify) and expect to fine-tune"
)


def tensor_sha256(t) -> str:
    """sha256 of a tensor's raw bytes (any dtype)."""
    import torch

    return hashlib.sha256(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()).hexdigest()


def _source_errors(d: Drafter) -> None:
    if d.layout not in READERS:
        raise EaglehubError(f"{d.path}: layout {d.layout} cannot be converted", hint="run `eaglehub validate` on it", exit_code=1)
    if d.is_31:
        raise EaglehubError(f"{d.path} is already an EAGLE-3.1 drafter (fc_norm/norm_output set or fc_norm.* tensors present)",
                            hint="nothing to do; validate it with `eaglehub validate`")
    errors = [f for f in run_checks(d) if f.severity == "error"]
    if errors:
        listed = ", ".join(sorted({f.code for f in errors}))
        raise EaglehubError(f"{d.path} has {len(errors)} error finding(s) ({listed}); refusing to convert",
                            hint=f"run `eaglehub validate {d.path}` and fix them first", exit_code=1)


def _upgrade_config(cfg: dict, norm_output: bool) -> tuple[dict, list[dict]]:
    """Copy of ``cfg`` (key order kept) with the 3.1 flags; ``[{key, old, new}]`` for each change."""
    updates = {"fc_norm": True, "norm_output": norm_output}
    changes = [{"key": k, "old": cfg.get(k), "new": v} for k, v in updates.items() if k not in cfg or cfg[k] != v]
    return {**cfg, **updates}, changes


def _copy_side_files(src: Path, dst: Path, weight_files: list[str]) -> list[str]:
    skip = {"config.json", SINGLE_SAFETENSORS, PYTORCH_BIN, *weight_files}
    copied = []
    for p in sorted(src.iterdir()):
        if p.name in skip or p.name.endswith(".safetensors.index.json"):
            continue
        (shutil.copytree if p.is_dir() else shutil.copy2)(p, dst / p.name)
        copied.append(p.name)
    return copied


def convert(src: str | Path, dst: str | Path, to: str = "3.1", norm_output: bool = True, overwrite: bool = False) -> dict:
    """Upgrade ``src`` to EAGLE-3.1 into ``dst`` and return the report (``schemas/convert-report.schema.json``).

    Output: ``config.json`` + one ``model.safetensors`` in the source's layer-0 spelling, side files
    (tokenizer, README, ...) copied. Adds ``fc_norm.{i}.weight [Ht]`` for ``i < A``.

    Raises:
        EaglehubError: unknown ``to``; ``dst`` exists without ``overwrite``; ``dst`` is ``src``;
            source already 3.1; source with error findings (exit 1); result fails validation (exit 1,
            ``dst`` left untouched).
    """
    import torch

    if to not in TARGETS:
        raise EaglehubError(f"unknown conversion target {to!r}", hint=f"use --to {' | '.join(TARGETS)}")
    src, dst = Path(src), Path(dst)
    if dst.resolve() == src.resolve():
        raise EaglehubError("DST is the source directory", hint="the source is never modified; choose another DST")
    if dst.exists() and not overwrite:
        raise EaglehubError(f"{dst} already exists", hint="pass --overwrite or choose another output path")
    d = read_drafter(src)
    _source_errors(d)
    tensors = d.load_all()
    src_hash = {n: tensor_sha256(t) for n, t in tensors.items()}
    dtype = tensors["fc.weight"].dtype
    added = {f"fc_norm.{i}.weight": torch.ones(d.dims.Ht, dtype=dtype) for i in range(d.dims.A)}
    cfg, changes = _upgrade_config(d.config, norm_output)
    with atomic_dir(dst, overwrite=overwrite) as tmp:
        written = READERS[d.layout].write(tmp, cfg, {**tensors, **added}, prefix=stored_prefix(d),
                                          metadata={k: v for k, v in d.index.metadata.items() if k != "format"})
        side = _copy_side_files(src, tmp, d.index.files)
        out = read_drafter(tmp)
        out_tensors = out.load_all()
        changed = [n for n, h in src_hash.items() if tensor_sha256(out_tensors[n]) != h]
        if changed or set(out_tensors) != set(tensors) | set(added):
            raise EaglehubError(f"copy check failed for {changed or 'tensor set'}", hint="report this bug", exit_code=1)
        errors = [f for f in run_checks(out) if f.severity == "error"]
        if errors:
            raise EaglehubError(f"the converted drafter fails validation: {', '.join(f.code for f in errors)}", hint="report this bug", exit_code=1)
    extra = "; norm_output changes the state fed back to the next draft step" if norm_output else ""
    return {
        "schema": REPORT_SCHEMA,
        "source": str(src),
        "destination": str(dst),
        "to": to,
        "layout": d.layout,
        "added_tensors": [
            {"name": n, "shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch."), "sha256": tensor_sha256(t)}
            for n, t in added.items()
        ],
        "config_changes": changes,
        "copied_tensors": [
            {"name": n, "bytes": d.tensors[n].nbytes, "sha256": h, "bit_exact": True} for n, h in src_hash.items()
        ],
        "copied_files": side,
        "bytes_written": written,
        "warnings": [NOT_EQUIVALENT.format(extra=extra)],
    }
