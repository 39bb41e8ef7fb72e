"""``eaglehub probe DRAFTER --target T``: which config reading were the weights trained for (docs/probe.md).

1. The target continues each prompt greedily (``max_tokens``), then one forward over prompt +
   continuation records its hidden states at every layer any aux reading needs
   (:func:`eaglehub.convert.gains.collect`).
2. Each reading (:mod:`eaglehub.probe.readings`) is measured by replaying those records through the
   reference engine's decode loop with the drafter loaded under that reading's config edits
   (:func:`eaglehub.engines.replay.replay_acceptance`): drafter passes only, greedy, k draft tokens.
3. Coordinate search: every field's readings are measured with the other fields at the current
   readings; a field whose best reading beats the current one by more than ``margin`` (relative AL)
   moves to it (and is above it with 95 % confidence over prompts), all such fields at once, and the search repeats from there (at most ``MAX_ROUNDS``).
   The readings of the last round are the ones reported.
4. A field whose configured reading is beaten: ``E-PROBE-READING`` naming the config field, both
   values and both ALs, with the command that writes the corrected checkpoint.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from eaglehub import __version__
from eaglehub.errors import EaglehubError
from eaglehub.findings import count_by_severity, finding
from eaglehub.io.schemas import check_output
from eaglehub.measure import acceptance
from eaglehub.probe.readings import (
    AUX,
    FIELD_KEYS,
    FIELDS,
    Reading,
    configured_values,
    field_readings,
    settings_of,
)

REPORT_SCHEMA = "eaglehub.probe-report/1"
DEFAULT_LIMIT = 4
"""Prompts per category: the project's 6 categories give 24 prompts; with 64 tokens each (about 1,300
target tokens) they separate the fixture's aux ids from the list one layer down (2 % of AL), which 12
prompts of 32 tokens do not."""
DEFAULT_MAX_TOKENS = 64
DEFAULT_MARGIN = 0.01
"""Relative AL by which a reading must beat the current one to be called the trained one, besides
being better with :data:`CONFIDENCE` over prompts. Small, because neighbouring readings are
close: the fixture's aux ids one layer down cost it 2 % of its AL, one layer up 8 %."""
CONFIDENCE = 0.95
"""One-sided confidence that the better reading's AL is above the current one's, over prompts
(:func:`eaglehub.measure.distribution.paired_difference_low`: paired delta method)."""
MAX_ROUNDS = 3
TRAINED, BEATEN, INCONCLUSIVE = "trained", "beaten", "inconclusive"
VERDICT_DEFINITION = (
    "per field: beaten when another reading's AL is above the configured one's by more than the margin and with "
    "95 % one-sided confidence over prompts (paired delta method on the same recorded continuations); trained "
    "when the chosen reading is above every other one, or within the margin of it, with that confidence; "
    "inconclusive when the sample can rule out neither (too few prompts or tokens), and then nothing is called "
    "trained. Overall: beaten if any field is, else inconclusive if any field is, else trained"
)


@dataclass
class ProbeOptions:
    """Inputs of a probe (``eaglehub probe --help`` gives units and defaults)."""

    target: str
    prompts_file: str | None = None
    limit: int | None = DEFAULT_LIMIT
    max_tokens: int = DEFAULT_MAX_TOKENS
    k: int = 3
    fields: tuple[str, ...] = FIELDS
    margin: float = DEFAULT_MARGIN
    device: str = "cpu"
    write: str | None = None
    """Write the drafter with the trained readings here (:func:`write_corrected`)."""
    overwrite: bool = False

    def check(self) -> None:
        """Raises: EaglehubError (exit 2) for values out of range or an unknown field."""
        unknown = [f for f in self.fields if f not in FIELDS]
        if unknown:
            raise EaglehubError(f"unknown probe field {unknown[0]!r}", hint="use --field " + " | ".join(FIELDS))
        if self.k < 1 or self.max_tokens < 2 or (self.limit is not None and self.limit < 1):
            raise EaglehubError("-k and --limit must be >= 1 and --max-tokens >= 2")
        if not 0 <= self.margin < 1:
            raise EaglehubError(f"--margin must be in [0, 1), got {self.margin}", hint="e.g. --margin 0.05")


