"""What the API server tells its request listener: one entry per HTTP request it answered (health
checks, model lists, generations, refusals: 401, 404, 429 …), so a log can show every request and
not only the generations the engine service ran."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus

log = logging.getLogger(__name__)

GENERATION_PATHS = ("/v1/chat/completions", "/v1/completions")


@dataclass(frozen=True)
class HttpExchange:
    t: float  # time.time() when the request arrived
    method: str
    path: str  # without the query string
    status: int  # the status sent (a stream's is its first: 200)
    client: str  # the client's address
    duration_s: float  # until the response was written (a stream: until it ended)

    @property
    def label(self) -> str:
        return f"{self.method} {self.path} ({self.client})"

    @property
    def generation(self) -> bool:
        """A generation the engine service ran (it reports it too, with its metrics)."""
        return self.method == "POST" and self.path in GENERATION_PATHS and self.status == 200

    @property
    def status_text(self) -> str:
        try:
            return f"{self.status} {HTTPStatus(self.status).phrase}"
        except ValueError:
            return str(self.status)


RequestListener = Callable[[HttpExchange], None]  # called on the connection's thread; must not block


class ReportsRequests:
    """Mixed into the server's request handler (before BaseHTTPRequestHandler): remembers the status
    sent and, once a request is handled, tells the server's `on_request` listener."""

    _status = 0  # the status sent for this request (0: none yet)

    def send_response(self, code: int, message: str | None = None) -> None:
        self._status = code
        super().send_response(code, message)  # type: ignore[misc]

    def _logged(self, method: str, handle: Callable[[], None]) -> None:
        self._status = 0
        t, start = time.time(), time.perf_counter()
        try:
            handle()
        finally:
            listener: RequestListener | None = getattr(self.server, "on_request", None)  # type: ignore[attr-defined]
            if listener is not None and self._status:
                path = self.path.split("?", 1)[0]  # type: ignore[attr-defined]
                client = self.client_address[0]  # type: ignore[attr-defined]
                try:
                    listener(HttpExchange(t, method, path, self._status, client, time.perf_counter() - start))
                except Exception:
                    log.exception("The API request listener failed")
