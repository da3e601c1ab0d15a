"""An empty chat greets (issue 28): with a model loaded and no message yet, the transcript shows the
model's name, what it is good at and three example prompts that fill the message box; at launch Ember
reopens the chat that was open when it quit, unless that chat has since gone."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.window import LOAD_TIMEOUT, load, send, set_max_tokens


def test_an_empty_chat_greets_with_the_model_and_example_prompts(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    assert not w.greeting.isVisible()  # no model: the welcome panel says how to get one
    load(qtbot, w)
    assert w.centre_stack.currentWidget() is w.transcript
    assert w.greeting.isVisible() and w.greeting.title.text() == "tiny.gguf"
    assert "chat model" in w.greeting.good_at.text()  # its GGUF has a chat template
    assert w.greeting.geometry() == w.transcript.viewport().rect()  # over the whole transcript
    example = w.greeting.examples[0]
    assert example.isVisible() and example.text() == "Explain photosynthesis in simple words"
    example.click()
    assert w.composer.editor.toPlainText() == example.text() and w.composer.editor.hasFocus()
    set_max_tokens(w, 4)
    send(qtbot, w, example.text())
    assert not w.greeting.isVisible()  # the chat has begun
    assert "Explain photosynthesis" in w.transcript.plain_text()
    w.chats.new_chat()
    assert w.greeting.isVisible()  # a new empty chat greets again
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "none", timeout=LOAD_TIMEOUT):
        w.models.unload_model()
    assert not w.greeting.isVisible() and w.centre_stack.currentWidget() is w.welcome


def test_a_base_model_is_greeted_with_text_to_continue(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths, tiny_model_no_template: Path
) -> None:
    shutil.copy(tiny_model_no_template, paths.default_models_dir / "tiny-base.gguf")
    w = make_window()
    load(qtbot, w, "tiny-base.gguf")
    assert w.greeting.isVisible() and w.greeting.title.text() == "tiny-base.gguf"
    assert "continues the text" in w.greeting.good_at.text()
    texts = [b.text() for b in w.greeting.examples]
    assert len(texts) == 3 and texts[0].startswith("Once upon a time")
    w.composer.editor.setPlainText("my own draft")
    w.greeting.examples[2].click()
    assert w.composer.editor.toPlainText() == texts[2]
    w.composer.editor.undo()  # the draft it replaced comes back
    assert w.composer.editor.toPlainText() == "my own draft"


def quit_window(w: MainWindow) -> None:
    """Quit as the user does (the window's close), then let go of the store as Ember's exit does."""
    w.close()
    assert w.join_background(30)
    w.store.close()


def test_the_chat_open_at_quit_is_reopened_at_launch(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    conv = w.store.create_conversation("the chat I was in")
    w.store.add_message(conv.id, "user", "where was I?")
    other = w.store.create_conversation("another chat")
    w.chats.reload_conversations()
    w.chats.open_conversation(conv.id)
    quit_window(w)

    w = make_window()
    assert w.controller.conversation_id == conv.id and "where was I?" in w.transcript.plain_text()
    w.chats.open_conversation(other.id)
    w.store.organise.trash_chats([other.id])  # (behind the window's back, as a script could)
    quit_window(w)

    w = make_window()  # the chat open at quit is in the Trash: none opened, nothing said
    assert w.controller.conversation_id is None and not w.banner.isVisible()
    w.chats.open_conversation(conv.id)
    w.store.delete_conversation(conv.id)  # purged
    quit_window(w)

    w = make_window()
    assert w.controller.conversation_id is None and not w.banner.isVisible()
