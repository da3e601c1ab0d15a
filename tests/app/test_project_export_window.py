"""Export project… in a project's menu in the chat list (issue 34), and File ▸ Import chats… of what it
writes, in the real window (offscreen), on real SQLite files: the project and its chats, or the project
alone when it has none, go into one file (asking first, as a chat's export does, whether the passages'
text goes too); the import makes the project and its banner says so, naming the knowledge that waits to
be confirmed and offering Project settings, which open on Knowledge; a project here already is joined.
A file whose project block is not one is refused in the banner with a sentence, and nothing is made."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QPushButton
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.projects.answers import AnswerKnowledge
from ember_chat.engine.projects.citations import ProjectSource
from ember_chat.engine.projects.records import ProjectStore
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.export import project_export_json
from tests.helpers.chat_list import menu_grab
from tests.helpers.import_window import choose
from tests.helpers.projects_window import settings_dialog

TEXT = "Spring tides come after a full moon."


def _menu(w: MainWindow, folder_id: int) -> list[str]:
    """The project's row menu, as a right click opens it (left open): its entries."""
    lst = w.conversations
    w.chats.conversation_menu(lst.list.visualRect(lst.folder_index(folder_id)).center())
    menu = w.chats.chat_menu
    assert menu is not None and menu.isVisible()
    return [a.text() for a in menu.actions() if a.text()]


def _export_dialog(w: MainWindow, folder_id: int) -> QFileDialog:
    """Export project… chosen in the project's menu: its save dialog, open."""
    assert "Export project…" in _menu(w, folder_id)
    menu = w.chats.chat_menu
    assert menu is not None
    next(a for a in menu.actions() if a.text() == "Export project…").trigger()
    menu.close()
    dialog = w.chats.exports.export_dialog_open
    assert dialog is not None and dialog.isVisible()
    return dialog


def _export_from_menu(w: MainWindow, folder_id: int, target: Path) -> None:
    """Export project… chosen in the project's menu, then `target` picked in the save dialog."""
    dialog = _export_dialog(w, folder_id)
    assert dialog.selectedFiles()[0].endswith("Research.json")  # (named for the project)
    dialog.selectFile(str(target))
    dialog.accept()


def _research(store: ConversationStore, user: Path) -> int:
    """A project with two knowledge folders (not indexed): its folder id."""
    for name in ("notes", "papers"):
        (user / name).mkdir(parents=True)
    projects = ProjectStore(store)
    project = projects.create("Research", icon="🔭", instructions="Cite the notes.")
    projects.add_source(project.folder_id, user / "notes")
    projects.add_source(project.folder_id, user / "papers")
    return project.folder_id


