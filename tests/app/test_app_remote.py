"""The window with remote engines and its own API server: Models ▸ Connections (add, test, use) against
a real OpenAI-compatible server on 127.0.0.1 (Ember's own, serving a tiny model), chatting with a
remote model with the same live metrics, and Settings ▸ Local API server serving the window's model
to the `openai` client while the status bar shows it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import openai
import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.cli.common import load_blocking
from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.inference.service.engine import EngineService, QueueState, ServiceListener
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.server import ApiServer
from ember_chat.engine.storage.connections import Connection, remote_model_name
from ember_chat.engine.storage.secrets import API_SERVER_KEY, SecretStore
from tests.helpers.peer_servers import free_port
from tests.helpers.remote_window import cut_answer
from tests.helpers.sse_server import DONE, FakeOpenAI, chunk, usage_chunk
from tests.helpers.window import ANSWER_TIMEOUT, load, send, set_max_tokens


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """A real OpenAI-compatible server (Ember's own) with a tiny model, standing in for a lab server."""
    from tests.helpers.gguf_factory import write_tiny_model

    model = write_tiny_model(tmp_path_factory.mktemp("lab") / "lab.gguf")
    service = EngineService()
    load_blocking(service, LoadConfig(model, n_ctx=1024, threads=1), "lab-model")
    server = ApiServer(service, ServerConfig(port=0, api_key="lab-key"))
    server.start()
    yield server
    server.stop()
    service.close()


def test_add_test_and_use_a_connection(
    qtbot: QtBot, make_window: Callable[..., MainWindow], lab_server: ApiServer
) -> None:
    w = make_window()
    w.models.open_connections()
    d = w.models.connections_dialog
    d.name.setText("lab")
    d.url.setText(lab_server.url)
    d.key.setText("wrong-key")
    with qtbot.waitSignal(d.tested, timeout=10_000):
        d.test_connection()
    assert "API key" in d.result.text() and "✗" in d.result.text()
    d.key.setText("lab-key")
    with qtbot.waitSignal(d.tested, timeout=10_000):
        d.test_connection()
    assert "Connected" in d.result.text() and "lab-model" in d.result.text() and "round trip" in d.result.text()
    saved = w.connections.get("lab")
    assert saved.models == ("lab-model",) and w.connections.endpoint("lab").api_key == "lab-key"
    assert "lab-key" not in w.connections.path.read_text()  # the key lives in the keychain only

    # the remote model is in the same picker as the local ones, marked with the connection
    def labels() -> list[str]:
        return [w.model_picker.itemText(i) for i in range(w.model_picker.count())]

    qtbot.waitUntil(lambda: "lab-model — lab" in labels(), timeout=10_000)  # listed off the GUI thread
    assert "tiny.gguf" in labels()
    d.model.setCurrentText("lab-model")
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s in ("ready", "none"), timeout=10_000):
        d._use()
    assert w.controller.model_ready and w.model_bar.badge.text() == "Remote · lab"
    assert w.model_picker.currentData() == remote_model_name("lab", "lab-model")


def test_chat_with_a_remote_model_has_the_same_metrics(
    qtbot: QtBot, make_window: Callable[..., MainWindow], lab_server: ApiServer
) -> None:
    w = make_window()
    w.connections.save(Connection("lab", lab_server.url, "lab-model"), api_key="lab-key")
    w.models.reload_models()
    load(qtbot, w, remote_model_name("lab", "lab-model"))
    set_max_tokens(w, 12)
    w.side.params.temperature.setValue(0)
    send(qtbot, w, "Hello there")
    thread = w.store.thread(w.controller.conversation_id)
    answer = thread[-1]
    assert answer.role == "assistant" and answer.content and answer.complete
    m = answer.metrics
    assert m["backend"] == "remote" and m["connection"] == "lab" and m["output_tokens"] == 12
    assert m["token_count"] == "exact" and m["ttft_s"] > 0 and m["decode_tokens_per_s"] > 0
    assert m["stop_reason"] == "length" and m["threads"] is None
    panel = w.side.metrics
    assert panel.output.text() == "12" and panel.decode.text().endswith("tok/s")
    assert (
        "12 tokens · max tokens reached · lab" in w.transcript.plain_text()
    )  # the answer's metrics line names the connection


