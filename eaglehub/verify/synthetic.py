"""``verify --write-synthetic FILE``: the measured acceptance curve as the ``--speculative-config`` of vLLM's
synthetic rejection method, which accepts each draft token with the measured unconditional rate per position
instead of checking it against the target (vllm 0.32.0 ``config/speculative.py`` L529-545), so a serving
benchmark reproduces this drafter's acceptance without a trained drafter's quirks or a real prompt set.

Which curve: the one drafter's, measured at the served settings asked for: the sampled run's at ``--temperature``
T > 0 (what traffic at T meets), the greedy run's otherwise. Several drafters (repeated ``--drafter``,
``--baseline-drafter``, a manifest, the drafters found for ``--target``) would make several curves: refused before
anything runs. The file: ``schemas/synthetic-config.schema.json``.
"""

from __future__ import annotations

from pathlib import Path

from eaglehub.errors import UsageError
from eaglehub.io.schemas import write_output
from eaglehub.measure.curve import AcceptanceCurve

SCHEMA = "synthetic-config"
ONE_DRAFTER_HINT = "give exactly one --drafter (or --endpoint), no --manifest or --baseline-drafter, and no --dry-run"


def check_request(
    drafters: tuple[str, ...] | list[str],
    endpoint: str | None,
    manifest: str | None,
    baseline_drafter: str | None,
    dry_run: bool,
) -> None:
    """Refuse, before anything runs, a ``--write-synthetic`` that would not have exactly one drafter's curve.

    Raises:
        UsageError: several or no drafters, or a dry run (exit 2).
    """
    several = (
        f"{len(drafters)} drafters"
        if len(drafters) > 1
        else "--baseline-drafter adds a second drafter"
        if baseline_drafter
        else "a manifest verifies several pairs"
        if manifest
        else None
    )
    if several is None and not drafters and not endpoint:
        several = "without --drafter the drafters found for --target are verified, maybe several"
    if several is None and dry_run:
        several = "--dry-run measures nothing"
    if several is not None:
        raise UsageError(
            f"--write-synthetic writes one drafter's measured acceptance curve: {several}", hint=ONE_DRAFTER_HINT
        )


def synthetic_document(report: dict, sampled: bool) -> tuple[dict, AcceptanceCurve]:
    """``(the speculative config to write, its curve)``: the drafter's ``speculative_config`` (method, model; none
    for a served drafter) with ``num_speculative_tokens`` = the curve's k and vLLM's synthetic keys
    (:meth:`AcceptanceCurve.synthetic_config`, checked as vLLM checks them).

    Raises:
        UsageError: the report holds no such curve (nothing drafted; a served AL that is configured or mixes ks).
    """
    (entry,) = report["drafters"]
    section = entry.get("sampled_acceptance") if sampled else entry
    data = (section or {}).get("acceptance_curve")
    if not data:
        which = "sampled" if sampled else "greedy"
        raise UsageError(
            f"--write-synthetic: the {which} run measured no acceptance curve (nothing drafted, or a served acceptance "
            "that is configured or mixes ks); nothing was written",
            hint="verify a drafter that drafts, served with one k and standard rejection sampling",
        )
    curve = AcceptanceCurve.from_dict(data)
    config = {
        **(entry.get("speculative_config") or {}),
        "num_speculative_tokens": curve.k,
        **curve.synthetic_config(),
    }
    return config, curve


def write_synthetic(report: dict, path: str | Path, sampled: bool) -> AcceptanceCurve:
    """Write :func:`synthetic_document` to ``path`` atomically (validated); returns the curve written.

    Raises:
        UsageError: no curve (:func:`synthetic_document`); EaglehubError: the file cannot be written.
    """
    config, curve = synthetic_document(report, sampled)
    write_output(config, path, SCHEMA, "synthetic speculative config")
    return curve