class _Measurer:
    """AL of a drafter under a set of config edits, over the recorded target runs; each distinct set
    of edits is measured once."""

    def __init__(self, engine, live, path: Path, records: list[dict], layer_ids: list[int], k: int):
        self.engine, self.live, self.path, self.k = engine, live, path, k
        self.records, self.layer_ids = records, layer_ids
        self.cache: dict[str, dict] = {}
        self.count = 0

    def __call__(self, settings: dict[str, Any]) -> dict:
        key = json.dumps(settings, sort_keys=True)
        if key not in self.cache:
            self.cache[key] = self._measure(settings)
        return self.cache[key]

    def _measure(self, settings: dict[str, Any]) -> dict:
        from eaglehub.engines.reference import load_drafter
        from eaglehub.engines.replay import replay_acceptance

        drafter = load_drafter(self.path, self.live, "float32", settings=settings or None)
        per_prompt = [
            replay_acceptance(
                self.engine, self.live, self.path, [_select(rec, self.layer_ids, drafter.aux_ids)], self.k, drafter
            )
            for rec in self.records
        ]
        self.count += 1
        stats = acceptance.acceptance_stats(acceptance.total(per_prompt))
        return {
            "acceptance_length": stats["acceptance_length"],
            "acceptance_rate_per_position": stats["acceptance_rate_per_position"],
            "num_drafts": stats["num_drafts"],
            "_per_prompt": per_prompt,
        }


def _select(rec: dict, layer_ids: list[int], wanted: list[int]) -> dict:
    """A record whose ``aux`` holds the hidden states of ``wanted`` (sorted, as engines capture them)
    from a record of every id in ``layer_ids``."""
    import torch

    chunks = rec["hidden"].chunk(len(layer_ids), dim=-1)
    aux = torch.cat([chunks[layer_ids.index(i)] for i in sorted(wanted)], dim=-1)
    return {"ids": rec["ids"], "answer_start": rec["answer_start"], "aux": aux}


def _clearly_better(better: dict, current: dict, margin: float) -> bool:
    """``better``'s AL is above ``current``'s by more than ``margin`` (relative) and above it with
    :data:`CONFIDENCE` over prompts (both measured on the same recorded continuations)."""
    from eaglehub.measure.distribution import paired_difference_low

    low = paired_difference_low(better["_per_prompt"], current["_per_prompt"], CONFIDENCE)
    return _al(better) > _al(current) * (1 + margin) and low is not None and low > 0


def _public(m: dict) -> dict:
    """A measurement without its per-prompt counters (kept for the paired comparison only)."""
    return {k: v for k, v in m.items() if not k.startswith("_")}


def _al(m: dict) -> float:
    return m["acceptance_length"] or 1.0


