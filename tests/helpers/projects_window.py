"""The Project settings dialog in the real window, as the projects' window tests drive it: the one open,
and a wait for the indexing run under way (and the state the dialog reads after it)."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from ember_chat.app.projects.dialog import ProjectSettingsDialog
from ember_chat.app.projects.knowledge_panel import KnowledgePanel
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.projects.records import ProjectStore

WAIT_MS = 30_000
INSTRUCTIONS = "Answer as a geographer would.\nKeep it short."


def project_chat(qtbot: QtBot, w: MainWindow, docs: Path) -> int:
    """A project "🌊 Rivers" (INSTRUCTIONS) over `docs`, indexed, and a new chat in it (selected): the
    project's folder id."""
    store = ProjectStore(w.store)
    project = store.create("Rivers", icon="🌊", instructions=INSTRUCTIONS)
    store.add_source(project.folder_id, str(docs))
    w.chats.reload_conversations()
    indexing = w.projects.indexing
    with qtbot.waitSignal(indexing.finished, timeout=WAIT_MS):
        indexing.run(project.folder_id)
    qtbot.waitUntil(lambda: not indexing.running(project.folder_id), timeout=WAIT_MS)
    w.conversations.list.setCurrentIndex(w.conversations.folder_index(project.folder_id))
    w.chats.new_chat()
    return project.folder_id


def settings_dialog(w: MainWindow) -> ProjectSettingsDialog:
    """The Project settings dialog open (and shown)."""
    dialog = w.projects.settings_dialog
    assert dialog is not None and dialog.isVisible()
    return dialog


def knowledge_tab(w: MainWindow, name: str = "Rivers") -> tuple[int, ProjectSettingsDialog, KnowledgePanel]:
    """A new project `name` made in the window, its settings open on the Knowledge tab: (its folder id,
    the dialog, the tab)."""
    project = w.projects.new_project(name)
    assert project is not None
    dialog = settings_dialog(w)
    dialog.tabs.setCurrentWidget(dialog.knowledge)
    return project.folder_id, dialog, dialog.knowledge


def indexed(qtbot: QtBot, w: MainWindow, folder_id: int) -> None:
    """Wait for the run under way (or about to start) to end, then for the dialog's state to be read."""
    k = w.projects.indexing
    qtbot.waitUntil(lambda: not k.running(folder_id) and not w.tasks.busy, timeout=WAIT_MS)  # (and the state read)


def answer(panel: KnowledgePanel, button: str) -> str:
    """The Knowledge tab's question open (non-blocking) answered with the button of that text (or
    "Cancel"): its text."""
    box = panel.question
    assert box is not None and box.isVisible()
    text = box.text()
    chosen = next(b for b in box.buttons() if b.text().replace("&", "") == button)
    chosen.click()
    return text
