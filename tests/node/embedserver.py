"""A real OpenAI-compatible embeddings server on loopback for the endpoint embedder's tests.

``POST /v1/embeddings`` answers with wordllama's own vectors, computed by the wordllama
package directly (not through node.search), on a ``http.server`` thread — an HTTP
implementation other than the client's.  A test steers it: the key it wants, how the answer
is delimited (``Content-Length``, chunked, or by closing), a tampered answer, or hanging
until released.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["EmbedServer", "reference_model"]

HANG = 30.0  # seconds a hanging answer waits at most for its release


def reference_model() -> Any:
    """wordllama's l2_supercat at 256 dimensions, from the files in its package."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    import wordllama  # (its import configures the root logger; put back below)

    root.handlers[:], root.level = handlers, level
    package = Path(wordllama.__file__).parent
    return wordllama.WordLlama.load(
        config="l2_supercat", dim=256, cache_dir=package, disable_download=True
    )


class EmbedServer:
    """The server on ``127.0.0.1:<free port>``; ``url`` is its base URL."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.key: str | None = None
        self.delimit = "length"  # or "chunked", "close"
        self.tamper: Callable[[dict[str, Any]], Any] | None = None
        self.raw: bytes | None = None  # answered instead of JSON when set
        self.status = 200
        self.hang = False
        self.release = threading.Event()
        self.received: list[dict[str, Any]] = []
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}"
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()

    def reset(self) -> None:
        self.key, self.delimit, self.tamper, self.raw, self.status = None, "length", None, None, 200
        self.hang = False
        self.release.set()
        self.release = threading.Event()
        self.received.clear()

    def close(self) -> None:
        self.release.set()
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=10)

    def answer(self, request: dict[str, Any], authorization: str | None) -> tuple[int, bytes]:
        self.received.append({"body": request, "authorization": authorization})
        if self.hang:
            self.release.wait(HANG)
        if self.key is not None and authorization != f"Bearer {self.key}":
            return 401, b'{"error": {"message": "invalid api key"}}'
        if self.raw is not None:
            return self.status, self.raw
        vectors = self.model.embed(request["input"], norm=True)
        answer = {
            "object": "list",
            "model": request["model"],
            "data": [
                {"object": "embedding", "index": i, "embedding": v.tolist()}
                for i, v in reversed(list(enumerate(vectors)))
            ],
        }
        shown = self.tamper(answer) if self.tamper else answer
        return self.status, json.dumps(shown).encode()


def _handler(server: EmbedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            request = json.loads(self.rfile.read(length))
            if self.path != "/v1/embeddings":
                status, body = 404, b'{"error": "no such route"}'
            else:
                status, body = server.answer(request, self.headers.get("Authorization"))
            self._send(status, body)

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            if server.delimit == "length":
                self.send_header("Content-Length", str(len(body)))
            elif server.delimit == "chunked":
                self.send_header("Transfer-Encoding", "chunked")
                body = _chunked(body)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:
            pass  # (quiet: the tests read what was received instead)

    return Handler


def _chunked(body: bytes, size: int = 1000) -> bytes:
    chunks = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x;ext=1\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\nX-T: 1\r\n\r\n"
