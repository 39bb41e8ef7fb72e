"""``eaglehub verify``: prove a target + EAGLE-3 drafter pair lossless in an engine and measure acceptance.

One target-alone run is the baseline; each drafter then runs with the same target, the same prompt
token ids (chat template applied once, :mod:`eaglehub.engines.chat`), greedy decoding, the same
seed and the same batches (one batch per prompt category, so the counters are read per category).
Per prompt the output token ids are compared with the baseline (exact ids: on CPU float32 no
numerical-tie divergence is expected, docs/verification.md §4 pitfall 1). Acceptance metrics follow
:mod:`eaglehub.measure.acceptance` (docs/vllm.md §9). Multi-turn prompts (MT-Bench, Spec-Bench) are one request
per (prompt, turn), ids ``<id>``, ``<id>#2``, …: the baseline runs turn by turn so that its
decoded outputs become the replies in the next turn's input, and every other run receives those
same ids (:func:`run_by_turn`, :data:`MULTI_TURN_DEFINITION`).

Each drafter gets findings with the registered ``stage="verify"`` codes of :mod:`eaglehub.findings`:

* ``E-VERIFY-LOSSLESS``: a prompt's output differs from the baseline (docs/failure-kinds.md F23) and
  divergence forensics (:mod:`eaglehub.verify.forensics`) does not show a numerical near-tie there;
* ``W-VERIFY-NEAR-TIE``: every divergence is a near-tie of the target's top-2 logits;
* ``E-VERIFY-NOT-WIRED``: position-0 acceptance ≈ 0 (Cross-cutting: F2, F5, F6, F8, F12, F17);
* ``E-VERIFY-COUNTERS``: a category's counters break their invariants (an engine bug);
* ``W-VERIFY-LOW-AL``: AL below :data:`~eaglehub.measure.acceptance.LOW_AL_THRESHOLD`, overall or per
  category (F13);
* ``E-VERIFY-AL-REGRESSION``: with ``--reference-report``, AL below the reference drafter's by more
  than the tolerance (F26; see :func:`compare_with_reference`);
* ``E-VERIFY-ENGINES-DISAGREE`` and the other engine's errors: with two engines
  (:mod:`eaglehub.verify.cross_engine`);
* ``E-SAMPLING-BIASED``: with ``--sampling-trials``, the T > 0 test of :mod:`eaglehub.verify.sampling_check`;
* ``E-VERIFY-SAMPLED-COLLAPSE``: with ``--temperature``, a drafter wired greedily whose sampled position-0
  acceptance is ≈ 0 (the engine's sampled path, :mod:`eaglehub.verify.sampled`).

With ``--temperature T > 0`` each drafter also runs sampled in the primary engine, every request
``--samples`` times: its ``sampled_acceptance`` section (:mod:`eaglehub.verify.sampled`) gives the sampled
AL with a confidence interval next to the greedy AL. ``--chat-template-kwargs`` reach the chat template
once, for every run (:mod:`eaglehub.engines.chat`).

Engines: ``vllm`` (:mod:`eaglehub.engines.vllm_engine`), ``reference`` (the embedded PyTorch engine,
:mod:`eaglehub.engines.reference`), ``auto`` = vLLM when installed, else the reference engine.

A drafter passes when it has no error finding; warnings never change the exit code. The report (a
dict valid against ``schemas/verify-report.schema.json``) records all of it; :func:`exit_code` is 1
when any drafter fails, else 0.
"""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path
from typing import Any

from eaglehub.checks.validate import preflight
from eaglehub.engines.base import Engine, RunResult, RunSpec, SpecCounters
from eaglehub.engines.registry import make_engines
from eaglehub.errors import EaglehubError
from eaglehub.measure.curve import attach as attach_curves
from eaglehub.measure.prompts import default_prompts_path, load_prompts
from eaglehub.measure.requests import Request, chat_codec, requests_of, run_by_turn
from eaglehub.measure.runner import progress_runner, resolve_drafter, run_all, run_label
from eaglehub.verify import cross_engine, forensics, production
from eaglehub.verify.options import MAX_K, MIN_SAMPLING_TRIALS, VerifyOptions
from eaglehub.verify.preflight import judged_profiles, profiles_section
from eaglehub.verify.regression import (
    load_reference_report,
)
from eaglehub.verify.report import build_report, validate_report
from eaglehub.verify.sampled import check_served_settings

