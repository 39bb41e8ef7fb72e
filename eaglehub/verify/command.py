"""``eaglehub verify`` as one call: one run of given drafters, or every pair of a manifest."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eaglehub.errors import UsageError
from eaglehub.verify.options import VerifyOptions

if TYPE_CHECKING:
    from eaglehub.plan.inputs import LaunchOptions

#: options whose value, when given on the command line, overrides the manifest's per-pair setting
OVERRIDABLE = ("k", "dtype")


@dataclass
class VerifyRequest:
    """A verify invocation: the run's options plus how pairs are selected and where reports go."""

    options: VerifyOptions
    manifest: str | None = None
    report_dir: str | None = None
    engine_log: str | None = None
    report_path: str | None = None
    plot_path: str | None = None
    given: set[str] = field(default_factory=set)
    """Names of :data:`OVERRIDABLE` options the user gave explicitly."""
    hub_endpoint: str | None = None
    """The Hub discovery searches (``verify --target T`` without drafters); ``None``: huggingface_hub's."""
    max_drafters: int | None = None
    """At most this many discovered drafters."""
    launch: LaunchOptions | None = None
    """``--dry-run``: plan the launch on these GPUs (:func:`eaglehub.plan.inputs.plan_for_verify`), run nothing."""
    launch_given: bool = False
    """Whether a launch option (:data:`eaglehub.plan.inputs.LAUNCH_KEYS`) was given; without ``--dry-run`` an error."""


@dataclass
class VerifyOutcome:
    """``summary`` (a manifest run), ``report`` (one run) or ``plan`` (``--dry-run``), and the exit code."""

    kind: str
    data: dict
    exit_code: int


def run_verify_command(request: VerifyRequest, console: Any = None) -> VerifyOutcome:
    """Run what ``request`` asks for and return the report or manifest summary with its exit code."""
    from eaglehub.engines.registry import make_engines
    from eaglehub.verify.pairing import exit_code as pairs_exit_code
    from eaglehub.verify.pairing import run_pairs, select
    from eaglehub.verify.report import exit_code
    from eaglehub.verify.run import run_verify

    opts = request.options
    _refuse_features(request)
    if request.launch is not None:  # plan only: reads the target's config, never its weights
        from eaglehub.plan.inputs import plan_for_verify

        if request.manifest or opts.endpoint:
            raise UsageError("--dry-run plans one local target", hint="drop --manifest / --endpoint")
        if opts.served_config:  # it describes a running server; a plan has none, so it would be ignored
            raise UsageError(
                "--served-config states the settings of a server measured with --endpoint; --dry-run plans a launch",
                hint="drop --served-config (the plan's --speculative-config is its own)",
            )
        if request.plot_path:  # a plot draws a run's acceptance; a plan has none
            raise UsageError("--plot draws a run's acceptance; --dry-run runs nothing", hint="drop --plot")
        plan = plan_for_verify(opts, request.launch, opts.dtype if "dtype" in request.given else None)
        drafter_ok = plan["drafter_check"] is None or plan["drafter_check"]["ok"]
        return VerifyOutcome("plan", plan, 0 if plan["fits"] and drafter_ok else 1)
    if request.launch_given:
        raise UsageError(
            "--gpus, --gpu-memory, --nodes, --data-parallel-size and --enable-expert-parallel describe a launch plan",
            hint="add --dry-run",
        )
    if opts.served_config and not opts.endpoint:  # it describes a server; without one it would be ignored
        raise UsageError(
            "--served-config states the settings of a server measured with --endpoint",
            hint="add --endpoint URL, or drop --served-config",
        )
    if opts.endpoint:  # the drafter served elsewhere: no pairs, no local drafter (eaglehub.verify.endpoint)
        from eaglehub.verify.endpoint import run_verify_endpoint

        if request.manifest or request.report_dir:
            raise UsageError("--endpoint measures one server; a manifest verifies local pairs", hint="drop --manifest")
        if opts.profiles:  # no local drafter to judge: the option would be silently ignored
            raise UsageError(
                "--profile judges local drafters before a run; --endpoint measures the drafter a server already runs",
                hint="drop --profile (eaglehub validate --profile P judges a drafter directory)",
            )
        report = run_verify_endpoint(opts, console=console)
        return VerifyOutcome("report", report, exit_code(report))
    log_dir = Path(request.engine_log) if request.engine_log else None
    chosen = make_engines(opts.engines, log_dir=log_dir, device=opts.device)
    selection = select(
        request.manifest,
        opts.target or None,
        opts.drafters,
        hub_endpoint=request.hub_endpoint,
        drafter_limit=request.max_drafters,
        console=console,
    )
    if selection is None and request.report_dir:
        raise UsageError("--report-dir needs a manifest (one report per pair)", hint="use --report FILE with --drafter")
    if selection is None:
        report = run_verify(opts, engines=chosen, console=console)
        return VerifyOutcome("report", report, exit_code(report))
    if opts.baseline_drafter:
        raise UsageError(
            "--baseline-drafter compares drafters of one run; a manifest or discovery runs pairs",
            hint="use --target T --drafter D --baseline-drafter B",
        )
    if request.report_path or request.plot_path:
        raise UsageError(
            "--report and --plot write one report; a manifest or discovery gives one per pair",
            hint="use --report-dir DIR (one report per pair)",
        )
    overrides = {
        **opts.engine_options,
        **({"num_speculative_tokens": opts.k} if "k" in request.given else {}),
        **({"dtype": opts.dtype} if "dtype" in request.given else {}),
    }
    summary = run_pairs(selection, opts, overrides, engines=chosen, console=console, report_dir=request.report_dir)
    return VerifyOutcome("summary", summary, pairs_exit_code(summary))


def _refuse_features(request: VerifyRequest) -> None:
    """Production-feature options (:mod:`eaglehub.verify.production`) set up local vLLM runs: with
    ``--endpoint`` or ``--dry-run`` nothing would use them.

    Raises:
        UsageError: such an option there.
    """
    from eaglehub.verify.production import FEATURE_OPTIONS, requested

    opts = request.options
    given = [FEATURE_OPTIONS[k] for k, v in requested(opts).items() if v is not None]
    if not given or not (opts.endpoint or request.launch is not None):
        return
    if opts.endpoint:
        raise UsageError(
            f"{', '.join(given)} set up the local vLLM runs; --endpoint measures a server started with its own",
            hint="drop them (--served-config states a served k schedule)",
        )
    raise UsageError(f"{', '.join(given)} set up a run; --dry-run runs nothing", hint="drop --dry-run")