def probe(drafter: str | Path, opts: ProbeOptions, progress=None) -> dict:
    """Probe ``drafter`` (a local directory) against ``opts.target`` and return the report
    (``probe-report.schema.json``). ``progress(text)`` is called before each stage.

    Raises:
        EaglehubError: bad options, an unusable target, drafter or prompt file, a drafter the reference
            engine cannot run (quantized other than FP8, inconsistent with its config).
    """
    from eaglehub.checks.validate import preflight
    from eaglehub.convert.gains import collect
    from eaglehub.engines.chat import encode_chat
    from eaglehub.engines.reference import ReferenceEngine
    from eaglehub.formats.registry import read_drafter
    from eaglehub.measure.prompts import default_prompts_path, describe_prompts, load_prompts
    from eaglehub.target import resolve_target

    opts.check()
    t0 = time.perf_counter()
    path = Path(drafter)
    d = read_drafter(path)
    if opts.write:
        from eaglehub.convert.write import destination

        destination(path, Path(opts.write), opts.overwrite)  # refused now, not after the measurements
    target_path = resolve_target(opts.target)
    # a drafter validate finds broken (a wrong dimension, missing weights) cannot be run to ask its weights
    engine = ReferenceEngine(device=opts.device)
    preflight(path, target_path, (engine.profile(),))  # as the engine that runs it reads it
    prompts = load_prompts(opts.prompts_file, None, opts.limit)
    say = progress or (lambda _text: None)
    say("loading the target")
    live = engine.target(target_path, "float32")
    fields = field_readings(d, live.num_layers, opts.fields)
    configured = configured_values(d, live.num_layers)
    layer_ids = sorted({i for r in fields.get(AUX, []) for i in r.value} | set(configured[AUX]))
    say(f"recording the target's greedy continuations of {len(prompts)} prompts")
    ids = encode_chat(target_path, [p.text for p in prompts])
    records = [
        {"ids": s["ids"], "answer_start": s["answer_start"], "hidden": s["aux"]}
        for s in collect(live, ids, layer_ids, opts.max_tokens)
    ]
    record_s = time.perf_counter() - t0
    measure = _Measurer(engine, live, path, records, layer_ids, opts.k)

    current = {name: next(r for r in rs if r.configured) for name, rs in fields.items()}
    rounds = 0
    tables: dict[str, list[tuple[Reading, dict]]] = {}
    converged = not fields
    while fields and rounds < MAX_ROUNDS:
        rounds += 1
        tables = {}
        moves: dict[str, Reading] = {}
        for name, readings in fields.items():
            say(f"round {rounds}: {name} ({len(readings)} readings)")
            rows = []
            for r in readings:
                combo = {**current, name: r}
                rows.append((r, measure(settings_of(combo))))
            tables[name] = rows
            best_r, best_m = max(rows, key=lambda rm: _al(rm[1]))
            now = next(m for r, m in rows if r == current[name])
            if best_r != current[name] and _clearly_better(best_m, now, opts.margin):
                moves[name] = best_r
        if not moves:
            converged = True
            break
        current.update(moves)

    base = _public(measure({}))
    trained = _public(measure(settings_of(current)))
    report_fields = [_field_report(name, rows, current[name], opts.margin) for name, rows in tables.items()]
    answer_tokens = int(sum(r["ids"].shape[0] - r["answer_start"] for r in records))
    sample = {"prompts": len(records), "answer_tokens": answer_tokens}
    findings = _findings(path, opts, report_fields, current) + _inconclusive(path, opts, report_fields, sample)
    settings = settings_of(current)
    report = {
        "schema": REPORT_SCHEMA,
        "drafter": str(path.resolve()),
        "format": d.format,
        "target": str(target_path),
        "tool": {"name": "eaglehub", "version": __version__},
        "engine": {"name": engine.name, "version": engine.version()},
        "num_speculative_tokens": opts.k,
        "prompts": {
            **describe_prompts(prompts),
            "file": str(Path(opts.prompts_file) if opts.prompts_file else default_prompts_path()),
            "limit_per_category": opts.limit,
            "max_tokens": opts.max_tokens,
            "answer_tokens": answer_tokens,
        },
        "margin": opts.margin,
        "configured": {name: configured[name] for name in fields} if fields else {},
        "trained": {name: current[name].value for name in fields},
        "fields": report_fields,
        "acceptance": {"configured": base, "trained": trained},
        "settings": settings,
        "rounds": rounds,
        "converged": converged,
        "readings_measured": measure.count,
        "verdict": _verdict(report_fields),
        # an inconclusive field is not a pass: nothing was shown to be the trained reading
        "passed": not any(f.severity == "error" for f in findings) and _verdict(report_fields) != INCONCLUSIVE,
        "findings": [f.as_dict() for f in findings],
        "counts": count_by_severity(findings),
        "definitions": {
            "acceptance_length": acceptance.AL_DEFINITION + "; greedy, replaying the target's recorded greedy "
            "continuation of each prompt through the reference engine's decode loop, the drafter read with the "
            "reading's config edits",
            "margin": "relative AL by which the best reading must beat the current one to be taken as trained",
            "reading": "one value of a field that changes the drafter's function without changing its tensors",
            "verdict": VERDICT_DEFINITION,
        },
        "seconds": {"recording": round(record_s, 1), "total": round(time.perf_counter() - t0, 1)},
    }
    if opts.write:
        report = write_corrected(report, opts.write, opts.overwrite)
        written = report["written"]
        if isinstance(written, dict):  # the source's findings stand, but their fix is done: say where it went
            dst = written["destination"]
            for f in cast(list, report["findings"]):
                if f["code"] == "E-PROBE-READING":
                    f["hint"] = f"written by this run: {dst} holds the trained reading (the source is unchanged)"
    check_output(report, "probe-report", "probe report")
    return report


