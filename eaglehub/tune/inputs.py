"""What tune reads: costs and acceptance measured elsewhere (the files ``tune --costs`` and ``tune --acceptance``
read), and the prompts' lengths against the engine's context."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath

from eaglehub.errors import UsageError
from eaglehub.measure.curve import AcceptanceCurve
from eaglehub.measure.prompts import Prompt
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


@dataclass(frozen=True)
class Acceptance:
    """An acceptance curve read from a report, with what the report says of it: the direct-run checks of a tune
    report (``check``), the drafter it was measured for (``drafter``: its directory name or Hub id) and whether
    that pair was lossless (``lossless``: ``None`` where the report does not say)."""

    curve: AcceptanceCurve
    check: tuple[dict, ...]
    drafter: str | None
    lossless: bool | None


def _name(drafter: str | None) -> str | None:
    return None if not drafter else PurePath(str(drafter)).name


def load_acceptance(path: str, drafter: str | None = None) -> Acceptance:
    """The acceptance curve of a tune report, or of one drafter of a verify report (local or ``--endpoint``): the
    only one, or the one whose directory name is ``drafter``'s.

    Raises:
        UsageError: (exit 2) unreadable, neither report, a verify report whose drafters none or several match,
            or a drafter without a measured curve.
    """
    from eaglehub.measure.curve import entry_curve

    doc = read_json(path, "--acceptance")
    hint = "give a tune report or a verify report (eaglehub verify ... --report FILE)"
    if isinstance(doc, dict) and isinstance(doc.get("acceptance"), dict) and "curve" in doc["acceptance"]:
        try:
            curve = AcceptanceCurve.from_dict(doc["acceptance"]["curve"])
        except ValueError as exc:
            raise UsageError(f"--acceptance {path}: {exc}", hint=hint) from exc
        check = tuple(r for r in doc["acceptance"].get("check") or () if isinstance(r, dict))
        checked = doc.get("check")
        loss = checked.get("lossless") if isinstance(checked, dict) else None
        same = loss.get("identical") == loss.get("compared") if isinstance(loss, dict) else None
        return Acceptance(curve, check, _name(doc.get("drafter")), same)
    entries = doc.get("drafters") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries or "settings" not in doc:
        raise UsageError(f"--acceptance {path}: not a tune report or a verify report", hint=hint)
    names = [_name(e.get("drafter")) for e in entries if isinstance(e, dict)]
    if len(entries) > 1:
        entries = [e for e, n in zip(entries, names) if n is not None and n == _name(drafter)]
        if len(entries) != 1:
            raise UsageError(
                f"--acceptance {path}: a verify report of {len(names)} drafters ({', '.join(map(str, names))}), "
                f"none of them --drafter {drafter}",
                hint="give the verify report of --drafter, or --drafter one of the report's drafters",
            )
    measured = entry_curve(doc, entries[0])
    if measured is None:
        raise UsageError(f"--acceptance {path}: its drafter has no measured acceptance curve", hint=hint)
    lossless = entries[0].get("lossless")
    return Acceptance(measured, (), _name(entries[0].get("drafter")), lossless if isinstance(lossless, bool) else None)


def check_prompt_lengths(
    prompts: Sequence[Prompt], ids: list[list[int]], max_tokens: int, max_k: int, max_model_len: int
) -> None:
    """Refuse, before any engine loads, a prompt the engine's context cannot hold with its whole output and k
    draft tokens. vLLM itself refuses only a prompt of ``max_model_len`` tokens or more, inside the loaded worker
    (vllm 0.32.0 ``v1/engine/input_processor.py`` L574-600), and cuts a longer output short at the context; tune
    needs every request to decode its full ``--max-tokens``, so a pass holds the steps it stands for.

    Raises:
        UsageError: (exit 2) naming the longest such prompt, its token count and the context.
    """
    need = max_tokens + max_k + 1
    over = [(len(t), p.id) for p, t in zip(prompts, ids) if len(t) + need > max_model_len]
    if over:
        n, pid = max(over)
        raise UsageError(
            f"prompt {pid!r} is {n} tokens: with --max-tokens {max_tokens} and up to {max_k} draft "
            f"token{'s' if max_k != 1 else ''} it needs "
            f"{n + need} of the engine's {max_model_len}-token context"
            + (f" ({len(over)} prompts are too long)" if len(over) > 1 else ""),
            hint="shorten or leave out the long prompts (--category / --limit pick a subset), or lower --max-tokens",
        )
