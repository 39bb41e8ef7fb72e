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
            err_console.print(f"[bold red]error:[/] {exc.message}", highlight=False, soft_wrap=True)
            if exc.hint:
                err_console.print(f"[dim]hint: {exc.hint}[/]", highlight=False, soft_wrap=True)
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


@main.command("inspect")
@click.argument("src")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (schemas/inspect-report.schema.json).")
@handle_errors
def inspect_cmd(src: str, as_json: bool) -> None:
    """Describe drafter SRC from tensor headers: layout, dims, flags, aux ids, vocabulary, tensors."""
    from .inspection import inspect_drafter
    from .render import print_inspect

    report = inspect_drafter(src)
    print_json(report) if as_json else print_inspect(report, console)


@main.command("validate")
@click.argument("src")
@click.option("--target", "target_spec", default=None, help="Target model (directory, cached Hub id or `smollm2`).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (schemas/validate-report.schema.json).")
@handle_errors
def validate_cmd(src: str, target_spec: str | None, as_json: bool) -> None:
    """Check drafter SRC (and its pairing with --target). Exit 0 clean, 1 on error findings, 2 on bad input."""
    from .render import print_findings
    from .validate import validate

    report = validate(src, target_spec)
    print_json(report) if as_json else print_findings(report, console)
    sys.exit(0 if report["ok"] else 1)


@main.command("convert")
@click.argument("src")
@click.argument("dst")
@click.option("--to", "to", type=click.Choice(["3.1"]), required=True, help="Target format.")
@click.option("--norm-output/--no-norm-output", default=True, show_default=True, help="Set norm_output in the 3.1 config.")
@click.option("--overwrite", is_flag=True, help="Replace DST if it exists.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (schemas/convert-report.schema.json).")
@handle_errors
def convert_cmd(src: str, dst: str, to: str, norm_output: bool, overwrite: bool, as_json: bool) -> None:
    """Upgrade drafter SRC to EAGLE-3.1 into DST (atomic; SRC untouched; other tensors bit-exact)."""
    from .convert import convert
    from .render import print_convert

    report = convert(src, dst, to=to, norm_output=norm_output, overwrite=overwrite)
    if as_json:
        print_json(report)
        for w in report["warnings"]:
            err_console.print(f"[yellow]warning:[/] {w}", highlight=False, soft_wrap=True)
    else:
        print_convert(report, console, err_console)


# --- verify (eaglehub.verify) -----------------------------------------------------------------


if __name__ == "__main__":
    main()
