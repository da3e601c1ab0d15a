"""An embedding model or a reranker in the library (a bert GGUF) is not a chat model: picked in the
window, it is refused with what it is and where Ember serves it (the API's /v1/embeddings, /v1/rerank),
before anything is unloaded; the loaded model stays and still answers."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.gguf_factory import write_tiny_bert
from tests.helpers.window import load


@pytest.mark.parametrize(
    ("pooling", "says"),
    [
        ("mean", "bert.gguf is an embedding model: it has no chat. Ember's API server serves its vectors at "
                 "/v1/embeddings."),
        ("rank", "bert.gguf is a reranker: it has no chat. Ember's API server serves its scores at /v1/rerank."),
    ],
)  # fmt: skip
def test_picking_an_embedding_model_keeps_the_loaded_one(
    qtbot: QtBot, make_window: Callable[..., MainWindow], pooling: str, says: str
) -> None:
    w = make_window()
    load(qtbot, w)
    write_tiny_bert(w.library.models_dir / "bert.gguf", pooling)
    with qtbot.waitSignal(w.models_listed, timeout=10_000):
        w.models.reload_models()
    states: list[str] = []
    w.model_state_changed.connect(states.append)
    index = w.model_picker.findData("bert.gguf")
    assert index >= 0  # (listed: the library takes it; the pick says what it is)
    w.model_picker.setCurrentIndex(index)
    w.model_picker.activated.emit(index)
    qtbot.waitUntil(lambda: says in w.banner.text(), timeout=10_000)
    assert "tiny.gguf is still loaded" in w.banner.text()
    assert states == [] and w.model is not None and w.model_picker.currentData() == "tiny.gguf"
