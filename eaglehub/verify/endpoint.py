"""``eaglehub verify --endpoint URL``: the drafter measured where it is served.

The drafter run is the server's (:class:`~eaglehub.endpoint.engine.EndpointEngine`): every request of
the prompt set, greedy, at ``--concurrency``; acceptance from the server's own counters (each
response's per-request spec-decode metrics, cross-checked with the delta of its ``/metrics``
counters). The baseline is the target alone, greedy: ``--baseline-endpoint`` (the target served
alone) or, when ``--target`` is local, a local run in the chosen engine. Outputs are compared per
request with the same code, findings and divergence forensics (when the target is local) as
``verify``'s own runs (:mod:`eaglehub.verify.report`); the report is the verify report with an
``endpoint`` section (schemas/verify-report.schema.json).

API: ``completions`` (default with a local target) sends the token ids the offline engines see, the
chat template applied once here (:mod:`eaglehub.engines.chat`); ``chat`` sends messages and the
server applies its own template (single-turn prompt sets; a ``--baseline-endpoint`` is needed, as
the local engines take token ids).

Failures (docs/verify.md): nothing answered (a refused connection, every request failed) is a
one-line :class:`~eaglehub.errors.EndpointError` (exit 1); some requests failed: the report keeps the
requests both runs answered and says which failed and why (E-ENDPOINT-REQUESTS-FAILED); a server that
does not speculate: E-ENDPOINT-NO-SPEC with the serve flags that fix it. The API key (``--api-key`` or
``OPENAI_API_KEY``) goes only into the Authorization header.
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

from eaglehub.endpoint.client import EndpointClient, engine_of
from eaglehub.endpoint.engine import EndpointEngine, EndpointRun
from eaglehub.endpoint.served_config import parse_served_config
from eaglehub.endpoint.settings import read_served_settings
from eaglehub.engines.base import Engine, RunResult, RunSpec, SpecCounters
from eaglehub.errors import EndpointError, UsageError
from eaglehub.findings import finding
from eaglehub.measure import acceptance
from eaglehub.measure.curve import attach as attach_curves
from eaglehub.measure.prompts import default_prompts_path, load_prompts
from eaglehub.measure.requests import Request, chat_codec, requests_of, run_by_turn
from eaglehub.measure.runner import progress_runner
from eaglehub.verify.options import VerifyOptions
from eaglehub.verify.report import build_report, drafter_report, validate_report
from eaglehub.verify.run import forensics_for
from eaglehub.verify.sampled import run_sampled, sampled_acceptance

API_KEY_ENV = "OPENAI_API_KEY"


def _check(opts: VerifyOptions) -> None:
    refused = [
        ("--drafter", bool(opts.drafters), "the server's drafter is the one measured"),
        ("--reference-report", bool(opts.reference_report), "compare endpoint reports with `eaglehub watch`"),
        ("--sampling-trials", bool(opts.sampling_trials), "the sampling test needs the reference engine's drafter"),
        ("--baseline-drafter", bool(opts.baseline_drafter), "measure each served drafter with its own --endpoint"),
        ("--probe", opts.probe, "probe the drafter's files: eaglehub probe DRAFTER --target T"),
    ]
    for name, given, why in refused:
        if given:
            raise UsageError(f"{name} does not apply with --endpoint: {why}", hint=f"drop {name}")
    if opts.endpoint_api == "completions" and not opts.target:
        raise UsageError(
            "--api completions sends token ids and needs the target's tokenizer here",
            hint="give --target (a local model directory) or use --api chat",
        )
    if not opts.target and not opts.baseline_endpoint:
        raise UsageError(
            "--endpoint needs a baseline: the target served alone or a local target",
            hint="give --baseline-endpoint URL or --target DIR",
        )
    if opts.max_tokens < 1 or opts.timeout <= 0:
        raise UsageError("--max-tokens and --timeout must be positive", hint="e.g. --max-tokens 64 --timeout 120")


def _subset(run: RunResult, keep: list[int], groups: list[str], per_request: bool) -> RunResult:
    """``run`` restricted to the requests ``keep`` (answered by both runs). With ``per_request`` counters
    the groups' counters are re-summed over exactly those requests; a group left without any is dropped."""
    kept = {groups[i] for i in keep}
    counters = {g: c for g, c in run.group_counters.items() if g in kept}
    if per_request and run.prompt_counters is not None:
        counters = {g: SpecCounters() for g in counters}
        for i in keep:
            if groups[i] in counters:
                counters[groups[i]] = counters[groups[i]] + run.prompt_counters[i]
    return replace(
        run,
        outputs=[run.outputs[i] for i in keep],
        prompt_counters=None if run.prompt_counters is None else [run.prompt_counters[i] for i in keep],
        group_counters=counters,
    )


