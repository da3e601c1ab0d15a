"""Shared by the remote backend tests: backends whose retry waits are recorded, and helpers (the
fault-injecting server's fixtures, plain, second origin and HTTPS, are tests/conftest.py's)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.refs import Endpoint, RemoteModelRef
from ember_chat.engine.inference.events import Event, Finished, Token
from ember_chat.engine.inference.remote.backend import RemoteBackend
from tests.helpers.sse_server import FakeOpenAI

MODEL = "test-model"
HI = [ChatMessage("user", "Hi")]
PARAMS = SamplingParams(temperature=0.3, max_tokens=64, seed=7, stop=("</s>", "\nUser:"))
API_KEY = "sk-test-5ecret-do-not-leak"


# ----- helpers


class Backends:
    """Makes loaded backends whose retry waits are recorded instead of slept; closes them all."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []
        self._made: list[RemoteBackend] = []

    def endpoint(self, server: FakeOpenAI | str, **kw: object) -> Endpoint:
        url = server if isinstance(server, str) else server.base_url
        return Endpoint("lab", url, **kw)  # type: ignore[arg-type]

    def make(self, server: FakeOpenAI | str, model: str = MODEL, **kw: object) -> RemoteBackend:
        backend = RemoteBackend(sleep=self.sleeps.append)
        self._made.append(backend)
        backend.load(RemoteModelRef(self.endpoint(server, **kw), model))
        return backend

    def close(self) -> None:
        for backend in self._made:
            backend.close()


def drain(events: Iterator[Event]) -> tuple[list[Event], Finished]:
    out = list(events)
    assert out, "no events"
    assert isinstance(out[-1], Finished), out[-1]
    assert sum(isinstance(e, Finished) for e in out) == 1
    return out, out[-1]


def tokens(events: list[Event]) -> list[Token]:
    return [e for e in events if isinstance(e, Token)]


def free_port() -> int:
    """A port nothing listens on: bound, read, closed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
