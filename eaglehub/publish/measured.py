"""The measured part of the model card ``eaglehub publish`` writes: the acceptance a verify report measured,
per drafter and category, and its acceptance curve (AL(k) at each k up to the measured one, also in the card's
metadata as ``eaglehub.acceptance_curve``; schemas/acceptance-curve.schema.json)."""

from __future__ import annotations

from eaglehub.constants import VERIFY_FILE


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def fmt(x, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def rates_text(acc: dict) -> str:
    return " / ".join(fmt(r) for r in acc.get("acceptance_rate_per_position") or []) or "—"


def verify_section(entry: dict, report: dict, others: list[dict]) -> list[str]:
    s, p, acc = report["settings"], report["prompts"], entry["acceptance"]
    lines = [
        "## Measured acceptance",
        "",
        f"Measured by `eaglehub verify` with {report['engine']['name']} {report['engine']['version']}: "
        f"k = {s['num_speculative_tokens']} draft tokens, greedy (temperature {s['temperature']}), {s['dtype']}, "
        f"at most {s['max_tokens']} output tokens per prompt, {p['count']} prompts from `{p['file'].rsplit('/', 1)[-1]}` "
        f"(sha256 `{p['sha256'][:12]}…`; {', '.join(f'{c} {n}' for c, n in p['categories'].items())}).",
        "",
        "| drafter | lossless | acceptance length (AL) | rate per draft position | per-request mean AL | drafts |",
        "|---|---|---|---|---|---|",
    ]
    for e, label in [(entry, "**this drafter**")] + [
        (o, f"`{o['drafter'].rsplit('/', 1)[-1]}` (same run)") for o in others
    ]:
        a = e["acceptance"]
        lines.append(
            f"| {label} | {e['num_prompts_matched']} / {e['num_prompts']} token-identical | "
            f"{fmt(a['overall']['acceptance_length'])} | {rates_text(a['overall'])} | "
            f"{fmt(a.get('per_request_mean_acceptance_length'))} | {a['overall'].get('num_drafts', '—')} |"
        )
    lines += [
        "",
        "Per prompt category (this drafter):",
        "",
        "| category | AL | rate per draft position |",
        "|---|---|---|",
    ]
    lines += [f"| {c} | {fmt(a['acceptance_length'])} | {rates_text(a)} |" for c, a in acc["per_category"].items()]
    lines += curve_section(entry, report)
    findings = [f"`{f['code']}` ({f['severity']}): {f['message']}" for f in entry["findings"]]
    if findings:
        lines += ["", "Verify findings:", ""] + [f"- {f}" for f in findings]
    d = report["definitions"]
    lines += [
        "",
        "Definitions:",
        "",
        f"- *acceptance length*: {d['acceptance_length']}",
        f"- *rate per draft position*: {d['acceptance_rate_per_position']}",
        "- *lossless*: the greedy output with the drafter is token-identical to the target alone.",
        "",
        f"The full report is [`{VERIFY_FILE}`]({VERIFY_FILE}); `eaglehub verify --reference-report "
        f"{VERIFY_FILE}` fails a later run (another engine version, a changed target) whose AL falls "
        "below it by more than the tolerance.",
        "",
    ]
    return lines


def card_curve(entry: dict | None, report: dict | None) -> dict | None:
    """The drafter's greedy acceptance curve (``schemas/acceptance-curve.schema.json``) from its verify ``entry``:
    the one the report records, or for a report written before reports recorded it, the one its counters give."""
    from eaglehub.measure.curve import AcceptanceCurve, entry_curve

    if entry is None or report is None:
        return None
    if entry.get("acceptance_curve"):
        return AcceptanceCurve.from_dict(entry["acceptance_curve"]).to_dict()
    curve = entry_curve(report, entry)
    return None if curve is None else curve.to_dict()


def curve_section(entry: dict, report: dict) -> list[str]:
    """A row per k: the AL the rates measured at the run's k predict there, and the rate at position k; the
    settings and the prompts' hash; the rates as vLLM's synthetic acceptance (serving benchmarks replay it)."""
    import json

    from eaglehub.measure.curve import MODEL, AcceptanceCurve

    data = card_curve(entry, report)
    if data is None:
        return []
    curve = AcceptanceCurve.from_dict(data)
    s = curve.settings
    temperature = s["temperature"]
    sampling = (
        "greedy (temperature 0)"
        if not temperature
        else f"temperature {temperature:g}, top-p {s['top_p']:g}, top-k {s['top_k']}"
    )
    lines = [
        "",
        "### Acceptance curve",
        "",
        f"Mean acceptance length at each k up to {curve.k}, predicted from the rates per draft position measured at "
        f"k = {curve.k} ({curve.num_drafts} verify steps over {plural(curve.prompts, 'prompt')}, prompts sha256 "
        f"`{curve.prompts_sha256}`; {s['engine']['name']} {s['engine']['version']}, {sampling}, {s['dtype']}, at most "
        f"{s['max_tokens']} output tokens). {MODEL}",
        "",
        "| k | AL(k) | rate at position k |",
        "|---|---|---|",
    ]
    lines += [
        f"| {i} | {fmt(al)} | {'—' if i == 0 else fmt(curve.rates[i - 1])} |" for i, al in enumerate(curve.al_by_k())
    ]
    lines += [
        "",
        "The same rates as vLLM's synthetic acceptance, for serving benchmarks (add to `--speculative-config`): "
        f"`{json.dumps(curve.synthetic_config())}`. The card's metadata holds the curve as "
        "`eaglehub.acceptance_curve`.",
    ]
    return lines