def _same(a: SpecCounters, b: SpecCounters) -> bool:
    """The responses' counters ``a`` against the ``/metrics`` delta ``b``, on what ``b`` counts: SGLang's
    page has no per-position counter and derives accepted tokens from generated tokens, which a request cut
    at max_tokens mid-step undercounts (eaglehub/endpoint/metrics.py): there steps and drafted tokens."""
    if not b.accepted_per_pos:
        return (a.num_drafts, a.num_draft_tokens) == (b.num_drafts, b.num_draft_tokens)
    return (a.num_drafts, a.num_draft_tokens, a.num_accepted_tokens, a.accepted_per_pos) == (
        b.num_drafts,
        b.num_draft_tokens,
        b.num_accepted_tokens,
        b.accepted_per_pos,
    )


def run_verify_endpoint(opts: VerifyOptions, console=None) -> dict:
    """Measure the drafter served at ``opts.endpoint`` against the baseline; return the validated report.

    Raises:
        UsageError: options that do not apply or miss a companion (exit 2).
        EndpointError: a server refused the connection or answered no request (exit 1).
        EaglehubError: a bad target or prompt file (exit 2), a local engine failure (exit 1).
    """
    from eaglehub.target import resolve_target

    assert opts.endpoint is not None
    _check(opts)
    key = opts.api_key or os.environ.get(API_KEY_ENV) or None
    target = resolve_target(opts.target) if opts.target else None
    api = opts.endpoint_api or ("completions" if target is not None else "chat")
    if api == "chat" and opts.context is not None:
        raise UsageError("--context pads token-id prompts", hint="use --api completions with a local --target")
    if api == "chat" and not opts.baseline_endpoint:
        raise UsageError(
            "--api chat needs --baseline-endpoint", hint="the local engines take token ids: use --api completions"
        )
    prompts_file = Path(opts.prompts_file) if opts.prompts_file else None
    prompts = load_prompts(prompts_file, opts.categories, opts.limit)
    requests = requests_of(prompts)
    if api == "chat" and any(r.turn > 1 for r in requests):
        raise UsageError("--api chat sends single-turn prompts", hint="use --api completions with a local --target")
    groups = [r.category for r in requests]
    template_kwargs = dict(opts.chat_template_kwargs or {})
    if api == "chat" and opts.temperature > 0:
        raise UsageError(
            "--temperature with --endpoint samples token-id prompts", hint="use --api completions with a local --target"
        )

    parse_served_config(opts.served_config)  # a --served-config vLLM would refuse fails before the server is asked

    with ExitStack() as stack:
        server = EndpointEngine(
            stack.enter_context(EndpointClient(opts.endpoint, key, opts.timeout, opts.concurrency)),
            concurrency=opts.concurrency,
        )
        server.version()  # a refused connection fails here, before any local work
        model = server.model
        settings = read_served_settings(server.client, opts.served_config, server.version())
        base: Engine
        if opts.baseline_endpoint:
            base = EndpointEngine(
                stack.enter_context(EndpointClient(opts.baseline_endpoint, key, opts.timeout, opts.concurrency)),
                concurrency=opts.concurrency,
            )
        else:
            from eaglehub.engines.registry import make_engines

            base = make_engines(opts.engines[:1], device=opts.device)[0]
        base.version()
        spec = RunSpec(
            target or Path(model), None, opts.k, opts.max_tokens, opts.dtype, opts.seed, opts.max_model_len,
            engine_options=dict(opts.engine_options),
        )  # fmt: skip
        ids: list[list[int]] | None = None
        sampled_run: RunResult | None = None
        context = None
        if api == "completions":
            assert target is not None
            encode, decode = chat_codec(target, prompts, template_kwargs or None)
            if opts.context is not None:
                from eaglehub.verify.run import padded_context

                context, encode, opts = padded_context(target, prompts, requests, opts, console)
                spec = replace(spec, max_model_len=opts.max_model_len)
            with progress_runner(console) as run:
                baseline, ids = run_by_turn(
                    lambda x, g, turn: run(base, spec, x, g, f"target alone ({base.name}, turn {turn})"),
                    requests,
                    encode,
                    decode,
                )
                served = run(server, spec, ids, groups, f"served drafter ({server.client.shown})")
            seen = server.last  # the greedy run's record: a sampled run below replaces server.last
            if opts.temperature > 0:
                sampled_run = run_sampled(server, [spec], requests, ids, opts, console)[0]
        else:
            messages = [[{"role": "user", "content": r.prompt.turns[0]}] for r in requests]
            extra = {"chat_template_kwargs": template_kwargs} if template_kwargs else None
            assert isinstance(base, EndpointEngine)
            baseline = base.run_messages(spec, messages, groups, extra)
            served = server.run_messages(spec, messages, groups, extra)
            seen = server.last
    base_failures = base.last.failures if isinstance(base, EndpointEngine) else []
    failed = {f.index for f in seen.failures} | {f.index for f in base_failures}
    keep = [i for i in range(len(requests)) if i not in failed]
    if not keep:
        raise EndpointError(
            f"no request was answered by both the endpoint and the baseline ({len(failed)} failed)",
            hint="see the failures of each server: rerun with --limit 1 to see the first error",
        )
    k = seen.k or opts.k
    run_opts = replace(opts, k=k)
    compared = [requests[i] for i in keep]
    per_request = seen.source is not None and seen.per_request_complete
    base_run, served_run = _subset(baseline, keep, groups, False), _subset(served, keep, groups, per_request)
    texts = seen.texts_only or (isinstance(base, EndpointEngine) and base.last.texts_only)
    explain = None
    if target is not None and ids is not None and not texts:
        from eaglehub.engines.reference import ReferenceEngine

        ref, tgt = ReferenceEngine(device=opts.device), target
        explain = forensics_for(
            {r.id: ids[i] for r, i in zip(compared, keep)},
            base_run,
            lambda: ref.target(tgt, opts.dtype),
            opts.dtype,
            opts.tie_epsilon,
        )
    file = (prompts_file or default_prompts_path()).resolve()
    report = build_report(run_opts, target or Path(model), prompts, file, base_run, [], None, None, requests, context)
    entry = drafter_report(None, target or Path(model), k, compared, base_run, served_run, None, explain)
    entry["drafter"] = f"served by {server.client.shown} ({model})"
    entry["findings"] = _endpoint_findings(entry["findings"], seen, base_failures, requests)
    entry["passed"] = not any(f["severity"] == "error" for f in entry["findings"])
    if sampled_run is not None:
        greedy = acceptance.total(served_run.group_counters.values())
        entry["sampled_acceptance"], found = sampled_acceptance(sampled_run, requests, run_opts, greedy)
        entry["findings"] += [f.as_dict() for f in found]
        entry["findings"].sort(key=lambda f: f["severity"] != "error")
        entry["passed"] = not any(f["severity"] == "error" for f in entry["findings"])
    from eaglehub.verify.served import apply_claims, served_claims

    card = next((c for c in server.cards if c.get("id") == server.model), {})
    overall = acceptance.total(served_run.group_counters.values())
    settings, served_section, found = served_claims(
        settings, seen, keep, overall, entry["prompts"], card.get("root"), engine_of(server.cards)
    )
    apply_claims(entry, settings, found)
    report["drafters"] = [entry]
    report["passed"] = entry["passed"]
    report["engine"] = {"name": server.name, "version": server.version()}
    report["endpoint"] = _section(opts, server, base, seen, base_failures, requests, len(keep), api, texts)
    report["endpoint"]["served"] = served_section
    attach_curves(report)  # the server's engine, its sampled run, and no curve for a configured or mixed-k AL
    validate_report(report)
    return report


