"""Shared by the API server tests: helpers and a gated fake engine (their fixtures, a tiny
model behind Ember's server and extra servers and fake-engine setups stopped at teardown, are tests/conftest.py's)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from http.client import HTTPConnection
from pathlib import Path
from typing import Any

import httpx2
import openai

from ember_chat.engine.cli.common import load_blocking
from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.core.refs import Endpoint, RemoteModelRef
from ember_chat.engine.inference.service.engine import (
    EngineService,
    QueueState,
    RequestRecord,
    ServiceListener,
)
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.server import ApiServer
from tests.helpers.fake_backend import WORDS, FakeBackend

WAIT_S = 10.0
MESSAGES: list[Any] = [{"role": "user", "content": "Hello there"}]
METRIC_KEYS = ("ttft_s", "prefill_tokens_per_s", "decode_tokens_per_s", "itl_p50_ms", "output_tokens", "e2e_s")


# ----- helpers


class Watcher(ServiceListener):
    """Records queue states and finished requests; tests wait on it instead of sleeping."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.states: list[QueueState] = []
        self.done: list[RequestRecord] = []

    def queue_changed(self, state: QueueState) -> None:
        with self.cond:
            self.states.append(state)
            self.cond.notify_all()

    def request_done(self, record: RequestRecord) -> None:
        with self.cond:
            self.done.append(record)
            self.cond.notify_all()

    def wait_for(self, predicate: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
        with self.cond:
            assert self.cond.wait_for(predicate, timeout), f"timed out waiting for {what}"

    def wait_counts(self, client: str, running: int, queued: int) -> QueueState:
        """Wait until a queue state with (running, queued) requests of `client` was seen."""
        found: list[QueueState] = []

        def seen() -> bool:
            found[:] = [s for s in self.states if s.count(client) == (running, queued)]
            return bool(found)

        self.wait_for(seen, f"{running} running and {queued} queued {client} requests")
        return found[-1]

    def wait_done(self, request_id: int) -> RequestRecord:
        self.wait_for(lambda: any(r.id == request_id for r in self.done), f"request {request_id} to finish")
        return next(r for r in self.done if r.id == request_id)

    def ran(self, request_id: int) -> bool:
        with self.cond:
            return any(s.running is not None and s.running.id == request_id for s in self.states)


class Task(threading.Thread):
    """A function on its own thread; `value()` joins it and returns its result or raises its error."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.fn = fn
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as exc:
            self.error = exc

    def value(self) -> Any:
        self.join(WAIT_S)
        assert not self.is_alive(), "the client thread did not finish"
        if self.error is not None:
            raise self.error
        return self.result


class FakeSetup:
    """A service over a slow FakeBackend, its API server and the client threads of one test.

    `gate`: while clear, every generation pauses after its first token (the engine thread waits),
    so tests decide exactly when the running request may go on."""

    def __init__(self, backend: FakeBackend, queue_limit: int, gated: bool) -> None:
        self.backend = backend
        self.gate = threading.Event()
        if gated:
            backend.on_token = self._on_token
        else:
            self.gate.set()
        self.service = EngineService(backend_factory=lambda ref: backend, queue_limit=queue_limit)
        self.watcher = Watcher()
        self.service.add_listener(self.watcher)
        self.tasks: list[Task] = []
        self.server = ApiServer(self.service, ServerConfig(port=0))
        try:
            load_blocking(self.service, LoadConfig(Path("fake.gguf")), "fake")
            self.server.start()
        except BaseException:
            self.service.close()
            raise

    def _on_token(self, index: int) -> None:
        if index == 0:
            self.gate.wait(WAIT_S)

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.server.url, api_key="unused", max_retries=0, timeout=WAIT_S)

    def spawn(self, fn: Callable[[], Any]) -> Task:
        task = Task(fn)
        self.tasks.append(task)
        task.start()
        return task

    def stream_chat(self, **kwargs: Any) -> tuple[str, str | None]:
        """One streaming chat on its own client: (text, finish_reason)."""
        text: list[str] = []
        finish = None
        with (
            self.client() as client,
            client.chat.completions.create(model="fake", messages=MESSAGES, stream=True, **kwargs) as stream,
        ):
            for chunk in stream:
                if chunk.choices:
                    text.append(chunk.choices[0].delta.content or "")
                    finish = chunk.choices[0].finish_reason or finish
        return "".join(text), finish

    def close(self) -> None:
        self.gate.set()
        try:
            self.server.stop()
            for task in self.tasks:
                task.join(WAIT_S)
        finally:
            self.service.close()
        assert not any(t.is_alive() for t in self.tasks)


def fake_text(n_tokens: int) -> str:
    return "".join(WORDS[i % len(WORDS)] + ("\n\n" if i % 80 == 79 else "") for i in range(n_tokens))


def assert_error(response: httpx2.Response, status: int, param: str | None = None, code: str | None = None) -> str:
    """An OpenAI-shaped error with no stack trace; returns its message."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert "Traceback" not in response.text and 'File "' not in response.text
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["type"], str) and error["type"]
    assert error["param"] == param
    if code is not None:
        assert error["code"] == code
    return str(error["message"])


def assert_api_error(exc: openai.APIStatusError, status: int, param: str | None = None) -> None:
    assert exc.status_code == status
    assert "Traceback" not in exc.response.text
    assert isinstance(exc.body, dict) and exc.body.get("message")
    assert exc.param == param


def raw_request(
    port: int, method: str, path: str, headers: dict[str, str], body: bytes | None = None
) -> tuple[int, dict[str, str], bytes]:
    """A request with exactly these headers (http.client sends our Host instead of its own)."""
    conn = HTTPConnection("127.0.0.1", port, timeout=WAIT_S)
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def chat_body(**extra: Any) -> dict[str, Any]:
    return {"model": "tiny", "messages": MESSAGES, "max_tokens": 4, "temperature": 0, **extra}


# ----- fixtures


@contextlib.contextmanager
def in_front_of_remote(base_url: str, model: str = "test-model") -> Iterator[httpx2.Client]:
    """Ember's API server serving `model` of the OpenAI-compatible server at `base_url` (a remote
    model), and a plain HTTP client of it; both stopped after."""
    service = EngineService()
    api = None
    try:
        load_blocking(service, RemoteModelRef(Endpoint("fake", base_url), model), model)
        api = ApiServer(service, ServerConfig(port=0))
        api.start()
        with httpx2.Client(base_url=f"http://127.0.0.1:{api.port}", timeout=WAIT_S) as client:
            yield client
    finally:
        if api is not None:
            api.stop()
        service.close()
