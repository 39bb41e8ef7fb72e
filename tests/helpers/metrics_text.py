"""Prometheus exposition texts in the layout vLLM's prometheus_client writes, for the /metrics tests, and a
tiny HTTP server that serves them (``MetricsServer``: a real socket on 127.0.0.1, scripted bodies; it stands
in for a server's /metrics page in unit tests, never for vLLM in the endpoint tests, which start it)."""

from __future__ import annotations

from collections.abc import Callable
from http.server import BaseHTTPRequestHandler

from eaglehub.engines.base import SpecCounters
from helpers.local_http import LocalHTTPServer


def vllm_text(
    engines: dict[str, SpecCounters | tuple[int, int, int, list[int]]],
    model: str = "/m/target",
    types: bool = True,
    start_time: float | None = 1.7645e09,
) -> str:
    """An exposition with vLLM's spec-decode counters, one label set per engine; ``types``: with the
    ``# HELP`` / ``# TYPE`` lines (without them the parser keeps the ``_total`` suffix)."""
    rows = {e: (c.num_drafts, c.num_draft_tokens, c.num_accepted_tokens, list(c.accepted_per_pos)) if isinstance(c, SpecCounters) else c for e, c in engines.items()}  # fmt: skip
    out = []
    if start_time is not None:
        out += ["# HELP process_start_time_seconds Start time of the process since unix epoch in seconds."]
        out += ["# TYPE process_start_time_seconds gauge", f"process_start_time_seconds {start_time}"]
    for name, idx in (("num_drafts", 0), ("num_draft_tokens", 1), ("num_accepted_tokens", 2)):
        full = f"vllm:spec_decode_{name}_total"
        if types:
            out += [f"# HELP {full} x", f"# TYPE {full} counter"]
        for eng, vals in rows.items():
            out.append(f'{full}{{engine="{eng}",model_name="{model}"}} {float(vals[idx])}')
        if types:
            out += [f"# HELP vllm:spec_decode_{name}_created x", f"# TYPE vllm:spec_decode_{name}_created gauge"]
        for eng in rows:
            out.append(f'vllm:spec_decode_{name}_created{{engine="{eng}",model_name="{model}"}} 1.7645e+09')
    full = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
    if types:
        out += [f"# HELP {full} x", f"# TYPE {full} counter"]
    for eng, vals in rows.items():
        for i, v in enumerate(vals[3]):
            out.append(f'{full}{{engine="{eng}",model_name="{model}",position="{i}"}} {float(v)}')
    return "\n".join(out) + "\n"


class MetricsServer(LocalHTTPServer):
    """``GET /metrics`` answered by ``respond() -> (status, body)``, one call per request; the request
    headers are kept in ``headers``. Use as a context manager; ``base_url`` is ``http://127.0.0.1:PORT``."""

    def __init__(self, respond: Callable[[], tuple[int, str]]):
        self.respond = respond
        self.headers: list[dict[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                outer.headers.append(dict(self.headers))
                status, body = outer.respond() if self.path == "/metrics" else (404, "not found")
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):  # keep the test output clean
                pass

        super().__init__(Handler)
