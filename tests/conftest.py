"""Shared fixtures. Environment isolation happens before anything imports huggingface_hub or Qt."""

from __future__ import annotations

import gc
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

_SANDBOX = Path(tempfile.mkdtemp(prefix="ember-tests-"))
os.environ.update(
    {
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
        "HF_HOME": str(_SANDBOX / "hf-home"),
        "EMBER_DATA_DIR": str(_SANDBOX / "data"),
        "EMBER_CONFIG_DIR": str(_SANDBOX / "config"),
        "QT_QPA_PLATFORM": "offscreen",
        # tests never touch the real OS keychain
        "PYTHON_KEYRING_BACKEND": "tests.helpers.file_keyring.FileTestKeyring",
        "EMBER_TEST_KEYRING": str(_SANDBOX / "keyring.json"),
        # read aloud through Qt's mock engine: speech-dispatcher needs a sound server (app/voice/speaker.py)
        "EMBER_TTS_ENGINE": "mock",
        # Qt Multimedia (under text-to-speech) looks for PipeWire and warns where it is absent, as in CI
        "QT_LOGGING_RULES": "qt.multimedia.symbolsresolver.warning=false",
    }
)


import contextlib  # noqa: E402
import ipaddress  # noqa: E402
import shutil  # noqa: E402
import ssl  # noqa: E402
import threading  # noqa: E402
from collections.abc import Callable  # noqa: E402
from datetime import UTC, datetime, timedelta  # noqa: E402

import httpx2  # noqa: E402
import openai  # noqa: E402
import pytest  # noqa: E402
from pytestqt.qtbot import QtBot  # noqa: E402

from ember_chat.app.main import build_window  # noqa: E402
from ember_chat.app.shell.main_window import MainWindow  # noqa: E402
from ember_chat.engine.cli.common import load_blocking  # noqa: E402
from ember_chat.engine.core.params import LoadConfig  # noqa: E402
from ember_chat.engine.inference.service.engine import EngineService  # noqa: E402
from ember_chat.engine.serve.config import ServerConfig  # noqa: E402
from ember_chat.engine.serve.server import ApiServer  # noqa: E402
from ember_chat.engine.storage.paths import AppPaths  # noqa: E402
from tests.helpers.api_support import WAIT_S, FakeSetup  # noqa: E402
from tests.helpers.ember_export import Place  # noqa: E402
from tests.helpers.fake_backend import FakeBackend  # noqa: E402
from tests.helpers.remote_support import Backends  # noqa: E402
from tests.helpers.sse_server import FakeOpenAI  # noqa: E402
from tests.helpers.window import LOAD_TIMEOUT  # noqa: E402


@pytest.fixture(autouse=True)
def _garbage_collected_on_the_main_thread() -> Iterator[None]:
    """As in the app (app/qt/gc_guard.py): Python's cyclic collector never runs on a worker thread, where
    destroying the Qt objects of an earlier test's window deadlocks against the GUI thread; each test's
    garbage is collected on the main thread after it (the youngest generation holds all it made: nothing was
    collected, so nothing was promoted, while it ran; a full collection each time made the suite 70 % slower)."""
    gc.disable()
    yield
    gc.collect(0)


@pytest.fixture(autouse=True)
def _keyring_left_as_found() -> Iterator[None]:
    """Each test leaves the test keychain as it found it: a key one test saved (the window's API server key
    in test_app_remote) made a later test's server ask for it (test_remote_switch: 401)."""
    keyring_file = Path(os.environ["EMBER_TEST_KEYRING"])
    before = keyring_file.read_bytes() if keyring_file.exists() else None
    yield
    if before is None:
        keyring_file.unlink(missing_ok=True)
    else:
        keyring_file.write_bytes(before)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that runs a real starter model is slow (it loads 100-250 MB): `pytest -m "not slow"` is the
    fast inner loop; the whole suite runs them all."""
    for item in items:
        if {"starter_model", "chat_starter_model"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


from tests.helpers.gguf_factory import TinySpec, write_tiny_model  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer dim-64 llama model with a ChatML template (~0.5 MB)."""
    return write_tiny_model(tmp_path_factory.mktemp("models") / "tiny-chatml.gguf")


@pytest.fixture(scope="session")
def tiny_model_no_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = TinySpec(chat_template=None, name="Tiny Base", seed=1)
    return write_tiny_model(tmp_path_factory.mktemp("models") / "tiny-base.gguf", spec)


