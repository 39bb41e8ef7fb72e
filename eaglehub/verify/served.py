"""What ``verify --endpoint`` may claim, given the settings the server runs (:mod:`eaglehub.endpoint.settings`).

* a **synthetic** rejection method: the acceptance is the configured one and the outputs are not the
  target's: no measured AL, no losslessness verdict, and the drafter is not verified (E-ENDPOINT-SYNTHETIC);
* a **lossy** method (vLLM 0.33's ``fly``, SGLang's relaxed acceptance thresholds): no losslessness verdict
  (``lossless: null``), the AL is the lossy rule's (W-ENDPOINT-LOSSY);
* a **k schedule** (or drafts of varying length seen in the counters): the AL is over a mix of ks, given per
  k where the server reports the tokens drafted at each step, and never as the AL at one k; the per-position
  rates are sized by the largest k and count every step (W-ENDPOINT-K-SCHEDULE);
* **draft lm_head quantization**: the drafter that runs is not the checkpoint (W-ENDPOINT-DRAFT-QUANT);
* settings the server does not say and no ``--served-config`` states: ``source: unknown`` in the report,
  said under the endpoint table; an assumption the server contradicts: W-ENDPOINT-SETTINGS-CONFLICT.
"""

from __future__ import annotations

import json
import shlex

from eaglehub.endpoint.engine import EndpointRun
from eaglehub.endpoint.settings import SERVER, UNKNOWN, ServedSettings, with_observed
from eaglehub.endpoint.steps import al_by_k, observed_ks
from eaglehub.engines.base import SpecCounters
from eaglehub.findings import finding
from eaglehub.measure import acceptance

DISPLACED = ("E-VERIFY-LOSSLESS", "W-VERIFY-NEAR-TIE")
"""Output findings that do not apply where the method does not keep the target's outputs by design."""
PER_POSITION_ALL_STEPS = (
    "accepted at position i over all verify steps, sized by the largest k; a step that drafted fewer than "
    "i + 1 tokens counts as not accepted there"
)


def kept_steps(seen: EndpointRun, keep: list[int]) -> list[tuple[int, int]] | None:
    """The per-step ``(drafted, accepted)`` pairs of the compared requests, ``None`` unless every one of them
    carried them."""
    if not keep or any(i not in seen.steps for i in keep):
        return None
    return [step for i in keep for step in seen.steps[i]]


def _drafts_shorter_than_k(overall: SpecCounters, k: int | None) -> bool:
    return bool(k and overall.num_drafts and overall.num_draft_tokens < overall.num_drafts * k)


def seen_engine(seen: EndpointRun, owner: str | None) -> tuple[str, str] | None:
    """The engine as the run saw it, with where: the per-request metrics' shape, the ``/metrics`` names, or
    ``/v1/models``' ``owned_by`` (:func:`eaglehub.endpoint.client.engine_of`)."""
    if seen.source is not None:
        return seen.source, "the per-request metrics' shape"
    if seen.metrics_server is not None:
        return seen.metrics_server, "the /metrics names"
    return (owner, "/v1/models owned_by") if owner else None


def al_claim(settings: ServedSettings, ks: dict[int, int] | None, overall: SpecCounters) -> tuple[str, int | None]:
    """What the run's AL is, decided once for the table and the warning: ``configured`` (synthetic),
    ``mixed_k`` (steps drafted different ks, or a schedule with nothing drafted), ``measured`` (the server or
    ``--served-config`` says there is no schedule), ``one_k_this_load`` (every step drafted one k, with a
    schedule or with the schedule unknown: one load shows no schedule's absence); with the one k drafted."""
    k = settings.k.value
    if settings.synthetic_run:
        return "configured", k
    if (ks is not None and len(ks) > 1) or (ks is None and _drafts_shorter_than_k(overall, k)):
        return "mixed_k", k
    schedule = settings.k_schedule
    if schedule.source != UNKNOWN and schedule.value == []:
        return "measured", k
    one = next(iter(ks)) if ks else k if overall.num_drafts and k else None
    if one is not None:
        return "one_k_this_load", one
    return ("mixed_k" if settings.scheduled else "measured"), k


