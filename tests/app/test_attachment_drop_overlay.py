"""While files are dragged over the window, the chat area says a drop attaches them (issue 28, item 15
and the gaps: "no drop-zone highlight"): nothing showed that letting go would attach, nor what Ember
reads. Now an overlay covers the chat area — "Drop files to attach" and the kinds — from the drag's
entering to its leaving or dropping; a drop still attaches. Drag events sent to the real window as a
drag over the transcript or the message box delivers them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDragLeaveEvent, QDragMoveEvent, QDropEvent
from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from tests.helpers.attachments_window import settle
from tests.helpers.fake_backend import FakeBackend


@pytest.fixture
def make_window(make_loaded_window: Callable[..., MainWindow]) -> Callable[..., MainWindow]:
    """A window with the tiny model loaded: tests/app/conftest.py's make_loaded_window."""
    return make_loaded_window


LEFT, NONE, COPY = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, Qt.DropAction.CopyAction


def files_mime(*paths: Path) -> QMimeData:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    return mime


def drag_enter(target: QWidget, mime: QMimeData) -> QDragEnterEvent:
    event = QDragEnterEvent(QPoint(40, 40), COPY, mime, LEFT, NONE)
    QApplication.sendEvent(target, event)
    return event


def test_dragging_files_over_the_chat_shows_the_drop_zone_until_the_drag_leaves_or_drops(
    qtbot: QtBot, make_window: Callable[[FakeBackend], MainWindow], tmp_path: Path
) -> None:
    w = make_window(FakeBackend(n_tokens=3))
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n\nFeed the cat.\n", encoding="utf-8")
    overlay = w.attach.drop_overlay
    over_chat = w.transcript.viewport()  # (the transcript takes no files: the window does)
    assert not overlay.isVisible()

    assert drag_enter(over_chat, files_mime(notes)).isAccepted()
    assert overlay.isVisible() and overlay.title.text() == "Drop files to attach"
    assert "PDF" in overlay.kinds.text() and "images" in overlay.kinds.text()
    area = w.centre_stack  # it covers the chat area, above the transcript
    assert overlay.parentWidget() is area and overlay.geometry() == area.rect()
    assert overlay.testAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
    w.resize(w.width() - 80, w.height() - 60)  # (it follows the chat area's size)
    QApplication.processEvents()
    assert overlay.geometry() == area.rect()
    mime = files_mime(notes)  # (kept: an event holds its mime data without owning it)
    move = QDragMoveEvent(QPoint(60, 60), COPY, mime, LEFT, NONE)
    QApplication.sendEvent(over_chat, move)
    assert move.isAccepted() and overlay.isVisible()
    QApplication.sendEvent(w, QDragLeaveEvent())  # (the window gets the leave: it took the drag)
    assert not overlay.isVisible()

    drag_enter(over_chat, mime)
    assert overlay.isVisible()
    drop = QDropEvent(QPointF(40, 40), COPY, mime, LEFT, NONE)
    QApplication.sendEvent(over_chat, drop)
    assert drop.isAccepted() and not overlay.isVisible()
    settle(qtbot, w)
    assert [i.chip.name_label.text() for i in w.composer.attachments.items] == ["notes.md"]


def test_the_drop_zone_shows_over_the_message_box_too_and_never_for_text(
    qtbot: QtBot, make_window: Callable[[FakeBackend], MainWindow], tmp_path: Path
) -> None:
    w = make_window(FakeBackend(n_tokens=3))
    notes = tmp_path / "notes.txt"
    notes.write_text("Feed the cat.\n", encoding="utf-8")
    overlay, editor = w.attach.drop_overlay, w.composer.editor
    text = QMimeData()
    text.setText("just some words")
    drag_enter(w.transcript.viewport(), text)
    assert not overlay.isVisible()  # (dragged text is no attachment)
    mime = files_mime(notes)  # (kept: an event holds its mime data without owning it)
    drag_enter(editor.viewport(), mime)  # the message box takes files itself
    assert overlay.isVisible()
    drop = QDropEvent(QPointF(10, 10), COPY, mime, LEFT, NONE)
    QApplication.sendEvent(editor.viewport(), drop)
    assert not overlay.isVisible()
    settle(qtbot, w)
    assert [i.chip.name_label.text() for i in w.composer.attachments.items] == ["notes.txt"]
    assert editor.toPlainText() == ""  # (attached, not pasted as a path)