"""2: per-drafter ``findings`` with registered codes (was ``failures`` with ad-hoc codes), the
prompt file's sha256, and the ``reference`` comparison."""


# --- reference report (F26) ----------------------------------------------------------------------


def forensics_for(
    prompt_ids: dict[str, list[int]],
    baseline: RunResult,
    load_target,
    dtype: str,
    epsilon: float | None,
    decode=None,
):
    """The ``explain`` callable of :func:`drafter_report`: loads the target (``load_target()`` →
    :class:`~eaglehub.engines.reference.ReferenceTarget`) only when a prompt diverges, then
    :func:`eaglehub.verify.forensics.explain` on each divergence."""
    order = {pid: i for i, pid in enumerate(prompt_ids)}

    def explain(rows: list[dict], run: RunResult) -> tuple[dict[str, dict], str | None]:
        if not rows:
            return {}, None
        divs = [
            forensics.Divergence(
                r["id"],
                prompt_ids[r["id"]],
                baseline.outputs[order[r["id"]]],
                run.outputs[order[r["id"]]],
                r["first_divergence"],
            )
            for r in rows
        ]
        try:
            target = load_target()
        except EaglehubError as exc:  # forensics explains; it must not hide the divergence it cannot explain
            return {}, f"no divergence forensics: {exc.message}"
        found = forensics.explain(target, divs, forensics.tie_epsilon(dtype, epsilon), decode)
        return {f["id"]: f for f in found}, None

    return explain


def _check_options(opts: VerifyOptions) -> None:
    if opts.k < 1 or opts.max_tokens < 1:
        raise EaglehubError("-k and --max-tokens must be at least 1", hint="e.g. -k 3 --max-tokens 64")
    if not opts.drafters:
        raise EaglehubError("give at least one --drafter")
    for name, value in (("--al-tolerance", opts.al_tolerance), ("--engine-tolerance", opts.engine_tolerance)):
        if not 0.0 <= value < 1.0:  # also refuses NaN
            raise EaglehubError(f"{name} must be a fraction in [0, 1), got {value}", hint="5 % is 0.05")
    if opts.sampling_trials and not MIN_SAMPLING_TRIALS <= opts.sampling_trials:
        raise EaglehubError(
            f"--sampling-trials {opts.sampling_trials} is too few for a chi-square test",
            hint=f"give at least {MIN_SAMPLING_TRIALS} (2000000 finds a 1 % bias), or 0 for no test",
        )
    if opts.sampling_trials and not 0.05 <= opts.sampling_temperature <= 10:  # also refuses NaN and inf
        raise EaglehubError(
            f"--sampling-temperature must be in [0.05, 10], got {opts.sampling_temperature}",
            hint="the sampling test needs T > 0; 1.0 is the target's own distribution",
        )
    if opts.tie_epsilon is not None and not (math.isfinite(opts.tie_epsilon) and opts.tie_epsilon >= 0):
        raise EaglehubError(
            f"--tie-epsilon must be a finite logit gap >= 0, got {opts.tie_epsilon}",
            hint="leave it out for the dtype's default (float32: 0.01)",
        )
    check_served_settings(opts)
    if opts.k > MAX_K:
        raise EaglehubError(
            f"-k {opts.k} is more draft tokens than any EAGLE drafter proposes usefully",
            hint=f"use at most {MAX_K} (the manifest schema's bound too)",
        )


"""The reply rule of :mod:`eaglehub.engines.chat`, as the report's ``definitions.multi_turn``."""


