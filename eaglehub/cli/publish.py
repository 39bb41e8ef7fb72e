"""`eaglehub publish`: one pinned commit (a pull request by default) to the Hugging Face Hub."""

from __future__ import annotations

from typing import Any

import click

from eaglehub.cli.errors import handle_errors
from eaglehub.cli.options import hub_endpoint_option, json_option, profile_option
from eaglehub.cli.output import console, err_console, print_json


@click.command("publish")
@click.argument("src")
@click.option("--repo", required=True, help="Destination Hub repo, ORG/NAME (created when missing).")
@click.option(
    "--revision",
    default="main",
    show_default=True,
    help="Branch to commit to, or the pull request's base branch.",
)
@click.option(
    "--pr/--no-pr",
    "create_pr",
    default=True,
    show_default=True,
    help="Open a pull request (refs/pr/N) instead of committing to the branch.",
)
@click.option("--tag", default=None, help="Tag the new commit.")
@click.option("--private", is_flag=True, help="Create the repo private (when it does not exist).")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the plan (files, sizes, status, repo, revision, parent commit) and the model card; read only, "
    "nothing is written.",
)
@click.option(
    "--report",
    "report",
    type=click.Path(dir_okay=False),
    default=None,
    help="Verify report for SRC (default: SRC/eaglehub-verify.json, SRC.verify.json or verify.json beside SRC).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Publish although validation or verification fails or is missing (recorded in the card).",
)
@click.option("--target", "target", default=None, help="Target to validate against (default: the verify report's).")
@profile_option(
    "Engine profile the gate validates SRC for, repeatable: {names} (default {default}). The card names the "
    "profiles checked and its vllm serve line is written for the first vLLM one."
)
@click.option("--base-model", default=None, help="Card base_model (default: the target's Hub id when known).")
@click.option(
    "--parent-commit",
    default=None,
    help="Fail unless the revision is still at this commit (the parent_commit of a reviewed dry run).",
)
@click.option("--message", default=None, help="Commit message.")
@hub_endpoint_option()
@json_option("the report", "publish-report.schema.json")
@handle_errors
def publish_cmd(as_json: bool, **options: Any) -> None:
    """Publish drafter SRC to the Hugging Face Hub in one commit (a pull request by default), pinned to
    the revision's head: a concurrent change makes it fail, never overwritten.

    SRC must pass `eaglehub validate` and have a passing verify report for these very files (sha256);
    the model card (metadata, provenance, measured acceptance, the `vllm serve` line) is generated.
    The token comes from HF_TOKEN or the saved login and is never printed. Exit 0 published (or
    planned), 1 refused or the revision moved, 2 token / permission / repo / usage errors.
    """
    from eaglehub.publish import PublishOptions, publish
    from eaglehub.views.publish import render_publish

    with err_console.status("publish: hashing, validating, reading the Hub"):
        report = publish(PublishOptions(**options))
    print_json(report) if as_json else render_publish(report, console)