def al_said(code: str, k: int | None, schedule_known: bool) -> str:
    """The claim :func:`al_claim` decided, in words: the served-settings table and W-ENDPOINT-K-SCHEDULE
    both say it."""
    if code == "one_k_this_load":
        if schedule_known:
            return f"at k={k} only: every step drafted k={k} at this load; the schedule drafts other ks at other loads"
        return (
            f"at k={k} for this load: every step drafted k={k} at this load; whether the server runs a k schedule "
            "is unknown (no fixed-k claim)"
        )
    return {
        "measured": "measured, at one k",
        "configured": "CONFIGURED by the synthetic rejection method: not a measurement",
        "mixed_k": "over a mix of ks: not the AL at one k",
    }[code]


def served_claims(
    settings: ServedSettings,
    seen: EndpointRun,
    keep: list[int],
    overall: SpecCounters,
    rows: list[dict],
    model_root: str | None,
    owner: str | None = None,
) -> tuple[ServedSettings, dict, list[dict]]:
    """The settings completed by the run's counters, the report's ``served`` section (settings, what the AL
    and the outputs may claim, AL per k) and the findings (module doc). ``owner``: ``/v1/models``'
    ``owned_by`` engine, where nothing else names it."""
    steps = kept_steps(seen, keep)
    ks = observed_ks(steps) if steps else None
    settings = with_observed(settings, seen.k, seen.k_source, ks, seen_engine(seen, owner))
    k = settings.k.value
    by_k = al_by_k(steps) if steps else None
    code, one_k = al_claim(settings, ks, overall)
    mixed = code == "mixed_k"
    scheduled = settings.scheduled or mixed
    al = acceptance.acceptance_length(overall)
    matched, n = sum(r["match"] for r in rows), len(rows)
    out: list[dict] = []

    for line in settings.conflicts:
        out.append(finding("W-ENDPOINT-SETTINGS-CONFLICT", "endpoint.served.settings", line).as_dict())
    method = settings.rejection_method
    if settings.synthetic_run:
        configured = (settings.synthetic.value or {}).get("acceptance_length")
        shown = f"configured AL {configured:g}" if configured is not None else "a configured acceptance"
        out.append(
            finding(
                "E-ENDPOINT-SYNTHETIC",
                "endpoint.served.settings.rejection_method",
                f"the server accepts drafts synthetically (rejection_sample_method synthetic, {method.source}: "
                f"{method.where}; {shown}): each draft token is accepted with a set probability, never checked "
                f"against the target's choice, so the AL {_al(al)} is that setting, not the drafter's, and the "
                f"outputs are not the target's ({matched}/{n} token-identical): neither is verified",
                _standard_hint(settings, model_root),
            ).as_dict()
        )
    elif settings.lossy:
        out.append(
            finding(
                "W-ENDPOINT-LOSSY",
                "endpoint.served.settings.rejection_method",
                f"the server's rejection method {method.value} ({method.source}: {method.where}) is lossy by "
                f"design: outputs may differ from the target's, so losslessness is not judged ({matched}/{n} "
                f"prompts token-identical), and the AL {_al(al)} is that rule's, not standard verification's",
            ).as_dict()
        )
    if scheduled:
        out.append(
            finding(
                "W-ENDPOINT-K-SCHEDULE",
                "endpoint.served.settings.k_schedule",
                _schedule_message(settings, code, one_k, by_k, overall, al, k),
                # with per-step counts the AL per k is in the report already: no call to serve for them
                hint=None
                if by_k is None
                else "compare the AL with one measured under the same schedule and load, or the report's AL at "
                "one k (endpoint.served.acceptance_by_k) with a fixed-k run at that k",
            ).as_dict()
        )
    quant = settings.draft_lm_head_quantization
    if quant.value:
        out.append(
            finding(
                "W-ENDPOINT-DRAFT-QUANT",
                "endpoint.served.settings.draft_lm_head_quantization",
                f"the server runs the drafter with its lm_head quantized to {quant.value} ({quant.source}: "
                f"{quant.where}): the AL {_al(al)} is of that drafter, not of the checkpoint's weights",
            ).as_dict()
        )
    claims = {
        "acceptance_length": code,
        "lossless": "not_judged" if settings.synthetic_run or settings.lossy else "judged",
        # no fixed-k claim from steps that drafted one k: only a settings page or --served-config says it
        "fixed_k": False
        if scheduled
        else True
        if settings.k_schedule.source != UNKNOWN and settings.k_schedule.value == [] and k is not None
        else None,
        "drafter_as_checkpoint": None if quant.source == UNKNOWN else not quant.value,
        "per_position": PER_POSITION_ALL_STEPS if scheduled else "accepted at position i over all verify steps",
    }
    section = {"settings": settings.to_dict(), "claims": claims, "acceptance_by_k": by_k}
    return settings, section, out