def run_verify(
    opts: VerifyOptions, engine: Engine | None = None, console=None, engines: list[Engine] | None = None
) -> dict:
    """Run the baseline and every drafter in each engine, return the validated report.

    ``engines`` (or one ``engine``; default :func:`make_engines` of ``opts.engines``): the first is
    primary; each further one is compared with it (:mod:`eaglehub.verify.cross_engine`). ``console``: a rich
    Console for the progress bar (``None``: no progress display).

    Multi-turn prompts (MT-Bench, Spec-Bench): each (prompt, turn) is a :class:`Request`. The primary
    engine runs the target alone turn by turn (:func:`run_by_turn`), its outputs becoming the
    replies in the next turn's input; every other run (each drafter, each further engine's baseline
    and drafters) then takes all requests at once with those token ids. Single-turn sets run the
    baseline once, as one phase.

    Raises:
        EaglehubError: bad target/drafter/prompts/options or reference report (exit 2), engine
            missing (exit 2), a drafter with error findings for an engine's profile or one asked for (exit 1,
            :func:`preflight`, :mod:`eaglehub.verify.preflight`) or engine
            failure (exit 1).
    """
    from eaglehub.target import resolve_target

    _check_options(opts)
    # a bad reference is a usage error: refuse it before minutes of engine work
    reference = load_reference_report(opts.reference_report) if opts.reference_report else None
    engines = engines or ([engine] if engine is not None else make_engines(opts.engines, device=opts.device))
    for e in engines:
        e.version()  # fail fast, before any model work, when an engine is missing
    production.check_features(opts, [e.name for e in engines])
    drafters = [
        resolve_drafter(d) for d in [*opts.drafters, *([opts.baseline_drafter] if opts.baseline_drafter else [])]
    ]
    target = resolve_target(opts.target)
    judged, _ = judged_profiles(engines, opts.profiles)
    for d in drafters:
        preflight(d, target, tuple(p.id for p in judged))
    prompts_file = Path(opts.prompts_file) if opts.prompts_file else None
    prompts = load_prompts(prompts_file, opts.categories, opts.limit)
    requests = requests_of(prompts)
    encode, decode = chat_codec(target, prompts, opts.chat_template_kwargs)
    context = None
    if opts.context is not None:
        context, encode, opts = padded_context(target, prompts, requests, opts, console)
    groups = [r.category for r in requests]
    specs = [
        RunSpec(
            target,
            d,
            opts.k,
            opts.max_tokens,
            opts.dtype,
            opts.seed,
            opts.max_model_len,
            engine_options=production.engine_options(opts),
            one_batch=opts.in_flight is not None,
        )
        for d in (None, *drafters)  # the target alone first: the baseline
    ]
    load_target = _target_loader(engines, target, opts)
    file = (prompts_file or default_prompts_path()).resolve()
    multi_turn = any(r.turn > 1 for r in requests)
    reports, all_results, ids = [], [], None
    for e in engines:
        if ids is None:  # the primary engine's baseline writes the replies every later input holds
            with progress_runner(console) as run:
                baseline, ids = run_by_turn(
                    lambda x, g, turn: run(e, specs[0], x, g, run_label(specs[0], turn if multi_turn else None)),
                    requests,
                    encode,
                    decode,
                )
                results = [baseline] + [run(e, s, ids, groups, run_label(s)) for s in specs[1:]]
        else:
            results = run_all(e, specs, ids, groups, console)
        explain = forensics_for(
            {r.id: i for r, i in zip(requests, ids)}, results[0], load_target, opts.dtype, opts.tie_epsilon
        )
        explain, numerics = production.numerics_explainer(
            explain,
            results[0],
            partial(run_all, e, [production.plain_spec(specs[0], opts)], ids, groups, console),
            {r.id: i for i, r in enumerate(requests)},
        )
        reports.append(
            build_report(
                opts,
                target,
                prompts,
                file,
                results[0],
                list(zip(drafters, results[1:])),
                reference,
                explain,
                requests,
                context,
            )
        )
        production.attach(reports[-1], opts, results, drafters, [len(i) for i in ids], numerics)
        all_results.append(results)
    report = reports[0]
    if len(engines) > 1:
        _attach_cross_engine(report, reports[1:], all_results, opts.engine_tolerance)
    if opts.temperature > 0:
        assert ids is not None  # set by the first engine's baseline
        _attach_sampled(report, engines[0], specs[1:], requests, ids, opts, console)
    if opts.sampling_trials:
        assert ids is not None  # set by the first engine's baseline
        _attach_sampling_tests(report, engines, specs[1:], requests, ids, opts)
    if opts.baseline_drafter:
        from eaglehub.verify.baseline import attach_baseline

        attach_baseline(report, drafters[-1])
    if opts.probe:
        _attach_probes(report, drafters, opts, console)
    report["profiles"] = profiles_section(engines, opts.profiles)
    validate_report(report)
    return report


