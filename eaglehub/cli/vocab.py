"""`eaglehub vocab`: how much of the target's own output the draft vocabulary can draft."""

from __future__ import annotations

import sys
from typing import Any

import click

from eaglehub.cli.errors import handle_errors
from eaglehub.cli.options import (
    device_option,
    json_option,
    limit_option,
    max_tokens_option,
    plot_option,
    prompts_option,
    report_option,
    target_option,
)
from eaglehub.cli.output import err_console, write_and_show
from eaglehub.vocab.run import DEFAULT_LIMIT, DEFAULT_MAX_TOKENS


@click.command("vocab")
@click.argument("drafter", type=click.Path(file_okay=False))
@target_option(required=True, help="Target the drafter drafts for: directory, cached Hub id, or `smollm2`.")
@prompts_option()
@limit_option("Prompts per category.", default=DEFAULT_LIMIT)
@max_tokens_option(DEFAULT_MAX_TOKENS, "Target tokens generated per prompt (its greedy continuation).")
@device_option()
@report_option("Write the JSON report here (schemas/vocab-report.schema.json).")
@plot_option("Write a PNG of the coverage per category next to the best vocabulary's.")
@json_option("the report", "vocab-report.schema.json")
@handle_errors
def vocab_cmd(
    drafter: str, target_spec: str, report_path: str | None, plot_path: str | None, as_json: bool, **options: Any
) -> None:
    """Measure the share of the target's own output tokens (its greedy continuations of the prompts, per
    category) that DRAFTER's draft vocabulary holds, against the best vocabulary of the same size on the same
    text, and list the tokens it misses most. An untrained identity d2t is flagged with its coverage.

    Exit 0 (coverage findings are warnings); 1 when the drafter fails validation against the
    target; 2 for usage errors.
    """
    from eaglehub.views.vocab import plot_vocab, render_report
    from eaglehub.vocab.run import VocabOptions, vocab_report, write_report

    opts = VocabOptions(target=target_spec, **options)
    with err_console.status("measuring") as status:
        report = vocab_report(drafter, opts, progress=lambda text: status.update(text))
    write_and_show(
        report,
        as_json,
        render_report,
        (write_report, report_path, "report"),
        (plot_vocab, plot_path, "plot"),
    )
    sys.exit(0 if report["passed"] else 1)
