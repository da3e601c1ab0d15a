"""The Parameters tab's context length applies when a model is loaded: while the loaded model runs with
another context, a note under it says so (a user set 1,024 and saw nothing change). Real window, a fake
engine whose model runs with 1,000,000 tokens of context."""

from __future__ import annotations

from collections.abc import Callable

from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.window import load


def test_a_context_length_other_than_the_loaded_models_is_said(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window(lambda _ref: FakeBackend(n_tokens=3))
    if not w.side.isVisible():
        w.toggle_side_panel()
    params = w.side.params
    assert not params.context_note.isVisibleTo(params)  # no model loaded: nothing to compare with
    load(qtbot, w)
    params.context.setValue(1024)
    note = params.context_note
    assert note.isVisibleTo(params) and "1,000,000" in note.text() and "next load" in note.text()
    params.context.setValue(1_000_000)
    assert not note.isVisibleTo(params)
    params.context.setValue(2048)
    assert note.isVisibleTo(params)
    params.set_params(params.params(), "", 1_000_000)  # another chat opened, with the model's context
    assert not note.isVisibleTo(params)
    params.set_params(params.params(), "", 4096)
    assert note.isVisibleTo(params)
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "none", timeout=60_000):
        w.models.unload_model()
    assert not note.isVisibleTo(params)


def test_a_chat_without_its_own_context_length_opens_with_the_settings_value(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    """It showed the context length of the chat opened before (and was then saved with it)."""
    w = make_window(lambda _ref: FakeBackend(n_tokens=3))
    a = w.store.create_conversation("Long context", params={"context_length": 2048})
    b = w.store.create_conversation("No context of its own")
    w.chats.reload_conversations()
    w.chats.open_conversation(a.id)
    assert w.side.params.context.value() == 2048
    w.chats.open_conversation(b.id)
    assert w.side.params.context.value() == w.settings.context_length != 2048
