"""Pairing manifests: which drafters belong to which target, and the vLLM settings of each pair.

A manifest is a TOML (``.toml``, stdlib ``tomllib``) or YAML (``.yaml``/``.yml``, PyYAML's safe
loader) file, checked against ``schemas/manifest.schema.json`` (the shape, every key and its
meaning are documented there)::

    [targets.smollm2]
    spec = "smollm2"                      # a directory, a cached Hub id, or `smollm2`

    [targets.llama8b]
    spec = "meta-llama/Llama-3.1-8B-Instruct"
    engine = { tensor_parallel_size = 2, distributed_executor_backend = "mp" }

    [[drafters]]
    path = "../smollm2-eagle3"            # relative to this file's directory
    target = "smollm2"
    name = "eagle3"                       # default: the directory name
    num_speculative_tokens = 3            # default: verify's -k
    engine = { max_model_len = 4096 }     # per-pair override of the target's engine settings

Every problem is one :class:`~eaglehub.errors.EaglehubError` line (exit 2) that names the file and
the place: a JSON path into the document (``drafters[1].target``) or, for a syntax error, the line
and column. Paths that must exist (drafter directories, target directories) are checked by
:meth:`Manifest.pairs` for the pairs it returns, so a manifest listing drafters not built yet still
serves the ones that are.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from eaglehub.errors import EaglehubError
from eaglehub.io.schemas import schema_errors

SCHEMA = "manifest"
DEFAULT_MANIFEST = "eaglehub.toml"
"""Read from the current directory by ``eaglehub verify`` when no ``--drafter`` is given."""
MAX_BYTES = 1 << 20  # a manifest is a short hand-written file; anything bigger is not one
ENGINE_KEYS = (
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "distributed_executor_backend",
    "max_num_seqs",
    "max_model_len",
    "dtype",
)
"""Keys of a manifest ``engine`` table (``schemas/manifest.schema.json#/$defs/engine``)."""
HINT = 'see schemas/manifest.schema.json and docs/verify.md ("Manifests")'
STAGE_KEYS = ("convert", "quantize", "verify", "publish")
"""Per-drafter sections only ``eaglehub pipeline`` reads (``schemas/manifest.schema.json#/$defs/*_stage``)."""


@dataclass(frozen=True)
class Target:
    """A manifest target: ``name`` (its key), ``spec`` as :func:`eaglehub.target.resolve_target`
    takes it (a directory spec made absolute against the manifest's directory, see :func:`_target_spec`),
    ``spec_written`` (the spec as written), ``engine`` (its engine settings, :data:`ENGINE_KEYS`),
    ``is_path`` (``spec`` is a directory, not a Hub id or alias)."""

    name: str
    spec: str
    spec_written: str
    engine: dict = field(default_factory=dict)
    is_path: bool = False


@dataclass(frozen=True)
class Pair:
    """One (target, drafter) entry of a manifest.

    ``drafter``: absolute drafter directory; ``name``: the drafter's name (unique per target);
    ``settings``: what this pair sets itself, the target's ``engine`` updated by the drafter's
    ``engine`` plus ``num_speculative_tokens`` when given (keys: :data:`ENGINE_KEYS` and
    ``num_speculative_tokens``); ``where``: its JSON path in the manifest (``drafters[i]``).
    """

    target: Target
    drafter: Path
    name: str
    settings: dict
    where: str
    stages: dict = field(default_factory=dict)
    """``eaglehub pipeline``'s per-drafter sections as written (``convert``, ``quantize``, ``verify``,
    ``publish``; :data:`STAGE_KEYS`); verify ignores them."""

    @property
    def label(self) -> str:
        """``<target name>--<drafter name>``: unique within a manifest, the report's file stem."""
        return f"{self.target.name}--{self.name}"


@dataclass(frozen=True)
class Manifest:
    """A loaded, schema-checked manifest (:func:`load_manifest`)."""

    path: Path
    targets: dict[str, Target]
    entries: tuple[Pair, ...]

    def _error(self, where: str, what: str, hint: str = HINT) -> EaglehubError:
        return EaglehubError(f"manifest {self.path}: {where}: {what}", hint=hint)

    def find_targets(self, target: str) -> list[Target]:
        """The targets ``target`` names: by name, by spec as written, or (a directory) by resolved path."""
        found = [t for t in self.targets.values() if target in (t.name, t.spec_written, t.spec)]
        if not found:
            path = Path(target).expanduser()
            if path.is_dir():
                found = [t for t in self.targets.values() if t.is_path and Path(t.spec) == path.resolve()]
        return found

    def pairs(self, target: str | None = None, drafters: list[str] | tuple[str, ...] = ()) -> list[Pair]:
        """The pairs to run, in manifest order: all, or those of ``target`` (see :meth:`find_targets`),
        narrowed to ``drafters`` (each a drafter name or a drafter directory) when given.

        Raises:
            EaglehubError: (exit 2) ``target`` or a ``drafters`` entry matches nothing, nothing is
                left, or a selected pair's drafter or target directory does not exist.
        """
        selected = list(self.entries)
        if target is not None:
            targets = self.find_targets(target)
            if not targets:
                raise self._error(
                    "targets",
                    f"no target named {target!r} or with that spec (targets: {', '.join(self.targets)})",
                    "pass one of the manifest's target names",
                )
            selected = [p for p in selected if p.target in targets]
            if not selected:
                raise self._error(
                    "drafters",
                    f"no drafter is registered for target {target!r}",
                    "add a [[drafters]] entry with this target, or pass --drafter",
                )
        if drafters:
            by_request = []
            for d in drafters:
                path = Path(d).expanduser()
                hits = [p for p in selected if p.name == d or (path.is_dir() and p.drafter == path.resolve())]
                if not hits:
                    names = ", ".join(dict.fromkeys(p.name for p in selected))
                    raise self._error(
                        "drafters",
                        f"no drafter named {d!r} or at that path"
                        f"{'' if target is None else f' for target {target!r}'} (drafters: {names})",
                        "pass a drafter name from the manifest or its directory",
                    )
                by_request += [p for p in hits if p not in by_request]
            selected = [p for p in selected if p in by_request]
        for p in selected:
            if p.target.is_path and not (Path(p.target.spec) / "config.json").is_file():
                raise self._error(
                    f"targets.{p.target.name}.spec",
                    f"{p.target.spec} is not a model directory with config.json",
                    "fix the path (relative to the manifest's directory)",
                )
            if not (p.drafter / "config.json").is_file():
                raise self._error(
                    f"{p.where}.path",
                    f"{p.drafter} is not a drafter directory with config.json",
                    "fix the path (relative to the manifest's directory) or build the drafter first",
                )
        return selected


def _read_document(path: Path) -> object:
    """The parsed TOML or YAML document of ``path`` (by suffix)."""
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".yaml", ".yml"):
        raise EaglehubError(
            f"manifest {path}: unknown format {suffix or '(no suffix)'!r}",
            hint="name it *.toml or *.yaml / *.yml",
        )
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise EaglehubError(f"manifest {path}: {size} bytes, more than a manifest can be ({MAX_BYTES})", hint=HINT)
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise EaglehubError(
            f"manifest {path}: cannot read it ({exc.strerror or exc})", hint="pass an existing manifest file"
        ) from exc
    except UnicodeDecodeError as exc:
        raise EaglehubError(f"manifest {path}: not UTF-8 text (byte {exc.start})", hint=HINT) from exc
    try:
        return _parse_toml(text) if suffix == ".toml" else _parse_yaml(text)
    except RecursionError as exc:
        raise EaglehubError(f"manifest {path}: nested too deeply", hint=HINT) from exc
    except ValueError as exc:  # both parsers' errors, normalised below
        raise EaglehubError(f"manifest {path}: {exc}", hint=HINT) from exc