def _rivals(
    rows: list[tuple[Reading, dict]], chosen: Reading, margin: float
) -> list[tuple[Reading, dict, float | None]]:
    """The readings the sample cannot rule out as better than ``chosen`` by more than ``margin`` (relative AL):
    ``(reading, measurement, bound)``, ``bound`` the upper end of the one-sided :data:`CONFIDENCE` interval of
    AL(reading) - AL(chosen) over prompts (paired delta method), ``None`` where the sample cannot bound it (fewer
    than two prompts). A reading that drafts exactly as ``chosen`` on every prompt computes the same drafts here
    and is no rival; best first."""
    from eaglehub.measure.distribution import paired_difference_low

    chosen_m = next(m for r, m in rows if r == chosen)
    out = []
    for r, m in rows:
        if r == chosen or m["_per_prompt"] == chosen_m["_per_prompt"]:
            continue
        low = paired_difference_low(chosen_m["_per_prompt"], m["_per_prompt"], CONFIDENCE)
        bound = None if low is None else -low
        if bound is None or bound > margin * _al(chosen_m):
            out.append((r, m, bound))
    return sorted(out, key=lambda rmb: -_al(rmb[1]))


def _field_report(name: str, rows: list[tuple[Reading, dict]], chosen: Reading, margin: float) -> dict:
    ranked = sorted(rows, key=lambda rm: -_al(rm[1]))
    configured = next(m for r, m in rows if r.configured)
    chosen_m = next(m for r, m in rows if r == chosen)
    runner_up = next((m for r, m in ranked if r != chosen), None)
    rivals = _rivals(rows, chosen, margin)
    verdict = BEATEN if not chosen.configured else INCONCLUSIVE if rivals else TRAINED
    rival = None
    if verdict == INCONCLUSIVE:
        r, m, bound = rivals[0]
        rival = {
            "value": r.value,
            "label": r.label,
            "acceptance_length": m["acceptance_length"],
            "difference_upper_bound": None if bound is None else round(bound, 4),
        }
    return {
        "verdict": verdict,
        "confidence_level": CONFIDENCE,
        "rival": rival,
        "field": name,
        "config_keys": FIELD_KEYS[name],
        "configured": next(r.value for r, _m in rows if r.configured),
        "trained": chosen.value,
        "configured_acceptance_length": configured["acceptance_length"],
        "trained_acceptance_length": chosen_m["acceptance_length"],
        "margin": None if runner_up is None else round(_al(chosen_m) / _al(runner_up) - 1, 4),
        "readings": [
            {
                "value": r.value,
                "label": r.label,
                "configured": r.configured,
                "trained": r == chosen,
                "settings": r.settings,
                **_public(m),
            }
            for r, m in ranked
        ],
    }


def _findings(path: Path, opts: ProbeOptions, fields: list[dict], current: dict[str, Reading]) -> list:
    from eaglehub.drafter.settings import setting_arg

    out = []
    wrong = [f for f in fields if f["trained"] != f["configured"]]
    sets = " ".join(f"--set {setting_arg(k, v)}" for k, v in settings_of(current).items())
    for f in wrong:
        cfg_al, tr_al = f["configured_acceptance_length"] or 1.0, f["trained_acceptance_length"] or 1.0
        out.append(
            finding(
                "E-PROBE-READING",
                FIELD_KEYS[f["field"]],
                f"{FIELD_KEYS[f['field']]}: the configured reading {_show(f['configured'])} gives AL {cfg_al:.3f}; "
                f"the weights were trained for {_show(f['trained'])} (AL {tr_al:.3f}, {tr_al / cfg_al - 1:+.0%})",
                hint=f"eaglehub probe {path} --target {opts.target} --write {_sibling(path)} "
                f"(or: eaglehub convert {path} {_sibling(path)} {sets})",
            )
        )
    return out


