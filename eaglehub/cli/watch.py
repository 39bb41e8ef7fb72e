"""`eaglehub watch`: a served drafter's AL per interval, from the server's /metrics (sends no traffic)."""

from __future__ import annotations

import shlex
import sys

import click

from eaglehub.cli.errors import handle_errors
from eaglehub.cli.exits import interrupt_exit_code
from eaglehub.cli.options import (
    al_tolerance_option,
    api_key_option,
    reference_report_option,
    report_option,
)
from eaglehub.cli.output import console, report_unwritten, write_outputs
from eaglehub.cli.paths import server_url
from eaglehub.cli.verify_options import SERVED_CONFIG_HELP, served_config_option
from eaglehub.errors import UsageError
from eaglehub.watch.intervals import DEFAULT_PATIENCE, MIN_DRAFTS_TO_JUDGE


def _url_argument(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """The positional URL, read as --endpoint is (a refusal's hint names --endpoint, a command that runs)."""
    endpoint = next(p for p in ctx.command.params if p.name == "endpoint")
    return server_url(ctx, endpoint, value)


@click.command("watch")
@click.argument("url", required=False, metavar="[URL]", callback=_url_argument)
@click.option(
    "--endpoint",
    default=None,
    metavar="URL",
    callback=server_url,
    help="The server: http://host:port or its OpenAI base http://host:port/v1 (vLLM, SGLang; host:port alone "
    "means http://host:port); only its /metrics page is read. Also accepted as the one argument: eaglehub "
    "watch URL.",
)
@click.option(
    "--interval", type=click.FloatRange(min=0.1), default=5.0, show_default=True, help="Seconds between polls."
)
@click.option(
    "--duration",
    type=click.FloatRange(min=0.1),
    default=60.0,
    show_default=True,
    help="Seconds to watch, wall-clock: a poll still waiting at the end gets only the time left (Ctrl-C ends "
    "earlier, with the summary); must be at least --interval.",
)
@click.option("--count", type=click.IntRange(min=1), default=None, help="Stop after this many intervals.")
@reference_report_option(
    "A verify report (schemas/verify-report.schema.json): flag intervals whose AL is below its drafter's AL "
    "by more than --al-tolerance (E-WATCH-AL-DROP, exit 1)."
)
@click.option(
    "--reference-drafter",
    default=None,
    help="The report's drafter entry to compare with (its path or directory name); default: the only, else the "
    "first, drafter at the server's k.",
)
@al_tolerance_option("Relative AL drop tolerated per interval (0.05 = 5 %).")
@click.option(
    "--patience",
    type=click.IntRange(min=1),
    default=DEFAULT_PATIENCE,
    show_default=True,
    help="Judged intervals below the tolerance in a row that confirm a drop.",
)
@click.option(
    "--min-drafts",
    type=click.IntRange(min=1),
    default=MIN_DRAFTS_TO_JUDGE,
    show_default=True,
    help="Intervals with fewer drafts are shown but not judged (too few to measure AL within 5 %).",
)
@click.option("--stop-on-drop", is_flag=True, help="End the watch at the first confirmed drop (default: watch on).")
@served_config_option(
    SERVED_CONFIG_HELP + " Intervals are judged against --reference-report only when the server's known settings "
    "match the reference run's (W-WATCH-SETTINGS-DIFFER otherwise)."
)
@api_key_option("Sent as Authorization: Bearer; never printed or written.")
@report_option("Write the summary report here (schemas/watch-report.schema.json).")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON line per interval (schemas/watch-interval.schema.json), then the summary "
    "(schemas/watch-report.schema.json).",
)
@handle_errors
def watch_cmd(report_path: str | None, as_json: bool, url: str | None, **options) -> None:
    """Read a running server's speculative-decoding counters every --interval seconds and show, per
    interval, the drafts, the acceptance length (AL) and the acceptance rate per position.

    Sends no completions: it reads GET /metrics, and once at the start the server's settings page
    (GET /server_info where the server has one) for the speculative settings its AL depends on. A server restart (the counters start again from 0) is shown as
    such, never as a negative rate; a poll that fails mid-watch is noted and the watch goes on. Ctrl-C
    (SIGINT) or SIGTERM ends the watch at once, with the summary and the report of the intervals so far.
    --duration bounds the wall-clock time, whatever the server does.
    Exit code 1 when an AL drop against --reference-report is confirmed (E-WATCH-AL-DROP), the server
    cannot be read at the start, no later poll read its counters (E-WATCH-NO-READING), or no interval
    had enough drafts to judge against the reference (INCONCLUSIVE); else 130 when stopped by Ctrl-C
    (143 by SIGTERM); 0 otherwise; 2 for usage errors and an unusable reference report.
    """
    from eaglehub.views.watch import WatchDisplay
    from eaglehub.watch.run import WatchOptions, run_watch, write_report

    if url is not None and options["endpoint"] is not None and url != options["endpoint"]:
        raise UsageError(
            f"two servers given: {url} and --endpoint {options['endpoint']}", hint="give one: eaglehub watch URL"
        )
    options["endpoint"] = options["endpoint"] or url
    if options["endpoint"] is None:
        raise UsageError("no server given", hint="give its URL: eaglehub watch http://host:port")
    if options["duration"] < options["interval"]:
        raise UsageError(
            f"--duration {options['duration']:g} is shorter than --interval {options['interval']:g}: no interval "
            "would be read",
            hint=f"eaglehub watch --endpoint {shlex.quote(options['endpoint'])} --interval {options['interval']:g} "
            f"--duration {options['interval'] * 10:g}",
        )
    display = WatchDisplay(console, as_json, options["count"])
    try:
        report = run_watch(WatchOptions(**options), display.start, display.reading)
    finally:
        display.close()
    failed = write_outputs(report, ((write_report, report_path, "report"),))
    display.summary(report, None if failed else report_path)
    report_unwritten(report, failed, as_json)
    if report["verdict"] == "drop":
        sys.exit(1)
    # stopped by Ctrl-C / SIGTERM with no drop confirmed: the summary is whole, the watch was not
    if report["stopped"] == "interrupted":
        sys.exit(interrupt_exit_code())
    # nothing read, or nothing judged against the reference: not a pass (the verdict line says which)
    sys.exit(0 if report["passed"] else 1)
