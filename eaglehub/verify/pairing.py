"""``eaglehub verify --manifest``: verify every (target, drafter) pair of a pairing manifest.

Pairs (:mod:`eaglehub.verify.manifest`) with the same target and the same effective settings — k, dtype,
max_model_len and the vLLM pass-through options — form one group, and a group is one
:func:`eaglehub.verify.run.run_verify`: one target-alone baseline shared by all its drafters, exactly
as ``verify --drafter A --drafter B``. The group's report is then split into one report per pair
(the same report with ``drafters`` = that drafter and ``passed`` its verdict), written as
``<report dir>/<target name>--<drafter name>.json``, and a summary row per pair is collected
(``schemas/verify-summary.schema.json``; ``summary.json`` in the report directory).

Effective settings of a pair, lowest precedence first: :class:`~eaglehub.verify.run.VerifyOptions`
(``k``, ``dtype``, ``max_model_len``, ``engine_options``), the target's ``engine`` table, the
drafter's ``num_speculative_tokens`` and ``engine`` table, then ``overrides`` (the options given
explicitly on the command line).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from eaglehub import __version__
from eaglehub.errors import EaglehubError
from eaglehub.io.schemas import check_output, write_output
from eaglehub.verify.manifest import DEFAULT_MANIFEST, Manifest, Pair, load_manifest
from eaglehub.verify.options import VerifyOptions
from eaglehub.verify.report import write_report
from eaglehub.verify.run import run_verify

SUMMARY_SCHEMA = "verify-summary"
SUMMARY_VERSION = 1
SUMMARY_FILE = "summary.json"
PASS_THROUGH_KEYS = (
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "distributed_executor_backend",
    "max_num_seqs",
)
"""Settings passed to the engine untouched (:attr:`eaglehub.engines.base.RunSpec.engine_options`);
the other settings (``num_speculative_tokens``, ``dtype``, ``max_model_len``) are VerifyOptions fields."""


@dataclass(frozen=True)
class Selection:
    """The pairs to run (:func:`select`): from a manifest, or found for the target by discovery
    (``manifest`` ``None``; ``discovery``: the drafters report; ``claims``: each pair's claimed
    acceptance by its ``where``)."""

    manifest: Manifest | None
    pairs: list[Pair]
    discovery: dict | None = None
    claims: dict = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class Group:
    """Pairs that share one baseline: same target (name), same effective ``settings``."""

    target_name: str
    target_spec: str
    settings: dict
    pairs: list[Pair]


def select(
    manifest: str | None,
    target: str | None,
    drafters: Sequence[str],
    cwd: Path | None = None,
    hub_endpoint: str | None = None,
    drafter_limit: int | None = None,
    console=None,
) -> Selection | None:
    """What ``eaglehub verify`` runs: ``None`` for the plain mode (``--target`` + ``--drafter``
    directories or Hub ids, no manifest), else the manifest's pairs, else the drafters discovery
    finds for the target.

    The manifest is ``manifest`` when given, else ``eaglehub.toml`` in ``cwd`` (default: the current
    directory) when no ``drafters`` are given and it exists. With a manifest, ``target`` keeps the
    pairs of that target (by name or spec) and ``drafters`` those drafters (by name or directory);
    ``target`` alone means every drafter registered for it. Without a manifest, ``target`` alone (or a
    Hub id with ``drafters`` that are names, neither directories nor Hub ids) means the drafters the Hub's
    model tree lists for it (:mod:`eaglehub.verify.discovered`; ``hub_endpoint``, at most ``drafter_limit``).

    Raises:
        EaglehubError: (exit 2, one line) no drafter given anywhere and no target, ``--drafter``
            without ``--target`` and without a manifest, or a manifest error
            (:func:`~eaglehub.verify.manifest.load_manifest`, :meth:`~eaglehub.verify.manifest.Manifest.pairs`);
            (exit 1) discovery found no drafter.
    """
    if manifest is None and not drafters:
        default = (cwd or Path.cwd()) / DEFAULT_MANIFEST
        if not default.is_file() and target:
            return _discovered(target, [], drafter_limit, hub_endpoint, console)
        if not default.is_file():
            raise EaglehubError(
                "no drafter to verify: give --target T (its drafters are found on the Hub), --drafter DIR "
                "with --target, or --manifest FILE",
                hint=f"or put an {DEFAULT_MANIFEST} pairing manifest in the current directory "
                "(schemas/manifest.schema.json)",
            )
        manifest = str(default)
    if manifest is None and target and _on_the_hub(target) and all(_is_name(d) for d in drafters):
        return _discovered(target, list(drafters), drafter_limit, hub_endpoint, console)
    if manifest is None:
        if target is None:
            raise EaglehubError(
                "--drafter needs --target (the model the drafter was trained for)",
                hint="add --target DIR|ORG/NAME|smollm2, or pass --manifest FILE",
            )
        return None
    loaded = load_manifest(manifest)
    return Selection(loaded, loaded.pairs(target, list(drafters)))


def _is_name(drafter: str) -> bool:
    """A drafter given as a bare name: not a path that exists, not ORG/NAME, no path separator."""
    return not Path(drafter).expanduser().exists() and "/" not in drafter and "\\" not in drafter


def _on_the_hub(target: str) -> bool:
    from eaglehub.target import hub_id

    return hub_id(target) is not None and not Path(target).expanduser().exists()


def _discovered(target: str, names: list[str], limit: int | None, endpoint: str | None, console) -> Selection:
    from eaglehub.verify.discovered import discovered_pairs

    found = discovered_pairs(target, names, limit, endpoint, console)
    return Selection(None, found.pairs, found.report, found.claims)


def pair_settings(pair: Pair, opts: VerifyOptions, overrides: dict | None = None) -> dict:
    """The effective settings of ``pair`` (precedence in the module doc): ``num_speculative_tokens``,
    ``dtype``, ``max_model_len`` and ``engine_options`` (the set :data:`PASS_THROUGH_KEYS` only)."""
    merged = {
        "num_speculative_tokens": opts.k,
        "dtype": opts.dtype,
        "max_model_len": opts.max_model_len,
        **opts.engine_options,
        **pair.settings,
        **(overrides or {}),
    }
    engine_options = {k: merged[k] for k in PASS_THROUGH_KEYS if merged.get(k) is not None}
    return {
        "num_speculative_tokens": merged["num_speculative_tokens"],
        "dtype": merged["dtype"],
        "max_model_len": merged["max_model_len"],
        "engine_options": engine_options,
    }


def group_pairs(pairs: Sequence[Pair], opts: VerifyOptions, overrides: dict | None = None) -> list[Group]:
    """Pairs grouped by (target name, effective settings), groups and pairs in manifest order."""
    groups: dict[str, Group] = {}
    for p in pairs:
        settings = pair_settings(p, opts, overrides)
        key = json.dumps([p.target.name, settings], sort_keys=True)
        if key not in groups:
            groups[key] = Group(p.target.name, p.target.spec, settings, [])
        groups[key].pairs.append(p)
    return list(groups.values())


def group_options(group: Group, opts: VerifyOptions) -> VerifyOptions:
    """``opts`` for one group's :func:`~eaglehub.verify.run.run_verify`: its target, drafters and settings."""
    s = group.settings
    return dataclasses.replace(
        opts,
        target=group.target_spec,
        drafters=[str(p.drafter) for p in group.pairs],
        k=s["num_speculative_tokens"],
        dtype=s["dtype"],
        max_model_len=s["max_model_len"],
        engine_options=dict(s["engine_options"]),
    )


