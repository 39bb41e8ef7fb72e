"""`eaglehub validate`: check a drafter (and its pairing with a target); print the rule catalogue."""

from __future__ import annotations

import sys

import click

from eaglehub.cli.errors import handle_errors
from eaglehub.cli.options import (
    json_option,
    profile_option,
    revision_option,
    source_format_option,
    target_option,
)
from eaglehub.cli.output import console, print_json


@click.command("validate")
@click.argument("src", required=False)
@source_format_option()
@revision_option()
@target_option(help="Target model (directory, hub repo id or `smollm2`); only its config and tokenizer files are read.")
@click.option("--deep", is_flag=True, help="Also read every weight: NaN/Inf, untrained-looking tensors.")
@click.option(
    "--tp",
    "tp",
    type=click.IntRange(min=1),
    default=None,
    help="Tensor-parallel size to check divisibility for.",
)
@click.option(
    "--vllm-version",
    default=None,
    help="vLLM version the drafter will be served with (default: the installed one).",
)
@profile_option()
@click.option(
    "--prompts",
    "prompts_file",
    default=None,
    help="Also measure the draft vocabulary's coverage of the target's output on these prompts (a prompt file, or "
    "`default` for the project's set; needs --target with weights: it runs the target). See `eaglehub vocab`.",
)
@click.option("--strict", is_flag=True, help="Warnings fail too (exit 1).")
@click.option("--list-rules", is_flag=True, help="Print every rule (code, severity, title, concerns, hint) and exit.")
@click.option("--markdown", is_flag=True, help="With --list-rules: print the catalogue as Markdown (docs/rules.md).")
@json_option("the report", "validate-report.schema.json")
@handle_errors
def validate_cmd(
    src: str | None,
    source_format: str | None,
    revision: str | None,
    target_spec: str | None,
    deep: bool,
    tp: int | None,
    vllm_version: str | None,
    profiles: tuple[str, ...],
    prompts_file: str | None,
    strict: bool,
    list_rules: bool,
    markdown: bool,
    as_json: bool,
) -> None:
    """Check drafter SRC (and its pairing with --target). Exit 0 clean, 1 on error findings (or warnings
    with --strict), 2 on usage errors. Unreadable files are findings (E-INPUT-*), not crashes."""
    if markdown and not list_rules:
        raise click.UsageError("--markdown goes with --list-rules")
    if list_rules:
        _list_rules(src, markdown, as_json)
        return
    if src is None:
        raise click.UsageError("missing argument SRC (or pass --list-rules)")
    from eaglehub.checks.validate import Options, validate
    from eaglehub.views.common import print_findings

    report = validate(
        src,
        target_spec,
        source_format=source_format,
        revision=revision,
        deep=deep,
        options=Options(tp=tp, vllm_version=vllm_version, profiles=profiles or None),
        prompts=prompts_file,
    )
    if as_json:
        print_json(report)
    else:
        if report.get("vocab_coverage"):
            from eaglehub.views.vocab import print_coverage_line

            print_coverage_line(report["vocab_coverage"], console)
        print_findings(report, console)
    sys.exit(0 if report["ok"] and not (strict and report["counts"]["warning"]) else 1)


def _list_rules(src: str | None, markdown: bool, as_json: bool) -> None:
    from eaglehub.findings import rule_catalogue, rules_markdown
    from eaglehub.views.common import print_rules

    if src is not None:
        raise click.UsageError(f"--list-rules prints the catalogue and validates nothing; drop {src!r} or --list-rules")
    if markdown and as_json:
        raise click.UsageError("pick one of --markdown and --json")
    if markdown:
        click.echo(rules_markdown(), nl=False)
        return
    rules = rule_catalogue()
    print_json({"schema": "eaglehub.rules/1", "rules": rules}) if as_json else print_rules(rules, console)
