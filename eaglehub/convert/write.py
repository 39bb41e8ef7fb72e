"""The one atomic path that writes a drafter checkpoint: tensors, config, provenance and side files,
validated before DST appears (shared by convert, calibrate and quantize)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from eaglehub.convert.early import Early, destination  # noqa: F401  (destination: imported from here by other verbs)
from eaglehub.drafter.canonical import Drafter
from eaglehub.errors import EaglehubError
from eaglehub.formats.registry import FORMATS, read_drafter
from eaglehub.io.atomic import atomic_dir
from eaglehub.io.provenance import PROVENANCE_FILE, safetensors_metadata, write_provenance
from eaglehub.io.streaming import INDEX_FILE, OutTensor, start_checkpoint

#: weights of any kind are never side files: a stale copy next to the new weights would be loaded by mistake
WEIGHT_SUFFIXES = (
    ".safetensors",
    ".bin",
    ".pt",
    ".pth",
    ".ckpt",
    ".gguf",
    ".index.json",
    ".npz",
    ".h5",
    ".msgpack",
)


#: the side files a served drafter uses: its card and licence, a tokenizer and chat template shipped with it,
#: generation defaults, ModelOpt's quantization description (vLLM reads hf_quant_config.json for a ModelOpt
#: checkpoint). Anything else a producer leaves next to its weights (speculators' copied config.py, run.yaml,
#: train_command.txt, optimizer and scheduler state, training_state.json, val_metrics.json...) belongs to the
#: training run, not to the drafter, and is listed as left out
SIDE_FILES = frozenset(
    {
        "README.md",
        "tokenizer.json",
        "tokenizer_config.json",
        "tokenizer.model",
        "special_tokens_map.json",
        "added_tokens.json",
        "vocab.json",
        "vocab.txt",
        "merges.txt",
        "spiece.model",
        "chat_template.jinja",
        "chat_template.json",
        "generation_config.json",
        "hf_quant_config.json",
    }
)
LICENCE_PREFIXES = ("LICENSE", "LICENCE", "NOTICE", "COPYING")


def is_side_file(name: str) -> bool:
    return name in SIDE_FILES or name.upper().startswith(LICENCE_PREFIXES)


def copy_side_files(src: Path, dst: Path, skip: set[str]) -> tuple[list[str], list[str]]:
    """Copy the source's side files a drafter needs (:data:`SIDE_FILES`: card, licence, tokenizer) into
    ``dst``; weight files, directories, hidden files and a training run's files are left out. Returns
    ``(copied, left out)`` names (hidden ones not listed)."""
    copied, skipped = [], []
    for p in sorted(src.iterdir()):
        if p.name in skip:
            continue
        if not p.is_file() or p.name.endswith(WEIGHT_SUFFIXES) or not is_side_file(p.name):
            skipped.append(p.name + ("/" if p.is_dir() else ""))
            continue
        shutil.copy2(p, dst / p.name)
        copied.append(p.name)
    return copied, [s for s in skipped if not s.startswith(".")]


def shard_size(value: int | str | None) -> int | None:
    """``--max-shard-size`` in bytes: an int, or a number with KB/MB/GB/TB (powers of 1000, as
    huggingface_hub reads them) or KiB/MiB/GiB/TiB. Raises EaglehubError (exit 2) on anything else."""
    if value is None:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B)?\s*", str(value), re.IGNORECASE)
    if m is None or float(m.group(1)) <= 0:
        raise EaglehubError(
            f"--max-shard-size {value!r} is not a size", hint="use e.g. 5GB, 500MB, 2GiB or a byte count"
        )
    unit = (m.group(2) or "B").upper()
    scale = 1 if unit == "B" else (1024 if "I" in unit else 1000) ** ("KMGT".index(unit[0]) + 1)
    return int(float(m.group(1)) * scale)


def check_written(tmp: Path, fmt: str, expected: set[str], accepted: frozenset[str] = frozenset()) -> Drafter:
    """Re-read the written checkpoint (headers only) as a user's next command would, with no option, and
    validate it; any error is a bug here, said without naming an option the user did not give, except the
    codes in ``accepted`` (the source's, converted past with ``--force``)."""
    from eaglehub.checks.validate import run_checks

    try:
        out = read_drafter(tmp)
    except EaglehubError as exc:
        raise EaglehubError(
            f"the converted drafter cannot be read back: {exc.message}", hint="report this bug", exit_code=1
        ) from exc
    if out.format != fmt:
        raise EaglehubError(
            f"the converted drafter reads as {out.format}, not {fmt} ({'; '.join(out.evidence)})",
            hint="report this bug",
            exit_code=1,
        )
    if set(out.index.names()) != expected:
        raise EaglehubError(
            f"written tensor set differs from the plan: {sorted(set(out.index.names()) ^ expected)}",
            hint="report this bug",
            exit_code=1,
        )
    # an engine's own failure on the output (a finding naming profiles) is not this write's: the reading check
    # (convert/readings.py) has already held each profile's reading of the output to the source's, and says
    # which profiles read neither
    errors = [f for f in run_checks(out) if f.severity == "error" and f.code not in accepted and not f.profiles]
    if errors:
        raise EaglehubError(
            f"the converted drafter fails validation: {', '.join(f.code + ' ' + f.subject for f in errors)}",
            hint="report this bug (or convert with another --format)",
            exit_code=1,
        )
    return out


@dataclass(frozen=True)
class Written:
    """What :func:`write_drafter` wrote: weight files, copied and skipped side files, weight bytes."""

    files: list[str]
    copied_files: list[str]
    skipped_files: list[str]
    weight_bytes: int


def write_drafter(
    source_dir: Path,
    dst: Path,
    *,
    tensors: list[OutTensor],
    config: dict,
    provenance: dict,
    source_metadata: dict[str, str],
    source_files: Sequence[str],
    fmt: str,
    expected: set[str],
    overwrite: bool,
    max_shard_size: int | None = None,
    advance: Callable[[int], None] | None = None,
    check: Callable[[Drafter], None] | None = None,
    accepted: frozenset[str] | Callable[[], frozenset[str]] = frozenset(),
    early: Early | None = None,
) -> Written:
    """Write a drafter checkpoint to ``dst`` atomically: the tensors (sharded above ``max_shard_size``),
    ``config.json``, ``eaglehub.json`` and the source's side files, then read it back (it must read as
    format ``fmt``) and check it stores exactly ``expected`` tensors before ``dst`` appears. The source's
    own safetensors metadata is kept except eaglehub's keys, ``format`` and the stamps of producers of
    other formats (:attr:`eaglehub.formats.base.Format.metadata_stamps`).

    ``check`` gets the written drafter as read back and may refuse it (raise) before ``dst`` appears;
    ``accepted``: error codes the source had and ``--force`` converted past, or the source's checks that
    return them, run while the tensor bytes are copied (raising abandons the write). ``early``: the write of
    ``dst`` :func:`eaglehub.convert.early.start_early` opened, its copy kept where the plan agrees with it.

    Raises:
        EaglehubError: ``dst`` cannot be written (exit 2) or the result fails validation or ``check``
            (exit 1); in both cases ``dst`` is untouched.
    """
    stamps = {k for name, f in FORMATS.items() if name != fmt for k in f.metadata_stamps}
    keep_meta = {
        k: v for k, v in source_metadata.items() if not k.startswith("eaglehub.") and k != "format" and k not in stamps
    }
    try:
        with early.directory() if early is not None else atomic_dir(dst, overwrite=overwrite) as tmp:
            # the big tensors' bytes copy in the background (in the kernel, as cp's do) while the rest is
            # written and checked: the checks read headers, config and small tensors, and a read of bytes
            # still being copied waits for them (io/streaming.py)
            files, copying = start_checkpoint(
                tmp,
                tensors,
                safetensors_metadata(provenance, keep_meta),
                max_shard_size,
                advance or (lambda n: None),
                early.copy if early is not None else None,
            )
            try:
                (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
                write_provenance(tmp, provenance)
                side, skipped = copy_side_files(
                    source_dir, tmp, {"config.json", PROVENANCE_FILE, INDEX_FILE, *source_files}
                )
                out = check_written(tmp, fmt, expected, accepted() if callable(accepted) else accepted)
                if check is not None:  # the caller's own check of what was written (convert: the engine readings)
                    check(out)
            except BaseException:
                failed = copying.stop()
                if failed is not None:  # the copy's own failure (a full disk) is the cause of whatever followed
                    raise failed from None
                raise
            copying.finish()
            weight_bytes = sum((tmp / f).stat().st_size for f in files)
    except OSError as exc:
        raise EaglehubError(
            f"cannot write {dst}: {exc.strerror or exc}",
            hint="check permissions and free space of its directory",
        ) from exc
    return Written(files, side, skipped, weight_bytes)
