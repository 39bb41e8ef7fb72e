"""An OpenAI-compatible endpoint (vLLM's or SGLang's server): models, version, completions, and the
speculative-decoding counters each response carries.

Requests (docs/verify.md, "Measuring a served endpoint"):

* ``POST /v1/completions`` with ``prompt`` as a list of **token ids**, so the server decodes exactly
  the ids the offline engines see (the chat template is applied once, locally, by
  :mod:`eaglehub.engines.chat`), and ``return_token_ids: true`` so the output comes back as token ids too;
* ``POST /v1/chat/completions`` with ``messages``, for a server whose target tokenizer eaglehub does
  not have (the server applies its own template, with ``chat_template_kwargs`` when given).

Every request also carries :data:`SGLANG_FLAGS`: SGLang 0.5.23 writes its per-request speculative
counters only for a request that asks (``return_spec_tokens_details``: CompletionRequest and
ChatCompletionRequest, sglang/srt/entrypoints/openai/protocol.py:393 and :961; ``return_meta_info``:
ChatCompletionRequest, :964). The flags go to every server, because none refuses or warns about them:
vLLM 0.32 and 0.33's request models are ``extra="allow"`` and log unknown fields at debug level only
(``OpenAIBaseModel``, vllm/entrypoints/serve/engine/protocol.py:37-75, both releases); SGLang's models
keep pydantic's default (unknown fields ignored), so an older SGLang ignores a flag it lacks.

Per-request speculative-decoding counters, as :class:`~eaglehub.engines.base.SpecCounters`, and
:attr:`Completion.fields`, where in the body they were read:

* **vLLM** (``vllm serve --per-request-spec-decode-metrics summary``): ``metrics.speculative_decoding``
  of the response body (vLLM's ``SpeculativeDecodingMetrics``): ``num_spec_steps`` → ``num_drafts``,
  ``num_draft_tokens``, ``num_accepted_draft_tokens`` → ``num_accepted_tokens``,
  ``acceptance_histogram`` → ``accepted_histogram``; ``num_spec_tokens`` is k, and
  ``accepted_per_pos[i]`` = Σ_{j>i} ``acceptance_histogram[j]`` (a step that accepted j draft tokens
  accepted positions 0..j−1).
* **SGLang 0.5.23**: ``sglext.spec_tokens_details`` of the response body (``SglExt`` /
  ``SpecTokensDetails``, protocol.py:456-481): one object for a request of one choice, a list (one per
  choice) when ``n`` > 1 (serving_completions.py:554-564, serving_chat.py:2865-2875); choice 0's entry
  is read. On chat, ``return_meta_info`` also puts the request's whole ``meta_info`` on each choice
  (serving_chat.py:2985-2987), read when there is no ``sglext``.
* **older SGLang**: the ``meta_info`` object (of the body or of its first choice).

SGLang's fields, whichever object carries them (the tokenizer manager fills them,
sglang/srt/managers/tokenizer_manager.py:3138-3207): ``spec_verify_ct`` (verify steps, one per decode
forward of the request: scheduler_components/batch_result_processor.py:832) → ``num_drafts``;
``spec_num_correct_drafts`` (older: ``spec_accepted_drafts``, ``spec_accept_token_num``; accepted draft
tokens, the bonus token not counted) → ``num_accepted_tokens``; ``spec_num_proposed_drafts`` (older:
``spec_proposed_drafts``, ``spec_draft_token_num``) → ``num_draft_tokens``, which 0.5.23 computes as
``spec_verify_ct × (speculative_num_draft_tokens − 1)`` (tokenizer_manager.py:3156), so k =
proposed ÷ verify steps (the draft chain's length; with ``--speculative-eagle-topk`` > 1 it is the
tree's drafted tokens); ``spec_correct_drafts_histogram`` (older ``spec_accept_histogram``) →
``accepted_histogram``, padded with zeros to k + 1 entries: SGLang grows it only as far as the largest
accepted count seen (``Req.update_spec_correct_drafts_histogram``, managers/schedule_batch.py:1566), so
its length is never k. Per position: ``spec_num_correct_drafts_by_position`` where given, else from the
histogram once k is known. Without an accepted count, accepted = ``completion_tokens`` −
``spec_verify_ct`` (SGLang's own ``spec_accept_length`` = completion tokens / verify steps).

Errors are :class:`RequestFailed` (an :class:`~eaglehub.errors.EndpointError`, exit 1) with a
``kind``: ``refused``, ``timeout``, ``dropped`` (connection closed before a full answer),
``connection`` (another transport error), ``http`` (an error status, in ``status``) or ``response`` (a
body that is not an OpenAI completion). Messages name the path, never the API key: any occurrence of
the key in text the server sends back is replaced by ``***``. Only connection *setup* is retried
(:data:`CONNECT_RETRIES`, httpx's transport retries): a request the server received is never sent twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from eaglehub.endpoint.metrics import ServerSpecMetrics, parse_spec_metrics
from eaglehub.endpoint.steps import vllm_steps
from eaglehub.engines.base import SpecCounters
from eaglehub.errors import EndpointError
from eaglehub.measure.distribution import accepted_per_position, counters_from_histogram

DEFAULT_TIMEOUT_S = 120.0
"""Seconds per request: a CPU server decoding 32 tokens for 8 concurrent requests answers in seconds;
a GPU server with long outputs may need more (``--timeout``)."""
CONNECT_RETRIES = 2
"""Retries of a failed TCP connect (a server just restarted); never of a request already sent."""
METRICS_TIMEOUT_S = 10.0
"""Seconds allowed for one ``GET /metrics``: the page is a few hundred kB at most and rendered from
memory, so a server that takes longer is overloaded or hung."""
ERROR_TEXT_CHARS = 200
"""How much of a server's error message is quoted (one line)."""
SGLANG_FLAGS = {"return_spec_tokens_details": True}
"""Sent with every completion request (module doc): SGLang 0.5.23 returns its per-request counters only
when asked."""
SGLANG_CHAT_FLAGS = {**SGLANG_FLAGS, "return_meta_info": True}
"""Chat requests also ask for ``meta_info`` per choice (module doc)."""
SERVE_HINT = (
    "serve the pair with speculative decoding and per-request metrics, e.g. vllm serve TARGET "
    """--speculative-config '{"method": "eagle3", "model": "/abs/drafter", "num_speculative_tokens": 3}' """
    "--per-request-spec-decode-metrics summary"
)