def apply_claims(entry: dict, settings: ServedSettings, found: list[dict]) -> None:
    """The drafter entry as the settings allow: ``lossless`` ``null`` and no output findings where the
    method does not keep the target's outputs, no low-AL warning for a configured AL; the served findings
    added and ``passed`` recomputed."""
    keep = entry["findings"]
    if settings.synthetic_run or settings.lossy:
        entry["lossless"] = None
        keep = [f for f in keep if f["code"] not in DISPLACED]
    if settings.synthetic_run:
        keep = [f for f in keep if f["code"] != "W-VERIFY-LOW-AL"]
    entry["findings"] = sorted([*keep, *found], key=lambda f: f["severity"] != "error")
    entry["passed"] = not any(f["severity"] == "error" for f in entry["findings"])


def _al(al: float | None) -> str:
    return "-" if al is None else f"{al:.3f}"


def _schedule_message(
    settings: ServedSettings,
    code: str,
    one_k: int | None,
    by_k: list[dict] | None,
    overall: SpecCounters,
    al: float | None,
    k: int | None,
) -> str:
    s = settings.k_schedule
    what = (
        f"k is chosen per batch size (schedule {json.dumps(s.value)}, {s.source}: {s.where})"
        if isinstance(s.value, list) and s.value
        else f"k varies ({s.value}, {s.source}: {s.where})"
        if s.source != UNKNOWN and s.value
        else f"the drafts are shorter than k={k} at some steps ({overall.num_draft_tokens} draft tokens over "
        f"{overall.num_drafts} steps)"
    )
    if code == "one_k_this_load":
        return f"{what}; the AL {_al(al)} is {al_said(code, one_k, True)}"
    if by_k:
        per = "; ".join(f"k={r['k']}: {r['num_drafts']} steps, AL {r['acceptance_length']:.3f}" for r in by_k)
        mix = f"the AL {_al(al)} is {al_said(code, k, True)} ({per})"
    else:
        mean = overall.num_draft_tokens / overall.num_drafts if overall.num_drafts else 0.0
        mix = (
            f"the AL {_al(al)} is {al_said(code, k, True)} ({mean:.2f} draft tokens per step on average, up to {k}); "
            "the server gave no per-step k (vLLM: --per-request-spec-decode-metrics detailed gives AL per k)"
        )
    return f"{what}: {mix}; the per-position rates are sized by the largest k ({k}) and count every step"


def _standard_hint(settings: ServedSettings, model_root: str | None) -> str:
    """The serve line that measures the drafter: the same speculative config with standard rejection."""
    cfg = {
        "method": settings.method.value or "eagle3",
        "model": settings.drafter.value,
        "num_speculative_tokens": settings.k.value,
    }
    if cfg["model"] is None or cfg["num_speculative_tokens"] is None or not model_root:
        return (
            'serve the drafter with "rejection_sample_method": "standard" in --speculative-config (no '
            "synthetic_acceptance_*), then rerun this command"
        )
    line = (
        f"vllm serve {shlex.quote(model_root)} --speculative-config {shlex.quote(json.dumps(cfg))} "
        "--per-request-spec-decode-metrics summary"
    )
    return f"serve it with standard rejection: {line}; then rerun this command"


def server_said(settings: ServedSettings) -> bool:
    """Whether any speculative setting came from the server itself."""
    return any(getattr(settings, n).source == SERVER for n in ("k_schedule", "rejection_method"))
