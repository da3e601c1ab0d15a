"""Guards of Ember's API server found in review, each against a real server on 127.0.0.1: the Host
check on a LAN listener, a malformed Content-Length, slow and idle clients (timeouts, a bound on
connections), a keychain that cannot be read, port reuse on Windows, and generations that end
without finishing (cancelled, interrupted, failed) never reported as a clean "stop"."""

from __future__ import annotations

import contextlib
import email.utils
import json
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import keyring
import openai
import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.cli.common import load_blocking
from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.errors import GenerationError, SecretStoreError
from ember_chat.engine.inference.events import Event, Finished, Token
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.serve import server as server_module
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.server import ApiServer
from ember_chat.engine.storage.secrets import API_SERVER_KEY, SecretStore
from tests.helpers.api_support import MESSAGES, WAIT_S, FakeSetup, Task, Watcher, fake_text, raw_request
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.file_keyring import UnreadableKeyring

Serve = Callable[[EngineService, ServerConfig], ApiServer]


# ----- helpers and fixtures


@pytest.fixture
def fake_service() -> Iterator[Callable[[FakeBackend], EngineService]]:
    """Engine services over fake backends (a model called "fake"), all closed at teardown."""
    services: list[EngineService] = []

    def make(backend: FakeBackend) -> EngineService:
        service = EngineService(backend_factory=lambda ref: backend)
        services.append(service)
        load_blocking(service, LoadConfig(Path("fake.gguf")), "fake")
        return service

    yield make
    for service in services:
        service.close()
    assert not any(s.running for s in services)


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a timeout means it never did)."""
    data = b""
    while chunk := sock.recv(65_536):
        data += chunk
    return data


def head(response: bytes) -> tuple[int, dict[str, str], bytes]:
    """Status, headers (lower-case names) and body of one raw HTTP/1.1 response."""
    header, _, body = response.partition(b"\r\n\r\n")
    status_line, *lines = header.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, body


def client(server: ApiServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=WAIT_S)


# ----- 1. the Host check is for loopback listeners (DNS rebinding); a LAN listener relies on the key


def test_lan_listener_serves_clients_that_name_it_by_its_lan_address(fake_service: Callable, serve: Serve) -> None:
    server = serve(fake_service(FakeBackend(n_tokens=2)), ServerConfig(host="0.0.0.0", port=0, api_key="lan-key"))
    port = server.port
    for host in (f"192.168.1.50:{port}", "192.168.1.50", f"ember.lan:{port}"):
        status, _, body = raw_request(port, "GET", "/v1/models", {"Host": host, "Authorization": "Bearer lan-key"})
        assert status == 200, (host, body)
        assert [m["id"] for m in json.loads(body)["data"]] == ["fake"]
    # the API key still guards it
    status, _, body = raw_request(port, "GET", "/v1/models", {"Host": f"192.168.1.50:{port}"})
    assert status == 401
    assert json.loads(body)["error"]["code"] == "invalid_api_key"


def test_loopback_listener_still_refuses_other_host_names(fake_service: Callable, serve: Serve) -> None:
    service = fake_service(FakeBackend(n_tokens=2))
    for config in (ServerConfig(port=0), ServerConfig(port=0, api_key="k")):
        server = serve(service, config)
        port = server.port
        auth = {"Authorization": "Bearer k"}
        for host in ("evil.example", f"evil.example:{port}", f"192.168.1.50:{port}"):
            status, _, body = raw_request(port, "GET", "/health", {"Host": host, **auth})
            assert status == 403, host
            assert json.loads(body)["error"]["type"] == "forbidden"
        status, _, _ = raw_request(port, "GET", "/health", {"Host": f"127.0.0.1:{port}", **auth})
        assert status == 200


# ----- 2. a malformed Content-Length is refused, never read as "until the client closes"


@pytest.mark.parametrize("length", ["-1", "-4096", "1_0", "+5"])
def test_malformed_content_length_is_400_and_closes(fake_service: Callable, serve: Serve, length: str) -> None:
    server = serve(fake_service(FakeBackend(n_tokens=2)), ServerConfig(port=0))
    with connect(server.port) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %s\r\n\r\n" % length.encode()
        )
        status, headers, body = head(read_until_closed(sock))
    assert status == 400
    assert headers["connection"] == "close"
    assert "Content-Length" in json.loads(body)["error"]["message"]


# ----- 3. slow and idle clients: a read timeout, and a bound on connections


@pytest.mark.slow
def test_half_sent_request_and_idle_connection_are_closed(fake_service: Callable, serve: Serve) -> None:
    server = serve(fake_service(FakeBackend(n_tokens=2)), ServerConfig(port=0, timeout_s=0.5))
    with connect(server.port) as sock:  # a header that never ends
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1")
        assert read_until_closed(sock) == b""
    with connect(server.port) as sock:  # a connection that never sends anything
        assert read_until_closed(sock) == b""
    with connect(server.port) as sock:  # a keep-alive connection left idle after its request
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        status, _, body = head(read_until_closed(sock))
    assert status == 200 and json.loads(body)["status"] == "ok"


def test_short_body_times_out_with_408(fake_service: Callable, serve: Serve) -> None:
    server = serve(fake_service(FakeBackend(n_tokens=2)), ServerConfig(port=0, timeout_s=0.5))
    with connect(server.port) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"model": "fake"'
        )
        status, headers, body = head(read_until_closed(sock))
    assert status == 408
    assert headers["connection"] == "close"
    assert "in time" in json.loads(body)["error"]["message"]


def test_connections_beyond_the_limit_get_503(fake_service: Callable, serve: Serve) -> None:
    server = serve(fake_service(FakeBackend(n_tokens=2)), ServerConfig(port=0, max_connections=2))
    port = server.port
    holders = [connect(port) for _ in range(2)]
    try:
        for sock in holders:  # each answered once, then held open (keep-alive): two threads busy
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert sock.recv(65_536).startswith(b"HTTP/1.1 200")
        with connect(port) as extra:
            status, headers, body = head(read_until_closed(extra))
        assert status == 503
        assert headers["connection"] == "close"
        error = json.loads(body)["error"]
        assert error["code"] == "too_many_connections" and "connections" in error["message"]
    finally:
        for sock in holders:  # the client ends: the server closes its side after freeing the slot
            sock.shutdown(socket.SHUT_WR)
            read_until_closed(sock)
            sock.close()
    status, _, _ = raw_request(port, "GET", "/health", {"Host": "127.0.0.1"})
    assert status == 200


@pytest.mark.slow
@pytest.mark.parametrize("stream", [True, False])
def test_slow_generation_is_not_cut_by_the_read_timeout(fake_service: Callable, serve: Serve, stream: bool) -> None:
    """The timeout is for reads from the client: a model slower than it (per token, or before the
    first one) still answers in full."""
    server = serve(fake_service(FakeBackend(n_tokens=2, delay_s=0.9)), ServerConfig(port=0, timeout_s=0.4))
    with client(server) as c:
        if stream:
            with c.chat.completions.create(model="fake", messages=MESSAGES, stream=True) as chunks:
                parts = [(ch.choices[0].delta.content or "", ch.choices[0].finish_reason) for ch in chunks]
            text = "".join(p for p, _ in parts)
            finish = parts[-1][1]
        else:
            response = c.chat.completions.create(model="fake", messages=MESSAGES)
            text, finish = response.choices[0].message.content or "", response.choices[0].finish_reason
    assert text == fake_text(2)
    assert finish == "length"


def test_a_body_no_route_reads_does_not_hold_the_connection(fake_service: Callable, serve: Serve) -> None:
    """A GET announcing a body, answered, then one byte of that body and silence: the read timeout closes
    it (it held a connection for good, and a few of them locked every client out with 503s)."""
    server = serve(fake_service(FakeBackend(n_tokens=2)), ServerConfig(port=0, timeout_s=0.5, max_connections=2))
    held = [connect(server.port) for _ in range(2)]
    try:
        for sock in held:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n")
            answer = b""
            while not answer.endswith(b"}"):  # (its head and its JSON body)
                answer += sock.recv(65_536)
            assert answer.startswith(b"HTTP/1.1 200")
            sock.sendall(b"x")
        for sock in held:
            assert read_until_closed(sock) == b""  # closed by the server
    finally:
        for sock in held:
            sock.close()
    status, _, _ = raw_request(server.port, "GET", "/health", {"Host": "127.0.0.1"})
    assert status == 200


def test_a_client_over_the_limit_that_sent_its_request_still_gets_the_503(fake_service: Callable, serve: Serve) -> None:
    """The refused connection's request is read (and dropped) before it is closed: closing on unread data
    reset the connection, and the client saw a reset instead of the 503 (7 times in 10)."""
    server = serve(fake_service(FakeBackend(n_tokens=2)), ServerConfig(port=0, max_connections=1))
    with connect(server.port) as holder:
        holder.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert holder.recv(65_536).startswith(b"HTTP/1.1 200")
        for _ in range(5):
            with connect(server.port) as extra:
                extra.sendall(
                    b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2000\r\n\r\n"
                    + b" " * 2000
                )
                status, headers, body = head(read_until_closed(extra))
            assert status == 503 and headers["connection"] == "close"
            assert json.loads(body)["error"]["code"] == "too_many_connections"


@pytest.mark.slow
def test_a_client_that_stops_reading_its_stream_is_given_up(fake_service: Callable, serve: Serve) -> None:
    """A streaming client that never reads: once it has taken nothing for the timeout its generation is
    cancelled and its connection ended (the answer ran on to max_tokens, and stop() waited for it forever)."""
    backend = FakeBackend(n_tokens=1_000_000, rate=50_000)  # (20 s if nobody stopped it)
    tokens: list[int] = []
    backend.on_token = tokens.append
    service = fake_service(backend)
    watcher = Watcher()
    service.add_listener(watcher)
    server = serve(service, ServerConfig(port=0, timeout_s=0.5))
    body = json.dumps({"model": "fake", "messages": MESSAGES, "stream": True, "max_tokens": 1_000_000}).encode()
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        watcher.wait_counts("api", 1, 0)
        watcher.wait_for(lambda: len(watcher.done) == 1, "the generation to end", timeout=60)
        assert watcher.done[0].reason == "cancelled"
        assert len(tokens) < 1_000_000


def test_every_response_says_its_date_and_server(fake_service: Callable, serve: Serve) -> None:
    server = serve(fake_service(FakeBackend(n_tokens=2)), ServerConfig(port=0))
    for path in ("/health", "/nope"):
        with connect(server.port) as sock:
            sock.sendall(b"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" % path.encode())
            _, headers, _ = head(read_until_closed(sock))
        assert headers["server"] == "Ember"
        assert email.utils.parsedate_to_datetime(headers["date"]).tzinfo is not None


# ----- 4. a keychain that cannot be read is not "no key"


def test_no_stored_key_and_unreadable_keychain_differ() -> None:
    store = SecretStore(service="ember-test-guards")
    assert store.read(API_SERVER_KEY) is None  # nothing stored: None
    store.set(API_SERVER_KEY, "stored-key")
    try:
        assert store.read(API_SERVER_KEY) == "stored-key"
        previous = keyring.get_keyring()
        keyring.set_keyring(UnreadableKeyring())
        try:
            with pytest.raises(SecretStoreError, match="keychain could not be read"):
                store.read(API_SERVER_KEY, "The API server's key")
        finally:
            keyring.set_keyring(previous)
    finally:
        store.clear(API_SERVER_KEY)


def test_window_api_server_refuses_to_start_without_a_readable_keychain(
    qtbot: QtBot, make_window: Callable[..., MainWindow], unreadable_keychain: None
) -> None:
    """When the user set a key (the settings say so): without a key set, see
    tests/app/test_gui_never_waits.py::test_no_key_set_and_an_unreadable_keychain_starts_the_server."""
    w = make_window()
    w.settings = w.settings.with_changes(api_key_set=True)
    dialog = w.api.open_dialog()
    with qtbot.waitSignal(dialog.key_checked, timeout=WAIT_S * 1000):  # read off the GUI thread
        pass
    assert "keychain cannot be read" in dialog.key.placeholderText()
    dialog.enabled.setChecked(True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dialog.port.setValue(port)
    with qtbot.waitSignal(dialog.applied, timeout=WAIT_S * 1000) as applied:
        dialog.apply()
    assert applied.args == [False]
    assert not w.api.running
    banner = w.banner.text()
    assert "keychain could not be read" in banner and "was not started" in banner
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=WAIT_S).close()


# ----- 5. port reuse: SO_REUSEADDR is port stealing on Windows


def test_address_reuse_option_by_platform() -> None:
    assert server_module.bind_option("win32") == "SO_EXCLUSIVEADDRUSE"
    assert server_module.bind_option("linux") == "SO_REUSEADDR"
    assert server_module.bind_option("darwin") == "SO_REUSEADDR"


# ----- 6. a generation that did not finish is never a clean "stop"


class BreakingBackend(FakeBackend):
    """Two tokens, then the end that `how` says: a remote stream cut ("interrupted", as the remote
    backend reports it) or an engine error ("error")."""

    def __init__(self, how: str) -> None:
        super().__init__(n_tokens=2)
        self.how = how

    def _run(self, params: SamplingParams) -> Iterator[Event]:
        rec, ready = self.begin()
        yield ready
        for i in range(2):
            yield Token(fake_text(i + 1)[len(fake_text(i)) :], i, rec.token())
        if self.how == "error":
            raise GenerationError("llama.cpp failed while generating: out of memory.")
        yield Finished("interrupted", fake_text(2), rec.finish("interrupted"), "The connection broke mid-answer.")


@pytest.fixture
def breaking() -> Iterator[Callable[[str], FakeSetup]]:
    setups: list[FakeSetup] = []

    def make(how: str) -> FakeSetup:
        setup = FakeSetup(BreakingBackend(how), queue_limit=8, gated=False)
        setups.append(setup)
        return setup

    yield make
    with contextlib.ExitStack() as stack:
        for setup in setups:
            stack.callback(setup.close)


@pytest.mark.parametrize(("how", "message"), [("interrupted", "broke mid-answer"), ("error", "out of memory")])
def test_broken_generation_is_an_error_not_stop(breaking: Callable[[str], FakeSetup], how: str, message: str) -> None:
    setup = breaking(how)
    with setup.client() as c:
        with pytest.raises(openai.InternalServerError, match=message) as info:
            c.chat.completions.create(model="fake", messages=MESSAGES)
        assert info.value.status_code == 500 and info.value.code == "generation_failed"
        with pytest.raises(openai.InternalServerError, match=message):
            c.completions.create(model="fake", prompt="Hi")
        received: list[Any] = []
        with (
            pytest.raises(openai.APIError, match=message),
            c.chat.completions.create(model="fake", messages=MESSAGES, stream=True) as chunks,
        ):
            received.extend(chunks)
    assert all(ch.choices[0].finish_reason is None for ch in received)
    assert "".join(ch.choices[0].delta.content or "" for ch in received) == fake_text(2)


def test_cancelled_generation_is_an_error_not_stop(fake: Callable[..., FakeSetup]) -> None:
    """The service cancels everything (the window closing, the model unloading) while one API
    request streams and another waits: neither is told its answer ended cleanly."""
    setup = fake(n_tokens=50, gated=True)
    finishes: list[str | None] = []

    def stream() -> None:
        with (
            setup.client() as c,
            c.chat.completions.create(model="fake", messages=MESSAGES, stream=True) as chunks,
        ):
            finishes.extend(ch.choices[0].finish_reason for ch in chunks)

    def plain() -> str | None:
        with setup.client() as c:
            return c.chat.completions.create(model="fake", messages=MESSAGES).choices[0].finish_reason

    streaming: Task = setup.spawn(stream)
    setup.watcher.wait_counts("api", 1, 0)
    waiting: Task = setup.spawn(plain)
    setup.watcher.wait_counts("api", 1, 1)
    setup.service.cancel_all()
    setup.gate.set()
    with pytest.raises(openai.APIError, match="cancelled"):
        streaming.value()
    assert "stop" not in finishes
    with pytest.raises(openai.InternalServerError, match="cancelled") as info:
        waiting.value()
    assert info.value.status_code == 503 and info.value.code == "generation_cancelled"
    assert info.value.response.headers["x-should-retry"] == "false"  # the openai client does not send it again