SERVER_INFO_PATHS = ("/server_info?config_format=json", "/get_server_info")
"""Where a server says its settings (module doc): vLLM's development page as JSON (its default is a text
dump) and SGLang's ``/server_info`` (which ignores the query), then SGLang's older ``/get_server_info``."""


class RequestFailed(EndpointError):
    """One request failed; ``kind`` and ``status`` classify it (module doc)."""

    def __init__(self, message: str, kind: str, status: int | None = None, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.kind = kind
        self.status = status


@dataclass(frozen=True)
class Completion:
    """One answered request: output ``token_ids`` (``None`` when the server returns only text),
    ``text``, ``finish_reason``, the per-request ``counters`` (``None`` when the server gives none),
    ``k`` (num_speculative_tokens where the response says it), ``source`` of the counters
    (``"vllm"`` or ``"sglang"``) and ``fields``: where in the body they were read
    (:data:`FIELDS_VLLM`, :data:`FIELDS_SGLANG`, :data:`FIELDS_CHOICE_META`, :data:`FIELDS_META`)."""

    token_ids: list[int] | None
    text: str
    finish_reason: str | None
    counters: SpecCounters | None = None
    k: int | None = None
    source: str | None = None
    fields: str | None = None
    steps: tuple[tuple[int, int], ...] | None = None
    """vLLM's ``(drafted, accepted)`` per verify step (``--per-request-spec-decode-metrics detailed``), in
    order; ``None`` where the response has no per-step arrays (:func:`eaglehub.endpoint.steps.vllm_steps`)."""


FIELDS_VLLM = "metrics.speculative_decoding"
FIELDS_SGLANG = "sglext.spec_tokens_details"
FIELDS_CHOICE_META = "choices[].meta_info"
FIELDS_META = "meta_info"


def engine_of(cards: list[dict]) -> str | None:
    """``"vllm"`` / ``"sglang"`` from ``/v1/models``' ``owned_by``, which each server fills with its own
    name (vLLM 0.33 ``ModelCard``, vllm/entrypoints/serve/engine/protocol.py:109; SGLang 0.5.23
    ``ModelCard``, sglang/srt/entrypoints/openai/protocol.py:93): a server is known without another
    request. ``None`` for any other value."""
    owners = {str(c.get("owned_by", "")).lower() for c in cards}
    return next((e for e in ("vllm", "sglang") if e in owners), None)


def server_root(url: str) -> str:
    """``http://host:port`` of a URL given as the server root or its OpenAI base (``…/v1``)."""
    base = url.strip().rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def metrics_url(url: str) -> str:
    """The ``/metrics`` URL of a server given as its root or its OpenAI base (``/metrics`` sits at the
    server root in vLLM and SGLang)."""
    return server_root(url) + "/metrics"


def redact_url(url: str) -> str:
    """``url`` without any ``user:password@`` part, fit for messages and reports."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def redact(text: str, secrets: list[str]) -> str:
    for s in secrets:
        if s:
            text = text.replace(s, "***")
    return text


def counters_from_vllm(spec: dict) -> tuple[SpecCounters, int]:
    """``metrics.speculative_decoding`` of a vLLM response → (counters, k) (module doc); the counts are
    the histogram's, as vLLM derives its own ``num_spec_steps`` and ``num_accepted_draft_tokens`` from it."""
    counters = counters_from_histogram(spec["acceptance_histogram"], spec["num_draft_tokens"])
    return counters, int(spec.get("num_spec_tokens") or len(counters.accepted_per_pos))


def _first(meta: dict, *names: str):
    return next((meta[n] for n in names if meta.get(n) is not None), None)


def counters_from_sglang(meta: dict) -> tuple[SpecCounters, int | None] | None:
    """SGLang's ``sglext.spec_tokens_details`` or ``meta_info`` → (counters, k or ``None``); ``None``
    when it has no ``spec_verify_ct`` (a server that does not speculate). k is proposed drafts ÷ verify
    steps, never the histogram's length (module doc)."""
    if meta.get("spec_verify_ct") is None:
        return None
    steps = int(meta["spec_verify_ct"])
    hist_raw = _first(meta, "spec_correct_drafts_histogram", "spec_accept_histogram")
    hist = [int(x) for x in hist_raw] if hist_raw else []
    accepted = _first(meta, "spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num")
    if accepted is None and hist:
        accepted = sum(j * n for j, n in enumerate(hist))
    if accepted is None and meta.get("completion_tokens") is not None:
        accepted = max(int(meta["completion_tokens"]) - steps, 0)
    proposed = _first(meta, "spec_num_proposed_drafts", "spec_proposed_drafts", "spec_draft_token_num")
    k = None
    if proposed is not None and steps and int(proposed) > 0 and int(proposed) % steps == 0:
        k = int(proposed) // steps
    if hist and k is not None and len(hist) < k + 1:
        hist += [0] * (k + 1 - len(hist))  # SGLang's histogram stops at the largest count seen
    by_pos = meta.get("spec_num_correct_drafts_by_position")
    if by_pos:
        pos = tuple(int(x) for x in by_pos)
    else:
        pos = accepted_per_position(hist, k) if hist and k else ()
    return (
        SpecCounters(
            num_drafts=steps,
            num_draft_tokens=int(proposed) if proposed is not None else (k or 0) * steps,
            num_accepted_tokens=int(accepted or 0),
            accepted_per_pos=pos,
            accepted_histogram=tuple(hist),
        ),
        k,
    )


def _sglang_details(body: dict, choice: dict) -> tuple[dict, str] | None:
    """SGLang's per-request counters object of choice 0 and where it was found (module doc), or ``None``."""
    details = (body.get("sglext") or {}).get("spec_tokens_details")
    if isinstance(details, list):  # one entry per choice when n > 1
        details = details[0] if details else None
    if isinstance(details, dict):
        return details, FIELDS_SGLANG
    if isinstance(choice.get("meta_info"), dict):
        return choice["meta_info"], FIELDS_CHOICE_META
    if isinstance(body.get("meta_info"), dict):
        return body["meta_info"], FIELDS_META
    return None


def parse_completion(body: dict, chat: bool) -> Completion:
    """An OpenAI (chat) completion body → :class:`Completion`.

    Raises:
        RequestFailed: ``kind="response"``: no choices, or a malformed speculative-decoding entry.
    """
    choices = body.get("choices") if isinstance(body, dict) else None
    if not choices or not isinstance(choices[0], dict):
        raise RequestFailed("the response has no choices: not an OpenAI completion", "response")
    choice = choices[0]
    text = (choice.get("message") or {}).get("content") or "" if chat else choice.get("text") or ""
    # SGLang's chat choices carry the output ids as response_token_ids (protocol.py:1319)
    ids = choice.get("token_ids") if choice.get("token_ids") is not None else choice.get("response_token_ids")
    try:
        counters, k, source, fields = None, None, None, None
        spec = (body.get("metrics") or {}).get("speculative_decoding")
        found = _sglang_details(body, choice)
        if spec:
            (counters, k), source, fields = counters_from_vllm(spec), "vllm", FIELDS_VLLM
        elif found is not None and (parsed := counters_from_sglang(found[0])) is not None:
            (counters, k), source, fields = parsed, "sglang", found[1]
        token_ids = None if ids is None else [int(t) for t in ids]
    except (KeyError, TypeError, ValueError) as exc:
        raise RequestFailed(f"the response's speculative-decoding metrics are malformed ({exc!r})", "response") from exc
    return Completion(token_ids, text, choice.get("finish_reason"), counters, k, source, fields, steps=vllm_steps(spec))


class EndpointClient:
    """One OpenAI-compatible server at ``url`` (its root or ``…/v1``); thread-safe (one httpx client).

    ``api_key``: sent as ``Authorization: Bearer``, never shown. ``timeout``: seconds per request.
    ``transport``: another httpx transport (tests); by default one that retries connection setup only."""

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        pool: int = 8,
        transport: httpx.BaseTransport | None = None,
    ):
        self.root = server_root(url)
        self.shown = redact_url(self.root)  # what messages and reports carry
        self._secrets = [api_key] if api_key else []
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        limits = httpx.Limits(max_connections=max(pool, 1), max_keepalive_connections=max(pool, 1))
        self.timeout = timeout
        self.http = httpx.Client(
            headers=headers,
            timeout=timeout,
            limits=limits,
            transport=transport or httpx.HTTPTransport(retries=CONNECT_RETRIES, limits=limits),
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> EndpointClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _request(
        self, method: str, path: str, json: dict | None = None, timeout: float | None = None
    ) -> httpx.Response:
        where = f"{method} {self.shown}{path}"
        seconds = self.timeout if timeout is None else timeout
        try:
            return self.http.request(method, self.root + path, json=json, timeout=seconds)
        except httpx.TimeoutException as exc:
            raise RequestFailed(
                f"{where} timed out after {seconds:g} s",
                "timeout",
                hint="the server is overloaded or hung; raise --timeout or lower --concurrency",
            ) from exc
        except httpx.ConnectError as exc:
            raise RequestFailed(
                f"{where}: the server is not reachable (connection refused or host unreachable)",
                "refused",
                hint="check the URL and port, and that the server is running",
            ) from exc
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            raise RequestFailed(
                f"{where}: the server closed the connection before answering ({type(exc).__name__})",
                "dropped",
                hint="the server crashed or restarted mid-request; check its log",
            ) from exc
        except httpx.TransportError as exc:
            raise RequestFailed(f"{where} failed: {type(exc).__name__}", "connection") from exc

    def _json(self, method: str, path: str, json: dict | None = None) -> Any:
        response = self._request(method, path, json)
        if response.status_code >= 400:
            raise RequestFailed(
                f"{method} {self.shown}{path} answered {response.status_code}: {self._error_text(response)}",
                "http",
                response.status_code,
                hint="pass the server's API key with --api-key or OPENAI_API_KEY"
                if response.status_code in (401, 403)
                else "check the server's log",
            )
        try:
            return response.json()
        except ValueError as exc:
            raise RequestFailed(f"{method} {self.shown}{path} did not answer JSON", "response") from exc

    def _error_text(self, response: httpx.Response) -> str:
        try:
            body = response.json()
            err = body.get("error", body) if isinstance(body, dict) else body
            text = err.get("message", str(err)) if isinstance(err, dict) else str(err)
        except ValueError:
            text = response.text
        return redact(" ".join(str(text).split())[:ERROR_TEXT_CHARS], self._secrets) or "(empty body)"

    def models(self) -> list[dict]:
        """``GET /v1/models``: the model cards (vLLM's carry ``root`` and ``max_model_len``)."""
        body = self._json("GET", "/v1/models")
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise RequestFailed(f"GET {self.shown}/v1/models has no model list", "response")
        return [m for m in data if isinstance(m, dict) and m.get("id")]

    def version(self) -> str | None:
        """The server's version: ``GET /version`` (vLLM), else the ``version`` of :meth:`server_info`
        (SGLang, which has no ``/version``); ``None`` when neither says. A refused connection raises."""
        try:
            body = self._json("GET", "/version")
            if isinstance(body, dict) and body.get("version"):
                return str(body["version"])
        except RequestFailed as exc:
            if exc.kind not in ("http", "response"):
                raise
        info = self.server_info()
        return str(info["version"]) if info and info.get("version") else None

    def settings_page(self, timeout: float | None = None) -> tuple[str, dict] | None:
        """``(where, body)`` of the first :data:`SERVER_INFO_PATHS` page that answers a JSON object: vLLM's
        development page (only under ``VLLM_SERVER_DEV_MODE=1``, vllm 0.32.0
        ``vllm/entrypoints/serve/dev/server_info/api_router.py`` L43-59; JSON with ``config_format=json``),
        SGLang's ``/server_info`` (0.5.23 keeps ``/get_server_info`` as well,
        sglang/srt/entrypoints/http_server.py:853-891: the resolved server arguments, speculative settings
        included, and ``version``). ``None`` when none answers, or none within ``timeout`` (default: the
        client's): a settings page must not hold up the run. A refused connection raises."""
        for path in SERVER_INFO_PATHS:
            try:
                response = self._request("GET", path, timeout=timeout)
            except RequestFailed as exc:
                if exc.kind == "refused":
                    raise
                return None
            if response.status_code >= 400:
                continue
            try:
                body = response.json()
            except ValueError:
                continue
            if isinstance(body, dict):
                return f"GET {path.split('?')[0]}", body
        return None

    def server_info(self) -> dict | None:
        """The body of :meth:`settings_page`, ``None`` where the server has none."""
        page = self.settings_page()
        return page[1] if page else None

    def metrics(self, timeout: float = METRICS_TIMEOUT_S) -> ServerSpecMetrics | None:
        """``GET /metrics`` read by :func:`~eaglehub.endpoint.metrics.parse_spec_metrics`: the server's
        spec-decode counters, ``None`` when it exposes none.

        Raises:
            RequestFailed: as any request (module doc); ``kind="http"`` with the fix for 401 / 403 (the
                key) and 404 (no metrics page), ``kind="response"`` for a body that is not Prometheus text.
        """
        response = self._request("GET", "/metrics", timeout=timeout)
        where = f"GET {self.shown}/metrics"
        if response.status_code >= 400:
            hint = {
                401: "pass the server's API key with --api-key or OPENAI_API_KEY",
                403: "pass the server's API key with --api-key or OPENAI_API_KEY",
                404: "the server has no /metrics page: vLLM serves it by default, SGLang needs --enable-metrics",
            }.get(response.status_code, "check the server's log")
            raise RequestFailed(f"{where} answered {response.status_code}", "http", response.status_code, hint=hint)
        try:
            return parse_spec_metrics(response.text)
        except ValueError as exc:
            raise RequestFailed(
                f"{where} did not return Prometheus exposition text",
                "response",
                hint="point --endpoint at the vLLM or SGLang server itself, not a proxy page",
            ) from exc

    def complete(self, model: str, prompt: list[int], settings: dict) -> Completion:
        """``POST /v1/completions`` of token ids ``prompt`` (module doc); ``settings``: sampling fields."""
        body = {"model": model, "prompt": prompt, "return_token_ids": True, **SGLANG_FLAGS, **settings}
        return parse_completion(self._json("POST", "/v1/completions", body), chat=False)

    def chat(self, model: str, messages: list[dict], settings: dict) -> Completion:
        """``POST /v1/chat/completions`` of ``messages`` (module doc)."""
        body = {"model": model, "messages": messages, "return_token_ids": True, **SGLANG_CHAT_FLAGS, **settings}
        return parse_completion(self._json("POST", "/v1/chat/completions", body), chat=True)
