"""``eaglehub convert`` as one call: the option rules of the verb and the choice between a plain
conversion, a calibrated 3.1 upgrade and a fold back to EAGLE-3 (docs/convert.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from eaglehub.drafter.settings import parse_setting, parse_settings
from eaglehub.errors import UsageError


@dataclass
class ConvertOptions:
    """Everything ``eaglehub convert`` takes besides SRC and DST (``None``: the verb's default)."""

    to: str | None = None
    fmt: str | None = None
    source_format: str | None = None
    force: bool = False
    max_shard_size: str | None = None
    revision: str | None = None
    verifier: str | None = None
    aux_convention: str | None = None
    norm_output: bool | None = None
    calibrate: bool = False
    target: str | None = None
    calibration_prompts: str | None = None
    calibration_limit: int | None = None
    calibration_tokens: int | None = None
    steps: int | None = None
    train: str | None = None
    lr: float | None = None
    label_weight: float | None = None
    device: str = "cpu"
    overwrite: bool = False
    settings: tuple[str, ...] = ()
    """``--set KEY=VALUE`` config edits (:mod:`eaglehub.drafter.settings`), plain conversions only."""
    rebuild_vocab_maps: bool = False
    """``--rebuild-vocab-maps``: d2t / t2d written afresh from what the source holds (plain conversions only)."""
    profiles: tuple[str, ...] = ()
    """``--profile``: the engine profiles whose readings the output must keep (none: every named profile)."""

    @property
    def mode(self) -> str:
        """``fold`` (--to 3 --force), ``calibrate`` (--calibrate) or ``plain`` (tensor bytes copied)."""
        if self.to == "3" and self.force:
            return "fold"
        return "calibrate" if self.calibrate else "plain"

    def check(self) -> None:
        """Refuse option combinations that would be silently ignored, with the fix."""
        tuning = self.steps is not None or self.train or self.lr is not None or self.label_weight is not None
        if not self.calibrate and tuning:
            raise UsageError(
                "--steps, --train, --lr and --label-weight fine-tune a calibrated upgrade: they need --calibrate",
                hint="add --to 3.1 --calibrate --target T",
            )
        calibration = self.target or self.calibration_prompts or self.calibration_limit or self.calibration_tokens
        if self.mode == "plain" and calibration:
            raise UsageError(
                "--target and the --calibration-* options are read only by --calibrate (and --to 3 --force)",
                hint="add --calibrate for the calibrated 3.1 upgrade, e.g. --to 3.1 --calibrate --target smollm2",
            )
        if self.mode == "fold" and (self.calibrate or self.norm_output is not None):
            raise UsageError(
                "--calibrate and --norm-output apply to --to 3.1; --to 3 --force folds fc_norm into fc",
                hint="drop --calibrate / --norm-output",
            )
        if self.mode == "fold" and not self.target:
            raise UsageError(
                "--to 3 --force needs --target T: the folded fc columns use the aux states' mean RMS on T",
                hint="e.g. --to 3 --force --target smollm2",
            )
        if self.settings and self.mode != "plain":
            raise UsageError(
                "--set edits the config of a plain conversion; a calibration or fold reads the source as it is",
                hint="write the edited drafter first (eaglehub convert SRC EDITED --set KEY=VALUE), then calibrate EDITED",
            )
        if self.rebuild_vocab_maps and self.mode != "plain":
            raise UsageError(
                "--rebuild-vocab-maps is a plain conversion; a calibration or fold reads the source's maps as they are",
                hint="write the rebuilt drafter first (eaglehub convert SRC REBUILT --rebuild-vocab-maps), then "
                "calibrate REBUILT",
            )
        for text in self.settings:
            parse_setting(text)
        if self.profiles:
            from eaglehub.profiles import resolve_all

            resolve_all(self.profiles)  # an unknown profile is refused before anything is read
        if self.mode == "calibrate" and (self.to != "3.1" or not self.target):
            raise UsageError(
                "--calibrate needs --to 3.1 and --target T", hint="e.g. --to 3.1 --calibrate --target smollm2"
            )

    def common(self) -> dict[str, Any]:
        """The keyword arguments every conversion path takes."""
        return dict(
            fmt=self.fmt,
            force=self.force,
            overwrite=self.overwrite,
            max_shard_size=self.max_shard_size,
            source_format=self.source_format,
            verifier=self.verifier,
            revision=self.revision,
            aux_convention=self.aux_convention,
            profiles=self.profiles,
        )


def start_early(src: str, dst: str, opts: ConvertOptions) -> Any:
    """The byte copy of a plain ``--to 3.1`` of a local safetensors drafter, started before anything is planned
    (:mod:`eaglehub.convert.early`); ``None`` for every other conversion."""
    if (
        opts.mode != "plain"
        or opts.to != "3.1"
        or opts.fmt is not None
        or opts.max_shard_size is not None
        or opts.rebuild_vocab_maps
        or opts.revision is not None
    ):
        return None
    from eaglehub.convert.early import start_early as start

    return start(src, dst, opts.overwrite)


def run_convert(
    src: str,
    dst: str,
    opts: ConvertOptions,
    *,
    progress: Callable[..., Any] | None = None,
    console: Any = None,
    early: Any = None,
) -> dict:
    """Convert ``src`` into ``dst`` as ``opts`` say and return the convert report.

    ``progress`` receives byte counts of a plain conversion; ``console`` (a rich console) shows the
    calibration's stages. ``early``: :func:`start_early`'s copy, used by a plain conversion (and abandoned,
    its temporary directory removed, when the conversion fails)."""
    try:
        opts.check()
        if opts.mode == "plain":
            from eaglehub.convert.run import convert

            return convert(
                src,
                dst,
                to=opts.to,
                norm_output=True if opts.norm_output is None else opts.norm_output,
                progress=progress,
                settings=parse_settings(opts.settings),
                rebuild_vocab_maps=opts.rebuild_vocab_maps,
                early=early,
                **opts.common(),
            )
    finally:
        if early is not None:
            early.abandon()  # nothing once the write used it
    from eaglehub.convert.calibrate import CalibrationOptions, calibrated_upgrade, fold_to_eagle3

    assert opts.target is not None  # check() refuses both modes without a target
    # options not given keep CalibrationOptions' defaults (its class attributes)
    max_new_tokens = CalibrationOptions.max_new_tokens if opts.calibration_tokens is None else opts.calibration_tokens
    if opts.mode == "fold":
        fold_opts = CalibrationOptions(
            target=opts.target,
            prompts_file=opts.calibration_prompts,
            limit=opts.calibration_limit,
            device=opts.device,
            max_new_tokens=max_new_tokens,
        )
        return fold_to_eagle3(src, dst, fold_opts, **opts.common())
    cal_opts = CalibrationOptions(
        target=opts.target,
        prompts_file=opts.calibration_prompts,
        limit=opts.calibration_limit,
        steps=opts.steps,
        lr=opts.lr,
        norm_output=opts.norm_output,
        max_new_tokens=max_new_tokens,
        device=opts.device,
        train=opts.train or CalibrationOptions.train,
        label_weight=CalibrationOptions.label_weight if opts.label_weight is None else opts.label_weight,
    )
    return calibrated_upgrade(src, dst, cal_opts, console=console, **opts.common())
