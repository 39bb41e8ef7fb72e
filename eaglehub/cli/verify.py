"""`eaglehub verify`: losslessness and acceptance of target + drafter pairs, in vLLM or the reference engine."""

from __future__ import annotations

import sys
from typing import Any

import click
from click.core import ParameterSource

from eaglehub.cli.errors import handle_errors
from eaglehub.cli.options import (
    al_tolerance_option,
    category_option,
    context_option,
    device_option,
    dtype_option,
    engine_log_option,
    k_option,
    limit_option,
    max_tokens_option,
    output_path,
    padding_option,
    plot_option,
    profile_option,
    prompts_option,
    reference_report_option,
    report_option,
)
from eaglehub.cli.output import console, err_console, print_json, write_and_show
from eaglehub.cli.verify_options import (
    PROMPTS_HELP,
    endpoint_options,
    engine_parallel_options,
    launch_plan_options,
    sampling_test_options,
    served_settings_options,
)
from eaglehub.cli.verify_run_options import (
    engine_choice_options,
    probe_option,
    production_options,
    write_synthetic_file,
    write_synthetic_option,
)


@click.command("verify")
@endpoint_options
@click.option(
    "--target",
    "target_spec",
    default=None,
    help="Target: model directory, cached Hub id, or `smollm2`; with a manifest, a target's name or spec "
    "(without --drafter: every drafter registered for it). Without --drafter or a manifest: every drafter the "
    "Hub's model tree lists for it (eaglehub drafters --target T).",
)
@click.option(
    "--drafter",
    "drafters",
    multiple=True,
    help="EAGLE-3 drafter directory or Hub id; repeat to verify several drafters against one target-alone run. "
    "With --manifest: a drafter's name or directory in it; a bare NAME: that drafter of the ones found for --target.",
)
@click.option(
    "--max-drafters",
    type=click.IntRange(min=1),
    default=None,
    help="Verifying the drafters found for --target: at most N of them.",
)
@click.option(
    "--hub-endpoint",
    default=None,
    help="The Hub the drafters of --target are looked up on (default: huggingface_hub's, HF_ENDPOINT).",
)
@k_option()
@max_tokens_option()
@prompts_option(PROMPTS_HELP)
@category_option()
@limit_option()
@dtype_option()
@engine_log_option()
@report_option("Write the JSON report here (schemas/verify-report.schema.json).")
@plot_option("Write a PNG of acceptance length per category and acceptance rate per position.")
@reference_report_option(
    "An earlier verify report: fail (E-VERIFY-AL-REGRESSION) when a drafter's AL fell below its entry "
    "there by more than --al-tolerance; no comparison when k, max tokens, dtype or prompts differ."
)
@al_tolerance_option("Relative AL drop tolerated against --reference-report (0.05 = 5 %, vLLM's CI rtol).")
@click.option(
    "--manifest",
    type=click.Path(dir_okay=False),
    default=None,
    help="Pairing manifest (TOML or YAML, schemas/manifest.schema.json): verify its pairs; without --drafter, "
    "./eaglehub.toml is read when present.",
)
@click.option(
    "--report-dir",
    type=click.Path(file_okay=False),
    default=None,
    callback=output_path("dir"),
    help="With a manifest: write each pair's report as DIR/<target>--<drafter>.json and DIR/summary.json "
    "(schemas/verify-summary.schema.json).",
)
@engine_parallel_options
@production_options
@launch_plan_options
@engine_choice_options
@device_option()
@profile_option(
    "Also judge each drafter for this engine profile before the run, repeatable: {names}. The profile of the "
    "engine run is always judged (the vLLM CPU build: vllm-0.32-cpu; the reference engine: as vLLM's V1 runner); "
    "an error finding for any of them refuses the drafter. With --dry-run: the vLLM release the launch plan and "
    "its vllm serve line are for (default {default})."
)
@sampling_test_options
@probe_option
@click.option(
    "--baseline-drafter",
    default=None,
    help="A drafter to compare the others with on the same prompts (e.g. the unquantized source of a "
    "quantized drafter): both acceptance lengths, their ratio and the size on disk of both.",
)
@served_settings_options
@write_synthetic_option
@context_option()
@padding_option()
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the report (with a manifest: the summary) as JSON instead of tables.",
)
@handle_errors
def verify_cmd(
    target_spec: str | None,
    drafters: tuple[str, ...],
    categories: tuple[str, ...],
    engines: tuple[str, ...],
    tensor_parallel_size: int | None,
    pipeline_parallel_size: int | None,
    distributed_executor_backend: str | None,
    max_num_seqs: int | None,
    dry_run: bool,
    manifest: str | None,
    report_dir: str | None,
    max_drafters: int | None,
    hub_endpoint: str | None,
    engine_log: str | None,
    report_path: str | None,
    plot_path: str | None,
    as_json: bool,
    **options: Any,
) -> None:
    """Prove TARGET + DRAFTER lossless (greedy) and measure acceptance, in vLLM or the reference engine.

    Exit code 1 when any drafter has an error finding: a prompt not token-identical to the target
    alone (E-VERIFY-LOSSLESS), a drafter not wired (position-0 acceptance ~ 0, E-VERIFY-NOT-WIRED),
    inconsistent engine counters (E-VERIFY-COUNTERS), an AL regression against --reference-report
    (E-VERIFY-AL-REGRESSION), two engines disagreeing (E-VERIFY-ENGINES-DISAGREE), a biased
    sampling test (E-SAMPLING-BIASED) or, with --temperature, a sampled acceptance that collapses while
    greedy works (E-VERIFY-SAMPLED-COLLAPSE); warnings (W-VERIFY-LOW-AL: AL below 1.3; W-VERIFY-NEAR-TIE:
    divergences only at numerical near-ties, shown by forensics) never fail. 0 otherwise; 2 for
    usage errors, a bad reference report or a missing engine.

    With --target alone (no --drafter, no manifest) the drafters the Hub lists for the target are
    downloaded and verified, each held to the acceptance it claims (E-VERIFY-AL-CLAIM at the claim's
    settings, W-VERIFY-AL-CLAIM at others). With a pairing manifest (--manifest FILE, or
    ./eaglehub.toml without --drafter) every pair is verified, pairs of one target with the same settings sharing one target-alone run; the manifest's
    engine settings apply per pair, options given here override them. Exit code 1 when any pair fails.

    With --endpoint URL the drafter a running server serves is measured instead (docs/verify.md).
    With --dry-run nothing runs: the launch plan for the target on --gpus x --gpu-memory is printed.
    """
    from eaglehub.plan.inputs import LaunchOptions
    from eaglehub.verify.command import OVERRIDABLE, VerifyRequest, run_verify_command
    from eaglehub.verify.options import VerifyOptions, parse_chat_template_kwargs
    from eaglehub.verify.production import parse_k_schedule
    from eaglehub.verify.report import write_plot, write_report
    from eaglehub.views.endpoint import render_endpoint_report

    parallel = {
        "tensor_parallel_size": tensor_parallel_size,
        "pipeline_parallel_size": pipeline_parallel_size,
        "distributed_executor_backend": distributed_executor_backend,
        "max_num_seqs": max_num_seqs,
    }
    launch, launch_given = LaunchOptions.pop_from(options, dry_run)  # --gpus, --gpu-memory, ...
    synthetic = options.pop("write_synthetic")
    if synthetic is not None:
        from eaglehub.verify.synthetic import check_request

        check_request(drafters, options["endpoint"], manifest, options["baseline_drafter"], dry_run)
    context = options.pop("context")
    options["profiles"] = list(options.pop("profiles"))
    concurrency = options.pop("concurrency")
    local = not options.get("endpoint")  # --concurrency: requests per server, or a local run's max_num_seqs
    opts = VerifyOptions(
        target=target_spec or "",
        context=context[0] if context else None,
        context_fit=bool(context and context[1]),
        drafters=list(drafters),
        categories=list(categories),
        engines=list(engines) or ["auto"],
        engine_options={name: value for name, value in parallel.items() if value is not None},
        chat_template_kwargs=parse_chat_template_kwargs(options.pop("chat_template_kwargs")),
        concurrency=concurrency or 8,
        in_flight=concurrency if local else None,
        k_schedule=parse_k_schedule(options.pop("k_schedule")),
        **options,
    )
    ctx = click.get_current_context()
    defaults = (ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)
    request = VerifyRequest(
        opts,
        manifest=manifest,
        report_dir=report_dir,
        engine_log=engine_log,
        report_path=report_path,
        plot_path=plot_path,
        given={n for n in OVERRIDABLE if ctx.get_parameter_source(n) not in defaults},
        hub_endpoint=hub_endpoint,
        max_drafters=max_drafters,
        launch=launch,
        launch_given=launch_given,
    )
    outcome = run_verify_command(request, console=err_console)
    if outcome.kind == "plan":
        from eaglehub.plan.inputs import write_plan
        from eaglehub.views.plan import render_plan

        write_and_show(outcome.data, as_json, render_plan, (write_plan, report_path, "report"))
    elif outcome.kind == "summary":
        from eaglehub.views.pairs import render_summary

        print_json(outcome.data) if as_json else render_summary(outcome.data, console)
    else:
        write_and_show(
            outcome.data,
            as_json,
            render_endpoint_report,
            (write_report, report_path, "report"),
            (write_plot, plot_path, "plot"),
        )
        if synthetic is not None:
            write_synthetic_file(outcome.data, synthetic, sampled=opts.temperature > 0)
    sys.exit(outcome.exit_code)
