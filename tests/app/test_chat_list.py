"""The chat list in the real window: the context menu acts on the chat clicked, the keyboard on the
chat selected, and the selection is always the open chat (issue 16, item 1); titles elide on one
line, and File ▸ Export proposes the chat's title in the documents folder (issue 16, item 17)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QContextMenuEvent, QFont, QFontMetrics
from PySide6.QtWidgets import QApplication, QFileDialog, QInputDialog, QMessageBox
from pytestqt.qtbot import QtBot

from ember_chat.app.chat_list.rows import _match_in_view
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.records import MATCH_END, MATCH_START, SearchHit
from tests.helpers.chat_list import _click, _menu_action, _right_click, _two_chats, menu_grab
from tests.helpers.window import load, send, set_max_tokens

pytestmark = pytest.mark.usefixtures("nothing_blocks")


def _selected_ids(w: MainWindow) -> list[int]:
    return w.conversations.selected_ids()


@menu_grab
def test_the_context_menu_acts_on_the_chat_clicked(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    a, b = _two_chats(w)
    _click(qtbot, w, a)

    _right_click(qtbot, w, b)
    assert w.controller.conversation_id == a and _selected_ids(w) == [a]  # the open chat stays selected
    _menu_action(w, "Rename…")
    dialog = w.chats.chat_question
    assert isinstance(dialog, QInputDialog) and dialog.isVisible()
    assert dialog.textValue() == "Chat B"
    dialog.setTextValue("Chat B renamed")
    dialog.accept()
    assert w.store.conversation(b).title == "Chat B renamed" and w.store.conversation(a).title == "Chat A"

    _right_click(qtbot, w, b)
    _menu_action(w, "Move to Trash")  # no question: it is undoable
    assert QApplication.activeModalWidget() is None
    assert [c.id for c in w.store.organise.trashed()] == [b]
    qtbot.waitUntil(lambda: [c.id for c in w.store.conversations()] == [a], timeout=5000)
    assert w.controller.conversation_id == a and _selected_ids(w) == [a]


def test_keyboard_actions_act_on_the_selected_chat_which_is_the_open_one(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    a, b = _two_chats(w)
    _click(qtbot, w, b)  # B is listed first, A below it
    w.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is w, timeout=5000)

    qtbot.keyClick(w, Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)  # View ▸ Go to ▸ Chat list
    assert QApplication.focusWidget() is w.conversations.list
    qtbot.keyClick(w.conversations.list, Qt.Key.Key_Down)
    assert _selected_ids(w) == [a]
    qtbot.waitUntil(lambda: w.controller.conversation_id == a, timeout=5000)  # selecting opens it
    assert "question in Chat A" in w.transcript.plain_text()

    qtbot.keyClick(w.conversations.list, Qt.Key.Key_F2)
    dialog = w.chats.chat_question
    assert isinstance(dialog, QInputDialog) and dialog.textValue() == "Chat A"
    dialog.reject()

    qtbot.keyClick(w.conversations.list, Qt.Key.Key_Up)
    qtbot.waitUntil(lambda: w.controller.conversation_id == b, timeout=5000)
    qtbot.keyClick(
        w.conversations.list,
        Qt.Key.Key_Backspace,
        Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier,
    )
    box = w.chats.chat_question
    assert isinstance(box, QMessageBox) and "Chat B" in box.text()
    box.reject()  # Cancel: nothing is deleted
    assert len(w.store.conversations()) == 2


def test_tabbing_into_the_list_opens_nothing(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    """Focus alone (Qt makes the first row current) neither opens a chat nor makes it the one F2 renames."""
    w = make_window()
    _two_chats(w)
    w.chats.new_chat()
    w.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is w, timeout=5000)
    w.conversations.list.setFocus(Qt.FocusReason.TabFocusReason)
    assert w.controller.conversation_id is None and _selected_ids(w) == []
    w.chats.rename_current()
    assert w.chats.chat_question is None


@menu_grab
def test_a_right_click_outside_any_chat_offers_only_a_new_folder_or_project(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    a, _b = _two_chats(w)
    _click(qtbot, w, a)
    lst = w.conversations.list
    below = QPoint(10, lst.viewport().height() - 5)
    QApplication.sendEvent(
        lst.viewport(), QContextMenuEvent(QContextMenuEvent.Reason.Mouse, below, lst.viewport().mapToGlobal(below))
    )
    menu = w.chats.chat_menu
    assert menu is not None and [a.text() for a in menu.actions()] == ["New folder…", "New project…"]  # no chat
    menu.close()


def test_long_titles_elide_on_one_line(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    """A title longer than the list is one line ending in "…" (whole in its tooltip), never wrapped or
    cut mid-word onto a second line."""
    w = make_window()
    long_title = "Explain the difference between supercalifragilistic and antidisestablishmentarianism"
    for title in ("Short", long_title):
        w.store.create_conversation(title)
    w.chats.reload_conversations()
    lst = w.conversations.list
    by_title = {w.store.conversation(cid).title: w.conversations.index_of(cid) for cid in w.conversations.chat_ids()}
    long_row, short_row = by_title[long_title], by_title["Short"]
    assert lst.fontMetrics().horizontalAdvance(long_title) > lst.viewport().width()  # it does not fit
    assert lst.visualRect(long_row).height() == lst.visualRect(short_row).height()
    assert not lst.wordWrap() and lst.textElideMode() == Qt.TextElideMode.ElideRight
    assert long_row.data(Qt.ItemDataRole.ToolTipRole) == long_title
    # what is drawn: the row's text elided at its end, with "…"
    shown = lst.itemDelegate().displayText(long_row.data(), lst.locale())
    drawn = lst.fontMetrics().elidedText(shown, lst.textElideMode(), lst.visualRect(long_row).width())
    assert drawn.endswith("…") and drawn.startswith("Explain the")


def test_export_proposes_the_title_in_documents_and_says_where_it_saved(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / "Documents").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))  # no user-dirs.dirs: ~/Documents
    w = make_window()
    load(qtbot, w)
    set_max_tokens(w, 4)
    send(qtbot, w, "export this")
    w.chats.rename_current("Plans: 2025/26 <draft>")
    w.chats.exports.export_dialog("md")
    dialog = w.chats.exports.export_dialog_open
    assert isinstance(dialog, QFileDialog) and dialog.isVisible()
    proposed = Path(dialog.selectedFiles()[0])
    assert proposed.parent == home / "Documents"
    assert proposed.name == "Plans 2025 26 draft.md"
    target = tmp_path / "exported.md"
    dialog.selectFile(str(target))
    dialog.accept()
    text = target.read_text(encoding="utf-8")
    assert w.banner.isVisible() and str(target) in w.banner.text()
    # the Markdown names the model that answered and the chat's date
    conv = w.store.conversation(w.controller.conversation_id)
    day = time.strftime("%Y-%m-%d", time.localtime(conv.created_at))
    assert text.startswith("# Plans: 2025/26 <draft>\n")
    header = text.split("## You")[0]
    model = w.store.thread(conv.id)[-1].metrics["model"]
    assert model == w.model.name and f"Model: {model}" in header and day in header
    # a place that cannot be written (a file where the folder should be): said, nothing else changes
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x", encoding="utf-8")
    w.chats.exports.export_dialog("json")
    dialog = w.chats.exports.export_dialog_open
    assert dialog is not None
    dialog.selectFile(str(blocker / "chat.json"))
    dialog.accept()
    assert "Could not export to" in w.banner.text() and str(blocker / "chat.json") in w.banner.text()
    assert blocker.read_text(encoding="utf-8") == "x" and target.read_text(encoding="utf-8") == text


def test_export_of_a_chat_with_a_shortened_title_proposes_its_words_without_the_ellipsis(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """File ▸ Export chat as JSON… and as Markdown… on a chat titled from a long first message ("…"):
    both propose the title's words, no "…" before the suffix."""
    home = tmp_path / "home"
    (home / "Documents").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    w = make_window()
    load(qtbot, w)
    set_max_tokens(w, 4)
    send(qtbot, w, "In which year did the Tarvesh volcano last erupt, and what did it destroy?")
    title = w.store.conversation(w.controller.conversation_id).title
    assert title.endswith("…")
    for kind in ("json", "md"):
        w.chats.exports.export_dialog(kind)
        dialog = w.chats.exports.export_dialog_open
        assert isinstance(dialog, QFileDialog) and dialog.isVisible()
        assert Path(dialog.selectedFiles()[0]).name == f"{title.removesuffix('…')}.{kind}"
        dialog.reject()
        qtbot.waitUntil(lambda: w.chats.exports.export_dialog_open is None, timeout=5_000)


def test_a_search_hit_row_keeps_its_match_in_view(qtbot: QtBot) -> None:
    """The passage's start is cut ("…") when the match would fall past two thirds of the row."""
    metrics = QFontMetrics(QFont())
    long = SearchHit(1, "Trip", 2, f"We could take the night train to Lisbon, then {MATCH_START}hike{MATCH_END} along")
    width = metrics.horizontalAdvance("We could take the night train")
    shown = _match_in_view(long.parts(), metrics, width)
    assert shown[0][0].startswith("…") and shown[1] == ("hike", True) and shown[-1] == (" along", False)
    assert metrics.horizontalAdvance(shown[0][0]) <= width // 3 + metrics.horizontalAdvance("…")
    short = SearchHit(1, "Hi", 2, f"Say {MATCH_START}hi{MATCH_END}.\nThen more")
    assert _match_in_view(short.parts(), metrics, width) == [("Say ", False), ("hi", True), (". Then more", False)]
