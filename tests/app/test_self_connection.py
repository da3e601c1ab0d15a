"""A connection that points at this Ember's own API server is refused (issue 16, item 2): the window's
model would be served by the API server that the window itself feeds, and a message would wait
behind itself. Ember's API server names its process in a response header (X-Ember-Server), so the
window's Test connection and Use this model see it; `ember-chat serve --remote NAME` with NAME at the
address it is to listen on exits 2. And a stopped request never stays "running" on the server."""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx2
import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.cli.common import load_blocking
from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.server import ApiServer
from ember_chat.engine.storage.connections import Connection, remote_model_name
from tests.helpers.cli_remote import cli
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.peer_servers import free_port
from tests.helpers.window import ANSWER_TIMEOUT, load, set_max_tokens
from tests.helpers.window_support import start_api_in_window

SELF = "this Ember's own API server"


def _health(url: str) -> dict[str, object]:
    root = url.removesuffix("/v1")
    return httpx2.get(root + "/health", timeout=5.0).json()


def test_a_connection_to_this_embers_own_api_server_is_refused(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    load(qtbot, w)
    url = start_api_in_window(qtbot, w)
    assert w.api.running
    # Test connection in Models ▸ Connections says so
    w.models.open_connections()
    d = w.models.connections_dialog
    d.name.setText("myself")
    d.url.setText(url)
    with qtbot.waitSignal(d.tested, timeout=10_000):
        d.test_connection()
    assert SELF in html.unescape(d.result.text()) and "✗" in d.result.text()
    d.close()
    # a connection saved anyway (as the user did): using it keeps the local model
    w.connections.save(Connection("myself", url, "tiny.gguf"))
    states: list[str] = []
    w.model_state_changed.connect(states.append)
    w.models.load_model(remote_model_name("myself", "tiny.gguf"))
    qtbot.waitUntil(lambda: SELF in w.banner.text(), timeout=10_000)
    assert "myself" in w.banner.text() and "tiny.gguf is still loaded" in w.banner.text()
    assert states == [] and w.controller.model_ready and w.bridge.service.model_alias == "tiny.gguf"
    assert _health(url) == {"status": "ok", "model": "tiny.gguf", "running": 0, "queued": 0}
    assert w.models.remote_question is None  # refused before anything is asked
    w.api.stop()  # closing the window would ask about the running server


def test_the_same_server_by_another_address_is_refused_by_its_server_id(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    """'localhost' instead of 127.0.0.1: the address differs, the server's id in its answer does not."""
    w = make_window()
    load(qtbot, w)
    url = start_api_in_window(qtbot, w).replace("127.0.0.1", "localhost")
    assert w.api.running
    w.connections.save(Connection("alias", url, "tiny.gguf"))
    w.models.load_model(remote_model_name("alias", "tiny.gguf"))
    qtbot.waitUntil(lambda: SELF in w.banner.text(), timeout=10_000)
    assert w.controller.model_ready and w.bridge.service.model_alias == "tiny.gguf"
    w.api.stop()


def test_serve_remote_pointing_at_its_own_address_exits_2(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    assert cli(tmp_path, "remote", "add", "loop", url).returncode == 0
    out = cli(tmp_path, "serve", "--remote", "loop", "--model", "anything", "--port", str(port))
    assert out.returncode == 2, out.stderr
    assert "loop" in out.stderr and f"127.0.0.1:{port}" in out.stderr and "itself" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.fixture
def slow_server() -> Iterator[ApiServer]:
    """A real Ember API server on 127.0.0.1 whose model answers slowly and at length."""
    service = EngineService(lambda _ref: FakeBackend(n_tokens=1_000_000, delay_s=0.005))
    load_blocking(service, LoadConfig(Path("fake.gguf")), "slow-model")
    server = ApiServer(service, ServerConfig(port=0))
    server.start()
    yield server
    server.stop()
    service.close()


def test_a_stopped_remote_answer_never_stays_running_on_the_server(
    qtbot: QtBot, make_window: Callable[..., MainWindow], slow_server: ApiServer
) -> None:
    w = make_window()
    w.connections.save(Connection("slow", slow_server.url, "slow-model"))
    load(qtbot, w, remote_model_name("slow", "slow-model"))
    set_max_tokens(w, 100_000)
    w.composer.editor.setPlainText("talk for a long time")
    with qtbot.waitSignal(w.controller.streamed, timeout=ANSWER_TIMEOUT):
        qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
    assert _health(slow_server.url)["running"] == 1
    with qtbot.waitSignal(w.controller.generating_changed, timeout=ANSWER_TIMEOUT):
        qtbot.mouseClick(w.composer.button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: _health(slow_server.url)["running"] == 0, timeout=3_000)
    assert _health(slow_server.url)["queued"] == 0
    assert w.bridge.service.queue_state().count("window") == (0, 0)
