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

GENERATION_PATHS = ("/v1/chat/completions", "/v1/completions", "/infill", "/v1/responses", "/v1/messages")


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


class RequestRecord:
    """One request being answered, for the request listener: when it arrived, and the status sent
    (its handler says each status it sends); `report` tells the listener once it has been handled."""

    def __init__(self, method: str, path: str, client: str) -> None:
        self.method = method
        self.path = path.split("?", 1)[0]
        self.client = client
        self.status = 0  # the status sent for this request (0: none yet: nothing to report)
        self._t, self._start = time.time(), time.perf_counter()

    def exchange(self) -> HttpExchange | None:
        """The request as answered until now (None: no status sent yet)."""
        if not self.status:
            return None
        return HttpExchange(
            self._t, self.method, self.path, self.status, self.client, time.perf_counter() - self._start
        )

    def report(self, listener: RequestListener | None) -> None:
        exchange = self.exchange()
        if listener is None or exchange is None:
            return
        try:
            listener(exchange)
        except Exception:
            log.exception("The API request listener failed")
