"""The acceptance a published drafter claims: read from its ``eaglehub-verify.json`` (the verify report
``eaglehub publish`` uploads: the AL with the settings it was measured at) or, failing that, from the
card's ``model-index`` results (a metric whose type or name says acceptance length). Whether a run
reached it is :mod:`eaglehub.verify.claims`. The acceptance curve (AL(k) at each k up to the measured one,
:mod:`eaglehub.measure.curve`) comes from the same report, or from the card's metadata
(``eaglehub.acceptance_curve``, written by ``eaglehub publish``).
"""

from __future__ import annotations

AL_DEFINITION = (
    "acceptance length = 1 + accepted draft tokens / verify steps (the bonus token counted), over all prompts"
)


def claim_from_report(report: dict | None, source: str) -> dict | None:
    """The claim of a verify report's first drafter, or ``None`` when it holds no acceptance length."""
    if not isinstance(report, dict):
        return None
    try:
        entry = report["drafters"][0]
        al = float(entry["acceptance"]["overall"]["acceptance_length"])
        s, p, e = report["settings"], report["prompts"], report["engine"]
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return {
        "acceptance_length": al,
        "acceptance_rate_per_position": list(entry["acceptance"]["overall"].get("acceptance_rate_per_position") or []),
        "lossless": entry.get("lossless"),
        "source": source,
        "definition": AL_DEFINITION,
        "num_speculative_tokens": s.get("num_speculative_tokens"),
        "max_tokens": s.get("max_tokens"),
        "temperature": s.get("temperature"),
        "dtype": s.get("dtype"),
        "num_prompts": p.get("count"),
        "prompts_sha256": p.get("sha256"),
        "engine": f"{e.get('name')} {e.get('version')}",
    }


def claim_from_card(card: dict | None) -> dict | None:
    """A claim from the card's ``model-index`` (metric type or name with "acceptance" and "length"), or ``None``."""
    for model in (card or {}).get("model-index") or []:
        for result in (model or {}).get("results") or [] if isinstance(model, dict) else []:
            for metric in (result or {}).get("metrics") or [] if isinstance(result, dict) else []:
                if not isinstance(metric, dict):
                    continue
                label = f"{metric.get('type', '')} {metric.get('name', '')}".lower().replace("_", " ")
                value = metric.get("value")
                if "acceptance" in label and "length" in label and isinstance(value, (int, float)):
                    return {
                        "acceptance_length": float(value),
                        "acceptance_rate_per_position": [],
                        "lossless": None,
                        "source": "card model-index",
                        "definition": f"as the card states it ({metric.get('name') or metric.get('type')})",
                        "num_speculative_tokens": None,
                        "max_tokens": None,
                        "temperature": None,
                        "dtype": None,
                        "num_prompts": None,
                        "prompts_sha256": None,
                        "engine": None,
                    }
    return None


def curve_from_report(report: dict | None) -> dict | None:
    """The acceptance curve of a verify report's first drafter (recorded, or from its counters for a report
    written before reports recorded it), or ``None``."""
    from eaglehub.measure.curve import AcceptanceCurve, entry_curve

    try:
        entry = report["drafters"][0]  # type: ignore[index]
        if entry.get("acceptance_curve"):
            return AcceptanceCurve.from_dict(entry["acceptance_curve"]).to_dict()
        curve = entry_curve(report, entry)  # type: ignore[arg-type]
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        return None
    return None if curve is None else curve.to_dict()


def curve_from_card(card: dict | None) -> dict | None:
    """The acceptance curve a card's metadata holds (``eaglehub.acceptance_curve``), or ``None`` (none, or not
    a curve by ``schemas/acceptance-curve.schema.json``)."""
    from eaglehub.measure.curve import AcceptanceCurve

    meta = (card or {}).get("eaglehub")
    data = meta.get("acceptance_curve") if isinstance(meta, dict) else None
    if not isinstance(data, dict):
        return None
    try:
        return AcceptanceCurve.from_dict(data).to_dict()
    except ValueError:
        return None
