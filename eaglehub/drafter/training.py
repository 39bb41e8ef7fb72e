"""Raw training checkpoints: what the producers' trainers save while they train, before an export makes a drafter.

No engine loads these, and none of them has the ``config.json`` a drafter directory needs, so every verb that
reads a drafter would otherwise stop at "config.json is missing". :func:`recognise` tells the three layouts
apart and names the producer's own export command (``E-INPUT-RAW``):

* **SpecForge 0.2.0** (``specforge/training/checkpoint.py``): ``{run_id}-step{N}/training_state.pt`` (+ one
  ``training_state_rank{r}.pt`` per rank) under the run's ``output_dir``, with a ``{run_id}-latest`` link.
  Exported by ``specforge export --to sglang --checkpoint PATH --draft-config CONFIG --output-dir OUT``
  (``specforge/cli.py``; the draft config is not saved with the checkpoint); given the run directory, the
  export reads the step its one ``*-latest`` link points at, else the highest ``-step{N}``
  (``resolve_training_state`` in ``specforge/export/checkpoint_io.py``).
* **TorchSpec** (``torchspec/training/checkpoint.py``): ``checkpoints/iter_{N:07d}/{model,optimizer,
  lr_scheduler}/`` in ``torch.distributed.checkpoint`` form (``.metadata`` + ``*.distcp``), next to
  ``checkpoints/latest_checkpointed_iteration.txt`` and the run's ``config.yaml``. Exported by
  ``python tools/convert_to_hf.py --input-dir ITER_DIR [--config DRAFT_CONFIG] [--target-model-path T]``; the
  paths ``config.yaml`` recorded are named only where they exist on this machine.
* **speculators 0.9.0** (``speculators/train/checkpointer.py``): the ``--save-path`` root holds one drafter per
  epoch (``0/``, ``1/``, …, each already in the speculators layout) and a ``checkpoint_best`` link; the root
  itself is not one.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from eaglehub.errors import EaglehubError

SPECFORGE_STATE = "training_state.pt"
TORCHSPEC_LATEST = "latest_checkpointed_iteration.txt"
DCP_METADATA = ".metadata"
_ITER = re.compile(r"iter_(\d+)")
_STEP = re.compile(r".+-step(\d+)")
#: the files besides its epoch directories that ``speculators train`` writes into its save path
SPECULATORS_ROOT_FILES = ("run.yaml", "train_command.txt")
_DRAFT_CONFIG_NOTE = "DRAFT_CONFIG.json: the draft model config the run trained"


@dataclass(frozen=True)
class TrainingCheckpoint:
    """A recognised training checkpoint: the ``path`` given, its ``producer``, what in it says so, and the
    export command."""

    path: Path
    producer: str
    detail: str
    command: str
    #: what each upper-case placeholder in ``command`` stands for
    notes: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        kind = "training save path" if self.producer == "speculators" else "training checkpoint"
        return f"{self.path} is a {self.producer} {kind} ({self.detail}), not a servable drafter"


def _q(path: Path | str) -> str:
    return shlex.quote(str(path))


def _specforge_run(root: Path) -> tuple[Path, str] | None:
    """The checkpoint ``specforge export --checkpoint RUN_DIR`` exports, and how it got there (``None``: no
    SpecForge step under ``root``). Mirrors ``resolve_training_state`` (SpecForge 0.2.0,
    ``specforge/export/checkpoint_io.py``): the one ``*-latest`` link whose target holds ``training_state.pt``,
    else the highest ``-step{N}``. With several runs the export refuses the directory, so a step is named."""
    steps = sorted(
        (int(m.group(1)), p)
        for p in root.iterdir()
        if (m := _STEP.fullmatch(p.name)) and (p / SPECFORGE_STATE).is_file()
    )
    latest = sorted(p for p in root.glob("*-latest") if (p.resolve() / SPECFORGE_STATE).is_file())
    if len(latest) == 1:
        target = latest[0].resolve()
        return root, f"{latest[0].name} -> {target.name}/{SPECFORGE_STATE}"
    if latest:  # several runs: export raises, so name the newest step the links point at
        newest = max(latest, key=lambda p: _step_number(p.resolve()))
        return newest.resolve(), ", ".join(f"{p.name} -> {p.resolve().name}" for p in latest)
    if not steps:
        return None
    runs = {p.name.rsplit("-step", 1)[0] for _, p in steps}
    newest = steps[-1][1]
    what = f"{newest.name}/{SPECFORGE_STATE}, the highest step"
    return (root, what) if len(runs) == 1 else (newest, f"{what} of runs {sorted(runs)}")


def _step_number(path: Path) -> int:
    m = _STEP.fullmatch(path.name)
    return int(m.group(1)) if m else -1


def _specforge(root: Path) -> TrainingCheckpoint | None:
    if root.is_file() and root.name == SPECFORGE_STATE:
        checkpoint, what = root.parent, "its resumable training state"
    elif (root / SPECFORGE_STATE).is_file():
        checkpoint, what = root, f"{SPECFORGE_STATE}: draft weights, optimizer and step"
    elif (found := _specforge_run(root)) is not None:
        checkpoint, what = found
    else:
        return None
    out = f"{str(checkpoint).rstrip('/')}-sglang"
    command = (
        f"specforge export --to sglang --checkpoint {_q(checkpoint)} --draft-config DRAFT_CONFIG.json "
        f"--output-dir {_q(out)}"
    )
    return TrainingCheckpoint(root, "SpecForge", what, command, (_DRAFT_CONFIG_NOTE,))


def _torchspec_iter(root: Path) -> Path | None:
    """The ``iter_*`` directory ``convert_to_hf.py --input-dir`` takes, from any level of a TorchSpec run."""
    if (root / DCP_METADATA).is_file():  # iter_*/model itself (convert_to_hf accepts it too)
        return root.parent if root.name == "model" and _ITER.fullmatch(root.parent.name) else root
    if (root / "model" / DCP_METADATA).is_file():
        return root
    checkpoints = root / "checkpoints" if (root / "checkpoints").is_dir() else root
    latest = checkpoints / TORCHSPEC_LATEST
    if latest.is_file():
        text = latest.read_text(errors="replace").strip()
        if text.isdigit() and (checkpoints / f"iter_{int(text):07d}").is_dir():
            return checkpoints / f"iter_{int(text):07d}"
    iters = sorted(
        (int(m.group(1)), p)
        for p in checkpoints.iterdir()
        if (m := _ITER.fullmatch(p.name)) and (p / "model" / DCP_METADATA).is_file()
    )
    return iters[-1][1] if iters else None


def _run_config(run_dir: Path) -> dict[str, str]:
    """``model.draft_model_config`` and ``model.target_model_path`` of the run's ``config.yaml`` (TorchSpec saves
    the resolved config next to ``checkpoints/``), when it is there and readable."""
    import yaml

    path = run_dir / "config.yaml"
    try:
        data = yaml.safe_load(path.read_text(errors="replace")) if path.is_file() else None
    except (OSError, yaml.YAMLError):
        return {}
    model = data.get("model") if isinstance(data, dict) else None
    if not isinstance(model, dict):
        return {}
    return {k: v for k in ("draft_model_config", "target_model_path") if isinstance(v := model.get(k), str) and v}


#: an org/name Hub id, which ``convert_to_hf.py --target-model-path`` also takes (it downloads it)
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def _local(recorded: str, run_dir: Path) -> Path | None:
    """``recorded`` as a path on this machine (relative to the run directory), or ``None`` where nothing is there:
    the config.yaml of a run copied from another machine names that machine's paths."""
    path = Path(recorded).expanduser()
    path = path if path.is_absolute() else run_dir / path
    try:
        return Path(os.path.abspath(path)) if path.exists() else None
    except OSError:
        return None


