"""Verify findings of one drafter: losslessness against the target alone, wiring, low acceptance."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from eaglehub.engines.base import RunResult, SpecCounters
from eaglehub.findings import Finding, finding
from eaglehub.measure import acceptance
from eaglehub.measure.requests import Request


def compare_outputs(requests: list[Request], baseline: RunResult, run: RunResult) -> list[dict]:
    """Per request (:class:`Request`, the runs' output order): id, turn, category, match, first
    divergent output position, output token counts."""
    rows = []
    for r, ref, out in zip(requests, baseline.outputs, run.outputs):
        div = acceptance.first_divergence(ref, out)
        rows.append(
            {
                "id": r.id,
                "turn": r.turn,
                "category": r.category,
                "match": div is None,
                "first_divergence": div,
                "num_output_tokens": len(out),
                "num_output_tokens_target": len(ref),
            }
        )
    return rows


def overall_lossless(run: RunResult) -> SpecCounters:
    return acceptance.total(run.group_counters.values())


def _where(rows: list[dict]) -> str:
    return ", ".join(f"{r['id']}@{r['first_divergence']}" for r in rows[:8]) + (" …" if len(rows) > 8 else "")


def _lossless_findings(rows: list[dict]) -> list[Finding]:
    """E-VERIFY-LOSSLESS for divergences forensics did not explain as near-ties (all of them when no
    forensics ran), else one W-VERIFY-NEAR-TIE."""
    bad = [r for r in rows if not r["match"]]
    if not bad:
        return []
    faults = [r for r in bad if (r.get("forensics") or {}).get("classification") != "near_tie"]
    if not faults:
        # a near-tie the target alone also flips when the engine batches differently (verify's production
        # features, eaglehub.verify.production) is the engine's numerics, named apart from the verify pass's own
        batched = [r for r in bad if r["forensics"].get("batch_variant")]
        ties = [r for r in bad if not r["forensics"].get("batch_variant")]
        out = []
        if batched:
            out.append(
                finding(
                    "W-VERIFY-BATCH-NUMERICS",
                    "outputs",
                    f"{len(batched)} of {len(rows)} prompts diverge at a near-tie of the target's top-2 logits that "
                    "the target alone also flips when run one request at a time without the production features "
                    f"(id@first divergent token: {_where(batched)}): the engine's batch-dependent numerics",
                )
            )
        if ties:
            out.append(
                finding(
                    "W-VERIFY-NEAR-TIE",
                    "outputs",
                    f"{len(ties)} of {len(rows)} prompts diverge, each at a near-tie of the target's top-2 logits "
                    f"(id@first divergent token: {_where(ties)})",
                )
            )
        return out
    explained = sum(r.get("forensics") is not None for r in faults)
    return [
        finding(
            "E-VERIFY-LOSSLESS",
            "outputs",
            f"{len(faults)} of {len(rows)} prompts differ from the target alone (id@first divergent token: "
            f"{_where(faults)}){'; forensics: not near-ties' if explained else ''}",
            hint="greedy float32 on CPU must be token-identical; check the target/drafter pairing and the engine "
            "version; the prompts' forensics give the target's top-2 logits at the divergence",
        )
    ]


def _low_al_findings(
    overall: SpecCounters,
    per_category: dict[str, SpecCounters],
    rows: list[dict],
    run: RunResult,
    hint: Callable[[], str | None] | None = None,
) -> list[Finding]:
    """One W-VERIFY-LOW-AL for the overall AL and one per category below the bar (F13), each with its sample:
    drafts, prompts and, with per-prompt counters, the 95 % interval of the AL over prompts
    (:func:`~eaglehub.measure.distribution.acceptance_length_ci`); an interval that reaches the bar says the
    sample cannot tell. ``hint()``: the fix for this drafter (:func:`low_al_hint`), asked once, when needed."""
    from eaglehub.measure.distribution import acceptance_length_ci

    categories = [r["category"] for r in rows]
    per_prompt = run.prompt_counters if run.prompt_counters and len(run.prompt_counters) == len(rows) else None
    scopes: list[tuple[str, str, SpecCounters, str | None]] = [("acceptance.overall", "overall", overall, None)]
    scopes += [(f"acceptance.per_category.{g}", f"category {g}", c, g) for g, c in per_category.items()]
    out = []
    fix: list[str | None] = []
    for subject, label, c, group in scopes:
        al = acceptance.acceptance_length(c)
        if not acceptance.low_acceptance_length(al):
            continue
        n = sum(1 for g in categories if group is None or g == group)
        sample = f"over {c.num_drafts} drafts of {n} prompt{'s' * (n != 1)}"
        if per_prompt is not None:
            ci = acceptance_length_ci([p for p, g in zip(per_prompt, categories) if group is None or g == group])
            if ci["high"] is not None:
                sample += f" (95 % interval {ci['low']:.3f} to {ci['high']:.3f} over prompts)"
                if ci["high"] >= acceptance.LOW_AL_THRESHOLD:
                    sample += f": the interval reaches {acceptance.LOW_AL_THRESHOLD}, too few prompts to tell"
            else:
                sample += " (one prompt: no interval)"
        if hint is not None and not fix:
            fix.append(hint())
        out.append(
            finding(
                "W-VERIFY-LOW-AL",
                subject,
                f"{label}: acceptance length {al:.3f} < {acceptance.LOW_AL_THRESHOLD} {sample} "
                f"(tokens per verify pass, bonus included)",
                fix[0] if fix else None,
            )
        )
    return out


def low_al_hint(drafter: Path, target: Path) -> str | None:
    """The fix W-VERIFY-LOW-AL proposes for ``drafter`` on ``target``: ``convert --calibrate`` where the
    fc_norm gains are all 1 (an uncalibrated 3 → 3.1 upgrade, W-FCNORM-UNIT: calibrating is the fix), else
    ``eaglehub probe``, which measures the config readings the tensors cannot settle (aux ids, norm_output,
    the pre-FC norm), the likely cause when the prompts are like the training data; ``None`` (the rule's
    hint) when the drafter cannot be read."""
    import shlex

    from eaglehub.checks.context import Context, Options
    from eaglehub.checks.tensors import check_fc_norm_unit
    from eaglehub.errors import EaglehubError
    from eaglehub.formats.registry import read_drafter

    try:
        d = read_drafter(drafter, strict_provenance=False)
        unit = bool(check_fc_norm_unit(Context(d, None, Options())))
    except (EaglehubError, OSError, ValueError):
        return None
    if unit:
        source = (d.provenance or {}).get("source")
        src = source.get("path") if isinstance(source, dict) else None
        if src and Path(src).is_dir():
            command = shlex.join(
                [
                    "eaglehub",
                    "convert",
                    src,
                    str(_free_path(Path(f"{drafter}-calibrated"))),
                    "--to",
                    "3.1",
                    "--calibrate",
                    "--target",
                    str(target),
                ]
            )
            return (
                f"the fc_norm gains are all 1 (an uncalibrated 3.1 upgrade, W-FCNORM-UNIT): calibrate them: {command}"
            )
        return (
            "the fc_norm gains are all 1 (an uncalibrated 3.1 upgrade, W-FCNORM-UNIT): upgrade the EAGLE-3 source "
            f"again with eaglehub convert SRC DST --to 3.1 --calibrate --target {shlex.quote(str(target))}"
        )
    command = shlex.join(["eaglehub", "probe", str(drafter), "--target", str(target)])
    return (
        "a config reading the tensors cannot settle (aux-layer ids, norm_output, the pre-FC norm) may not be the one "
        f"the weights were trained for (the likely cause when these prompts are like the training data): {command}"
    )


def _free_path(path: Path) -> Path:
    """``path``, or ``path-2``, ``path-3``… where it exists: convert refuses an existing DST without
    --overwrite, and an earlier calibration there (``make demo`` writes one) is not ours to overwrite."""
    n = 1
    free = path
    while free.exists():
        n += 1
        free = path.with_name(f"{path.name}-{n}")
    return free


def _counts(c: SpecCounters, k: int) -> tuple:
    per_pos = tuple(c.accepted_per_pos) + (0,) * (k - len(c.accepted_per_pos))
    return c.num_drafts, c.num_draft_tokens, c.num_accepted_tokens, per_pos


def inconsistent_counter_findings(
    group_counters: dict[str, SpecCounters], k: int, scope: str = "acceptance", run: str = ""
) -> list[Finding]:
    """E-VERIFY-COUNTERS for each category whose counters break
    :func:`~eaglehub.measure.acceptance.check_consistency` (an engine bug). ``scope``: the report section
    the subject names; ``run``: how the message names the run (e.g. ``"sampled run, "``)."""
    out = []
    for g, c in group_counters.items():
        problems = acceptance.check_consistency(c, k)
        if problems:
            out.append(
                finding("E-VERIFY-COUNTERS", f"{scope}.per_category.{g}", f"{run}category {g}: " + "; ".join(problems))
            )
    return out


def per_request_counter_findings(categories: list[str], run: RunResult, scope: str = "acceptance") -> list[Finding]:
    """E-VERIFY-COUNTERS for each category whose per-request counters (``run.prompt_counters``,
    ``categories[i]`` the category of request i) do not sum to the engine's aggregate counters of that
    category: both count the same verify steps (docs/vllm.md §9), so a difference is an engine bug.
    Nothing without per-request counters. ``scope``: the report section the subject names."""
    if run.prompt_counters is None:
        return []
    summed: dict[str, SpecCounters] = {}
    for g, c in zip(categories, run.prompt_counters):
        summed[g] = summed[g] + c if g in summed else c
    out = []
    for g in dict.fromkeys([*run.group_counters, *summed]):
        agg, per = run.group_counters.get(g, SpecCounters()), summed.get(g, SpecCounters())
        k = max(len(agg.accepted_per_pos), len(per.accepted_per_pos))
        if _counts(agg, k) != _counts(per, k):
            names = "drafts, draft tokens, accepted, accepted per position"
            out.append(
                finding(
                    "E-VERIFY-COUNTERS",
                    f"{scope}.per_request.{g}",
                    f"category {g}: the per-request counters sum to ({names}) {_counts(per, k)}, the engine's "
                    f"aggregate counters say {_counts(agg, k)}",
                )
            )
    return out


def drafter_findings(
    rows: list[dict], run: RunResult, k: int, low_al_hint: Callable[[], str | None] | None = None
) -> list[Finding]:
    """Findings of one drafter run, from its compared outputs ``rows`` and its counters.

    E-VERIFY-LOSSLESS (any prompt differs), E-VERIFY-NOT-WIRED (position-0 acceptance below
    :data:`~eaglehub.measure.acceptance.NOT_WIRED_THRESHOLD`, or nothing drafted), E-VERIFY-COUNTERS (one
    per category whose counters break :func:`~eaglehub.measure.acceptance.check_consistency`; the overall sum
    is consistent whenever every category is; and :func:`per_request_counter_findings`) and W-VERIFY-LOW-AL (:func:`_low_al_findings`).
    A drafter that is not wired gets no low-AL warnings: its AL is at most 1 + k · 0.02, and the
    error already says why.
    """
    findings = _lossless_findings(rows)
    overall = overall_lossless(run)
    not_wired = acceptance.drafter_not_wired(overall)
    if not_wired:
        findings.append(
            finding(
                "E-VERIFY-NOT-WIRED",
                "acceptance.overall",
                f"position-0 acceptance is ≈ 0 (< {acceptance.NOT_WIRED_THRESHOLD}) over {overall.num_drafts} drafts",
                hint="the drafter's predictions do not reach the target: check d2t, aux layer ids, weight names "
                "(a missing tensor loads silently in vLLM) and that the drafter was trained for this target",
            )
        )
    findings += inconsistent_counter_findings(run.group_counters, k)
    findings += per_request_counter_findings([r["category"] for r in rows], run)
    if not not_wired:
        findings += _low_al_findings(overall, run.group_counters, rows, run, low_al_hint)
    return findings