def test_remote_errors_show_in_the_banner(
    qtbot: QtBot, make_window: Callable[..., MainWindow], lab_server: ApiServer
) -> None:
    w = make_window()
    w.connections.save(Connection("lab", lab_server.url, "no-such-model"), api_key="lab-key")
    # checked before the engine is asked to load (issue 16, items 2 and 3): refused with no state change
    w.models.load_model(remote_model_name("lab", "no-such-model"))
    qtbot.waitUntil(lambda: "does not serve a model called 'no-such-model'" in w.banner.text(), timeout=10_000)
    assert "lab-model" in w.banner.text() and not w.controller.model_ready
    w.connections.save(Connection("lab", lab_server.url, "lab-model"), api_key="bad")
    w.models.load_model(remote_model_name("lab", "lab-model"))
    qtbot.waitUntil(lambda: "refused the API key" in w.banner.text(), timeout=10_000)


class _States(ServiceListener):
    def __init__(self) -> None:
        self.saw_running = threading.Event()

    def queue_changed(self, state: QueueState) -> None:
        if state.count("api")[0]:
            self.saw_running.set()


def test_local_api_server_serves_the_window_model(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    w = make_window()
    load(qtbot, w)
    dialog = w.api.open_dialog()
    dialog.enabled.setChecked(True)
    dialog.port.setValue(free_port())
    dialog.key.setText("window-key")
    with qtbot.waitSignal(dialog.applied, timeout=10_000) as applied:  # the keychain: off the GUI thread
        dialog.apply()
    assert applied.args == [True]
    assert w.api.running and SecretStore().get(API_SERVER_KEY) == "window-key"
    assert "window-key" not in w.settings_file.path.read_text()
    url = w.api.server.url
    assert url in dialog.url.text()
    states = _States()
    w.bridge.service.add_listener(states)
    with openai.OpenAI(base_url=url, api_key="window-key", max_retries=0) as client:
        assert client.models.list().data[0].id == "tiny.gguf"  # (the window's model first, then those installed)
        stream = client.chat.completions.create(
            model="tiny.gguf",
            messages=[{"role": "user", "content": "Hi"}],
            max_tokens=16,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=url, api_key="nope", max_retries=0).models.list()
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text and chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 16
    assert states.saw_running.is_set()
    # the status bar follows the queue, and the log shows the request with its metrics
    qtbot.waitUntil(lambda: ": 0 running, 0 queued" in w.api.status.text(), timeout=ANSWER_TIMEOUT)
    assert w.api.status.isVisible() and url in w.api.status.text()
    # (every request: the model list, the generation and the refused key)
    qtbot.waitUntil(lambda: dialog.table.rowCount() == 3, timeout=ANSWER_TIMEOUT)
    rows = [[dialog.table.item(r, c).text() for c in range(6)] for r in range(3)]
    (generation,) = [row for row in rows if row[1].startswith("POST /v1/chat/completions")]
    assert generation[2] == "max tokens reached" and generation[5] == "16"
    assert sorted(row[2] for row in rows if row is not generation) == ["200 OK", "401 Unauthorized"]
    # turning it off closes the port
    dialog.enabled.setChecked(False)
    with qtbot.waitSignal(dialog.applied, timeout=10_000) as applied:
        dialog.apply()
    assert applied.args == [True] and not w.api.running and not w.api.status.isVisible()
    with (
        openai.OpenAI(base_url=url, api_key="window-key", max_retries=0) as client,
        pytest.raises(openai.APIConnectionError),
    ):
        client.models.list()


def test_api_server_port_in_use_is_a_clear_error(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    import socket

    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    try:
        w = make_window()
        dialog = w.api.open_dialog()
        dialog.enabled.setChecked(True)
        dialog.port.setValue(blocker.getsockname()[1])
        with qtbot.waitSignal(dialog.applied, timeout=10_000) as applied:
            dialog.apply()
        assert applied.args == [False]
        assert "cannot listen" in w.banner.text() and not w.settings.api_server and not dialog.enabled.isChecked()
    finally:
        blocker.close()


def test_a_cut_stream_keeps_the_answer_and_continue_finishes_it(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    with FakeOpenAI() as fake:
        w = make_window()
        answer = cut_answer(qtbot, w, fake)
        assert answer.content == "The first half"  # what arrived is kept
        assert answer.metrics is not None and answer.metrics["stop_reason"] == "interrupted"
        assert "flaky" in w.banner.text() and w.banner.isVisible()
        assert (f"ember:continue/{answer.id}", "Continue this answer where it stopped") in w.transcript.links()
        assert "interrupted" in w.transcript.plain_text()

        fake.stream([chunk(" and the rest."), chunk(finish="stop"), usage_chunk(12, 4), DONE])
        with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=20_000):
            w.transcript.action.emit("continue", answer.id, 0)  # the Continue link
        finished = w.store.message(answer.id)
        assert finished.content == "The first half and the rest." and finished.metrics["stop_reason"] == "stop"
        assert len(w.store.thread(w.controller.conversation_id)) == 2  # the same answer, continued
        body = fake.generate_requests()[-1].body
        assert body["messages"][-1] == {"role": "assistant", "content": "The first half"}
        assert body["continue_final_message"] is True


def test_a_busy_server_is_retried_with_a_countdown_and_no_duplicate(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    with FakeOpenAI() as fake:
        fake.fail(503, {"error": {"message": "overloaded"}}, headers={"Retry-After": "1"})
        w = make_window()
        w.connections.save(Connection("busy", fake.base_url, "test-model"))
        load(qtbot, w, remote_model_name("busy", "test-model"))
        notices: list[str] = []
        w.controller.retrying.connect(lambda *_: notices.append(w.banner.text()))
        with qtbot.waitSignal(w.controller.retrying, timeout=20_000):
            w.composer.editor.setPlainText("Hi")
            qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
        assert "overloaded" in w.banner.text() and "Trying again in 1 s (retry 1 of 3)" in w.banner.text()
        qtbot.waitUntil(lambda: not w.controller.generating, timeout=20_000)
        answer = w.store.thread(w.controller.conversation_id)[-1]
        assert answer.content == "Hello world" and len(fake.generate_requests()) == 2


def test_window_waits_its_turn_behind_an_api_request_and_stop_drops_it(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    from ember_chat.engine.core.params import SamplingParams
    from ember_chat.engine.inference.service.engine import GenerationRequest
    from tests.helpers.fake_backend import FakeBackend
    from tests.helpers.sinks import RecordingSink

    w = make_window(lambda _ref: FakeBackend(n_tokens=1_000_000, delay_s=0.002))
    load(qtbot, w)
    api_sink = RecordingSink()
    service = w.bridge.service
    api_id = service.submit(GenerationRequest(SamplingParams(max_tokens=1_000_000), api_sink, prompt="x", client="api"))
    assert api_sink.first_token.wait(10)
    with qtbot.waitSignal(w.controller.generating_changed, timeout=5_000):
        w.composer.editor.setPlainText("My question")
        qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
    assert service.queue_state().count("window") == (0, 1)  # waiting for its turn
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=5_000):
        w.stop()
    thread = w.store.thread(w.controller.conversation_id)
    assert [m.role for m in thread] == ["user"] and thread[0].content == "My question"  # no empty answer
    service.cancel(api_id)


def test_plain_http_to_another_machine_is_warned_about(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    """An API key (or any chat) sent over plain http:// to another host crosses the network in clear:
    the dialog says so as the address is typed; loopback and https:// addresses are not warned about."""
    from ember_chat.engine.core.refs import crosses_network_in_clear

    assert crosses_network_in_clear("http://192.168.1.20:8000/v1")
    assert crosses_network_in_clear("http://gpu-box.lan/v1")
    for safe in ("https://gpu-box.lan/v1", "http://127.0.0.1:8000/v1", "http://127.8.0.1/v1", "http://[::1]:80/v1",
                 "http://localhost:8000/v1", "not a url"):  # fmt: skip
        assert not crosses_network_in_clear(safe), safe
    w = make_window()
    w.models.open_connections()
    d = w.models.connections_dialog
    d.url.setText("http://127.0.0.1:8000/v1")
    assert d.clear_warning.isHidden()
    d.url.setText("http://192.168.1.20:8000/v1")
    assert not d.clear_warning.isHidden() and "your chats" in d.clear_warning.text()
    assert "API key" not in d.clear_warning.text()
    d.key.setText("secret")
    assert "API key" in d.clear_warning.text() and "secret" not in d.clear_warning.text()
    d.url.setText("https://192.168.1.20:8000/v1")
    assert d.clear_warning.isHidden()
