"""Model output cannot fabricate Ember's own links: an `ember:` link in an answer's Markdown is shown
but never runs an action, by mouse or keyboard; Ember's own action links still do. In the real window."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
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
