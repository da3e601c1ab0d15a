"""Shared by the remote backend tests: the fault-injecting server as fixtures (plain, second origin,
HTTPS with a certificate made at test time), backends closed at teardown, and helpers."""

from __future__ import annotations

import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.refs import Endpoint, RemoteModelRef
from ember_chat.engine.inference.events import Event, Finished, Token
from ember_chat.engine.inference.remote.backend import (
    RemoteBackend,
)
from tests.helpers.sse_server import FakeOpenAI

MODEL = "test-model"
HI = [ChatMessage("user", "Hi")]
PARAMS = SamplingParams(temperature=0.3, max_tokens=64, seed=7, stop=("</s>", "\nUser:"))
API_KEY = "sk-test-5ecret-do-not-leak"


# ----- fixtures and helpers
@pytest.fixture(autouse=True)
def no_thread_left() -> Iterator[None]:
    """Every server thread (accept loop and request handlers) is joined by the end of each test."""
    yield
    left = [t.name for t in threading.enumerate() if "process_request" in t.name or t.name.startswith("fake-openai")]
    assert not left, left


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def other_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


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


@pytest.fixture
def backends(server: FakeOpenAI) -> Iterator[Backends]:
    made = Backends()
    yield made
    made.close()  # before the servers stop


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


@pytest.fixture(scope="module")
def tls_context(tmp_path_factory: pytest.TempPathFactory) -> ssl.SSLContext:
    """A server context with a self-signed certificate for 127.0.0.1, made now."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("tls")
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(Path(cert_file), Path(key_file))
    return ctx


@pytest.fixture
def tls_server(tls_context: ssl.SSLContext) -> Iterator[FakeOpenAI]:
    with FakeOpenAI(tls=tls_context) as fake:
        yield fake
