"""``eaglehub drafters --target T``: the drafters the Hub, the local cache and a pairing manifest know for T.

The target's lineage comes first: T itself, then, while the repo names a base with relation
``quantized`` (its card's ``base_model`` / the Hub's ``base_model:quantized:<id>`` tag), that base —
a quantized target serves the drafters of the model it quantizes. For every model of the lineage
the Hub's model search lists the repos tagged ``base_model:<id>``; those whose config (or card tags)
marks an EAGLE-3 drafter are the candidates, each with its layout, EAGLE version, size, k and the
acceptance it claims (:mod:`eaglehub.discovery.claims`). With ``HF_HUB_OFFLINE`` the same walk runs
over the local Hugging Face cache (cards and configs of the cached snapshots) and says so. Drafters a
pairing manifest registers for T (or a model of its lineage) are listed too.

The report: ``schemas/drafters-report.schema.json``.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from eaglehub import __version__
from eaglehub.constants import VERIFY_FILE
from eaglehub.discovery.claims import claim_from_card, claim_from_report, curve_from_card, curve_from_report
from eaglehub.discovery.tree import MAX_DEPTH, TAG_PREFIX, Base, bases_from_card, bases_from_tags, drafter_view
from eaglehub.errors import InputError
from eaglehub.io.jsonio import read_object
from eaglehub.io.schemas import check_output
from eaglehub.io.source import REPO_ID
from eaglehub.io.stformat import DTYPES
from eaglehub.target import hub_id

SCHEMA = "drafters-report"
REPORT_VERSION = 1
EXPAND = ["cardData", "tags", "config", "safetensors", "siblings", "sha", "lastModified"]
"""Model properties the search asks for: enough to tell a drafter and describe it without a download."""
SEARCH_LIMIT = 1000
"""Repos read per model of the lineage (the Hub pages its search; a target with more children is rare)."""


@dataclass
class DiscoverOptions:
    """What ``eaglehub drafters`` (and ``verify --target`` without a drafter) searches.

    ``target``: a Hub id, ``smollm2``, or a model directory whose ``README.md`` card names its Hub
    base; ``endpoint``: the Hub (``None``: huggingface_hub's configured one); ``limit``: at most this
    many drafters; ``names``: keep only drafters with these names or repo ids; ``manifest``: a pairing
    manifest (``None``: ./eaglehub.toml when present; ``""``: none).
    """

    target: str
    endpoint: str | None = None
    limit: int | None = None
    names: list[str] = field(default_factory=list)
    manifest: str | None = None
    profiles: tuple[str, ...] = ()
    """Engine profiles each pair is judged for (``--profile``); none: the default profile."""


def hub_offline() -> bool:
    """huggingface_hub's own offline switch (``HF_HUB_OFFLINE``, read when it was imported)."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def start_id(target: str) -> tuple[str | None, list[str]]:
    """The Hub id discovery starts from, and a note when it had to be derived: a Hub id is itself,
    ``smollm2`` is SmolLM2-135M-Instruct, a directory is the base its card names."""
    from eaglehub.io.source import looks_like_path, no_such_directory

    path = Path(target).expanduser()
    if not path.is_dir() and looks_like_path(target):  # a mistyped path is not searched for as a Hub id
        raise no_such_directory(target, "target ")
    known = hub_id(target)
    if known is not None:
        return known, [] if known == target else [f"{target} is {known} on the Hub"]
    if path.is_dir():
        card = _read_card(path / "README.md")
        bases = bases_from_card(card, read_object(path / "config.json"))
        if bases:
            return bases[0].repo_id, [f"{target}: its card names {bases[0].repo_id} ({bases[0].relation})"]
        return None, [f"{target} is a local directory whose card names no Hub base model: only the manifest is read"]
    raise InputError(
        f"target {target!r} is neither a Hub id, `smollm2`, nor a model directory",
        hint="pass ORG/NAME as on the Hub, e.g. --target meta-llama/Llama-3.1-8B-Instruct",
    )


def discover(opts: DiscoverOptions) -> dict:
    """The drafters report for ``opts.target`` (module doc).

    Raises:
        EaglehubError: the target is not a Hub id / alias / directory, the Hub cannot be reached or
            refuses the token (one line, exit 2), a manifest error.
    """
    from eaglehub.checks.validate import Options

    judged = Options(profiles=tuple(opts.profiles) or None)
    judged.engine_profiles()  # an unknown --profile is a usage error, before the Hub is read
    offline = hub_offline()
    root, notes = start_id(opts.target)
    lineage: list[dict] = []
    rows: list[dict] = []
    endpoint = None
    target_config = _local_config(opts.target)
    if root is not None:
        if offline:
            lineage, rows = _from_cache(root)
            target_config = target_config or (_cached_repos().get(root) or {}).get("config")
            notes.append("offline (HF_HUB_OFFLINE): only the local Hugging Face cache and the manifest were searched")
        else:
            from eaglehub.io.hub import default_endpoint

            endpoint = (opts.endpoint or default_endpoint()).rstrip("/")
            lineage, rows, more, root_config = _from_hub(root, endpoint)
            target_config = target_config or root_config
            notes += more
    rows += _from_manifest(opts, [opts.target, *(s["repo_id"] for s in lineage)], rows)
    profiles, arch = _judge_pairs(rows, target_config, judged)
    if opts.names:
        wanted = set(opts.names)
        rows = [r for r in rows if r["name"] in wanted or r["repo_id"] in wanted]
        missing = wanted - {r["name"] for r in rows} - {r["repo_id"] for r in rows}
        if missing:
            notes.append(f"no drafter named {', '.join(sorted(missing))} was found")
    if opts.limit is not None and len(rows) > opts.limit:
        notes.append(f"{len(rows)} drafters found, the first {opts.limit} kept (--limit)")
        rows = rows[: opts.limit]
    _unique_names(rows)
    report = {
        "report_version": REPORT_VERSION,
        "tool": {"name": "eaglehub", "version": __version__},
        "target": opts.target,
        "hub_id": root,
        "endpoint": endpoint,
        "offline": offline,
        "lineage": lineage,
        "searched_tags": [f"{TAG_PREFIX}{s['repo_id']}" for s in lineage],
        "num_drafters": len(rows),
        "drafters": rows,
        "notes": notes,
        "target_architecture": arch,
        "profiles": profiles,
    }
    check_output(report, SCHEMA, "drafters report")
    return report


# --- the Hub --------------------------------------------------------------------------------------


def _from_hub(root: str, endpoint: str) -> tuple[list[dict], list[dict], list[str], dict | None]:
    from huggingface_hub.errors import RepositoryNotFoundError

    from eaglehub.io.hub import get_token, hub_errors, make_api

    token = get_token()
    api = make_api(endpoint, token)
    notes: list[str] = []
    lineage = [{"repo_id": root, "relation": None, "of": None}]
    root_config = None
    # without a network, the same search runs over the local Hugging Face cache
    offline = f"HF_HUB_OFFLINE=1 eaglehub drafters --target {shlex.quote(root)}"
    with hub_errors(root, "main", endpoint, token, writing=False, offline=offline):
        current = root
        while len(lineage) <= MAX_DEPTH:
            try:
                info = api.model_info(current, expand=["cardData", "tags", "config"])
            except RepositoryNotFoundError:
                if current == root:  # a base missing further up only ends the walk
                    notes.append(f"{current} is not on the Hub at {endpoint} (or not visible with this token)")
                break
            if current == root and isinstance(info.config, dict):
                root_config = info.config
            base = _quantized_base(bases_from_tags(info.tags) or bases_from_card(_card_dict(info), info.config))
            if base is None or any(s["repo_id"] == base.repo_id for s in lineage):
                break
            lineage.append({"repo_id": base.repo_id, "relation": "quantized", "of": current})
            current = base.repo_id
        rows: list[dict] = []
        for step in lineage:
            found = api.list_models(filter=f"{TAG_PREFIX}{step['repo_id']}", expand=EXPAND, limit=SEARCH_LIMIT)
            for model in found:
                if any(r["repo_id"] == model.id for r in rows) or any(s["repo_id"] == model.id for s in lineage):
                    continue
                row = _hub_row(model, str(step["repo_id"]), endpoint)
                if row is not None:
                    rows.append(row)
    return lineage, rows, notes, root_config


def _quantized_base(bases: list[Base]) -> Base | None:
    return next((b for b in bases if b.relation == "quantized"), None)


def _card_dict(info) -> dict:
    card = getattr(info, "card_data", None)
    return card.to_dict() if card is not None and hasattr(card, "to_dict") else dict(card or {})


def _hub_row(model, base_id: str, endpoint: str) -> dict | None:
    view = drafter_view(model.config, model.tags)
    if view is None:
        return None
    relation = next((b.relation for b in bases_from_tags(model.tags) if b.repo_id == base_id), None)
    files = [s.rfilename for s in model.siblings or []]
    claim = curve = None
    if VERIFY_FILE in files:
        report = _download_json(model.id, VERIFY_FILE, model.sha, endpoint)
        claim, curve = claim_from_report(report, VERIFY_FILE), curve_from_report(report)
    if claim is None:
        claim = claim_from_card(_card_dict(model))
    parameters, size = _safetensors_size(model.safetensors)
    row = _row(
        model.id.split("/")[-1], model.id, None, "hub", base_id, relation, view, parameters, size, claim, model.sha
    )
    row["acceptance_curve"] = curve or curve_from_card(_card_dict(model))
    # the search's config is a digest of config.json; the engines read the whole file
    row["_config"] = _download_json(model.id, "config.json", model.sha, endpoint) if "config.json" in files else None
    return row


def _download_json(repo_id: str, filename: str, revision: str | None, endpoint: str) -> dict | None:
    from huggingface_hub import hf_hub_download

    try:
        path = hf_hub_download(repo_id, filename, revision=revision, endpoint=endpoint)
    except Exception:  # a claim that cannot be read is a drafter without a claim, never a failed listing
        return None
    return read_object(Path(path))


def _safetensors_size(info) -> tuple[int | None, int | None]:
    params = getattr(info, "parameters", None) if info is not None else None
    if not isinstance(params, dict) or not params:
        return None, None
    total = sum(int(n) for n in params.values())
    known = {str(d).upper(): int(n) for d, n in params.items() if str(d).upper() in DTYPES}
    size = sum(DTYPES[d].nbytes(n) or 0 for d, n in known.items()) if len(known) == len(params) else None
    return total, size


# --- the local cache (offline) --------------------------------------------------------------------


def _from_cache(root: str) -> tuple[list[dict], list[dict]]:
    cached = _cached_repos()
    lineage = [{"repo_id": root, "relation": None, "of": None}]
    current = root
    while len(lineage) <= MAX_DEPTH and current in cached:
        card, config, files = cached[current]["card"], cached[current]["config"], cached[current]["files"]
        base = _quantized_base(bases_from_card(card, config, files))
        if base is None or any(s["repo_id"] == base.repo_id for s in lineage):
            break
        lineage.append({"repo_id": base.repo_id, "relation": "quantized", "of": current})
        current = base.repo_id
    ids = [s["repo_id"] for s in lineage]
    rows = []
    for repo_id, entry in sorted(cached.items()):
        if repo_id in ids:
            continue
        bases = bases_from_card(entry["card"], entry["config"], entry["files"])
        base = next((b for b in bases if b.repo_id in ids), None)
        view = drafter_view(entry["config"], (entry["card"] or {}).get("tags") or [])
        if base is None or view is None:
            continue
        snapshot: Path = entry["path"]
        report = read_object(snapshot / VERIFY_FILE) if (snapshot / VERIFY_FILE).is_file() else None
        claim = claim_from_report(report, VERIFY_FILE) if report is not None else None
        size = sum(p.stat().st_size for p in snapshot.glob("*.safetensors")) or None
        rows.append(
            _row(
                repo_id.split("/")[-1],
                repo_id,
                str(snapshot),
                "cache",
                base.repo_id,
                base.relation,
                view,
                None,
                size,
                claim or claim_from_card(entry["card"]),
                snapshot.name,
            )
        )
        rows[-1]["acceptance_curve"] = curve_from_report(report) or curve_from_card(entry["card"])
        rows[-1]["_config"] = entry["config"]
    return lineage, rows


def _cached_repos() -> dict[str, dict]:
    """Every model repo of the local Hugging Face cache: its newest snapshot's card, config and files."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    try:
        info = scan_cache_dir()
    except CacheNotFound:
        return {}
    out = {}
    for repo in info.repos:
        if repo.repo_type != "model" or not repo.revisions:
            continue
        main = [r for r in repo.revisions if "main" in r.refs]
        rev = (main or sorted(repo.revisions, key=lambda r: r.last_modified))[-1]
        snapshot = Path(rev.snapshot_path)
        card = _read_card(snapshot / "README.md")
        out[repo.repo_id] = {
            "card": card,
            "config": read_object(snapshot / "config.json"),
            "files": [f.file_name for f in rev.files],
            "path": snapshot,
        }
    return out


# --- a pairing manifest ---------------------------------------------------------------------------


def _from_manifest(opts: DiscoverOptions, names: list[str], found: list[dict]) -> list[dict]:
    from eaglehub.verify.manifest import DEFAULT_MANIFEST, load_manifest

    path = opts.manifest
    if path is None:
        path = DEFAULT_MANIFEST if Path(DEFAULT_MANIFEST).is_file() else ""
    if not path:
        return []
    manifest = load_manifest(path)
    targets = [t for name in names for t in manifest.find_targets(name)]
    rows: list[dict] = []
    for pair in manifest.entries:
        if pair.target not in targets or any(r["path"] == str(pair.drafter) for r in found + rows):
            continue
        config = read_object(pair.drafter / "config.json")
        view = drafter_view(config)
        if view is None:
            continue
        claim = curve = None
        if (pair.drafter / VERIFY_FILE).is_file():
            report = read_object(pair.drafter / VERIFY_FILE)
            claim, curve = claim_from_report(report, VERIFY_FILE), curve_from_report(report)
        size = sum(p.stat().st_size for p in pair.drafter.glob("*.safetensors")) or None
        k = pair.settings.get("num_speculative_tokens")
        if isinstance(k, int):
            view = type(view)(view.format, view.eagle_version, view.architecture, k, view.evidence)
        rows.append(
            _row(pair.name, None, str(pair.drafter), "manifest", pair.target.name, None, view, None, size, claim, None)
        )
        rows[-1]["acceptance_curve"] = curve
        rows[-1]["_config"] = config
    return rows


# --- engine profiles ------------------------------------------------------------------------------


def _local_config(target: str) -> dict | None:
    path = Path(target).expanduser()
    return read_object(path / "config.json") if path.is_dir() else None


def _judge_pairs(rows: list[dict], target_config: dict | None, judged) -> tuple[list[dict], str | None]:
    """Per judged profile, whether its release captures aux states from the target's architecture (its engine
    table, :func:`eaglehub.checks.target.architecture_verdict`), and per drafter, whether that engine builds the
    drafter class from its ``config.json`` (the profile's reading, :func:`eaglehub.profiles.read`, without the
    weights: whether it loads them is not judged here). Drafters whose config was not read get ``None``."""
    from eaglehub.checks.target import architecture_verdict
    from eaglehub.checks.validate import profiles_section
    from eaglehub.profiles import READERS, ServedTarget, Stored

    archs = (target_config or {}).get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    text = (target_config or {}).get("text_config")
    mt = (text if isinstance(text, dict) else target_config or {}).get("model_type")
    served = ServedTarget(architecture=arch, model_type=mt if isinstance(mt, str) else None)
    profiles = []
    for entry, p in zip(profiles_section(judged), judged.engine_profiles()):
        ok, note = architecture_verdict(arch, p) if arch else (None, "the target's config.json was not read")
        profiles.append({**entry, "target_eagle3": ok, "target_note": note})
    for row in rows:
        config = row.pop("_config", None)
        verdicts = []
        for p in judged.engine_profiles():
            if not isinstance(config, dict):
                verdicts.append({"profile": p.id, "builds": None, "error": "config.json not read"})
                continue
            r = READERS[p.engine](Stored(config, {}), p, served)
            error = f"{r.failures[0].message} ({r.failures[0].cite})" if r.failures else None
            verdicts.append({"profile": p.id, "builds": not r.failures, "error": error})
        row["engines"] = verdicts
    return profiles, arch


# --- shared ---------------------------------------------------------------------------------------


def _row(name, repo_id, path, source, base, relation, view, parameters, size, claim, revision) -> dict:
    return {
        "name": name,
        "repo_id": repo_id,
        "revision": revision,
        "path": path,
        "source": source,
        "base_model": base,
        "relation": relation,
        "format": view.format,
        "format_evidence": view.evidence,
        "architecture": view.architecture,
        "eagle_version": view.eagle_version,
        "num_speculative_tokens": view.num_speculative_tokens
        if view.num_speculative_tokens is not None
        else (claim or {}).get("num_speculative_tokens"),
        "parameters": parameters,
        "size_bytes": size,
        "claim": claim,
        "acceptance_curve": None,  # set by the caller from the report or the card it read
    }


def _unique_names(rows: list[dict]) -> None:
    """Two drafters of one name (different owners): both are named ``owner--name``."""
    names = [r["name"] for r in rows]
    for r in rows:
        if names.count(r["name"]) > 1 and r["repo_id"]:
            r["name"] = r["repo_id"].replace("/", "--")


def _read_card(path: Path) -> dict:
    """A ``README.md``'s metadata as huggingface_hub reads it ({} when there is none or it does not parse)."""
    from huggingface_hub import ModelCard

    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return {}
    if not text.startswith("---"):  # ModelCard warns on a card without metadata
        return {}
    try:
        return ModelCard(text, ignore_metadata_errors=True).data.to_dict()
    except ValueError:
        return {}


def is_hub_id(spec: str) -> bool:
    """``spec`` reads as ``ORG/NAME`` and is not a local path."""
    return bool(REPO_ID.match(spec)) and not Path(spec).expanduser().exists()
