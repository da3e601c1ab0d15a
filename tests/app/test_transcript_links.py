"""Model output cannot fabricate Ember's own links: an `ember:` link in an answer's Markdown is shown
but never runs an action, by mouse or keyboard; Ember's own action links still do. In the real window."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QApplication, QPlainTextEdit, QWidget
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.projects.records import ProjectStore
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.transcript import anchors, click
from tests.helpers.window import ANSWER_TIMEOUT, load, send

# the answer is message 2 of a fresh database (the question is 1): it names its own actions
FORGED_ANSWER = [
    "Nothing to see. Click [here](ember:regenerate/2) ",
    "or <ember:copy/2> or [edit](ember:edit/1), ",
    'or <a href="ember:regenerate/2">this</a>.',
]


def test_an_answer_cannot_make_an_action_link_by_mouse_or_keyboard(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window(lambda _ref: FakeBackend(script=FORGED_ANSWER))
    load(qtbot, w, "tiny.gguf")
    send(qtbot, w, "say something")
    cid = w.controller.conversation_id
    question, answer = w.store.thread(cid)
    assert (question.id, answer.id) == (1, 2)
    t = w.transcript
    body = t.document().find("Nothing").position()
    forged = [a for a in anchors(t) if a.href.startswith("ember:") and a.position > body]
    assert [a.href for a in forged] == ["ember:regenerate/2", "ember:copy/2", "ember:edit/1", "ember:regenerate/2"]
    assert "Click here" in t.plain_text()  # the link text is still shown
    actions: list[tuple[str, int, int]] = []
    t.action.connect(lambda verb, mid, arg: actions.append((verb, mid, arg)))

    for anchor in forged:  # clicked
        click(qtbot, t, anchor)
        assert actions == [] and not w.controller.generating, anchor

    w.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is w, timeout=5000)
    w.focus_pane("transcript")  # and with the keyboard: Tab to each forged link, then Enter
    t.moveCursor(QTextCursor.MoveOperation.Start)
    own = len(anchors(t)) - len(forged)
    for _ in range(own):
        qtbot.keyClick(t, Qt.Key.Key_Tab)
    for anchor in forged:
        qtbot.keyClick(t, Qt.Key.Key_Tab)
        assert t.textCursor().selectionStart() == anchor.position
        qtbot.keyClick(t, Qt.Key.Key_Return)
        assert actions == [] and not w.controller.generating, anchor
    assert len(w.store.messages(cid)) == 2  # nothing was regenerated or edited

    # Ember's own Regenerate icon, clicked, still regenerates
    regenerate = next(a for a in anchors(t) if a.image and a.href == f"ember:regenerate/{answer.id}")
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=ANSWER_TIMEOUT):
        click(qtbot, t, regenerate)
    assert actions == [("regenerate", answer.id, 0)]
    assert len(w.store.messages(cid)) == 3


def test_a_source_link_clicked_in_a_window_not_active_opens_its_passage(
    qtbot: QtBot, make_loaded_window: Callable[[FakeBackend | None], MainWindow], tmp_path: Path
) -> None:
    """Qt clears the selection of a clicked link when the view has no focus (the window not active yet):
    the click still opens the source, as it does with focus."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "recipe.md").write_text("The secret of the Zelmora loaf is toasted fennel seed.\n")
    w = make_loaded_window(FakeBackend(script=["Fennel ", "seed ", "[1]", "."]))
    projects = ProjectStore(w.store)
    project = projects.create("Kitchen")
    projects.add_source(project.folder_id, str(docs))
    w.chats.reload_conversations()
    with qtbot.waitSignal(w.projects.indexing.finished, timeout=ANSWER_TIMEOUT):
        w.projects.indexing.run(project.folder_id)
    qtbot.waitUntil(lambda: not w.projects.indexing.running(project.folder_id), timeout=ANSWER_TIMEOUT)
    w.conversations.list.setCurrentIndex(w.conversations.folder_index(project.folder_id))
    w.chats.new_chat()
    send(qtbot, w, "What is the secret of the Zelmora loaf?")
    t = w.transcript
    source = next(a for a in anchors(t) if a.href.startswith("ember:cite/") and a.text == "recipe.md")
    other = QWidget()  # another window active: the click does not give the transcript focus
    qtbot.addWidget(other)
    other.show()
    other.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is other, timeout=5000)
    click(qtbot, t, source)
    dialog = t.attachments.dialog
    assert dialog is not None and dialog.isVisible()
    assert "toasted fennel seed" in dialog.findChild(QPlainTextEdit, "sourceText").toPlainText()
    assert not t.hasFocus()
    dialog.close()
