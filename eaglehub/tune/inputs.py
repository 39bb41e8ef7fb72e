"""Costs and acceptance measured elsewhere: the files ``tune --costs`` and ``tune --acceptance`` read."""

from __future__ import annotations

from eaglehub.errors import UsageError
from eaglehub.measure.curve import AcceptanceCurve
from eaglehub.tune.costs import SCHEMA as COSTS_SCHEMA
from eaglehub.tune.costs import CostModel


def read_json(path: str, option: str):
    from eaglehub.io import jsonio

    try:
        return jsonio.read(path)
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot read it: {exc.strerror or exc}", hint="check the path") from exc
    except ValueError as exc:
        raise UsageError(f"{option} {path}: not JSON: {exc}", hint="give the file eaglehub wrote") from exc


def load_costs(path: str) -> CostModel:
    """A cost model ``--save-costs`` wrote.

    Raises:
        UsageError: (exit 2) unreadable, not JSON or breaking ``schemas/tune-costs.schema.json``.
    """
    from eaglehub.io.schemas import schema_errors

    doc = read_json(path, "--costs")
    errors = schema_errors(doc, COSTS_SCHEMA)
    if errors:
        where, message = errors[0]
        raise UsageError(
            f"--costs {path}: not a tune cost file ({where}: {' '.join(message.split())[:160]})",
            hint="write one with eaglehub tune --target T --drafter D --save-costs FILE on the serving machine",
        )
    return CostModel.from_dict(doc)


def load_acceptance(path: str) -> AcceptanceCurve:
    """The acceptance curve of a tune report, or of the one drafter of a verify report (local or ``--endpoint``).

    Raises:
        UsageError: (exit 2) unreadable, neither report, or a verify report without exactly one curve.
    """
    from eaglehub.measure.curve import entry_curve

    doc = read_json(path, "--acceptance")
    hint = "give a tune report or a verify report of one drafter (eaglehub verify ... --report FILE)"
    if isinstance(doc, dict) and isinstance(doc.get("acceptance"), dict) and "curve" in doc["acceptance"]:
        try:
            return AcceptanceCurve.from_dict(doc["acceptance"]["curve"])
        except ValueError as exc:
            raise UsageError(f"--acceptance {path}: {exc}", hint=hint) from exc
    entries = doc.get("drafters") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or len(entries) != 1 or "settings" not in doc:
        raise UsageError(f"--acceptance {path}: not a tune report or a one-drafter verify report", hint=hint)
    curve = entry_curve(doc, entries[0])
    if curve is None:
        raise UsageError(f"--acceptance {path}: its drafter has no measured acceptance curve", hint=hint)
    return curve