def _parse_toml(text: str) -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: tomllib is the stdlib copy of tomli
        try:
            import tomli as tomllib
        except ModuleNotFoundError as exc:
            raise ValueError(
                "reading TOML needs Python 3.11+ or `pip install tomli`; or write the manifest as YAML"
            ) from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # message ends "(at line L, column C)"
        raise ValueError(f"not valid TOML: {' '.join(str(exc).split())}") from exc


def _parse_yaml(text: str) -> object:
    import yaml

    class Loader(yaml.SafeLoader):
        """Safe loader that refuses what a hand-written manifest never needs and that would otherwise
        pass silently: a repeated key (PyYAML keeps the last one), a non-string key, an alias."""

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                raise yaml.MarkedYAMLError(
                    problem="aliases (*name) are not allowed in a manifest",
                    problem_mark=self.peek_event().start_mark,
                )
            return super().compose_node(parent, index)

        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if not isinstance(key, str):
                    raise yaml.MarkedYAMLError(problem=f"key {key!r} is not a string", problem_mark=key_node.start_mark)
                if key in seen:
                    raise yaml.MarkedYAMLError(problem=f"duplicate key {key!r}", problem_mark=key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    try:
        return yaml.load(text, Loader=Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        where = f" (at line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise ValueError(f"not valid YAML: {problem}{where}") from exc


def _target_spec(spec: str, base: Path) -> tuple[str, bool]:
    """``(spec for resolve_target, is a directory spec)``: a spec that starts with ``.``, ``/`` or
    ``~``, or that names a directory under ``base``, is a directory relative to ``base``; anything
    else (``ORG/NAME``, ``smollm2``) is passed on as written."""
    path = Path(spec).expanduser()
    if spec.startswith((".", "/", "~")) or (base / path).is_dir():
        return str((base / path).resolve()), True
    return spec, False


def load_manifest(path: str | Path) -> Manifest:
    """Read, schema-check and resolve a manifest (format by suffix: ``.toml``, ``.yaml``, ``.yml``).

    Drafter paths and directory target specs are made absolute against the manifest file's
    directory. Shapes and meanings: ``schemas/manifest.schema.json``.

    Raises:
        EaglehubError: (exit 2, one line naming the file and the JSON path or line) unreadable file,
            unknown suffix, bad TOML/YAML, a schema violation, a drafter naming an unknown target, two
            drafters of one target with the same name, or a default name (the directory name) that
            is not a valid name.
    """
    path = Path(path).expanduser()
    doc = _read_document(path)
    if doc is None:
        raise EaglehubError(f"manifest {path}: the file is empty", hint=HINT)
    errors = schema_errors(doc, SCHEMA)
    if errors:
        where, message = errors[0]
        message = " ".join(message.split())  # one line: jsonschema quotes whole sub-objects
        raise EaglehubError(
            f"manifest {path}: {where}: {message[:200] + ' …' if len(message) > 200 else message}", hint=HINT
        )
    assert isinstance(doc, dict)  # the schema's root is an object
    base = path.resolve().parent
    targets = {}
    for name, t in doc["targets"].items():
        spec, is_path = _target_spec(t["spec"], base)
        targets[name] = Target(name, spec, t["spec"], dict(t.get("engine", {})), is_path)
    manifest = Manifest(path, targets, ())
    name_pattern = _drafter_name_pattern()
    entries: list[Pair] = []
    first_use: dict[tuple[str, str], str] = {}
    for i, d in enumerate(doc["drafters"]):
        where = f"drafters[{i}]"
        if d["target"] not in targets:
            raise manifest._error(
                f"{where}.target",
                f"unknown target {d['target']!r} (targets: {', '.join(targets)})",
                "add it under [targets] or fix the name",
            )
        drafter = (base / Path(d["path"]).expanduser()).resolve()
        name = d.get("name", drafter.name)
        if "name" not in d and not name_pattern.fullmatch(name):
            raise manifest._error(
                f"{where}.path",
                f"the directory name {name!r} cannot name a report file",
                "give the drafter a `name` (letters, digits, _ . -)",
            )
        key = (d["target"], name)
        if key in first_use:
            raise manifest._error(
                f"{where}.name" if "name" in d else f"{where}.path",
                f"drafter name {name!r} is already used for target {d['target']!r} by {first_use[key]}",
                "give each drafter of a target its own `name`",
            )
        first_use[key] = where
        settings = {**targets[d["target"]].engine, **d.get("engine", {})}
        if "num_speculative_tokens" in d:
            settings["num_speculative_tokens"] = d["num_speculative_tokens"]
        entries.append(
            Pair(
                targets[d["target"]],
                drafter,
                name,
                settings,
                where,
                {key: d[key] for key in STAGE_KEYS if key in d},
            )
        )
    return Manifest(path, targets, tuple(entries))


def _drafter_name_pattern():
    import re

    from eaglehub.io.schemas import load_schema

    return re.compile(load_schema(SCHEMA)["$defs"]["drafter_name"]["pattern"])
