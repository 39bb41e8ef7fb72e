"""A tiny OpenAI-compatible HTTP server that fails on purpose (stdlib ``http.server`` in a thread on 127.0.0.1).

It answers ``/version``, ``/v1/models``, ``/metrics`` and ``/v1/completions`` / ``/v1/chat/completions`` in
vLLM's response layout (per-request ``metrics.speculative_decoding``, vLLM's ``SpeculativeDecodingMetrics``
fields) or SGLang's (``meta_info`` with ``spec_*`` fields, as SGLang's tokenizer manager writes them),
and its ``/metrics`` counters add up what it answered, in the layout vLLM's prometheus_client writes.
The outputs are a pure function of the prompt, so a "drafter" and a "target" instance agree (lossless).

``mode``: ``ok``; ``500`` (every completion answers 500, echoing the Authorization header it received in
the error text, so a client that quotes errors must redact it); ``every3`` (every third completion 500s);
``timeout`` (a completion sleeps ``delay`` s); ``drop`` (a completion closes the connection unanswered);
``nospec`` (answers without any speculative-decoding metrics: a target served alone); ``sglang``;
``noids`` (no token ids: text only); ``noper`` (``/metrics`` counters but no per-request metrics: vLLM without
``--per-request-spec-decode-metrics``); ``busy`` (``/metrics`` also counts another client's traffic: one more
request's worth per request).
"""

from __future__ import annotations

import json
import threading
import time

from helpers.local_http import LocalHTTPServer, QuietHandler
from helpers.metrics_text import vllm_text

K = 3
HIST = [1, 2, 0, 3]
"""Each answered request's histogram (j = accepted draft tokens): 6 steps, 0·1+1·2+2·0+3·3 = 11 accepted."""


def output_of(prompt) -> list[int]:
    ints = isinstance(prompt, list) and all(isinstance(t, int) for t in prompt)
    seed = sum(prompt) if ints else sum(map(ord, json.dumps(prompt)))
    return [(seed * 31 + i) % 1000 for i in range(8)]


class FakeServer(LocalHTTPServer):
    def __init__(self, mode: str = "ok", delay: float = 3.0):
        self.mode = mode
        self.delay = delay
        self.calls = 0
        self.lock = threading.Lock()
        self.totals = [0, 0, 0, [0] * K]  # drafts, draft tokens, accepted, per position
        self.headers: list[str] = []
        self.bodies: list[dict] = []
        """Every completion request's body, in arrival order."""
        super().__init__(self._handler())

    @property
    def url(self) -> str:
        return self.base_url

    def metrics_text(self) -> str:
        if self.mode in ("nospec", "sglang"):
            return "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0.0\n"
        d, t, a, pos = self.totals
        return vllm_text({"0": (d, t, a, list(pos))})

    def completion(self, body: dict, chat: bool) -> dict:
        with self.lock:
            self.bodies.append(body)
        out = output_of(body.get("prompt") if not chat else body.get("messages"))
        choice: dict = {"index": 0, "finish_reason": "length"}
        text = " ".join(map(str, out))
        choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
        if self.mode != "noids":
            choice["token_ids"] = out
        resp: dict = {"id": "x", "object": "chat.completion" if chat else "text_completion", "choices": [choice]}
        if self.mode in ("nospec",):
            return resp
        steps, accepted = sum(HIST), sum(j * n for j, n in enumerate(HIST))
        with self.lock:
            for _ in range(2 if self.mode == "busy" else 1):
                self.totals[0] += steps
                self.totals[1] += steps * K
                self.totals[2] += accepted
                self.totals[3] = [p + sum(HIST[i + 1 :]) for i, p in enumerate(self.totals[3])]
        if self.mode == "noper":
            return resp
        if self.mode == "sglang":
            resp["meta_info"] = {
                "completion_tokens": len(out),
                "spec_verify_ct": steps,
                "spec_num_correct_drafts": accepted,
                "spec_num_proposed_drafts": steps * K,
                "spec_accepted_drafts": accepted,
                "spec_proposed_drafts": steps * K,
                "spec_accept_length": len(out) / steps,
                "spec_accept_rate": accepted / (steps * K),
                "spec_correct_drafts_histogram": HIST,
                "spec_accept_histogram": HIST,
            }
        else:
            resp["metrics"] = {
                "speculative_decoding": {
                    "mean_acceptance_length": 1 + accepted / steps,
                    "draft_acceptance_rate": accepted / (steps * K),
                    "acceptance_histogram": HIST,
                    "num_spec_steps": steps,
                    "num_accepted_draft_tokens": accepted,
                    "num_draft_tokens": steps * K,
                    "num_spec_tokens": K,
                }
            }
        return resp

    def _handler(self):
        server = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                if self.path == "/version":
                    self.send(200, {"version": "fake-0.1"})
                elif self.path == "/v1/models":
                    self.send(
                        200, {"object": "list", "data": [{"id": "fake/target", "root": "/m/t", "max_model_len": 2048}]}
                    )
                elif self.path == "/metrics":
                    self.send(200, server.metrics_text(), "text/plain; version=0.0.4")
                else:
                    self.send(404, {"error": {"message": "not found", "type": "NotFound", "code": 404}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                server.headers.append(self.headers.get("Authorization", ""))
                with server.lock:
                    server.calls += 1
                    n = server.calls
                mode = server.mode
                if mode == "500" or (mode == "every3" and n % 3 == 0):
                    auth = self.headers.get("Authorization", "")
                    self.send(
                        500, {"error": {"message": f"engine died; request had {auth}", "type": "Internal", "code": 500}}
                    )
                elif mode == "timeout":
                    time.sleep(server.delay)
                    self.send(200, server.completion(body, self.path.endswith("chat/completions")))
                elif mode == "drop":
                    self.close_connection = True
                    self.connection.close()
                else:
                    self.send(200, server.completion(body, self.path.endswith("chat/completions")))

        return Handler