@pytest.fixture(scope="session")
def starter_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real Gemma 3 270M Q4_K_M base model (`gemma-3-270m`, the tests' and benchmarks' real model),
    assembled once per test session."""
    from ember_chat.engine.models.starter import GEMMA_ALIAS, starter_model_path

    return starter_model_path(tmp_path_factory.mktemp("starter"), GEMMA_ALIAS)


@pytest.fixture(scope="session")
def chat_starter_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real chat starter, SmolLM2 135M Instruct Q4_1 (`starter`), verified in place in its package."""
    from ember_chat.engine.models.starter import STARTER_ALIAS, starter_model_path

    return starter_model_path(tmp_path_factory.mktemp("chat-starter"), STARTER_ALIAS)


@pytest.fixture
def runtime() -> Iterator[object]:
    from ember_chat.engine.inference.local.runtime import LocalRuntime

    rt = LocalRuntime()
    yield rt
    rt.close()


@pytest.fixture
def places(tmp_path: Path) -> Iterator[tuple[Place, Place]]:
    a, b = Place(tmp_path / "a"), Place(tmp_path / "b")
    yield a, b
    a.store.close()
    b.store.close()


@pytest.fixture(scope="module")
def tiny_service(tiny_model: Path) -> Iterator[EngineService]:
    service = EngineService()
    try:
        load_blocking(service, LoadConfig(tiny_model, n_ctx=512, threads=1), "tiny")
        yield service
    finally:
        service.close()
    assert not service.running


@pytest.fixture(scope="module")
def tiny_server(tiny_service: EngineService) -> Iterator[ApiServer]:
    server = ApiServer(tiny_service, ServerConfig(port=0))
    server.start()
    yield server
    server.stop()
    assert not server.running


@pytest.fixture
def client(tiny_server: ApiServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=tiny_server.url, api_key="unused", max_retries=0, timeout=WAIT_S) as c:
        yield c


@pytest.fixture
def http(tiny_server: ApiServer) -> Iterator[httpx2.Client]:
    with httpx2.Client(base_url=f"http://127.0.0.1:{tiny_server.port}", timeout=WAIT_S) as c:
        yield c


@pytest.fixture
def serve() -> Iterator[Callable[[EngineService, ServerConfig], ApiServer]]:
    """Start extra servers (other configs); all stopped at teardown."""
    servers: list[ApiServer] = []

    def start(service: EngineService, config: ServerConfig) -> ApiServer:
        server = ApiServer(service, config)
        server.start()
        servers.append(server)
        return server

    yield start
    with contextlib.ExitStack() as stack:
        for server in servers:
            stack.callback(server.stop)


@pytest.fixture
def fake() -> Iterator[Callable[..., FakeSetup]]:
    setups: list[FakeSetup] = []

    def make(n_tokens: int, delay_s: float = 0.0, queue_limit: int = 8, gated: bool = False) -> FakeSetup:
        setup = FakeSetup(FakeBackend(n_tokens=n_tokens, delay_s=delay_s), queue_limit, gated)
        setups.append(setup)
        return setup

    yield make
    with contextlib.ExitStack() as stack:
        for setup in setups:
            stack.callback(setup.close)


@pytest.fixture
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


@pytest.fixture
def hanging_server() -> Iterator[FakeOpenAI]:
    """A server that accepts connections and never answers GET /models (until teardown)."""
    with FakeOpenAI() as fake:
        fake.stall_models = True
        yield fake


@pytest.fixture
def backends(server: FakeOpenAI) -> Iterator[Backends]:
    made = Backends()
    yield made
    made.close()  # before the servers stop


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


@pytest.fixture
def paths(tmp_path: Path, tiny_model: Path) -> AppPaths:
    p = AppPaths(tmp_path / "data", tmp_path / "config")
    p.default_models_dir.mkdir(parents=True)
    shutil.copy(tiny_model, p.default_models_dir / "tiny.gguf")
    return p


@pytest.fixture
def make_window(qtbot: QtBot, paths: AppPaths) -> Iterator[Callable[..., MainWindow]]:
    windows: list[MainWindow] = []

    def make(backend_factory: Callable[[], object] | None = None) -> MainWindow:
        kwargs = {"backend_factory": backend_factory} if backend_factory else {}
        w = build_window(paths, **kwargs)
        qtbot.addWidget(w)
        w.show()
        windows.append(w)
        with qtbot.waitSignal(w.models_listed, timeout=LOAD_TIMEOUT):  # the picker is filled off the GUI thread
            pass
        return w

    yield make
    for w in windows:
        w.close()  # stops, quits and joins the engine thread
        if w.api.quit_question is not None:  # the API server was left running: quitting asks first
            w.api.quit_button.click()
        assert not w.bridge.service.running
        assert w.join_background(30)  # and every background task's thread has ended
        w.store.close()