def split_report(report: dict) -> list[dict]:
    """One report per drafter of a verify report: the same report with ``drafters`` = [that drafter]
    and ``passed`` = that drafter's verdict (each still valid against verify-report). A
    ``cross_engine`` section keeps, per other engine, that drafter's comparison row and section
    (both lists are in drafter order)."""
    out = []
    for i, d in enumerate(report["drafters"]):
        single = {**report, "drafters": [d], "passed": d["passed"]}
        if report.get("cross_engine"):
            single["cross_engine"] = {
                **report["cross_engine"],
                "engines": [
                    {**e, "comparison": e["comparison"][i : i + 1], "drafters": e["drafters"][i : i + 1]}
                    for e in report["cross_engine"]["engines"]
                ],
            }
        out.append(single)
    return out


def _row(pair: Pair, group_index: int, settings: dict) -> dict:
    return {
        "target": pair.target.name,
        "target_spec": pair.target.spec,
        "drafter": pair.name,
        "drafter_path": str(pair.drafter),
        "group": group_index,
        "settings": settings,
    }


def pair_row(pair: Pair, group_index: int, settings: dict, report: dict, report_path: Path | None) -> dict:
    """The summary row of a pair that ran, from its own (split) report."""
    d = report["drafters"][0]
    overall = d["acceptance"]["overall"]
    return {
        **_row(pair, group_index, settings),
        "lossless": d["lossless"],
        "num_prompts": d["num_prompts"],
        "num_prompts_matched": d["num_prompts_matched"],
        "acceptance_length": overall["acceptance_length"],
        "acceptance_rate_per_position": overall["acceptance_rate_per_position"],
        "findings": [f["code"] for f in d["findings"]],
        "passed": d["passed"],
        "report": None if report_path is None else str(report_path),
        "error": None,
    }


def error_row(pair: Pair, group_index: int, settings: dict, error: EaglehubError) -> dict:
    """The summary row of a pair whose group did not run (``error``: the group's one-line error)."""
    return {
        **_row(pair, group_index, settings),
        "lossless": None,
        "num_prompts": None,
        "num_prompts_matched": None,
        "acceptance_length": None,
        "acceptance_rate_per_position": [],
        "findings": [],
        "passed": False,
        "report": None,
        "error": error.message,
    }


