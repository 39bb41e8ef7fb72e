"""The package's shape: few top-level modules, small CLI modules, no import cycle, no private
name imported across modules (docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "eaglehub"
MAX_TOP_LEVEL_MODULES = 12
MAX_CLI_LINES = 250
MAX_MODULE_LINES = 450


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(path: Path) -> list[tuple[str, list[str], bool]]:
    """(module, imported names, at module level) for every eaglehub import in ``path``."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    # `if TYPE_CHECKING:` blocks import for annotations only: never executed, never a cycle
    typing_only = {
        id(n)
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")
        for n in ast.walk(node)
    }
    out = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("eaglehub"):
            out.append((node.module or "", [a.name for a in node.names], id(node) in top))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("eaglehub"):
                    out.append((a.name, [], id(node) in top))
    return out


def resolve(module: str, name: str) -> str:
    """``from module import name`` names a submodule or an attribute of ``module``."""
    return f"{module}.{name}" if f"{module}.{name}" in MODULES else module


def test_top_level_modules_are_few():
    top = [p.name for p in PACKAGE.glob("*.py")]
    assert len(top) <= MAX_TOP_LEVEL_MODULES, sorted(top)


def test_cli_modules_are_small():
    sizes = {p.name: len(p.read_text().splitlines()) for p in (PACKAGE / "cli").glob("*.py")}
    assert sizes and max(sizes.values()) <= MAX_CLI_LINES, sizes


def test_no_module_is_large():
    sizes = {m: len(p.read_text().splitlines()) for m, p in MODULES.items()}
    large = {m: n for m, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not large, large


def test_no_private_name_imported_across_modules():
    bad = [
        f"{m} imports {name} from {mod}"
        for m, p in MODULES.items()
        for mod, names, _ in imports(p)
        for name in names
        if name.startswith("_") and not name.startswith("__")
    ]
    assert not bad, bad


def graph(module_level_only: bool) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for m, p in MODULES.items():
        for mod, names, top in imports(p):
            if module_level_only and not top:
                continue
            targets = {resolve(mod, n) for n in names} if names else {mod}
            edges[m] |= {t for t in targets if t in MODULES and t != m}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return out


@pytest.mark.parametrize("module_level_only", [True, False], ids=["module-level", "with-deferred"])
def test_no_import_cycle(module_level_only):
    """Packages (``__init__``) re-export their modules, so an edge into a package is an edge into
    its ``__init__`` only; a deferred import inside a function counts too."""
    assert cycles(graph(module_level_only)) == []
