"""The chat list's search narrowed to a project (issue 34: search, filter by project): the button beside
the search field lists "All chats" and each project with its icon; a project's search finds its chats and
its subfolders' chats alone; a project made a plain folder gives every chat back. Real SQLite files, the
real window."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.projects.records import ProjectStore
from tests.helpers.chat_list import menu_grab

pytestmark = pytest.mark.usefixtures("nothing_blocks")


def _chat(w: MainWindow, title: str, text: str, folder_id: int | None) -> int:
    chat = w.store.create_conversation(title)
    w.store.add_message(chat.id, "user", text)
    if folder_id is not None:
        w.store.organise.move_chats([chat.id], folder_id)
    return chat.id


def _found(w: MainWindow) -> set[int]:
    model = w.conversations.model
    return {hit.conversation_id for k in model.row_keys() if (hit := model.hit(k)) is not None}


@menu_grab
def test_a_search_narrowed_to_a_project_finds_its_chats_and_its_folders_chats_alone(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    projects = ProjectStore(w.store)
    thesis = projects.create("Thesis", icon="📚")
    chapter = w.store.organise.create_folder("Chapter 1", thesis.folder_id)
    birds = projects.create("Birds & fish")
    notes = _chat(w, "Notes", "herons nest by the river", thesis.folder_id)
    draft = _chat(w, "Draft", "the heron chapter", chapter.id)
    trip = _chat(w, "Trip", "we saw a heron", None)
    seen = _chat(w, "Seen", "a grey heron again", birds.folder_id)
    w.chats.reload_conversations()
    lst = w.conversations
    scope = lst.scope
    assert scope.isVisible() and scope.folder_id is None
    assert scope.accessibleName() == "Search in" and "all chats" in scope.accessibleDescription()
    entries = [a.text() for a in scope.menu_.actions() if a.text()]
    assert entries == ["All chats", "📚  Thesis", f"{w.projects.icons()[birds.folder_id]}  Birds && fish"]

    with qtbot.waitSignal(lst.search_changed, timeout=5000):
        qtbot.keyClicks(lst.search, "heron")
    assert _found(w) == {notes, draft, trip, seen}

    # the keyboard reaches it: Tab from the search field, then its menu
    lst.search.setFocus()
    qtbot.waitUntil(lst.search.hasFocus, timeout=5000)
    qtbot.keyClick(lst.search, Qt.Key.Key_Tab)
    qtbot.waitUntil(scope.hasFocus, timeout=5000)
    assert scope.focusPolicy() & Qt.FocusPolicy.TabFocus

    # Thesis chosen: its chats and its folder's chats, at once (no typing needed)
    next(a for a in scope.menu_.actions() if a.text() == "📚  Thesis").trigger()
    assert scope.folder_id == thesis.folder_id and scope.text() == "📚"
    assert _found(w) == {notes, draft}
    assert lst.search.placeholderText() == "Search in “Thesis”"
    assert [a.text() for a in scope.menu_.actions() if a.isChecked()] == ["📚  Thesis"]
    with qtbot.waitSignal(lst.search_changed, timeout=5000):
        lst.search.setText("nothing-like-it")
    assert lst.row_texts() == ["No matches in “Thesis”"]
    with qtbot.waitSignal(lst.search_changed, timeout=5000):
        lst.search.setText("heron")
    assert _found(w) == {notes, draft}

    # the project made a plain folder: the search is over every chat again
    w.projects.unmake(thesis.folder_id, confirmed=True)
    assert scope.folder_id is None and _found(w) == {notes, draft, trip, seen}
    assert lst.search.placeholderText() == "Search all chats"
    assert [a.text() for a in scope.menu_.actions() if a.text()][1:] == [
        f"{w.projects.icons()[birds.folder_id]}  Birds && fish"
    ]
    next(a for a in scope.menu_.actions() if "Birds" in a.text()).trigger()
    assert _found(w) == {seen}
    next(a for a in scope.menu_.actions() if a.text() == "All chats").trigger()
    assert _found(w) == {notes, draft, trip, seen}

    # no project left: no button to choose with
    w.projects.unmake(birds.folder_id, confirmed=True)
    assert not scope.isVisible()


def test_a_long_project_name_is_shortened_where_it_cannot_wrap(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    """A 300-character project name in the scope's menu, the search's placeholder, the search's "No
    matches" and the settings dialog's title: shortened with "…" (a menu as wide as the name, a title
    cut anywhere), the whole name in the entry's tooltip, the field's accessible name and the Name field."""
    w = make_window()
    name = ("The rivers of Iberia and their long histories " * 7).strip()
    project = ProjectStore(w.store).create(name, icon="🌊")
    w.chats.reload_conversations()
    lst = w.conversations
    scope = lst.scope
    entry = next(a for a in scope.menu_.actions() if a.text().startswith("🌊"))
    assert entry.text().startswith("🌊  The rivers of Iberia") and entry.text().endswith("…")
    assert len(entry.text()) < 60 and entry.toolTip() == name and scope.menu_.toolTipsVisible()
    assert scope.menu_.sizeHint().width() < 600
    entry.trigger()
    placeholder = lst.search.placeholderText()
    assert placeholder.startswith("Search in “The rivers") and placeholder.endswith("…”") and len(placeholder) < 60
    assert lst.search.accessibleName() == f"Search in “{name}”" and name in scope.toolTip()
    with qtbot.waitSignal(lst.search_changed, timeout=5000):
        lst.search.setText("nothing-like-it")
    (empty,) = lst.row_texts()
    assert empty.startswith("No matches in “The rivers") and empty.endswith("…”") and len(empty) < 60

    w.projects.open_settings(project.folder_id)
    dialog = w.projects.settings_dialog
    assert dialog is not None and dialog.isVisible()
    title = dialog.windowTitle()
    assert title.startswith("Project settings — The rivers") and title.endswith("…") and len(title) < 70
    assert dialog.name.text() == name
    dialog.close()