def run_pairs(
    selection: Selection,
    opts: VerifyOptions,
    overrides: dict | None = None,
    engine=None,
    console=None,
    report_dir: str | Path | None = None,
    engines: list | None = None,
) -> dict:
    """Verify every pair of ``selection``, one :func:`~eaglehub.verify.run.run_verify` per :class:`Group`.

    ``opts`` carries what all pairs share (prompts, max_tokens, seed, reference report, tolerance)
    and the default settings; ``overrides``: settings that beat the manifest (keys
    ``num_speculative_tokens``, ``dtype``, ``max_model_len`` and :data:`PASS_THROUGH_KEYS`).
    ``engine`` / ``engines``: passed to every group's run_verify (default: its own choice, from
    ``opts.engines``).
    With ``report_dir``, each pair's report is written as soon as its group ran
    (``<target>--<drafter>.json``, atomic, schema-checked) and the summary last (``summary.json``).

    A group whose run fails with exit code 1 (a drafter refused by the pre-run validation, an engine
    failure) fails all its pairs with that error and the other groups still run; a usage error
    (exit 2: bad target, prompts or options, a missing engine) stops everything.

    Returns:
        The summary (``schemas/verify-summary.schema.json``).

    Raises:
        EaglehubError: a usage error (exit 2) or a report that cannot be written.
    """
    engine_kwargs = {"engines": list(engines)} if engines else {"engine": engine} if engine is not None else {}
    engine_info = None  # the primary engine, as the first report that ran names it
    out_dir = None if report_dir is None else Path(report_dir)
    groups = group_pairs(selection.pairs, opts, overrides)
    by_place: dict[str, dict] = {}  # summary rows by the pair's place in the manifest (drafters[i])
    for gi, g in enumerate(groups):
        if console is not None:
            console.print(
                f"[bold]group {gi + 1}/{len(groups)}[/]: target {g.target_name}, {settings_text(g.settings)}: "
                f"{', '.join(p.name for p in g.pairs)}",
                highlight=False,
            )
        try:
            report = run_verify(group_options(g, opts), console=console, **engine_kwargs)
        except EaglehubError as exc:
            if exc.exit_code != 1:
                raise
            if console is not None:  # the message may carry the engine log's tail: shown once, in full
                from rich.markup import escape

                console.print(f"[bold red]error:[/] {escape(exc.message)}", highlight=False, soft_wrap=True)
            by_place.update((p.where, error_row(p, gi, g.settings, exc)) for p in g.pairs)
            continue
        engine_info = engine_info or report["engine"]
        for p, single in zip(g.pairs, split_report(report)):
            if p.where in selection.claims:
                from eaglehub.verify.claims import check_claim

                check_claim(single, selection.claims[p.where], opts.al_tolerance, p.name, g.target_spec, str(p.drafter))
            path = None if out_dir is None else out_dir / f"{p.label}.json"
            if path is not None:
                write_report(single, path)
            by_place[p.where] = pair_row(p, gi, g.settings, single, path)
    rows = [by_place[p.where] for p in selection.pairs]
    summary = {
        "summary_version": SUMMARY_VERSION,
        "tool": {"name": "eaglehub", "version": __version__},
        "manifest": None if selection.manifest is None else str(selection.manifest.path.resolve()),
        "discovery": selection.discovery,
        "engine": engine_info,
        "report_dir": None if out_dir is None else str(out_dir),
        "num_pairs": len(rows),
        "num_passed": sum(r["passed"] for r in rows),
        "pairs": rows,
        "passed": all(r["passed"] for r in rows),
    }
    validate_summary(summary)
    if out_dir is not None:
        write_summary(summary, out_dir / SUMMARY_FILE)
    return summary


def settings_text(s: dict) -> str:
    parts = [f"k={s['num_speculative_tokens']}", f"dtype={s['dtype']}", f"max_model_len={s['max_model_len']}"]
    return " ".join(parts + [f"{k}={v}" for k, v in s["engine_options"].items()])


def validate_summary(summary: dict) -> None:
    """Check ``summary`` against ``schemas/verify-summary.schema.json``.

    Raises:
        EaglehubError: it breaks the schema (a bug in eaglehub; exit code 1).
    """
    check_output(summary, SUMMARY_SCHEMA, "verify summary")


def write_summary(summary: dict, path: Path) -> None:
    """Validate, then write ``summary`` as JSON to ``path`` atomically.

    Raises:
        EaglehubError: schema violation (:func:`validate_summary`) or the file cannot be written.
    """
    write_output(summary, path, SUMMARY_SCHEMA, "verify summary")


def exit_code(summary: dict) -> int:
    """1 when any pair failed (an error finding, or its group did not run), else 0."""
    return 0 if summary["passed"] else 1
