"""First run: with no model loaded and no chat open, the window shows a welcome panel (starter model,
Model Manager, import), not an empty transcript."""

from __future__ import annotations

from collections.abc import Callable

from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.window import LOAD_TIMEOUT


def test_welcome_panel_until_a_model_is_loaded(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    assert w.centre_stack.currentWidget() is w.welcome
    assert w.welcome.starter.isVisible() and "SmolLM2 135M Instruct" in w.welcome.starter.text()
    note = w.welcome.note.text()
    assert "Gemma 3 270M" in note and "base" in note  # which starter is which
    picker = w.model_picker
    listed = next(picker.itemText(i) for i in range(picker.count()) if picker.itemData(i) == "gemma-3-270m")
    assert f"<b>{listed}</b> in the model picker" in note  # by the name the picker shows it under
    assert w.welcome.next_step.isVisible() and "Model Manager" in w.welcome.next_step.text()
    assert "Llama 3.2 3B Instruct" in w.welcome.next_step.text()  # what to download next
    assert w.welcome.manager.isVisible() and w.welcome.importer.isVisible()
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "ready", timeout=LOAD_TIMEOUT):
        w.welcome.starter.click()
    assert w.centre_stack.currentWidget() is w.transcript and w.model_picker.currentData() == "starter"
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "none", timeout=LOAD_TIMEOUT):
        w.models.unload_model()
    assert w.centre_stack.currentWidget() is w.welcome  # unloaded, and no chat open


def test_an_open_chat_is_shown_even_without_a_model(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    conv = w.store.create_conversation("earlier chat")
    w.store.add_message(conv.id, "user", "an old question")
    w.chats.reload_conversations()
    w.chats.open_conversation(conv.id)
    assert w.centre_stack.currentWidget() is w.transcript and "an old question" in w.transcript.plain_text()
    w.chats.new_chat()
    assert w.centre_stack.currentWidget() is w.welcome


def test_welcome_buttons_open_the_model_manager(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    w.welcome.manager.click()
    assert w.models.manager is not None and w.models.manager.isVisible()
    w.models.manager.close()
