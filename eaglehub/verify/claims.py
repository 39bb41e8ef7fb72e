"""Holding a run to the acceptance its drafter claims (:mod:`eaglehub.discovery.claims`).

A run that falls short of a claim by more than the tolerance gets ``E-VERIFY-AL-CLAIM`` when the claim
was measured at the run's settings (same prompts, k, output length, temperature), else
``W-VERIFY-AL-CLAIM``: the numbers may differ for the settings alone (docs/drafters.md §3).
"""

from __future__ import annotations

import shlex

from eaglehub.findings import finding

COMPARED = ("num_speculative_tokens", "max_tokens", "temperature", "prompts_sha256")
"""Settings a claim must share with the run to be held to it (an error rather than a warning)."""


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
    overall = entry["acceptance"]["overall"]
    low, high = al_interval(overall)
    sample = f"over {overall['num_drafts']} drafts of {entry['num_prompts']} prompts"
    if high is not None:
        sample += f", 95 % interval {low:.3f} to {high:.3f}"
    message = (
        f"{drafter} claims AL {claimed:.3f} ({claim['source']}), this run measured {measured:.3f} ({sample}): "
        f"{gap:.1%} below, more than the {tolerance:.0%} tolerated"
    )
    undecided = high is None or high >= claimed * (1 - tolerance)
    if not differ and undecided:  # the shortfall is inside what this sample can tell from the claim
        message += "; inconclusive: the claim is inside this run's interval, too few drafts to hold it to it"
        f = finding(
            "W-VERIFY-AL-CLAIM",
            "acceptance.overall.acceptance_length",
            message,
            "measure more: " + _settings_hint(claim, target_spec, drafter_path),
        ).as_dict()
        entry["findings"].append(f)
        return f
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


def al_interval(overall: dict) -> tuple[float | None, float | None]:
    """The 95 % interval of a run's AL from its overall counters: the exact (Clopper-Pearson) binomial interval
    of the draft-token acceptance rate (scipy.stats.binomtest), times the draft tokens per draft, plus one.
    Draft tokens are taken as independent, which prompts are not, so the interval is if anything too narrow:
    a claim outside it is not reached; one inside it cannot be judged. ``(None, None)`` with no draft tokens."""
    from scipy import stats

    n, accepted, drafts = overall["num_draft_tokens"], overall["num_accepted_tokens"], overall["num_drafts"]
    if not n or not drafts or not 0 <= accepted <= n:
        return None, None
    ci = stats.binomtest(int(accepted), int(n)).proportion_ci(0.95, method="exact")
    per_draft = n / drafts
    return 1 + ci.low * per_draft, 1 + ci.high * per_draft


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
