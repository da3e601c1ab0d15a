"""A comparison run from a message's Compare dialog, running when the test acts."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from ember_chat.app.compare.dialog import CompareDialog
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.connections import Connection, remote_model_name
from tests.helpers.sse_server import FakeOpenAI
from tests.helpers.transcript import anchors, click
from tests.helpers.window import ANSWER_TIMEOUT, LOAD_TIMEOUT, load, send, set_max_tokens


def open_compare(qtbot: QtBot, w: MainWindow, message_id: int) -> CompareDialog:
    """Click the message's Compare icon in the transcript; the dialog it opens."""
    link = next(a for a in anchors(w.transcript) if a.image and a.href == f"ember:compare/{message_id}")
    with qtbot.waitSignal(w.compare.dialog_opened, timeout=5000) as opened:
        click(qtbot, w.transcript, link)
    dialog = opened.args[0]
    assert isinstance(dialog, CompareDialog) and dialog.isVisible()
    return dialog


def running_comparison(qtbot: QtBot, w: MainWindow, peer: FakeOpenAI, local: bool = False) -> tuple[CompareDialog, int]:
    """A comparison streaming that never ends on its own: two stalled remote models (or the tiny local model
    and one stalled remote, with `local`); the prompt's id."""
    names = [remote_model_name(name, "test-model") for name in ("peer-a", "peer-b")]
    for name in ("peer-a", "peer-b"):
        w.connections.save(Connection(name, peer.base_url, "test-model"))
    with qtbot.waitSignal(w.models_listed, timeout=LOAD_TIMEOUT):
        w.models.reload_models()
    load(qtbot, w, "tiny.gguf")
    set_max_tokens(w, 4)
    send(qtbot, w, "go")
    question = w.store.thread(w.controller.conversation_id)[0]
    dialog = open_compare(qtbot, w, question.id)
    dialog.set_checked(["tiny.gguf", names[0]] if local else names)
    dialog.start_button.click()
    qtbot.waitUntil(lambda: bool(dialog.columns) and all(c.text for c in dialog.columns), timeout=ANSWER_TIMEOUT)
    assert w.compare.running
    return dialog, question.id