@menu_grab
def test_export_project_writes_a_project_with_no_chats(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    w = make_window()
    folder_id = _research(w.store, tmp_path / "user")
    w.chats.reload_conversations()
    target = tmp_path / "out" / "Research.json"
    target.parent.mkdir()
    _export_from_menu(w, folder_id, target)
    assert w.chats.chat_question is None  # (no answer was given passages: nothing to ask)
    (only,) = json.loads(target.read_text(encoding="utf-8"))
    assert only["project"]["name"] == "Research" and len(only["project"]["knowledge"]) == 2
    assert w.banner.text() == f"Exported the project “Research” (it has no chats) to {target}"


@menu_grab
def test_export_project_with_two_chats_asks_about_the_passages(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    w = make_window()
    folder_id = _research(w.store, tmp_path / "user")
    for title in ("Tides", "Moons"):
        chat = w.store.create_conversation(title)
        question = w.store.add_message(chat.id, "user", f"About {title.lower()}?")
        answer = w.store.add_message(chat.id, "assistant", "After a full moon [1].", parent_id=question.id)
        w.store.organise.move_chats([chat.id], folder_id)
    AnswerKnowledge(w.store).record(answer.id, [ProjectSource(1, "/home/ana/tides.md", None, 0, TEXT, 5)])
    w.chats.reload_conversations()
    target = tmp_path / "Research.json"
    _export_from_menu(w, folder_id, target)
    box = w.chats.chat_question
    assert box is not None and box.isVisible() and not target.exists()  # (asked before writing)
    box.findChild(QPushButton, "leavePassagesOut").click()
    qtbot.waitUntil(lambda: w.chats.chat_question is None)
    docs = json.loads(target.read_text(encoding="utf-8"))
    assert [d.get("title") for d in docs] == [None, "Moons", "Tides"] and TEXT not in target.read_text()
    assert w.banner.text() == f"Exported the project “Research” and its 2 chats to {target}"


def _imported(qtbot: QtBot, w: MainWindow, path: Path) -> str:
    importer = choose(qtbot, w, path)
    with qtbot.waitSignal(importer.finished, timeout=20_000):
        pass
    return w.banner.text()


def _exported(tmp_path: Path, chats: int) -> Path:
    """Research exported from another data folder, with `chats` chats of one question each."""
    other = ConversationStore(tmp_path / "elsewhere" / "chats.sqlite3")
    try:
        folder_id = _research(other, tmp_path / "user")
        for i in range(chats):
            chat = other.create_conversation(f"Chat {i + 1}")
            other.add_message(chat.id, "user", "When are spring tides?")
            other.organise.move_chats([chat.id], folder_id)
        path = tmp_path / "Research.json"
        path.write_text(project_export_json(other, folder_id), encoding="utf-8")
    finally:
        other.close()
    return path


def test_importing_a_project_with_no_chats_makes_it_and_says_so(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    w = make_window()
    said = _imported(qtbot, w, _exported(tmp_path, 0))
    assert said == (
        "Imported the project “Research” (no chats yet) from Research.json; its 2 folders wait to be confirmed "
        "in Project settings ▸ Knowledge."
    )
    (project,) = ProjectStore(w.store).projects()
    assert all(s.paused and s.from_import for s in project.sources)
    assert w.conversations.folder_index(project.folder_id).data(Qt.ItemDataRole.DisplayRole) == "🔭  Research"
    assert w.banner.action_button.text() == "Project settings"
    qtbot.mouseClick(w.banner.action_button, Qt.MouseButton.LeftButton)
    dialog = settings_dialog(w)
    assert dialog.folder_id == project.folder_id and dialog.tabs.currentWidget() is dialog.knowledge
    dialog.discard()


def test_importing_a_project_s_two_chats_names_the_new_project_then_joins_it(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    w = make_window()
    path = _exported(tmp_path, 2)
    assert _imported(qtbot, w, path) == (
        "Imported 2 chats (2 messages) from Research.json into the new project “Research”; its 2 folders wait "
        "to be confirmed in Project settings ▸ Knowledge."
    )
    (project,) = ProjectStore(w.store).projects()
    assert sorted(c.title for c in w.store.conversations()) == ["Chat 1", "Chat 2"]
    assert all(ProjectStore(w.store).of_chat(c.id) == project for c in w.store.conversations())
    again = _imported(qtbot, w, path)
    assert again.startswith(
        "Imported 2 chats (2 messages) from Research.json; they joined your project “Research”, which was left "
        "as it was."
    )
    assert len(ProjectStore(w.store).projects()) == 1


def test_a_project_block_that_is_not_one_is_refused_in_the_banner(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    w = make_window()
    path = tmp_path / "odd.json"
    path.write_text(json.dumps([{"format": "ember-chat", "version": 1, "project": ["x" * 1_000_000]}]))
    importer = choose(qtbot, w, path)
    with qtbot.waitSignal(importer.failed, timeout=20_000) as failed:
        pass
    assert failed.args[0] == "In odd.json, item 1 should be a project but has no name, so it cannot be imported."
    assert w.banner.text() == failed.args[0]
    assert ProjectStore(w.store).projects() == [] and w.store.organise.folders() == []


@menu_grab
def test_a_project_deleted_while_its_save_dialog_is_open_is_not_exported_as_another(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    w = make_window()
    projects = ProjectStore(w.store)
    alpha = projects.create("Alpha", instructions="Alpha's.")
    w.chats.reload_conversations()
    dialog = _export_dialog(w, alpha.folder_id)
    w.store.organise.delete_folder(alpha.folder_id)  # (meanwhile: Alpha deleted, Beta made with its folder's id)
    beta = projects.create("Beta", instructions="Beta's.")
    assert beta.folder_id == alpha.folder_id
    target = tmp_path / "Alpha.json"
    dialog.selectFile(str(target))
    dialog.accept()
    assert not target.exists()
    assert w.banner.text() == (
        "The project “Alpha” was deleted while its export was being chosen, so nothing was exported."
    )


def test_importing_a_project_beside_a_plain_folder_of_its_name_makes_a_new_project(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    w = make_window()
    folder = w.store.organise.create_folder("Research")  # (the user's plain folder: a file never changes it)
    mine = w.store.create_conversation("Mine")
    w.store.organise.move_chats([mine.id], folder.id)
    w.chats.reload_conversations()
    assert _imported(qtbot, w, _exported(tmp_path, 2)) == (
        "Imported 2 chats (2 messages) from Research.json into the new project “Research”; its 2 folders wait "
        "to be confirmed in Project settings ▸ Knowledge."
    )
    projects = ProjectStore(w.store)
    (project,) = projects.projects()
    assert project.folder_id != folder.id and project.instructions == "Cite the notes."
    assert sorted(c.title for c in w.store.conversations() if projects.of_chat(c.id) == project) == [
        "Chat 1",
        "Chat 2",
    ]
    assert projects.of_chat(mine.id) is None and w.store.conversation(mine.id).folder_id == folder.id
    shown = [w.conversations.folder_index(i).data(Qt.ItemDataRole.DisplayRole) for i in (folder.id, project.folder_id)]
    assert shown == ["Research", "🔭  Research"]  # (both in the chat list, the project with its icon)


def test_a_project_block_whose_chats_are_in_no_project_says_it_was_made_with_none(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    w = make_window()
    block = {"format": "ember-chat", "version": 1, "project": {"name": "B", "knowledge": [{"path": "/data/b"}]}}
    chats = [{"title": t, "tree": [{"parent": None, "role": "user", "content": "hi"}]} for t in ("One", "Two")]
    path = tmp_path / "b.json"
    path.write_text(json.dumps([block, *chats]), encoding="utf-8")
    assert _imported(qtbot, w, path) == (
        "Imported 2 chats (2 messages) from b.json. It also made the new project “B”, with no chats in it; its "
        "folder waits to be confirmed in Project settings ▸ Knowledge."
    )