def padded_context(target: Path, prompts, requests, opts: VerifyOptions, console):
    """``verify --context``: every prompt padded to ``opts.context`` tokens (:func:`build_contexts`).

    Returns ``(section, encode, opts)``: the report's ``settings.context``, an ``encode`` for
    :func:`run_by_turn` that hands out the padded ids, and ``opts`` with a ``max_model_len`` that holds
    the longest prompt, its output and the last verify pass's draft tokens (at most the target's limit).

    Raises:
        UsageError: multi-turn prompts, or a length the target cannot hold (with the longest that fits).
    """
    from dataclasses import replace

    from eaglehub.errors import UsageError
    from eaglehub.measure.context import context_error, max_context
    from eaglehub.measure.padding import build_contexts, padding_source

    assert opts.context is not None  # the caller pads only with --context
    if any(r.turn > 1 for r in requests):
        raise UsageError(
            "--context pads single-turn prompts; this prompt file has multi-turn conversations",
            hint="give a single-turn prompt file (--prompts), or leave --context out",
        )
    args = (target, [p.text for p in prompts], [opts.context], opts.max_tokens, opts.padding, opts.context_fit)
    if console is None:
        built, skipped = build_contexts(*args, template_kwargs=opts.chat_template_kwargs)
    else:
        with console.status(f"padding {len(prompts)} prompts to {opts.context} tokens"):
            built, skipped = build_contexts(*args, template_kwargs=opts.chat_template_kwargs)
    if not built:
        raise context_error(opts.context, skipped[0].note, max_context(target), opts.max_tokens)
    padded = built[0]
    longest = max(padded.lengths)
    limit = max_context(target)
    need = longest + opts.max_tokens + opts.k
    max_model_len = min(max(opts.max_model_len, need), limit) if limit else max(opts.max_model_len, need)
    section = {
        "requested": opts.context,
        "fit_to_target": opts.context_fit,
        "context_tokens": padded.context_tokens,
        "prompt_tokens": padded.lengths,
        "padding_tokens": padded.padding_tokens,
        "padding": padding_source(opts.padding),
    }

    def encode(convs: list) -> list[list[int]]:
        if len(convs) != len(padded.ids):  # single-turn: one batch of every request, in order
            raise AssertionError("padded prompts and requests out of step")
        return padded.ids

    return section, encode, replace(opts, max_model_len=max_model_len)


def _attach_probes(report: dict, drafters: list[Path], opts: VerifyOptions, console) -> None:
    """``verify --probe``: each drafter's probe report (``probe-report.schema.json``) under ``probe``; its
    E-PROBE-READING findings stay in it (they are the probe's), and fail the drafter."""
    from eaglehub.probe.run import ProbeOptions, probe

    for entry, path in zip(report["drafters"], drafters):
        say = (lambda text, name=path.name: console.print(f"probe {name}: {text}")) if console is not None else None
        entry["probe"] = probe(
            path,
            ProbeOptions(
                target=opts.target,
                prompts_file=opts.prompts_file,
                limit=opts.limit,
                max_tokens=opts.max_tokens,
                k=opts.k,
                device=opts.device,
            ),
            progress=say,
        )
    _refresh_passed(report)