def _torchspec_args(run_dir: Path) -> tuple[str, tuple[str, ...]]:
    """The ``--config`` / ``--target-model-path`` arguments and the notes on their placeholders."""
    run = _run_config(run_dir)
    notes: list[str] = []
    recorded = run.get("draft_model_config")
    draft = _local(recorded, run_dir) if recorded else None
    if draft is not None:
        args = f"--config {_q(draft)}"
    else:
        args = "--config DRAFT_CONFIG.json"
        missing = f"; config.yaml recorded {recorded}, which is not on this machine" if recorded else ""
        notes.append(f"{_DRAFT_CONFIG_NOTE}{missing}")
    recorded = run.get("target_model_path")
    if recorded:
        target = _local(recorded, run_dir)
        if target is not None:
            args += f" --target-model-path {_q(target)}"
        elif _HUB_ID.fullmatch(recorded):
            args += f" --target-model-path {_q(recorded)}"
        else:
            args += " --target-model-path TARGET_MODEL_DIR"
            notes.append(
                f"TARGET_MODEL_DIR: the target model the run trained against; config.yaml recorded {recorded}, "
                "which is not on this machine"
            )
    return args, tuple(notes)


def _torchspec(root: Path) -> TrainingCheckpoint | None:
    if not root.is_dir():
        return None
    iter_dir = _torchspec_iter(root)
    if iter_dir is None:
        return None
    args, notes = _torchspec_args(iter_dir.parent.parent)
    command = f"python tools/convert_to_hf.py --input-dir {_q(iter_dir)} {args} --output-dir {_q(f'{iter_dir}_hf')}"
    what = f"{iter_dir.name}: FSDP shards in torch.distributed.checkpoint form"
    return TrainingCheckpoint(root, "TorchSpec", what, command, notes)


