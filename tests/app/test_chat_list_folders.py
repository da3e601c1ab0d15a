"""Chats kept in order in the real window (issue 19): the list shows Pinned on top, folders (one level
of nesting, collapse saved), chats by newest activity, then Archived and Trash; chats drag onto a
folder or go through "Move to" (the keyboard's way); Shift/Ctrl select several. Real SQLite files."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtCore import QEvent, QModelIndex, QObject, Qt
from PySide6.QtGui import QContextMenuEvent
from PySide6.QtWidgets import QApplication, QMenu
from pytestqt.qtbot import QtBot

from ember_chat.app.chat_list.model import ARCHIVED, CHAT, FOLDER, PINNED, TRASH, ident_of, kind_of
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.conversations import ConversationStore
from tests.helpers.chat_list import _chats, _click, _menu_action, _right_click, menu_grab

pytestmark = pytest.mark.usefixtures("nothing_blocks")


def _rows(w: MainWindow, parent: QModelIndex | None = None) -> list[str]:
    """The rows under `parent` as "kind:label" (chats and folders by title, the sections by name)."""
    model = w.conversations.model
    parent = parent or QModelIndex()
    out = []
    for r in range(model.rowCount(parent)):
        key = model.index(r, 0, parent).internalId()
        names = {PINNED: "pinned", ARCHIVED: "archived", TRASH: "trash"}
        out.append(names.get(key) or f"{'chat' if kind_of(key) == CHAT else 'folder'}:{model.text(key)}")
    return out


def test_pins_folders_and_chats_in_order_and_a_collapse_is_kept(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    a, b, c, d = _chats(w, ["Alpha", "Beta", "Gamma", "Delta"])
    org = w.store.organise
    work = org.create_folder("Work")
    sub = org.create_folder("Reports", parent_id=work.id)
    w.chats.organise.move([a], work.id)
    w.chats.organise.move([b], sub.id)
    w.chats.organise.pin([c], True)
    assert _rows(w) == ["pinned", "folder:Work", "chat:Delta", "archived", "trash"]
    assert _rows(w, w.conversations.index_of(c).parent()) == ["chat:Gamma"]
    work_index = w.conversations.folder_index(work.id)
    assert _rows(w, work_index) == ["folder:Reports", "chat:Alpha"]
    assert _rows(w, w.conversations.folder_index(sub.id)) == ["chat:Beta"]
    assert w.conversations.list.isExpanded(work_index)
    w.conversations.list.collapse(work_index)  # as the user clicks its arrow
    assert org.folder(work.id).collapsed
    w.close()

    w2 = make_window()  # the same data folder, reopened
    assert not w2.conversations.list.isExpanded(w2.conversations.folder_index(work.id))
    assert w2.conversations.list.isExpanded(w2.conversations.folder_index(sub.id))
    assert _rows(w2) == ["pinned", "folder:Work", "chat:Delta", "archived", "trash"]
    assert d in w2.conversations.chat_ids()


def test_chats_dropped_on_a_folder_move_into_it_and_undo_moves_them_back(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    a, b, c = _chats(w, ["One", "Two", "Three"])
    work = w.store.organise.create_folder("Work")
    w.chats.reload_conversations()
    model = w.conversations.model
    data = model.mimeData([w.conversations.index_of(a), w.conversations.index_of(b)])  # what a drag carries
    target = w.conversations.folder_index(work.id)
    assert model.canDropMimeData(data, Qt.DropAction.MoveAction, -1, 0, target)
    assert model.dropMimeData(data, Qt.DropAction.MoveAction, -1, 0, target)
    assert {x.id: x.folder_id for x in w.store.conversations()} == {a: work.id, b: work.id, c: None}
    assert _rows(w, w.conversations.folder_index(work.id)) == ["chat:Two", "chat:One"]
    assert w.banner.isVisible() and w.banner.text() == "Moved 2 chats to “Work”."
    assert w.undo.link.isVisible()
    # dropped onto a chat that is in no folder: out of the folder again
    back = model.mimeData([w.conversations.index_of(a)])
    assert model.dropMimeData(back, Qt.DropAction.MoveAction, -1, 0, w.conversations.index_of(c))
    assert w.store.conversation(a).folder_id is None
    # the Pinned section and the Trash entry take no drop
    assert not model.canDropMimeData(back, Qt.DropAction.MoveAction, -1, 0, model.index_for(TRASH))

    w.undo.link.linkActivated.emit("undo")  # the banner's Undo: the last move (a, out of Work)
    assert w.store.conversation(a).folder_id == work.id
    qtbot.keyClick(w.conversations.list, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)  # then the drop
    assert {x.id: x.folder_id for x in w.store.conversations()} == {a: None, b: None, c: None}
    assert w.banner.text() == "Undone: Moved 2 chats to “Work”."
    assert _rows(w, w.conversations.folder_index(work.id)) == []


@menu_grab
def test_shift_and_ctrl_select_several_chats_for_move_and_archive(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    a, b, c, d = _chats(w, ["A", "B", "C", "D"])  # listed D, C, B, A
    w.store.organise.create_folder("Later")
    w.chats.reload_conversations()
    lst = w.conversations.list
    _click(qtbot, w, d)
    shift = lst.visualRect(w.conversations.index_of(b)).center()
    qtbot.mouseClick(lst.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ShiftModifier, shift)
    assert w.conversations.selected_ids() == [d, c, b]
    assert w.controller.conversation_id == d  # several selected: the open chat stays
    ctrl = lst.visualRect(w.conversations.index_of(c)).center()
    qtbot.mouseClick(lst.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ControlModifier, ctrl)
    assert w.conversations.selected_ids() == [d, b]

    # Chat ▸ Move to ▸ Later (the keyboard's way): the selected chats move
    chat_menu = next(a.menu() for a in w.menuBar().actions() if a.text() == "&Chat")
    move = next(x.menu() for x in chat_menu.actions() if x.text() == "Mo&ve to")
    assert isinstance(move, QMenu)
    move.aboutToShow.emit()
    assert [x.text() for x in move.actions() if x.text()] == ["Later", "No folder", "New folder…"]
    next(x for x in move.actions() if x.text() == "Later").trigger()
    later = w.store.organise.folders()[0].id
    assert {x.id for x in w.store.conversations() if x.folder_id == later} == {d, b}
    assert w.banner.text() == "Moved 2 chats to “Later”."

    # the context menu on a selected row acts on the whole selection: Archive
    w.conversations.list.expand(w.conversations.folder_index(later))
    w.conversations.select(d)
    sel = lst.selectionModel()
    sel.select(w.conversations.index_of(b), sel.SelectionFlag.Select)
    assert w.conversations.selected_ids() == [d, b]
    _right_click(qtbot, w, b)
    _menu_action(w, "Archive")
    assert {x.id for x in w.store.conversations(archived=True)} == {d, b}
    assert w.conversations.chat_ids() == [c, a]
    assert _rows(w)[-2:] == ["archived", "trash"] and w.conversations.model.text(ARCHIVED) == "Archived (2)"

    # the Archived entry shows them (still searchable, openable); back to the chats
    w.conversations.list.clicked.emit(w.conversations.model.index_for(ARCHIVED))
    assert w.conversations.mode == "archived" and w.conversations.view_bar.isVisible()
    assert set(w.conversations.chat_ids()) == {d, b}
    _click(qtbot, w, b)
    assert "question in B" in w.transcript.plain_text()
    w.conversations.back_button.click()
    assert w.conversations.mode == "chats" and w.conversations.chat_ids() == [c, a]


def test_the_delete_key_moves_to_the_trash_without_a_question_and_ctrl_z_brings_it_back(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: object
) -> None:
    """The issue's "Done when": 200 chats organised into folders, one deleted by mistake, Ctrl+Z."""
    w = make_window()
    ids = _chats(w, [f"Chat {i:03}" for i in range(200)])
    folders = [w.store.organise.create_folder(name).id for name in ("Home", "Work", "Study", "Travel")]
    for i, fid in enumerate(folders):
        w.chats.organise.move(ids[i * 50 : (i + 1) * 50], fid)
    victim = ids[120]  # in Study
    w.conversations.list.expand(w.conversations.folder_index(folders[2]))
    w.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is w, timeout=5000)
    _click(qtbot, w, victim)
    assert "question in Chat 120" in w.transcript.plain_text()
    w.conversations.list.setFocus()
    qtbot.keyClick(w.conversations.list, Qt.Key.Key_Delete)
    assert QApplication.activeModalWidget() is None  # no question
    assert [c.id for c in w.store.organise.trashed()] == [victim]
    assert victim not in w.conversations.chat_ids() and len(w.conversations.chat_ids()) == 199
    assert w.controller.conversation_id is None
    assert w.banner.text() == "Moved “Chat 120” to the Trash." and w.undo.link.isVisible()
    assert w.conversations.model.text(TRASH) == "Trash (1)"

    qtbot.keyClick(w.conversations.list, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert w.store.organise.trashed() == [] and w.store.conversation(victim).folder_id == folders[2]
    assert victim in w.conversations.chat_ids()
    assert w.controller.conversation_id == victim  # the chat that was open opens again
    assert "question in Chat 120" in w.transcript.plain_text()
    assert w.conversations.selected_ids() == [victim]
    w.close()
    reopened = ConversationStore(w.store.path)  # in the file
    try:
        assert reopened.conversation(victim).deleted_at is None
        assert reopened.conversation(victim).folder_id == folders[2]
    finally:
        reopened.close()


def _one_trashed_and_the_box_focused(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> tuple[MainWindow, int, int]:
    """Chats "Keep" and "Gone", Gone moved to the Trash, the focus in the message box (window, keep, gone)."""
    w = make_window()
    a, b = _chats(w, ["Keep", "Gone"])
    w.chats.organise.trash([b])
    w.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is w, timeout=5000)
    w.composer.editor.setFocus()
    return w, a, b


def test_ctrl_z_in_the_message_box_is_the_boxs_own(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w, a, b = _one_trashed_and_the_box_focused(qtbot, make_window)
    qtbot.keyClicks(w.composer.editor, "draft")
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert w.composer.editor.toPlainText() != "draft"  # the box undid its typing
    assert [c.id for c in w.store.organise.trashed()] == [b]  # the chat stays in the Trash
    w.conversations.list.setFocus()
    qtbot.keyClick(w.conversations.list, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert w.store.organise.trashed() == [] and a in w.conversations.chat_ids()


def test_ctrl_z_in_a_message_box_with_nothing_to_undo_undoes_the_chat_change(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    """Where the focus usually is after a send: an empty box with no typing left to undo."""
    w, a, b = _one_trashed_and_the_box_focused(qtbot, make_window)
    w.composer.editor.setPlainText("a draft given back")  # text, but no typing to undo (set, not typed)
    assert not w.composer.editor.document().isUndoAvailable()
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert [c.id for c in w.store.organise.trashed()] == [b]  # a box with text keeps Ctrl+Z to itself
    w.composer.editor.clear()
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert w.store.organise.trashed() == [] and a in w.conversations.chat_ids() and b in w.conversations.chat_ids()


def test_folders_made_renamed_nested_one_level_and_deleted_with_undo(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    a, b = _chats(w, ["In sub", "Outside"])
    w.chats.organise.new_folder()  # asks a name
    dialog = w.chats.chat_question
    assert dialog is not None and dialog.isVisible()
    dialog.setTextValue("Projects")
    dialog.accept()
    projects = w.store.organise.folders()[0]
    assert projects.name == "Projects" and _rows(w)[0] == "folder:Projects"
    w.chats.organise.new_folder(projects.id, then_move=[a], name="Ember")
    ember = next(f for f in w.store.organise.folders() if f.name == "Ember")
    assert ember.parent_id == projects.id and w.store.conversation(a).folder_id == ember.id
    w.chats.organise.new_folder(ember.id, name="Too deep")  # one level only: said, nothing made
    assert "one level" in w.banner.text() and len(w.store.organise.folders()) == 2
    w.chats.organise.rename_folder(projects.id, "Side projects")
    assert w.conversations.model.text(w.conversations.folder_index(projects.id).internalId()) == "Side projects"

    w.chats.organise.delete_folder(projects.id)  # its chats (and its subfolder's) go to the Trash
    assert w.store.organise.folders() == [] and [c.id for c in w.store.organise.trashed()] == [a]
    assert _rows(w) == ["chat:Outside", "archived", "trash"]
    w.undo.undo_last()
    assert [f.name for f in w.store.organise.folders()] == ["Side projects", "Ember"]
    assert w.store.conversation(a).folder_id == ember.id and w.store.conversation(a).deleted_at is None
    assert _rows(w)[0] == "folder:Side projects" and b in w.conversations.chat_ids()


@menu_grab
def test_the_trash_lists_restores_deletes_for_good_and_empties_with_a_question(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    a, b, c = _chats(w, ["First", "Second", "Third"])
    w.chats.organise.trash([a])
    w.chats.organise.trash([b, c])
    w.chats.show_view("trash")
    assert w.conversations.mode == "trash" and w.conversations.empty_button.isVisible()
    assert set(w.conversations.chat_ids()) == {a, b, c}
    tip = w.conversations.index_of(a).data(Qt.ItemDataRole.ToolTipRole)
    assert tip.startswith("First — in the Trash since ")
    _click_no_open(qtbot, w, a)  # a chat in the Trash does not open
    qtbot.keyClick(w.conversations.list, Qt.Key.Key_Delete)  # in the Trash the Delete key asks: for good
    box = w.chats.chat_question
    assert box is not None and box.isVisible() and "Delete 1 chat for good?" in box.text()
    box.reject()
    qtbot.waitUntil(lambda: w.chats.chat_question is None, timeout=5000)
    assert len(w.store.organise.trashed()) == 3
    _right_click(qtbot, w, a)
    _menu_action(w, "Restore")
    assert {x.id for x in w.store.conversations()} == {a} and set(w.conversations.chat_ids()) == {b, c}

    _right_click(qtbot, w, b)
    _menu_action(w, "Delete for good…")
    box = w.chats.chat_question
    assert box is not None and box.isVisible() and "cannot be undone" in box.text()
    assert "Backups made earlier still hold" in box.text()  # (the CLI's rm --purge says it too)
    with qtbot.waitSignal(w.tasks.settled, timeout=10_000):  # (the file is rewritten off the GUI thread)
        next(x for x in box.buttons() if x.text() == "Delete for good").click()
    assert [x.id for x in w.store.organise.trashed()] == [c]
    qtbot.waitUntil(lambda: w.chats.chat_question is None, timeout=5000)

    w.conversations.empty_button.click()
    box = w.chats.chat_question
    assert box is not None and "1 chat" in box.text() and "Backups made earlier still hold" in box.text()
    box.reject()  # Cancel: nothing goes
    assert [x.id for x in w.store.organise.trashed()] == [c]
    qtbot.waitUntil(lambda: w.chats.chat_question is None, timeout=5000)
    w.conversations.empty_button.click()
    with qtbot.waitSignal(w.tasks.settled, timeout=10_000):
        next(x for x in w.chats.chat_question.buttons() if x.text() == "Empty Trash").click()
    assert w.store.organise.trashed() == []
    assert w.conversations.row_texts() == ["The Trash is empty."] and not w.conversations.empty_button.isEnabled()
    with __import__("pytest").raises(KeyError):
        w.store.conversation(b)


def _click_no_open(qtbot: QtBot, w: MainWindow, cid: int) -> None:
    lst = w.conversations.list
    qtbot.mouseClick(
        lst.viewport(), Qt.MouseButton.LeftButton, pos=lst.visualRect(w.conversations.index_of(cid)).center()
    )
    assert w.conversations.selected_ids() == [cid] and w.controller.conversation_id != cid


def test_a_folder_key_is_not_a_chat(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    """Folder and chat ids share numbers: the rows keep them apart."""
    w = make_window()
    (a,) = _chats(w, ["Lonely"])
    folder = w.store.organise.create_folder("Same id")
    assert folder.id == a
    w.chats.reload_conversations()
    folder_key = w.conversations.folder_index(folder.id).internalId()
    assert kind_of(folder_key) == FOLDER and ident_of(folder_key) == a
    assert w.conversations.chat_ids() == [a]


def test_f2_on_a_selected_folder_renames_the_folder(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    (a,) = _chats(w, ["Inside"])
    folder = w.store.organise.create_folder("Old name")
    w.chats.organise.move([a], folder.id)
    w.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is w, timeout=5000)
    lst = w.conversations.list
    lst.setFocus()
    qtbot.mouseClick(
        lst.viewport(), Qt.MouseButton.LeftButton, pos=lst.visualRect(w.conversations.folder_index(folder.id)).center()
    )
    assert w.conversations.selected_folder() == folder.id
    qtbot.keyClick(lst, Qt.Key.Key_F2)
    dialog = w.chats.chat_question
    assert dialog is not None and dialog.textValue() == "Old name"
    dialog.setTextValue("New name")
    dialog.accept()
    assert w.store.organise.folder(folder.id).name == "New name" and w.store.conversation(a).title == "Inside"


def test_changes_made_while_searching_show_when_the_search_is_cleared(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    a, b, _c = _chats(w, ["Apples", "Bananas", "Cherries"])
    with qtbot.waitSignal(w.conversations.search_changed, timeout=5000):
        qtbot.keyClicks(w.conversations.search, "question")
    assert w.conversations.mode == "hits" and w.conversations.list.model().rowCount() == 3
    w.chats.organise.archive([a])  # (as Chat ▸ Archive does for the open chat)
    w.store.update_conversation(b, title="Blueberries")
    w.controller.conversation_id = b
    w.controller.conversations_changed.emit()  # what an answer ending in chat b says
    w.controller.conversation_id = None
    assert w.conversations.mode == "hits"
    with qtbot.waitSignal(w.conversations.search_changed, timeout=5000):
        w.conversations.search.clear()
    assert w.conversations.mode == "chats" and w.conversations.chat_ids() == [x.id for x in w.store.conversations()]
    assert sorted(_rows(w)[:2]) == ["chat:Blueberries", "chat:Cherries"] and _rows(w)[2:] == ["archived", "trash"]
    assert w.conversations.model.text(ARCHIVED) == "Archived (1)"


@menu_grab
def test_the_menu_key_opens_the_selected_chats_menu(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    """The keyboard's way to the row's menu (Move to, Archive, …): the Menu key on the selected chat."""
    w = make_window()
    a, b = _chats(w, ["First", "Second"])
    w.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is w, timeout=5000)
    _click(qtbot, w, a)
    lst = w.conversations.list
    lst.setFocus()
    # what the Menu key sends (the platform makes it from the key): to the focused list, at its current row
    at = lst.inputMethodQuery(Qt.InputMethodQuery.ImCursorRectangle).center()
    QApplication.sendEvent(lst, QContextMenuEvent(QContextMenuEvent.Reason.Keyboard, at, lst.mapToGlobal(at)))
    assert w.chats.chat_menu is not None
    _menu_action(w, "Archive")
    assert [c.id for c in w.store.conversations(archived=True)] == [a] and w.conversations.chat_ids() == [b]


class _Paints(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # Qt override
        if event.type() == QEvent.Type.Paint:
            self.count += 1
        return False


def test_opening_another_chat_from_elsewhere_repaints_the_highlight_and_a_new_chat_has_none(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    """A chat opened by a search hit, a script or Keep this one moves the list's highlight at once (the
    view repaints; it did not while the selection changed quietly), and a new chat leaves no row selected."""
    w = make_window()
    a, b = _chats(w, ["Alpha", "Beta"])
    w.chats.open_conversation(a)
    qtbot.waitUntil(lambda: w.controller.conversation_id == a, timeout=5000)
    paints = _Paints()
    viewport = w.conversations.list.viewport()
    viewport.installEventFilter(paints)
    try:
        w.chats.open_conversation(b)
        qtbot.waitUntil(lambda: w.controller.conversation_id == b, timeout=5000)
        assert w.conversations.selected_ids() == [b]
        qtbot.waitUntil(lambda: paints.count > 0, timeout=2000)
    finally:
        viewport.removeEventFilter(paints)
    w.chats.new_chat()
    qtbot.waitUntil(lambda: w.controller.conversation_id is None, timeout=5000)
    assert w.conversations.selected_ids() == []


def test_the_trash_view_needs_no_wider_sidebar_than_the_chat_list(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    (a,) = _chats(w, ["Alpha"])
    w.store.organise.trash_chats([a])
    lst = w.conversations
    narrowest = lst.minimumSizeHint().width()
    w.chats.show_view("trash")
    assert lst.mode == "trash" and lst.empty_button.isVisibleTo(lst) and lst.empty_button.isEnabled()
    assert lst.minimumSizeHint().width() <= narrowest  # ("Empty Trash…" beside the title widened it ~24 px)
    w.chats.show_view("chats")
    assert not lst.empty_button.isVisibleTo(lst)