def _target_loader(engines: list[Engine], target: Path, opts: VerifyOptions):
    """Forensics' target: the reference engine's loaded one when it runs, else loaded once on demand."""
    from eaglehub.engines.reference import ReferenceEngine

    ref = next((e for e in engines if isinstance(e, ReferenceEngine)), None) or ReferenceEngine(device=opts.device)
    return lambda: ref.target(target, opts.dtype)


def _refresh_passed(report: dict) -> None:
    for d in report["drafters"]:
        d["findings"].sort(key=lambda f: f["severity"] != "error")
        # a probe fails the drafter on its errors (a beaten reading); an inconclusive field is its warning
        probed = d.get("probe", {}).get("findings", [])
        d["passed"] = not any(f["severity"] == "error" for f in d["findings"] + probed)
    report["passed"] = all(d["passed"] for d in report["drafters"])


def _attach_cross_engine(report: dict, others: list[dict], results: list[list[RunResult]], tolerance: float) -> None:
    """``cross_engine`` section: each other engine's report parts and its comparison with the primary."""
    section: dict[str, Any] = {"tolerance": tolerance, "engines": []}
    for other, runs in zip(others, results[1:]):
        rows, extra = cross_engine.compare(report, other, results[0], runs, tolerance)
        for d, found in zip(report["drafters"], extra):
            d["findings"] += [f.as_dict() for f in found]
        section["engines"].append(
            {
                "engine": other["engine"],
                "baseline": other["baseline"],
                "comparison": rows,
                "drafters": other["drafters"],
            }
        )
    report["cross_engine"] = section
    _refresh_passed(report)


def _attach_sampled(
    report: dict,
    engine: Engine,
    specs: list[RunSpec],
    requests: list[Request],
    ids: list[list[int]],
    opts: VerifyOptions,
    console,
) -> None:
    """Each drafter's ``sampled_acceptance`` section: its sampled run in the primary engine
    (:mod:`eaglehub.verify.sampled`), next to its greedy AL."""
    from eaglehub.verify import sampled

    for d, run in zip(report["drafters"], sampled.run_sampled(engine, specs, requests, ids, opts, console)):
        greedy = SpecCounters.from_dict(d["acceptance"]["overall"])
        d["sampled_acceptance"], found = sampled.sampled_acceptance(run, requests, opts, greedy)
        d["findings"] += [f.as_dict() for f in found]
    attach_curves(report)  # the sampled runs' curves
    _refresh_passed(report)


def _attach_sampling_tests(
    report: dict,
    engines: list[Engine],
    specs: list[RunSpec],
    requests: list[Request],
    ids: list[list[int]],
    opts: VerifyOptions,
) -> None:
    """Each drafter's ``sampling_test`` section (:mod:`eaglehub.verify.sampling_check`), on the reference
    engine, at the first request of each category (its id and category stand in for a prompt's)."""
    from dataclasses import replace

    from eaglehub.engines.reference import ReferenceEngine
    from eaglehub.verify.sampling_check import first_per_category, run_engine_sampling_test, run_sampling_test

    ref = next((e for e in engines if isinstance(e, ReferenceEngine)), None) or ReferenceEngine(device=opts.device)
    chosen = first_per_category(requests, ids, opts.sampling_prefixes)
    for d, spec in zip(report["drafters"], specs):
        hot = replace(spec, temperature=opts.sampling_temperature)
        section, found = run_sampling_test(ref, hot, chosen, opts.sampling_trials)
        section["engine_outputs"] = []
        for e in engines:
            if opts.engine_samples and not isinstance(e, ReferenceEngine):  # the reference rule is tested above
                part, more = run_engine_sampling_test(
                    e, hot, chosen, opts.engine_samples, ref.target(spec.target, opts.dtype)
                )
                section["engine_outputs"].append(part)
                found += more
        d["sampling_test"] = section
        d["findings"] += [f.as_dict() for f in found]
    _refresh_passed(report)
