"""A stdlib HTTP server on 127.0.0.1 (a port the OS picks) in a daemon thread: the base of the test servers
that stand in for a server's pages in unit tests (fake_openai.FakeServer, metrics_text.MetricsServer)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        # a handler still sleeping (a timeout test) writes to a socket the client has closed: expected here
        pass


class LocalHTTPServer:
    """Serves ``handler`` (a :class:`BaseHTTPRequestHandler` class) while used as a context manager."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]):
        self.httpd = _QuietServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


class QuietHandler(BaseHTTPRequestHandler):
    """A handler that logs nothing and answers with :meth:`send`: a JSON value, or text as given."""

    def log_message(self, *args) -> None:
        pass

    def send(self, status: int, body, content_type: str = "application/json") -> None:
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
