"""A banner ends when its cause ends (issue 16, item 11): "No model is loaded" and a model's load error
when a model loads, the retry countdown when the retry answers, an answer's error (the connection broke)
when the answer is continued or another chat is opened."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.connections import Connection, remote_model_name
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.remote_window import cut_answer
from tests.helpers.sse_server import DONE, FakeOpenAI, chunk, usage_chunk
from tests.helpers.window import LOAD_TIMEOUT, load


def test_no_model_is_loaded_ends_when_a_model_loads(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    w.composer.editor.setPlainText("hello?")
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
    assert w.banner.isVisible() and "No model is loaded" in w.banner.text()
    load(qtbot, w)
    assert not w.banner.isVisible()


def test_a_damaged_models_error_ends_when_a_model_loads(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    (paths.default_models_dir / "broken.gguf").write_bytes(b"GGUF" + bytes(range(256)) * 8)
    w = make_window()
    w.models.load_model("broken.gguf")
    qtbot.waitUntil(lambda: w.banner.isVisible() and "broken.gguf" in w.banner.text(), timeout=LOAD_TIMEOUT)
    load(qtbot, w)
    assert not w.banner.isVisible()


def test_the_retry_countdown_ends_when_the_retry_answers(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    with FakeOpenAI() as fake:
        fake.fail(503, {"error": {"message": "overloaded"}}, headers={"Retry-After": "1"})
        w = make_window()
        w.connections.save(Connection("busy", fake.base_url, "test-model"))
        load(qtbot, w, remote_model_name("busy", "test-model"))
        with qtbot.waitSignal(w.controller.retrying, timeout=20_000):
            w.composer.editor.setPlainText("Hi")
            qtbot.keyClick(w.composer.editor, Qt.Key.Key_Return)
        assert "Trying again in 1 s" in w.banner.text()
        with qtbot.waitSignal(w.controller.streamed, timeout=20_000):  # the retry answers
            pass
        assert not w.banner.isVisible()
        qtbot.waitUntil(lambda: not w.controller.generating, timeout=20_000)
        assert not w.banner.isVisible() and w.store.thread(w.controller.conversation_id)[-1].content == "Hello world"


def _cut_answer(qtbot: QtBot, w: MainWindow, fake: FakeOpenAI) -> int:
    answer = cut_answer(qtbot, w, fake)
    assert w.banner.isVisible() and "flaky" in w.banner.text()
    return answer.id


def test_a_broken_connection_ends_when_the_answer_is_continued(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    with FakeOpenAI() as fake:
        w = make_window()
        answer = _cut_answer(qtbot, w, fake)
        fake.stream([chunk(" and the rest."), chunk(finish="stop"), usage_chunk(12, 4), DONE])
        with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=20_000):
            w.transcript.action.emit("continue", answer, 0)  # the Continue link
        assert w.store.message(answer).metrics["stop_reason"] == "stop"
        assert not w.banner.isVisible()


def test_a_broken_connection_ends_when_another_chat_is_opened(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    with FakeOpenAI() as fake:
        w = make_window()
        _cut_answer(qtbot, w, fake)
        w.chats.new_chat()
        assert not w.banner.isVisible()