def _verdict(fields: list[dict]) -> str:
    verdicts = {f["verdict"] for f in fields}
    return BEATEN if BEATEN in verdicts else INCONCLUSIVE if INCONCLUSIVE in verdicts else TRAINED


def _inconclusive(path: Path, opts: ProbeOptions, fields: list[dict], sample: dict) -> list:
    """W-PROBE-INCONCLUSIVE for each field whose sample cannot tell its reading from a rival, with the sample
    size, the confidence and the command that measures more."""
    import shlex

    out = []
    size = f"{sample['prompts']} prompt{'s' * (sample['prompts'] != 1)} ({sample['answer_tokens']} target tokens)"
    for f in fields:
        if f["verdict"] != INCONCLUSIVE:
            continue
        rival, mine = f["rival"], f["trained_acceptance_length"] or 1.0
        theirs = rival["acceptance_length"] or 1.0
        bound = rival["difference_upper_bound"]
        why = (
            "one prompt gives no spread to bound the difference with"
            if bound is None
            else f"at {CONFIDENCE:.0%} confidence {_show(rival['value'])} may be up to {bound:.3f} AL better, more "
            f"than the {opts.margin:.0%} margin"
        )
        more = [
            "eaglehub",
            "probe",
            str(path),
            "--target",
            opts.target,
            *(["--prompts", opts.prompts_file] if opts.prompts_file else []),
            "--field",
            f["field"],
            "--limit",
            str(max(DEFAULT_LIMIT, 2 * (opts.limit or DEFAULT_LIMIT))),
            "--max-tokens",
            str(max(DEFAULT_MAX_TOKENS, opts.max_tokens)),
        ]
        out.append(
            finding(
                "W-PROBE-INCONCLUSIVE",
                FIELD_KEYS[f["field"]],
                f"{FIELD_KEYS[f['field']]}: inconclusive on {size}: the configured reading {_show(f['configured'])} "
                f"(AL {mine:.3f}) cannot be told from {_show(rival['value'])} ({rival['label']}, AL {theirs:.3f}, "
                f"{theirs / mine - 1:+.0%}): {why}; neither is called trained",
                hint=f"measure more prompts and tokens: {shlex.join(more)}",
            )
        )
    return out


def _sibling(path: Path) -> str:
    """Where a corrected copy of ``path`` would go by default: beside it, ``-probed`` added."""
    return str(path.with_name(path.name + "-probed"))


def _show(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


def write_corrected(report: dict, dst: str | Path, overwrite: bool = False) -> dict:
    """Write the drafter with every trained reading (``report["settings"]``) to ``dst``, atomically:
    the source's tensors copied as they are, the config edited, the edits recorded in ``eaglehub.json``
    (``conversion.config_set``). Returns ``report`` with ``written`` set; nothing is written when every
    configured reading is the trained one (``written`` says why).

    Raises: as :func:`eaglehub.convert.run.convert` (an existing ``dst`` without ``overwrite``, …).
    """
    from eaglehub.convert.run import convert

    if not report["settings"]:
        return {**report, "written": None}
    out = convert(report["drafter"], dst, overwrite=overwrite, settings=report["settings"])
    changes = [c for c in out["config_changes"] if c.get("why") == "--set"]
    return {**report, "written": {"destination": str(dst), "config_changes": changes}}


def write_report(report: dict, path: str | Path) -> None:
    """Validate, then write the probe ``report`` to ``path`` atomically (``schemas/probe-report.schema.json``)."""
    from eaglehub.io.schemas import write_output

    write_output(report, str(path), "probe-report", "probe report")
