"""The acceptance a published drafter claims, and whether a run reached it.

A claim is read from the drafter's ``eaglehub-verify.json`` (the verify report ``eaglehub publish``
uploads: the AL with the settings it was measured at) or, failing that, from the card's
``model-index`` results (a metric whose type or name says acceptance length). A run that falls short
of a claim by more than the tolerance gets ``E-VERIFY-AL-CLAIM`` when the claim was measured at the
run's settings (same prompts, k, output length, temperature), else ``W-VERIFY-AL-CLAIM``: the
numbers may differ for the settings alone.
"""

from __future__ import annotations

import shlex

from eaglehub.findings import finding

AL_DEFINITION = (
    "acceptance length = 1 + accepted draft tokens / verify steps (the bonus token counted), over all prompts"
)
COMPARED = ("num_speculative_tokens", "max_tokens", "temperature", "prompts_sha256")
"""Settings a claim must share with the run to be held to it (an error rather than a warning)."""


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


def run_settings(report: dict) -> dict:
    """The :data:`COMPARED` settings of a verify report."""
    s = report["settings"]
    return {
        "num_speculative_tokens": s.get("num_speculative_tokens"),
        "max_tokens": s.get("max_tokens"),
        "temperature": s.get("temperature"),
        "prompts_sha256": report["prompts"].get("sha256"),
    }


def check_claim(
    report: dict, claim: dict | None, tolerance: float, drafter: str, target_spec: str, drafter_path: str
) -> dict | None:
    """The finding (as a dict) for a one-drafter verify report whose AL is below ``claim`` by more
    than ``tolerance`` (relative), else ``None``; adds it to the report and updates ``passed``.
    ``target_spec`` / ``drafter_path`` make the hint's command exact."""
    if not claim:
        return None
    entry = report["drafters"][0]
    measured = entry["acceptance"]["overall"]["acceptance_length"]
    claimed = claim["acceptance_length"]
    if measured is None or measured >= claimed * (1 - tolerance):
        return None
    ours = run_settings(report)
    differ = [k for k in COMPARED if claim.get(k) != ours[k]]
    gap = 1 - measured / claimed
    message = (
        f"{drafter} claims AL {claimed:.3f} ({claim['source']}), this run measured {measured:.3f}: "
        f"{gap:.1%} below, more than the {tolerance:.0%} tolerated"
    )
    if differ:
        code = "W-VERIFY-AL-CLAIM"
        message += (
            "; the claim was measured at other settings ("
            + ", ".join(f"{k} {claim.get(k)!r} vs {ours[k]!r}" for k in differ)
            + ")"
        )
        hint = "re-run at the claim's settings to hold it to them: " + _settings_hint(claim, target_spec, drafter_path)
    else:
        code, hint = "E-VERIFY-AL-CLAIM", None
    f = finding(code, "acceptance.overall.acceptance_length", message, hint).as_dict()
    entry["findings"].append(f)
    if f["severity"] == "error":
        entry["passed"] = False
        report["passed"] = False
    return f


def _settings_hint(claim: dict, target_spec: str, drafter_path: str) -> str:
    parts = [f"--target {shlex.quote(target_spec)}", f"--drafter {shlex.quote(drafter_path)}"]
    if claim.get("num_speculative_tokens"):
        parts.append(f"-k {claim['num_speculative_tokens']}")
    if claim.get("max_tokens"):
        parts.append(f"--max-tokens {claim['max_tokens']}")
    if claim.get("temperature"):
        parts.append(f"--temperature {claim['temperature']}")
    prompts = (
        f" on the claim's {claim['num_prompts']} prompts (sha256 {claim['prompts_sha256'][:12]}…) with --prompts FILE"
        if claim.get("num_prompts") and claim.get("prompts_sha256")
        else ""
    )
    return f"eaglehub verify {' '.join(parts)}{prompts}"