def _failure_rows(run: str, failures, requests: list[Request]) -> list[dict]:
    return [
        {
            "id": requests[f.index].id,
            "category": requests[f.index].category,
            "run": run,
            "kind": f.kind,
            "status": f.status,
            "message": f.message,
        }
        for f in failures
    ]


def _endpoint_findings(found: list[dict], seen: EndpointRun, base_failures, requests: list[Request]) -> list[dict]:
    """The drafter's findings with the endpoint's: a server that does not speculate replaces
    E-VERIFY-NOT-WIRED (it says why there are no drafts); failed requests; counter sources."""
    out = list(found)
    if seen.source is None and seen.metrics_server is None:
        out = [f for f in out if f["code"] != "E-VERIFY-NOT-WIRED"]
        out.append(
            finding(
                "E-ENDPOINT-NO-SPEC",
                "endpoint.counters",
                "the server reports no speculative decoding: no per-request spec-decode metrics in its responses "
                "and no spec-decode counters on /metrics",
            ).as_dict()
        )
    failures = _failure_rows("drafter", seen.failures, requests) + _failure_rows("baseline", base_failures, requests)
    if failures:
        kinds = sorted({f["kind"] if f["status"] is None else f"http {f['status']}" for f in failures})
        out.append(
            finding(
                "E-ENDPOINT-REQUESTS-FAILED",
                "endpoint.failures",
                f"{len(seen.failures)} of {len(requests)} requests to the endpoint and {len(base_failures)} to the "
                f"baseline failed ({', '.join(kinds)}; first: {failures[0]['id']}: {failures[0]['message']}); "
                "the prompts both answered are compared",
            ).as_dict()
        )
    prom, mine = seen.prometheus_total, seen.per_request_total
    if mine is None and prom is not None:
        out.append(
            finding(
                "W-ENDPOINT-NO-PER-REQUEST",
                "endpoint.counters",
                "no per-request spec-decode metrics in the responses: acceptance is the /metrics delta",
            ).as_dict()
        )
    if mine is not None and prom is not None and not _same(mine, prom):
        out.append(
            finding(
                "W-ENDPOINT-COUNTERS-DISAGREE",
                "endpoint.counters",
                f"/metrics delta (drafts {prom.num_drafts}, accepted {prom.num_accepted_tokens}) differs from the "
                f"responses' own counters (drafts {mine.num_drafts}, accepted {mine.num_accepted_tokens})",
            ).as_dict()
        )
    out.sort(key=lambda f: f["severity"] != "error")
    return out


