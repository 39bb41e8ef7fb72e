"""Start-up: `eaglehub --version`, `--help` and a verb's `--help` import only what they use.

Checked by the modules a fresh interpreter holds when the command exits (no timing here: the
start-up time itself is measured by benchmarks/convert_speed.py, next to `cp -r`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import click
import pytest

from eaglehub import __version__
from eaglehub.cli import VERBS, LazyGroup, main

#: heavy packages none of these commands needs
HEAVY = (
    "torch",
    "numpy",
    "rich",
    "jsonschema",
    "huggingface_hub",
    "safetensors",
    "transformers",
    "httpx",
    "scipy",
    "matplotlib",
    "prometheus_client",
)

_RUN = """
import atexit, json, sys
argv = json.loads(sys.argv[1])
atexit.register(lambda: sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n"))
sys.argv = ["eaglehub", *argv]
from eaglehub.cli import main
main()
"""


def _run(*argv: str) -> tuple[int, str, set[str]]:
    """Run the CLI with ``argv`` in a fresh interpreter; ``(exit code, stdout, modules it imported)``."""
    p = subprocess.run(
        [sys.executable, "-c", _RUN, json.dumps(argv)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "80"},
    )
    line = next(ln for ln in p.stderr.splitlines() if ln.startswith("MODULES "))
    return p.returncode, p.stdout, set(json.loads(line[len("MODULES ") :]))


def _heavy(modules: set[str]) -> list[str]:
    return sorted({m.split(".")[0] for m in modules} & set(HEAVY))


def test_version_imports_nothing_heavy():
    code, out, modules = _run("--version")
    assert (code, out) == (0, f"eaglehub, version {__version__}\n")
    assert _heavy(modules) == []
    assert sorted(m for m in modules if m.startswith("eaglehub.")) == [
        "eaglehub.cli",
        "eaglehub.cli.errors",
        "eaglehub.cli.exits",
        "eaglehub.errors",
    ]


def test_help_lists_every_verb_without_importing_one():
    code, out, modules = _run("--help")
    assert code == 0
    listed = [ln.split()[0] for ln in out.split("Commands:\n")[1].split("\n\n")[0].splitlines()]
    assert listed == sorted(VERBS)
    assert _heavy(modules) == []
    assert not [
        m for m in modules if m.startswith("eaglehub.cli.") and m not in ("eaglehub.cli.errors", "eaglehub.cli.exits")
    ]


def test_inspect_help_imports_only_its_own_verb():
    code, out, modules = _run("inspect", "--help")
    assert code == 0 and out.startswith("Usage: eaglehub inspect")
    # rich renders the report; the rest would only slow the start
    assert _heavy(modules) == ["rich"]
    assert [v.module for v in VERBS.values() if v.module in modules] == ["eaglehub.cli.inspect"]


@pytest.mark.parametrize("name", sorted(VERBS))
def test_verb_table_matches_the_command(name):
    """The table's short help is the command's own: `eaglehub --help` cannot drift from `VERB --help`."""
    verb = VERBS[name]
    command = getattr(__import__(verb.module, fromlist=[verb.attribute]), verb.attribute)
    assert isinstance(command, click.Command) and command.name == name
    assert VERBS[name].short_help == command.get_short_help_str(limit=10**6)


@pytest.mark.parametrize("width", [60, 80, 200])
def test_lazy_help_is_what_click_prints_with_every_verb_loaded(width):
    def group(cls: type[click.Group]) -> click.Group:
        return cls(main.name, help=main.help, params=main.params, context_settings=main.context_settings)

    lazy, eager = group(LazyGroup), group(click.Group)
    eager.epilog = lazy.epilog  # the exit codes cli.errors.Group lists under the help
    for name in VERBS:
        eager.add_command(main.get_command(click.Context(main), name), name)
    assert not lazy.commands  # nothing loaded: the listing comes from VERBS

    def show(g: click.Group) -> str:
        return g.get_help(click.Context(g, info_name="eaglehub", terminal_width=width, max_content_width=width))

    assert show(lazy) == show(eager)
    assert "Commands:" in show(lazy)


@pytest.mark.parametrize("name", sorted(VERBS))
def test_a_verbs_help_imports_only_rich_of_the_heavy_packages(name):
    """`VERB --help` needs the verb's options, not what it computes with (numpy for `vocab`, the Prometheus
    parser for `watch`, torch and engines for the rest)."""
    code, out, modules = _run(name, "--help")
    assert code == 0 and out.startswith(f"Usage: eaglehub {name}")
    assert set(_heavy(modules)) <= {"rich"}


@pytest.mark.parametrize("given", [None, "3"])
def test_a_plain_convert_starts_no_blas_thread_pool(make_drafter, tmp_path, given):
    """numpy's OpenBLAS starts a thread per core when imported (tens of ms) for linear algebra a byte-level
    conversion never does: a plain convert asks for one thread, unless the user set the count. (Maps that agree
    are checked from their bytes without numpy, so this drafter has no t2d: its d2t is read with numpy.)"""
    src = make_drafter(mutate=lambda cfg, t: t.pop("t2d"))
    code = (
        "import os, sys\n"
        "from eaglehub.cli import main\n"
        f"main(['convert', {str(src)!r}, {str(tmp_path / 'out')!r}, '--to', '3.1'], standalone_mode=False)\n"
        "print(os.environ.get('OPENBLAS_NUM_THREADS'), 'numpy' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given:
        env["OPENBLAS_NUM_THREADS"] = given
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[-1] == f"{given or 1} True"
