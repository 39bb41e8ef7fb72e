"""`eaglehub drafters`: the drafters the Hub (its model tree), the local cache and a manifest know for a target."""

from __future__ import annotations

import sys

import click

from eaglehub.cli.errors import handle_errors
from eaglehub.cli.options import hub_endpoint_option, json_option, profile_option, target_option


@click.command("drafters")
@target_option(
    required=True,
    help="Target: a Hub id (ORG/NAME), `smollm2`, or a model directory whose card names its Hub base model.",
)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="List at most N drafters.")
@click.option(
    "--drafter",
    "names",
    multiple=True,
    help="Keep only the drafter of this name or repo id (repeatable).",
)
@click.option(
    "--manifest",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also list the drafters this pairing manifest registers for the target (default: ./eaglehub.toml when present).",
)
@profile_option(
    "Engine profile each pair is judged for, repeatable: {names} (default {default}): whether its release "
    "captures aux states from the target's architecture, and whether it builds each drafter's class from its "
    "config.json (the weights are not read)."
)
@hub_endpoint_option()
@json_option("the report", "drafters-report.schema.json")
@handle_errors
def drafters_cmd(
    target_spec: str,
    limit: int | None,
    names: tuple[str, ...],
    manifest: str | None,
    profiles: tuple[str, ...],
    endpoint: str | None,
    as_json: bool,
) -> None:
    """List the drafters for TARGET: the Hub repos whose card names TARGET (or the model TARGET
    quantizes, walking up `base_model_relation: quantized`) as `base_model` and whose config is an
    EAGLE-3 drafter, with layout, EAGLE version, k, size and the acceptance each claims; plus the
    drafters a pairing manifest registers. With HF_HUB_OFFLINE=1 the local Hugging Face cache stands in
    for the Hub, and the report says so.

    Exit 0 when at least one drafter is found, 1 when none is, 2 for usage errors or an unreachable Hub.
    """
    from eaglehub.cli.output import console, print_json
    from eaglehub.discovery.discover import DiscoverOptions, discover
    from eaglehub.views.drafters import render_drafters

    report = discover(
        DiscoverOptions(
            target=target_spec,
            endpoint=endpoint,
            limit=limit,
            names=list(names),
            manifest=manifest,
            profiles=profiles,
        )
    )
    print_json(report) if as_json else render_drafters(report, console)
    sys.exit(0 if report["drafters"] else 1)