def _speculators(root: Path) -> TrainingCheckpoint | None:
    if not root.is_dir():
        return None
    epochs = sorted(int(p.name) for p in root.iterdir() if p.name.isdigit() and (p / "config.json").is_file())
    best = root / "checkpoint_best"
    if not epochs and not (best / "config.json").is_file():
        return None
    if not epochs and not any((root / f).is_file() for f in SPECULATORS_ROOT_FILES):
        return None
    pick = best if (best / "config.json").is_file() else root / str(epochs[-1])
    shown = f"{best.name} -> {best.resolve().name}" if best.is_symlink() else pick.name
    what = f"epoch checkpoints {epochs}, {shown}"
    command = f"eaglehub validate {_q(pick)}"
    return TrainingCheckpoint(root, "speculators", what, command)


def recognise(root: Path) -> TrainingCheckpoint | None:
    """The training checkpoint ``root`` is (or holds), or ``None``. Reads directory listings and, for TorchSpec,
    the run's ``config.yaml``; no checkpoint file is opened (they are pickles)."""
    root = Path(root)
    try:
        for probe in (_specforge, _torchspec, _speculators):
            if root.exists() and (found := probe(root)) is not None:
                return found
    except OSError:  # an unreadable listing is no evidence either way
        return None
    return None


def hint(found: TrainingCheckpoint) -> str:
    """The fix: the producer's export command (the speculators root needs none: an epoch is the drafter)."""
    if found.producer == "speculators":
        return f"each epoch directory is a speculators drafter; use the best one: {found.command}"
    placeholders = f" ({'; '.join(found.notes)})" if found.notes else ""
    return f"export it with `{found.command}`{placeholders}"


def raise_if_training_checkpoint(root: Path, subject: str) -> None:
    """A producer's raw training checkpoint is no drafter: say which one and how to export it (``E-INPUT-RAW``
    about ``subject``), instead of naming the file it lacks."""
    found = recognise(root)
    if found is not None:
        raise EaglehubError(found.message, hint=hint(found), code="E-INPUT-RAW", subject=subject)
