"""Command-line interface: one module per verb that parses its options, calls one library
function and prints the report it returns. No logic lives here (docs/architecture.md)."""

from __future__ import annotations

import click

from eaglehub import __version__
from eaglehub.cli.convert import convert_cmd
from eaglehub.cli.diagnose import diagnose_cmd
from eaglehub.cli.drafters import drafters_cmd
from eaglehub.cli.errors import Group
from eaglehub.cli.inspect import inspect_cmd
from eaglehub.cli.pipeline import pipeline_cmd
from eaglehub.cli.probe import probe_cmd
from eaglehub.cli.publish import publish_cmd
from eaglehub.cli.quantize import quantize_cmd
from eaglehub.cli.speedup import speedup_cmd
from eaglehub.cli.target import target
from eaglehub.cli.validate import validate_cmd
from eaglehub.cli.verify import verify_cmd
from eaglehub.cli.vocab import vocab_cmd
from eaglehub.cli.watch import watch_cmd

COMMANDS = (
    target,
    inspect_cmd,
    validate_cmd,
    convert_cmd,
    quantize_cmd,
    drafters_cmd,
    verify_cmd,
    probe_cmd,
    vocab_cmd,
    watch_cmd,
    speedup_cmd,
    diagnose_cmd,
    publish_cmd,
    pipeline_cmd,
)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="eaglehub")
def main() -> None:
    """Inspect, validate, upgrade and verify EAGLE-3 / EAGLE-3.1 speculative-decoding drafters."""


for _command in COMMANDS:
    main.add_command(_command)
