"""Generate ``eaglehub/checks/vllm_archs.py``: which target architectures the installed vLLM serves,
and which of them can feed an EAGLE-3 drafter (docs/failure-kinds.md F4, F22; docs/vllm.md §7, §8).

Run with the project's virtualenv, where vLLM is installed (validate itself never imports vLLM):

    .venv/bin/python scripts/gen_vllm_archs.py            # writes eaglehub/checks/vllm_archs.py
    .venv/bin/python scripts/gen_vllm_archs.py --check    # exit 1 if the committed table is stale

Sources, all in the installed vLLM package:

* ``vllm.model_executor.models.registry``: ``_TEXT_GENERATION_MODELS`` and ``_MULTIMODAL_MODELS``
  (``architectures[0]`` → module, class), plus ``_TRANSFORMERS_SUPPORTED_MODELS``: architectures
  vLLM registers for generation but serves through its Transformers backend, whose base class
  implements ``SupportsEagle3`` (``models/transformers/base.py``). Leaving them out would call a
  registered target such as ``SmolLM3ForCausalLM`` unknown.
* ``vllm.model_executor.models.interfaces.supports_eagle3``: since vLLM 0.22 this is the only gate
  (no allow-list, docs/vllm.md §8); a target without it fails at load with "Model does not support EAGLE3
  interface" (``v1/worker/gpu_model_runner.py``).
* ``vllm/transformers_utils/model_arch_config_convertor.py`` ``is_deepseek_mla``: the model types
  vLLM runs with MLA attention (read from the source with ``ast``, it is a literal tuple).

Some model modules need optional dependencies that may be missing; their classes are then decided by
reading the module source with ``ast``: the class (or what it is imported from / an alias of) lists
``SupportsEagle3`` among its bases, directly or through a base class, followed across modules.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import os
import sys
import textwrap
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "eaglehub" / "checks" / "vllm_archs.py"
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
    raise SystemExit("is_deepseek_mla has no literal tuple of model types: update scripts/gen_vllm_archs.py")


def collect() -> dict:
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


def _frozenset(name: str, items: list[str], doc: str) -> str:
    body = textwrap.fill(
        ", ".join(f'"{i}"' for i in items),
        width=100,
        initial_indent="    ",
        subsequent_indent="    ",
        break_long_words=False,
        break_on_hyphens=False,
    )
    return f"#: {doc}\n{name} = frozenset({{\n{body},\n}})\n"


def render(data: dict) -> str:
    header = f'''# Generated by scripts/gen_vllm_archs.py from vLLM {data["version"]}; do not edit by hand.
# Regenerate with `.venv/bin/python scripts/gen_vllm_archs.py` after changing the pinned vLLM.
# ALL_ARCHS: vllm.model_executor.models.registry _TEXT_GENERATION_MODELS, _MULTIMODAL_MODELS and
# _TRANSFORMERS_SUPPORTED_MODELS ({len(data["all"])} architectures). EAGLE3_ARCHS: those whose model class passes
# vllm.model_executor.models.interfaces.supports_eagle3 or list SupportsEagle3 among their bases in the source
# ({len(data["eagle3"])}; {len(data["by_ast"])} classes could not be imported here and were judged from source only;
# per-platform packages count when any platform's class implements it: {", ".join(data["disagree"]) or "none"}).
# MLA_MODEL_TYPES: model types vLLM runs with MLA attention
# (vllm/transformers_utils/model_arch_config_convertor.py is_deepseek_mla).
"""vLLM target-architecture table for ``validate --target`` (docs/failure-kinds.md F4, F22; docs/vllm.md §7, §8)."""

VLLM_VERSION = "{data["version"]}"

'''
    return header + "\n".join(
        [
            _frozenset(
                "EAGLE3_ARCHS",
                data["eagle3"],
                "architectures[0] values whose vLLM model class implements SupportsEagle3",
            ),
            _frozenset(
                "ALL_ARCHS",
                data["all"],
                "every architectures[0] value vLLM registers for text generation (multimodal included)",
            ),
            _frozenset(
                "MLA_MODEL_TYPES",
                data["mla"],
                "(text) model types vLLM serves with MLA attention when kv_lora_rank is set",
            ),
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed table instead of writing it")
    args = ap.parse_args()
    data = collect()
    if data["undecided"]:
        print(
            f"undecided (class definition not found, counted as no SupportsEagle3): {data['undecided']}",
            file=sys.stderr,
        )
    if data["disagree"]:
        print(f"import and source disagree (counted as SupportsEagle3): {data['disagree']}", file=sys.stderr)
    text = render(data)
    if args.check:
        # compare the tables, not the header: its counts of classes judged from source depend on
        # which optional dependencies this machine has
        committed: dict = {}
        if OUT.is_file():
            exec(compile(OUT.read_text(), str(OUT), "exec"), committed)
        fresh: dict = {}
        exec(compile(text, "generated", "exec"), fresh)
        names = ("VLLM_VERSION", "EAGLE3_ARCHS", "ALL_ARCHS", "MLA_MODEL_TYPES")
        same = all(committed.get(n) == fresh[n] for n in names)
        print(f"{OUT} is {'up to date' if same else 'stale'} for vLLM {data['version']}")
        raise SystemExit(0 if same else 1)
    OUT.write_text(text)
    print(
        f"wrote {OUT}: vLLM {data['version']}, {len(data['eagle3'])} of {len(data['all'])} architectures implement {INTERFACE}"
    )


if __name__ == "__main__":
    main()
