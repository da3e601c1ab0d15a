"""Using a remote model while a local one is loaded asks first (issue 16, item 3): Ember runs one
model at a time, so the local model is unloaded, and the local API server, which serves what the
window has loaded, serves the remote model instead. The question says both; Cancel keeps everything
as it was; with no local model loaded nothing is asked."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx2
import pytest
from PySide6.QtWidgets import QMessageBox
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.cli.common import load_blocking
from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.serve.config import ServerConfig
from ember_chat.engine.serve.server import ApiServer
from ember_chat.engine.storage.connections import Connection, remote_model_name
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.window import LOAD_TIMEOUT, load
from tests.helpers.window_support import start_api_in_window

LAB = remote_model_name("lab", "lab-model")


@pytest.fixture
def lab() -> Iterator[ApiServer]:
    """Another Ember (its own engine) on 127.0.0.1, standing in for a lab server."""
    service = EngineService(lambda _ref: FakeBackend(n_tokens=8))
    load_blocking(service, LoadConfig(Path("lab.gguf")), "lab-model")
    server = ApiServer(service, ServerConfig(port=0))
    server.start()
    yield server
    server.stop()
    service.close()


def _served(url: str) -> list[str]:
    return [m["id"] for m in httpx2.get(url + "/models", timeout=5.0).json()["data"]]


def test_a_remote_model_in_place_of_the_local_one_is_asked_about(
    qtbot: QtBot, make_window: Callable[..., MainWindow], lab: ApiServer
) -> None:
    w = make_window()
    load(qtbot, w)
    api_url = start_api_in_window(qtbot, w)
    w.connections.save(Connection("lab", lab.url, "lab-model"))
    w.models.reload_models()
    qtbot.waitUntil(lambda: w.model_picker.findData(LAB) >= 0, timeout=10_000)
    states: list[str] = []
    w.model_state_changed.connect(states.append)

    # the pick asks first: what is unloaded and what the API server will serve
    w.model_picker.setCurrentIndex(w.model_picker.findData(LAB))
    w.model_picker.activated.emit(w.model_picker.currentIndex())
    qtbot.waitUntil(lambda: w.models.remote_question is not None, timeout=10_000)  # once checked
    question: QMessageBox = w.models.remote_question
    assert question.isVisible()
    said = question.text() + " " + question.informativeText()
    assert "lab-model" in said and "tiny.gguf will be unloaded" in said and api_url in said
    assert "instead of tiny.gguf" in said
    # Cancel: nothing changed, and the picker shows the local model again
    question.button(QMessageBox.StandardButton.Cancel).click()
    assert not question.isVisible() and states == [] and w.controller.model_ready
    assert w.model_picker.currentData() == "tiny.gguf" and w.bridge.service.model_alias == "tiny.gguf"
    assert _served(api_url)[0] == "tiny.gguf"  # (the window's model first, then the others installed)

    # asked again, and this time the user says yes
    w.models.remote_question = None
    w.models.load_model(LAB)
    qtbot.waitUntil(lambda: w.models.remote_question is not None, timeout=10_000)
    question = w.models.remote_question
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "ready", timeout=LOAD_TIMEOUT):
        question.use_button.click()
    assert w.model is not None and w.model.is_remote and w.model_bar.badge.text() == "Remote · lab"
    assert _served(api_url)[0] == "lab-model"  # as the question said
    w.api.stop()  # closing the window would ask about the running server


def test_no_question_without_a_local_model(
    qtbot: QtBot, make_window: Callable[..., MainWindow], lab: ApiServer
) -> None:
    w = make_window()
    w.connections.save(Connection("lab", lab.url, "lab-model"))
    load(qtbot, w, LAB)
    assert w.model is not None and w.model.is_remote and w.models.remote_question is None
