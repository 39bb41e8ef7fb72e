"""Engine tables: what each engine release knows about speculative decoding, generated from that release's own
code by ``scripts/engine_tables.py`` and shipped as ``eaglehub/data/engines/<engine>-<version>.json``
(schema ``engine-table``; docs/engine-code.md).

    >>> t = engine_table("vllm", "0.33.0")
    >>> "LlamaForCausalLM" in t.eagle3_targets
    True

A table is read once per process (cached), checked against its schema, and never needs torch.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from eaglehub.errors import EaglehubError
from eaglehub.io.resources import data_path

SCHEMA_NAME = "engine-table"


@dataclass(frozen=True)
class DrafterClass:
    """Where a drafter architecture resolves: ``module``.``cls``; ``eagle3`` for EAGLE-3 drafters."""

    architecture: str
    module: str
    cls: str
    eagle3: bool


@dataclass(frozen=True)
class ConfigField:
    """One field of the release's speculative configuration (vLLM ``SpeculativeConfig``, SGLang ``spec``
    server arguments). ``default`` is meaningful when ``has_default``; ``default_factory`` names a factory."""

    name: str
    type: str
    has_default: bool
    default: Any
    default_factory: str | None
    required: bool


@dataclass(frozen=True)
class EngineTable:
    """One engine release's table (see the schema ``engine-table.schema.json`` for each field)."""

    engine: str
    version: str
    #: the artifact read: ``{"kind": "wheel", "file", "sha256"}`` or
    #: ``{"kind": "installed", "distribution", "version", "record_sha256"}``
    source: MappingProxyType
    architectures: frozenset[str]
    eagle3_targets: frozenset[str]
    mla_model_types: frozenset[str] | None
    drafter_architectures: MappingProxyType  # str -> DrafterClass
    speculative_methods: tuple[str, ...]
    rejection_sample_methods: tuple[str, ...]
    speculative_config_fields: tuple[ConfigField, ...]
    metrics: tuple[str, ...]
    #: vLLM's ``EngineArgs`` fields (``LLM(...)`` keywords, ``vllm serve`` flags); ``None`` for SGLang
    engine_args: frozenset[str] | None = None

    @property
    def key(self) -> str:
        return f"{self.engine}-{self.version}"

    def supports_eagle3(self, architecture: str) -> bool:
        return architecture in self.eagle3_targets

    def knows(self, architecture: str) -> bool:
        return architecture in self.architectures

    def drafter(self, architecture: str) -> DrafterClass | None:
        return self.drafter_architectures.get(architecture)

    def config_field(self, name: str) -> ConfigField | None:
        return next((f for f in self.speculative_config_fields if f.name == name), None)


def _tables_dir():
    return data_path("engines")


def available_tables() -> tuple[tuple[str, str], ...]:
    """``(engine, version)`` of every shipped table, sorted by engine then numeric version."""
    out = []
    for path in _tables_dir().glob("*.json"):
        engine, _, version = path.stem.partition("-")
        if engine and version:
            out.append((engine, version))

    def order(item: tuple[str, str]):
        parts = [int(p) if p.isdigit() else -1 for p in item[1].split(".")]
        return item[0], parts

    return tuple(sorted(out, key=order))


def _build(raw: dict) -> EngineTable:
    drafters = {
        arch: DrafterClass(arch, d["module"], d["class"], d["eagle3"])
        for arch, d in raw["drafter_architectures"].items()
    }
    fields = tuple(
        ConfigField(
            name=f["name"],
            type=f["type"],
            has_default="default" in f,
            default=f.get("default"),
            default_factory=f.get("default_factory"),
            required=bool(f.get("required", False)),
        )
        for f in raw["speculative_config_fields"]
    )
    mla = raw["mla_model_types"]
    return EngineTable(
        engine=raw["engine"],
        version=raw["version"],
        source=MappingProxyType(dict(raw["source"])),
        architectures=frozenset(raw["architectures"]),
        eagle3_targets=frozenset(raw["eagle3_targets"]),
        mla_model_types=None if mla is None else frozenset(mla),
        drafter_architectures=MappingProxyType(drafters),
        speculative_methods=tuple(raw["speculative_methods"]),
        rejection_sample_methods=tuple(raw["rejection_sample_methods"]),
        speculative_config_fields=fields,
        metrics=tuple(m["name"] for m in raw["metrics"]),
        engine_args=frozenset(raw["engine_args"]) if "engine_args" in raw else None,
    )


