"""Command-line interface: parses arguments, calls one module per verb, prints. No logic lives here."""

from __future__ import annotations

import errno
import functools
import json
import sys

import click
from click.core import ParameterSource
from rich.console import Console
from rich.markup import escape

from . import __version__
from .errors import EaglehubError
from .findings import printable

console = Console()
err_console = Console(stderr=True)


def _fail(message: str, hint: str | None, code: int):
    # escape(): messages carry paths and package names like `vllm[cpu]` that rich would eat as markup
    err_console.print(f"[bold red]error:[/] {escape(printable(message))}", highlight=False, soft_wrap=True)
    if hint:
        err_console.print(f"[dim]hint: {escape(printable(hint))}[/]", highlight=False, soft_wrap=True)
    sys.exit(code)


def handle_errors(fn):
    """Turn EaglehubError into a one-line error plus hint, never a traceback; an output stream that
    cannot be written (a full disk, a closed pipe) is one line too."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except EaglehubError as exc:
            _fail(exc.message, exc.hint, exc.exit_code)
        except OSError as exc:  # mostly output (reads raise EaglehubError); a path the OS refuses outright too
            if exc.errno == errno.ENAMETOOLONG:
                _fail(f"a path is too long: {exc.strerror}", "shorten the file or directory names given", 2)
            _fail(
                f"cannot write the output: {exc.strerror or exc}",
                "check the disk or the pipe the output goes to",
                2,
            )
        except (RuntimeError, ValueError) as exc:
            # pathlib's own refusals of a path argument, before any eaglehub check sees it
            if "home directory" in str(exc) or "null byte" in str(exc):
                _fail(
                    f"unusable path: {exc}",
                    "give a plain path (no ~user of an unknown user, no NUL character)",
                    2,
                )
            raise

    return wrapper


class Group(click.Group):
    """Click's usage errors as eaglehub's own errors: one line and a hint, exit 2."""

    def main(self, *args, **kwargs):
        kwargs["standalone_mode"] = False
        try:
            return super().main(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError as exc:  # bare `eaglehub`: the help, as click itself prints it
            click.echo(exc.ctx.get_help())
            sys.exit(2)
        except click.UsageError as exc:
            cmd = exc.ctx.command_path if exc.ctx else "eaglehub"
            _fail(exc.format_message(), f"see `{cmd} --help`", 2)
        except click.Abort:
            _fail("aborted", None, 1)


#: output/source format names (eaglehub.layouts.FORMATS; listed here so --help needs no import)
FORMAT_CHOICE = click.Choice(["vllm", "speculators", "specforge", "torchspec", "modelopt"])


def print_json(obj) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=False))


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
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
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (schemas/target.schema.json).")
@handle_errors
def target_build(spec: str, overwrite: bool, as_json: bool) -> None:
    """Build (or find) the local copy of target SPEC; `smollm2` converts the packaged GGUF."""
    from .target import (
        SMOLLM2_ALIASES,
        build_smollm2_cache,
        describe_target,
        resolve_target,
        smollm2_cache_path,
    )

    if spec.lower() in SMOLLM2_ALIASES and (overwrite or not (smollm2_cache_path() / "config.json").is_file()):
        with console.status("converting SmolLM2-135M-Instruct GGUF → safetensors (≈30 s)"):
            path = build_smollm2_cache(overwrite=overwrite)
    else:
        path = resolve_target(spec)
    if as_json:
        print_json(describe_target(spec, path))
    else:
        console.print(f"target {spec}: {path}")


# --- inspect / validate / convert (eaglehub.inspection, eaglehub.validate, eaglehub.convert) ---


@main.command("inspect")
@click.argument("src")
@click.option(
    "--from",
    "source_format",
    type=FORMAT_CHOICE,
    default=None,
    help="Source format, when detection is ambiguous.",
)
@click.option("--revision", default=None, help="Branch, tag or commit when SRC is a hub repo id.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (schemas/inspect-report.schema.json).")
@handle_errors
def inspect_cmd(src: str, source_format: str | None, revision: str | None, as_json: bool) -> None:
    """Describe drafter SRC (directory or hub repo id) from tensor headers: format with evidence, dims,
    flags, aux ids, vocabulary, tensors."""
    from .inspection import inspect_drafter
    from .render import print_inspect

    report = inspect_drafter(src, source_format=source_format, revision=revision)
    print_json(report) if as_json else print_inspect(report, console)


@main.command("validate")
@click.argument("src", required=False)
@click.option(
    "--from",
    "source_format",
    type=FORMAT_CHOICE,
    default=None,
    help="Source format, when detection is ambiguous.",
)
@click.option("--revision", default=None, help="Branch, tag or commit when SRC is a hub repo id.")
@click.option(
    "--target",
    "target_spec",
    default=None,
    help="Target model (directory, hub repo id or `smollm2`); only its config and tokenizer files are read.",
)
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
@click.option("--strict", is_flag=True, help="Warnings fail too (exit 1).")
@click.option("--list-rules", is_flag=True, help="Print every rule (code, severity, title, concerns, hint) and exit.")
@click.option("--markdown", is_flag=True, help="With --list-rules: print the catalogue as Markdown (docs/rules.md).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (schemas/validate-report.schema.json).")
@handle_errors
def validate_cmd(
    src: str | None,
    source_format: str | None,
    revision: str | None,
    target_spec: str | None,
    deep: bool,
    tp: int | None,
    vllm_version: str | None,
    strict: bool,
    list_rules: bool,
    markdown: bool,
    as_json: bool,
) -> None:
    """Check drafter SRC (and its pairing with --target). Exit 0 clean, 1 on error findings (or warnings
    with --strict), 2 on usage errors. Unreadable files are findings (E-INPUT-*), not crashes."""
    from .render import print_findings, print_rules
    from .validate import Options, validate

    if markdown and not list_rules:
        raise click.UsageError("--markdown goes with --list-rules")
    if list_rules:
        from .findings import rule_catalogue, rules_markdown

        if src is not None:
            raise click.UsageError(
                f"--list-rules prints the catalogue and validates nothing; drop {src!r} or --list-rules"
            )
        if markdown and as_json:
            raise click.UsageError("pick one of --markdown and --json")
        if markdown:
            click.echo(rules_markdown(), nl=False)
            return
        rules = rule_catalogue()
        print_json({"schema": "eaglehub.rules/1", "rules": rules}) if as_json else print_rules(rules, console)
        return
    if src is None:
        raise click.UsageError("missing argument SRC (or pass --list-rules)")
    report = validate(
        src,
        target_spec,
        source_format=source_format,
        revision=revision,
        deep=deep,
        options=Options(tp=tp, vllm_version=vllm_version),
    )
    print_json(report) if as_json else print_findings(report, console)
    sys.exit(0 if report["ok"] and not (strict and report["counts"]["warning"]) else 1)


@main.command("convert")
@click.argument("src")
@click.argument("dst")
@click.option(
    "--to",
    "to",
    type=click.Choice(["3.1", "3"]),
    default=None,
    help="EAGLE version: 3.1 adds fc_norm weights; 3 (from 3.1) is refused unless --force --target T, which "
    "writes the nearest approximation.",
)
@click.option("--format", "fmt", type=FORMAT_CHOICE, default=None, help="Output format (default: the source's).")
@click.option(
    "--from",
    "source_format",
    type=FORMAT_CHOICE,
    default=None,
    help="Source format, when detection is ambiguous.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Write even if the output format cannot express everything; drops are recorded.",
)
@click.option("--max-shard-size", default=None, help="Shard the weights, e.g. 5GB (default: one model.safetensors).")
@click.option("--revision", default=None, help="Branch, tag or commit when SRC is a hub repo id.")
@click.option(
    "--verifier",
    default=None,
    help="Target (verifier) id to record, required for --format speculators if unknown.",
)
@click.option(
    "--aux-convention",
    type=click.Choice(["c-in", "c-out"]),
    default=None,
    help="Convention of the source's aux-layer ids when it cannot be inferred.",
)
@click.option(
    "--norm-output/--no-norm-output",
    default=None,
    help="Set norm_output with --to 3.1 (default: on; with --calibrate: chosen by measured acceptance).",
)
@click.option(
    "--calibrate",
    is_flag=True,
    help="With --to 3.1: fit the fc_norm gains on the target's aux states (least squares per channel), "
    "choose norm_output by held-out acceptance, then fine-tune distilling the source (--steps); needs --target.",
)
@click.option(
    "--target",
    "target_spec",
    default=None,
    help="Calibration target: directory, cached Hub id, or `smollm2`.",
)
@click.option(
    "--calibration-prompts",
    type=click.Path(dir_okay=False),
    default=None,
    help="Calibration prompt file (any verify prompt format); default fixtures/prompts/calibration.jsonl.",
)
@click.option(
    "--calibration-limit",
    type=click.IntRange(min=2),
    default=None,
    help="At most N calibration prompts per category (default: all); the last 2 of each category are held out "
    "for the acceptance measurements, the rest are fitted on.",
)
@click.option(
    "--calibration-tokens",
    type=click.IntRange(min=1),
    default=None,
    help="Target tokens generated per calibration prompt.  [default: 64]",
)
@click.option(
    "--steps",
    type=click.IntRange(min=0),
    default=None,
    help="Fine-tuning steps after the closed-form fit (training-time test, 3 unrolled draft steps); "
    "0: closed-form gains only.  [default: 20 where the drafter can be unrolled (one Llama layer)]",
)
@click.option(
    "--train",
    "train_scope",
    type=click.Choice(["norms", "all"]),
    default=None,
    help="What fine-tuning trains: the fc_norm gains only (the rest stays bit-exact) or every drafter weight.  "
    "[default: all]",
)
@click.option(
    "--lr", type=float, default=None, help="Fine-tuning learning rate (default 1e-2 for norms, 1e-4 for all)."
)
@click.option(
    "--label-weight",
    type=click.FloatRange(0, 1),
    default=None,
    help="Weight of the target's greedy tokens in the fine-tuning loss; the rest is KL to the source "
    "drafter's drafts.  [default: 0.1]",
)
@click.option("--device", default="cpu", show_default=True, help="Calibration device (cpu, cuda).")
@click.option("--overwrite", is_flag=True, help="Replace DST if it exists.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (schemas/convert-report.schema.json).")
@handle_errors
def convert_cmd(
    src,
    dst,
    to,
    fmt,
    source_format,
    force,
    max_shard_size,
    revision,
    verifier,
    aux_convention,
    norm_output,
    calibrate,
    target_spec,
    calibration_prompts,
    calibration_limit,
    calibration_tokens,
    steps,
    train_scope,
    lr,
    label_weight,
    device,
    overwrite,
    as_json,
) -> None:
    """Convert drafter SRC (directory or hub repo id) into DST: another format and/or EAGLE-3.1.

    Tensor bytes are copied, never decoded, except the tensors a calibrated upgrade fine-tunes or a fold
    rewrites (listed as replaced); DST is written atomically; SRC is never modified.
    """
    from .convert import convert
    from .render import byte_progress, print_convert

    if not calibrate and (steps is not None or train_scope or lr is not None or label_weight is not None):
        raise EaglehubError(
            "--steps, --train, --lr and --label-weight fine-tune a calibrated upgrade: they need --calibrate",
            hint="add --to 3.1 --calibrate --target T",
        )
    fold = to == "3" and force
    if not calibrate and not fold and (target_spec or calibration_prompts or calibration_limit or calibration_tokens):
        raise EaglehubError(
            "--target and the --calibration-* options are read only by --calibrate (and --to 3 --force)",
            hint="add --calibrate for the calibrated 3.1 upgrade, e.g. --to 3.1 --calibrate --target smollm2",
        )
    if fold and (calibrate or norm_output is not None):
        raise EaglehubError(
            "--calibrate and --norm-output apply to --to 3.1; --to 3 --force folds fc_norm into fc",
            hint="drop --calibrate / --norm-output",
        )
    tokens = {} if calibration_tokens is None else {"max_new_tokens": calibration_tokens}
    if to == "3" and force and not target_spec:
        raise EaglehubError(
            "--to 3 --force needs --target T: the folded fc columns use the aux states' mean RMS on T",
            hint="e.g. --to 3 --force --target smollm2",
        )
    common = dict(
        fmt=fmt,
        force=force,
        overwrite=overwrite,
        max_shard_size=max_shard_size,
        source_format=source_format,
        verifier=verifier,
        revision=revision,
        aux_convention=aux_convention,
    )
    if to == "3" and force and target_spec:
        from .calibrate import CalibrationOptions, fold_to_eagle3

        report = fold_to_eagle3(
            src,
            dst,
            CalibrationOptions(
                target=target_spec,
                prompts_file=calibration_prompts,
                limit=calibration_limit,
                device=device,
                **tokens,
            ),
            **common,
        )
    elif calibrate:
        from .calibrate import CalibrationOptions, calibrated_upgrade

        if to != "3.1" or not target_spec:
            raise EaglehubError(
                "--calibrate needs --to 3.1 and --target T", hint="e.g. --to 3.1 --calibrate --target smollm2"
            )
        opts = CalibrationOptions(
            target=target_spec,
            prompts_file=calibration_prompts,
            limit=calibration_limit,
            steps=steps,
            lr=lr,
            norm_output=norm_output,
            **tokens,
            device=device,
            **({"train": train_scope} if train_scope else {}),
            **({"label_weight": label_weight} if label_weight is not None else {}),
        )
        report = calibrated_upgrade(src, dst, opts, console=err_console, **common)
    else:
        with byte_progress(err_console, "converting") as progress:
            report = convert(
                src,
                dst,
                to=to,
                norm_output=True if norm_output is None else norm_output,
                progress=progress,
                **common,
            )
    if as_json:
        print_json(report)
        for w in report["warnings"]:
            err_console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False, soft_wrap=True)
    else:
        print_convert(report, console, err_console)


@main.command("quantize")
@click.argument("src")
@click.argument("dst", required=False)
@click.option(
    "--scheme",
    type=click.Choice(["fp8-dynamic", "fp8-block"]),
    default="fp8-dynamic",
    show_default=True,
    help="fp8-dynamic: float8 weights with per-channel scales, activations per token at run time; fp8-block: "
    "128x128 weight blocks (layers vLLM would refuse stay unquantized).",
)
@click.option(
    "--ignore",
    "ignore",
    multiple=True,
    help="Keep this module unquantized too (repeatable): re:<regex> matched against vLLM's module names "
    "(model.layers.N.mlp.down_proj) or a module name (down_proj).",
)
@click.option(
    "--keep-fc/--quantize-fc",
    "keep_fc",
    default=True,
    show_default=True,
    help="Keep fc (the aux-state fusion) unquantized.",
)
@click.option("--dry-run", is_flag=True, help="Print what would be quantized and kept, with sizes; write nothing.")
@click.option("--revision", default=None, help="Branch, tag or commit when SRC is a hub repo id.")
@click.option("--overwrite", is_flag=True, help="Replace DST if it exists.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (schemas/quantize-report.schema.json).")
@handle_errors
def quantize_cmd(src, dst, scheme, ignore, keep_fc, dry_run, revision, overwrite, as_json) -> None:
    """Quantize drafter SRC into DST in the compressed-tensors FP8 layout vLLM loads; lm_head, embed_tokens,
    norms, d2t and t2d keep their dtype. DST is written atomically; SRC is never modified."""
    from .quantize import quantize, render_report

    report = quantize(
        src,
        dst,
        scheme=scheme,
        ignore=ignore,
        keep_fc=keep_fc,
        overwrite=overwrite,
        dry_run=dry_run,
        revision=revision,
    )
    print_json(report) if as_json else render_report(report, console)


def _write_and_show(report: dict, as_json: bool, render, *outputs) -> None:
    """Write each ``(writer, path, label)`` whose path is set, then print the report as JSON or through
    ``render(report, console)`` followed by the written paths."""
    for writer, path, _ in outputs:
        if path:
            writer(report, path)
    if as_json:
        print_json(report)
        return
    render(report, console)
    for _, path, label in outputs:
        if path:
            console.print(f"{label}: {path}", highlight=False)


# --- verify (eaglehub.verify) -----------------------------------------------------------------


@main.command("verify")
@click.option(
    "--target",
    "target_spec",
    default=None,
    help="Target: model directory, cached Hub id, or `smollm2`; with a manifest, a target's name or spec "
    "(without --drafter: every drafter registered for it).",
)
@click.option(
    "--drafter",
    "drafters",
    multiple=True,
    help="EAGLE-3 drafter directory; repeat to verify several drafters against one target-alone run. "
    "With --manifest: a drafter's name or directory in it.",
)
@click.option(
    "-k",
    "--num-speculative-tokens",
    "k",
    type=int,
    default=3,
    show_default=True,
    help="Draft tokens per step.",
)
@click.option("--max-tokens", type=int, default=64, show_default=True, help="Output tokens per prompt (cap).")
@click.option(
    "--prompts",
    "prompts_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Prompt file, format detected from its first line: eaglehub JSONL (schemas/prompts.schema.json), "
    "MT-Bench / Spec-Bench question.jsonl (schemas/prompts-mtbench.schema.json; multi-turn), or plain "
    "text (one prompt per line, category = file name); default fixtures/prompts/eval.jsonl.",
)
@click.option("--category", "categories", multiple=True, help="Only this prompt category (repeatable).")
@click.option("--limit", type=int, default=None, help="At most N prompts per category.")
@click.option("--dtype", default="float32", show_default=True, help="Engine compute dtype.")
@click.option(
    "--engine-log",
    type=click.Path(file_okay=False),
    default=None,
    help="Keep the engine logs in this directory.",
)
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the JSON report here (schemas/verify-report.schema.json).",
)
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write a PNG of acceptance length per category and acceptance rate per position.",
)
@click.option(
    "--reference-report",
    "reference_report",
    type=click.Path(dir_okay=False),
    default=None,
    help="An earlier verify report: fail (E-VERIFY-AL-REGRESSION) when a drafter's AL fell below its entry "
    "there by more than --al-tolerance; no comparison when k, max tokens, dtype or prompts differ.",
)
@click.option(
    "--al-tolerance",
    type=click.FloatRange(0.0, 1.0, max_open=True),
    default=0.05,
    show_default=True,
    help="Relative AL drop tolerated against --reference-report (0.05 = 5 %, vLLM's CI rtol).",
)
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
    help="With a manifest: write each pair's report as DIR/<target>--<drafter>.json and DIR/summary.json "
    "(schemas/verify-summary.schema.json).",
)
@click.option(
    "--tensor-parallel-size", type=click.IntRange(min=1), default=None, help="vLLM tensor parallelism (GPUs)."
)
@click.option("--pipeline-parallel-size", type=click.IntRange(min=1), default=None, help="vLLM pipeline stages.")
@click.option(
    "--distributed-executor-backend",
    type=click.Choice(["mp", "ray", "uni", "external_launcher"]),
    default=None,
    help="How vLLM starts its workers.",
)
@click.option(
    "--engine",
    "engines",
    multiple=True,
    type=click.Choice(["auto", "vllm", "reference"]),
    help="Engine: vllm, reference (embedded PyTorch + transformers) or auto (vLLM when installed, else the "
    "reference engine; the default). Give two to compare them on the same pairs and prompts.",
)
@click.option(
    "--engine-tolerance",
    type=click.FloatRange(0.0, 1.0, max_open=True),
    default=0.05,
    show_default=True,
    help="With two engines: relative AL difference tolerated (E-VERIFY-ENGINES-DISAGREE beyond).",
)
@click.option("--device", default="cpu", show_default=True, help="Reference engine device (cpu, cuda).")
@click.option(
    "--tie-epsilon",
    type=click.FloatRange(min=0.0),
    default=None,
    help="Divergence forensics: top-2 logit gap below which a flip is a numerical near-tie "
    "(default by dtype: float32 0.01, float16 0.1, bfloat16 0.25).",
)
@click.option(
    "--sampling-trials",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Also test sampling (T > 0) losslessness with this many trials per prefix on the reference "
    "engine (2000000 finds a 1 % bias in the acceptance probability); 0: no test.",
)
@click.option(
    "--sampling-temperature",
    type=float,
    default=1.0,
    show_default=True,
    help="Temperature of the sampling test.",
)
@click.option(
    "--sampling-prefixes",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="Prefixes of the sampling test: the first prompt of this many categories.",
)
@click.option(
    "--engine-samples",
    type=click.IntRange(min=0),
    default=2000,
    show_default=True,
    help="With --sampling-trials: samples per prefix of vLLM's own sampled output (its second token "
    "tested against the target's distribution); 0: skip.",
)
@click.option(
    "--baseline-drafter",
    default=None,
    help="A drafter to compare the others with on the same prompts (e.g. the unquantized source of a quantized drafter): both acceptance lengths, their ratio and the size on disk of both.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the report (with a manifest: the summary) as JSON instead of tables.",
)
@handle_errors
def verify_cmd(
    target_spec,
    drafters,
    k,
    max_tokens,
    prompts_file,
    categories,
    limit,
    dtype,
    engine_log,
    report_path,
    plot_path,
    reference_report,
    al_tolerance,
    as_json,
    manifest,
    report_dir,
    tensor_parallel_size,
    pipeline_parallel_size,
    distributed_executor_backend,
    engines,
    engine_tolerance,
    device,
    tie_epsilon,
    sampling_trials,
    sampling_temperature,
    sampling_prefixes,
    engine_samples,
    baseline_drafter,
) -> None:
    """Prove TARGET + DRAFTER lossless (greedy) and measure acceptance, in vLLM or the reference engine.

    Exit code 1 when any drafter has an error finding: a prompt not token-identical to the target
    alone (E-VERIFY-LOSSLESS), a drafter not wired (position-0 acceptance ~ 0, E-VERIFY-NOT-WIRED),
    inconsistent engine counters (E-VERIFY-COUNTERS), an AL regression against --reference-report
    (E-VERIFY-AL-REGRESSION), two engines disagreeing (E-VERIFY-ENGINES-DISAGREE) or a biased
    sampling test (E-SAMPLING-BIASED); warnings (W-VERIFY-LOW-AL: AL below 1.3; W-VERIFY-NEAR-TIE:
    divergences only at numerical near-ties, shown by forensics) never fail. 0 otherwise; 2 for
    usage errors, a bad reference report or a missing engine.

    With a pairing manifest (--manifest FILE, or ./eaglehub.toml without --drafter) every pair is
    verified, pairs of one target with the same settings sharing one target-alone run; the manifest's
    engine settings apply per pair, options given here override them. Exit code 1 when any pair fails.
    """
    from .pairing import exit_code as pairs_exit_code
    from .pairing import render_summary, run_pairs, select
    from .verify import VerifyOptions, exit_code, make_engines, run_verify, write_plot, write_report
    from .verify_view import render_report

    engine_options = {
        name: value
        for name, value in (
            ("tensor_parallel_size", tensor_parallel_size),
            ("pipeline_parallel_size", pipeline_parallel_size),
            ("distributed_executor_backend", distributed_executor_backend),
        )
        if value is not None
    }
    opts = VerifyOptions(
        target=target_spec or "",
        drafters=list(drafters),
        k=k,
        max_tokens=max_tokens,
        prompts_file=prompts_file,
        categories=list(categories),
        limit=limit,
        dtype=dtype,
        reference_report=reference_report,
        al_tolerance=al_tolerance,
        engine_options=engine_options,
        engines=list(engines) or ["auto"],
        engine_tolerance=engine_tolerance,
        tie_epsilon=tie_epsilon,
        sampling_trials=sampling_trials,
        sampling_temperature=sampling_temperature,
        sampling_prefixes=sampling_prefixes,
        engine_samples=engine_samples,
        device=device,
        baseline_drafter=baseline_drafter,
    )
    chosen = make_engines(opts.engines, log_dir=engine_log, device=device)
    selection = select(manifest, target_spec, drafters)
    if selection is None and report_dir:
        raise EaglehubError(
            "--report-dir needs a manifest (one report per pair)", hint="use --report FILE with --drafter"
        )
    if selection is not None:
        if baseline_drafter:
            raise EaglehubError(
                "--baseline-drafter compares drafters of one run; a manifest runs pairs",
                hint="use --target T --drafter D --baseline-drafter B",
            )
        if report_path or plot_path:
            raise EaglehubError(
                "--report and --plot write one report; a manifest gives one per pair",
                hint="use --report-dir DIR with a manifest",
            )
        ctx = click.get_current_context()
        defaults = (
            ParameterSource.DEFAULT,
            ParameterSource.DEFAULT_MAP,
        )  # given options override the manifest
        given = {n for n in ("k", "dtype") if ctx.get_parameter_source(n) not in defaults}
        overrides = {
            **engine_options,
            **({"num_speculative_tokens": k} if "k" in given else {}),
            **({"dtype": dtype} if "dtype" in given else {}),
        }
        summary = run_pairs(selection, opts, overrides, engines=chosen, console=err_console, report_dir=report_dir)
        if as_json:
            print_json(summary)
        else:
            render_summary(summary, console)
        sys.exit(pairs_exit_code(summary))
    report = run_verify(opts, engines=chosen, console=err_console)
    from .baseline_compare import render_baseline

    def render(r: dict, c: Console) -> None:
        render_report(r, c)
        render_baseline(r, c)

    _write_and_show(
        report,
        as_json,
        render,
        (write_report, report_path, "report"),
        (write_plot, plot_path, "plot"),
    )
    sys.exit(exit_code(report))


# --- speedup (eaglehub.speedup) ---------------------------------------------------------------


@main.command("speedup")
@click.option("--target", "target_spec", required=True, help="Target: model directory, cached Hub id, or `smollm2`.")
@click.option("--drafter", required=True, help="EAGLE-3 drafter directory.")
@click.option(
    "-k",
    "--num-speculative-tokens",
    "k",
    type=int,
    default=3,
    show_default=True,
    help="Draft tokens per step.",
)
@click.option(
    "--concurrency",
    default="1,4,16",
    show_default=True,
    help="Comma-separated concurrency levels: prompts decoded together in one batch.",
)
@click.option("--max-tokens", type=int, default=64, show_default=True, help="Output tokens per prompt (cap).")
@click.option("--limit", type=int, default=None, help="At most N prompts per category (cycled to fill each batch).")
@click.option(
    "--prompts",
    "prompts_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Prompt file in any format verify reads (eaglehub JSONL, MT-Bench / Spec-Bench JSONL, plain text); "
    "the first turn of each prompt is used; default fixtures/prompts/eval.jsonl.",
)
@click.option("--dtype", default="float32", show_default=True, help="Engine and cost-timing compute dtype.")
@click.option(
    "--prefix-tokens",
    type=int,
    default=256,
    show_default=True,
    help="KV-cache length (tokens) behind the timed target and drafter forwards.",
)
@click.option("--repeats", type=int, default=10, show_default=True, help="Timed repeats per forward (median).")
@click.option(
    "--engine-log",
    type=click.Path(file_okay=False),
    default=None,
    help="Keep the engine logs in this directory.",
)
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the JSON report here (schemas/speedup-report.schema.json).",
)
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write a PNG of tokens/s and measured vs expected speedup per concurrency.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of tables.")
@handle_errors
def speedup_cmd(
    target_spec,
    drafter,
    k,
    concurrency,
    max_tokens,
    limit,
    prompts_file,
    dtype,
    prefix_tokens,
    repeats,
    engine_log,
    report_path,
    plot_path,
    as_json,
) -> None:
    """Output tokens/s of TARGET alone and with DRAFTER per concurrency level (vLLM, greedy), and the
    speedup expected from the measured acceptance length and forward costs (Leviathan et al. 2023).

    CPU speedups are not GPU speedups: on a CPU a (k+1)-token verify costs about 1.7 single-token
    forwards. Exit 0 when measured; 2 for usage errors or a missing engine; 1 when the drafter fails
    validation or the engine fails.
    """
    from .engines.vllm_engine import VllmEngine
    from .speedup import (
        SpeedupOptions,
        parse_concurrency,
        plot_speedup,
        render_report,
        run_speedup,
        write_report,
    )

    opts = SpeedupOptions(
        target=target_spec,
        drafter=drafter,
        k=k,
        concurrency=parse_concurrency(concurrency),
        max_tokens=max_tokens,
        prompts_file=prompts_file,
        limit=limit,
        dtype=dtype,
        prefix_tokens=prefix_tokens,
        repeats=repeats,
    )
    report = run_speedup(opts, engine=VllmEngine(log_dir=engine_log), console=err_console)
    _write_and_show(
        report,
        as_json,
        render_report,
        (write_report, report_path, "report"),
        (plot_speedup, plot_path, "plot"),
    )


# --- diagnose (eaglehub.diagnose) -------------------------------------------------------------


@main.command("diagnose")
@click.option("--target", "target_spec", required=True, help="Target: model directory, cached Hub id, or `smollm2`.")
@click.option(
    "--drafter",
    "drafters",
    multiple=True,
    required=True,
    help="EAGLE-3 / EAGLE-3.1 drafter directory; repeat to compare (labelled by EAGLE version).",
)
@click.option(
    "--engine",
    "engine_name",
    type=click.Choice(["reference", "vllm"]),
    default="reference",
    show_default=True,
    help="reference: PyTorch, also hidden-state norm and sink attention per depth; vllm: counters only.",
)
@click.option(
    "--device",
    type=click.Choice(["cpu", "cuda"]),
    default="cpu",
    show_default=True,
    help="Device of the reference engine.",
)
@click.option(
    "--depth",
    type=click.IntRange(1, 8),
    default=8,
    show_default=True,
    help="Draft tokens per step (k), i.e. the deepest draft position measured.",
)
@click.option(
    "--contexts",
    default="0,1024,2048,4096",
    show_default=True,
    help="Prompt lengths in target tokens (chat template included) to pad to; 0 = unpadded. "
    "Lengths the target's context cannot hold with --max-tokens are skipped.",
)
@click.option(
    "--prompts",
    "prompts_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Prompt file in any format verify reads (eaglehub JSONL, MT-Bench / Spec-Bench JSONL, plain text); "
    "the first turn of each prompt is used; default fixtures/prompts/eval.jsonl.",
)
@click.option("--category", "categories", multiple=True, help="Only this prompt category (repeatable).")
@click.option("--limit", type=int, default=None, help="At most N prompts per category.")
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Output tokens per prompt (cap).",
)
@click.option("--dtype", default="float32", show_default=True, help="Engine compute dtype.")
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the JSON report here (schemas/diagnose-report.schema.json).",
)
@click.option(
    "--plot-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Write PNG plots here: conditional acceptance per position, AL vs context, and with the "
    "reference engine hidden-state norm and sink attention mass per depth.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of tables.")
@handle_errors
def diagnose_cmd(
    target_spec,
    drafters,
    engine_name,
    device,
    depth,
    contexts,
    prompts_file,
    categories,
    limit,
    max_tokens,
    dtype,
    report_path,
    plot_dir,
    as_json,
) -> None:
    """Show the drift EAGLE 3.1 targets: acceptance per draft position (conditional) and acceptance
    length at growing context lengths, prompts padded with real text to exact token counts.

    Exit 0 when measured (the numbers never fail); 2 for usage errors, a context list the target
    cannot hold or a missing engine; 1 when a drafter fails validation or the engine fails.
    """
    from .diagnose import (
        DiagnoseOptions,
        parse_contexts,
        render_report,
        run_diagnose,
        write_plots,
        write_report,
    )

    opts = DiagnoseOptions(
        target=target_spec,
        drafters=list(drafters),
        engine=engine_name,
        depth=depth,
        contexts=parse_contexts(contexts),
        prompts_file=prompts_file,
        categories=list(categories),
        limit=limit,
        max_tokens=max_tokens,
        dtype=dtype,
        device=device,
    )
    report = run_diagnose(opts, console=err_console)
    if report_path:
        write_report(report, report_path)
    plots = write_plots(report, plot_dir) if plot_dir else []
    if as_json:
        print_json(report)
    else:
        render_report(report, console)
        if report_path:
            console.print(f"report: {report_path}", highlight=False)
        for path in plots:
            console.print(f"plot: {path}", highlight=False)


# --- publish / pipeline (eaglehub.publish, eaglehub.pipeline) ------------------------------------


@main.command("publish")
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
    help="Print the plan (files, sizes, status, repo, revision, parent commit); read only, nothing is written.",
)
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Verify report for SRC (default: SRC/eaglehub-verify.json, SRC.verify.json or verify.json beside SRC).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Publish although validation or verification fails or is missing (recorded in the card).",
)
@click.option(
    "--target", "target_spec", default=None, help="Target to validate against (default: the verify report's)."
)
@click.option("--base-model", default=None, help="Card base_model (default: the target's Hub id when known).")
@click.option(
    "--parent-commit",
    default=None,
    help="Fail unless the revision is still at this commit (the parent_commit of a reviewed dry run).",
)
@click.option("--message", default=None, help="Commit message.")
@click.option("--endpoint", default=None, help="Hub endpoint (default: huggingface_hub's configured one, HF_ENDPOINT).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (schemas/publish-report.schema.json).")
@handle_errors
def publish_cmd(
    src,
    repo,
    revision,
    create_pr,
    tag,
    private,
    dry_run,
    report_path,
    force,
    target_spec,
    base_model,
    parent_commit,
    message,
    endpoint,
    as_json,
) -> None:
    """Publish drafter SRC to the Hugging Face Hub in one commit (a pull request by default), pinned to
    the revision's head: a concurrent change makes it fail, never overwritten.

    SRC must pass `eaglehub validate` and have a passing verify report for these very files (sha256);
    the model card (metadata, provenance, measured acceptance, the `vllm serve` line) is generated.
    The token comes from HF_TOKEN or the saved login and is never printed. Exit 0 published (or
    planned), 1 refused or the revision moved, 2 token / permission / repo / usage errors.
    """
    from .publish import PublishOptions, publish
    from .publish.view import render_publish

    opts = PublishOptions(
        src=src,
        repo=repo,
        revision=revision,
        create_pr=create_pr,
        tag=tag,
        private=private,
        dry_run=dry_run,
        force=force,
        report=report_path,
        target=target_spec,
        base_model=base_model,
        endpoint=endpoint,
        parent_commit=parent_commit,
        message=message,
    )
    with err_console.status("publish: hashing, validating, reading the Hub"):
        report = publish(opts)
    print_json(report) if as_json else render_publish(report, console)


@main.command("pipeline")
@click.argument("manifest", type=click.Path(dir_okay=False))
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False),
    default="pipeline-work",
    show_default=True,
    help="Where converted / quantized checkpoints and verify reports go (DIR/<target>--<drafter>/).",
)
@click.option(
    "--publish",
    "do_publish",
    is_flag=True,
    help="Really publish the drafters with a `publish` section (default: a dry run that writes nothing).",
)
@click.option(
    "--drafter",
    "drafters",
    multiple=True,
    help="Only this drafter of the manifest (name or directory; repeatable).",
)
@click.option("--endpoint", default=None, help="Hub endpoint (default: huggingface_hub's configured one, HF_ENDPOINT).")
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the summary here (schemas/pipeline-report.schema.json).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@handle_errors
def pipeline_cmd(manifest, work_dir, do_publish, drafters, endpoint, report_path, as_json) -> None:
    """For each drafter of MANIFEST: validate → convert → (quantize) → verify → publish, as its
    manifest entry says (schemas/manifest.schema.json: `convert`, `quantize`, `verify`, `publish`).

    Publishing is a dry run unless --publish. Exit 0 when every drafter passed every step, 1 when a
    step failed (that drafter's later steps are skipped), 2 for a bad manifest or options.
    """
    from .pipeline import exit_code, render_summary, run_pipeline, write_summary

    summary = run_pipeline(
        manifest, work_dir, publish=do_publish, endpoint=endpoint, drafters=drafters, console=err_console
    )
    _write_and_show(summary, as_json, render_summary, (write_summary, report_path, "report"))
    sys.exit(exit_code(summary))


if __name__ == "__main__":
    main()
