"""Command-line interface: parses arguments, calls one module per verb, prints. No logic lives here."""

from __future__ import annotations

import functools
import json
import sys

import click
from rich.console import Console

from . import __version__
from .errors import EaglehubError

console = Console()
err_console = Console(stderr=True)


def handle_errors(fn):
    """Turn EaglehubError (and missing files) into a one-line error plus hint, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except EaglehubError as exc:
            err_console.print(f"[bold red]error:[/] {exc.message}", highlight=False)
            if exc.hint:
                err_console.print(f"[dim]hint: {exc.hint}[/]", highlight=False)
            sys.exit(exc.exit_code)

    return wrapper


def print_json(obj) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=False))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="eaglehub")
def main() -> None:
    """Inspect, validate, upgrade and verify EAGLE-3 / EAGLE-3.1 speculative-decoding drafters."""


# --- target -----------------------------------------------------------------------------------


@main.group()
def target() -> None:
    """Targets (verifier models) available offline."""


@target.command("build")
@click.argument("spec", default="smollm2")
@click.option("--overwrite", is_flag=True, help="Rebuild even if the cache exists.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handle_errors
def target_build(spec: str, overwrite: bool, as_json: bool) -> None:
    """Build (or find) the local copy of target SPEC; `smollm2` converts the packaged GGUF."""
    from .target import SMOLLM2_ALIASES, build_smollm2_cache, resolve_target, smollm2_cache_path

    if spec.lower() in SMOLLM2_ALIASES and (overwrite or not (smollm2_cache_path() / "config.json").is_file()):
        with console.status("converting SmolLM2-135M-Instruct GGUF → safetensors (≈30 s)"):
            path = build_smollm2_cache(overwrite=overwrite)
    else:
        path = resolve_target(spec)
    if as_json:
        print_json({"target": spec, "path": str(path)})
    else:
        console.print(f"target {spec}: {path}")


# --- inspect / validate / convert (eaglehub.inspection, eaglehub.validate, eaglehub.convert) ---

# --- verify (eaglehub.verify) -----------------------------------------------------------------


if __name__ == "__main__":
    main()