def engine_table(engine: str, version: str) -> EngineTable:
    """The shipped table of ``engine`` (``vllm`` / ``sglang``) release ``version`` (``"0.33.0"``; ``"0.33"``
    means ``0.33.0``), validated against its schema; read once per process.

    Raises:
        EaglehubError: no table for that release (the hint lists the shipped ones), or a table that breaks
            its schema or names another release than its file (a damaged installation, exit 1).
    """
    version = version.strip()
    if version.count(".") == 1:
        version += ".0"
    return _load(engine.strip().lower(), version)


@functools.cache
def _load(engine: str, version: str) -> EngineTable:
    from eaglehub.io.schemas import schema_errors

    path = _tables_dir() / f"{engine}-{version}.json"
    if not path.is_file():
        have = ", ".join(f"{e} {v}" for e, v in available_tables()) or "none"
        raise EaglehubError(f"no engine table for {engine} {version}", hint=f"tables shipped: {have}")
    raw = json.loads(path.read_text())
    errors = schema_errors(raw, SCHEMA_NAME)
    if errors:
        where, message = errors[0]
        raise EaglehubError(
            f"engine table {path.name} breaks its schema at {where}: {' '.join(message.split())[:200]}",
            hint="reinstall eaglehub, or regenerate the table with scripts/engine_tables.py",
            exit_code=1,
        )
    if (raw["engine"], raw["version"]) != (engine, version):
        raise EaglehubError(
            f"engine table {path.name} is for {raw['engine']} {raw['version']}",
            hint="regenerate it with scripts/engine_tables.py",
            exit_code=1,
        )
    return _build(raw)


@dataclass(frozen=True)
class TableChoice:
    """The table that stands for one release: ``table`` is that release's own when shipped, else the nearest
    shipped release at or below it (the oldest shipped one when none is), and ``note`` says so (``None`` when
    the table is the release's own)."""

    table: EngineTable
    wanted: str
    note: str | None

    @property
    def title(self) -> str:
        """``vLLM 0.33.0`` / ``SGLang 0.5.23``: the release whose code the table was generated from."""
        return f"{'SGLang' if self.table.engine == 'sglang' else 'vLLM'} {self.table.version}"


def _release(version: str) -> tuple[int, ...]:
    """``"0.33"`` → ``(0, 33, 0)``: numeric parts, three of them, so 0.33 and 0.33.0 compare equal."""
    parts = [int(p) for p in re.findall(r"[0-9]+", version)[:3]]
    return tuple(parts + [0] * (3 - len(parts)))


def table_for(engine: str, version: str) -> TableChoice:
    """The table that judges ``engine`` release ``version``: its own, else the nearest shipped release at or
    below it (what that release's code is likeliest to still hold), else the oldest shipped one; the note
    names the stand-in so no finding passes one release's table off as another's.

    Raises:
        EaglehubError: no table is shipped for ``engine`` (exit 2).
    """
    engine = engine.strip().lower()
    shipped = [v for e, v in available_tables() if e == engine]
    if not shipped:
        raise EaglehubError(f"no engine table for {engine}", hint="engines with tables: vllm, sglang")
    wanted = _release(version)
    at_or_below = [v for v in shipped if _release(v) <= wanted]
    chosen = max(at_or_below, key=_release) if at_or_below else min(shipped, key=_release)
    name = "SGLang" if engine == "sglang" else "vLLM"
    note = None
    if _release(chosen) != wanted:
        shown = ".".join(str(p) for p in wanted)
        note = (
            f"eaglehub's table for {name} {shown} is {name} {chosen}'s, the nearest release at or below it"
            if at_or_below
            else f"eaglehub has no table for {name} {shown} or older; {name} {chosen}'s, the oldest shipped, stands in"
        )
    return TableChoice(engine_table(engine, chosen), ".".join(str(p) for p in wanted), note)


def profile_table(profile) -> TableChoice:
    """:func:`table_for` the release of an engine profile (:class:`eaglehub.profiles.Profile`)."""
    return table_for(profile.engine, profile.version)


__all__ = [
    "ConfigField",
    "DrafterClass",
    "EngineTable",
    "TableChoice",
    "available_tables",
    "engine_table",
    "profile_table",
    "table_for",
]