def _section(
    opts: VerifyOptions,
    server: EndpointEngine,
    base: Engine,
    seen: EndpointRun,
    base_failures,
    requests: list[Request],
    compared: int,
    api: str,
    texts: bool,
) -> dict:
    card = next((c for c in server.cards if c.get("id") == server.model), {})
    prom, mine = seen.prometheus_total, seen.per_request_total
    if isinstance(base, EndpointEngine):
        baseline = {
            "kind": "endpoint",
            "endpoint": {"url": base.client.shown, "model": base.model, "version": base.version()},
        }
    else:
        baseline = {"kind": "local", "engine": {"name": base.name, "version": base.version()}}
    used = "per_request" if seen.source is not None and seen.per_request_complete else "prometheus" if prom else "none"
    return {
        "url": server.client.shown,
        "model": server.model,
        "model_root": card.get("root"),
        "max_model_len": card.get("max_model_len"),
        "server": seen.source or seen.metrics_server or "unknown",
        "version": server.version(),
        "api": api,
        "num_speculative_tokens": seen.k,
        "k_source": seen.k_source,
        "concurrency": opts.concurrency,
        "timeout_seconds": opts.timeout,
        "baseline": baseline,
        "outputs_compared_as": "text" if texts else "token_ids",
        "requests": {"sent": len(requests), "answered": len(requests) - len(seen.failures), "compared": compared},
        "counters": {
            "per_request": None if mine is None else acceptance.acceptance_stats(mine),
            "prometheus": None if prom is None else acceptance.acceptance_stats(prom),
            "agree": None if mine is None or prom is None else _same(mine, prom),
            "used": used,
            "fields": {"per_request": seen.fields, "prometheus": list(seen.metrics_fields)},
        },
        "failures": _failure_rows("drafter", seen.failures, requests)
        + _failure_rows("baseline", base_failures, requests),
        "notes": list(seen.notes),
    }
