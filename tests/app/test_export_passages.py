"""A JSON export of a project's chat asks whether the passages of the user's files its answers were given
go too (issue 34): asked once the path is chosen, before anything is written; by default they stay out
(the files' names and pages go either way); Cancel writes nothing. A plain chat's export, and any
Markdown export (it names no project sources), never asks. Real window, real SQLite file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QMessageBox, QPushButton
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.projects.answers import AnswerKnowledge
from ember_chat.engine.projects.citations import ProjectSource
from ember_chat.engine.projects.records import ProjectStore
from tests.helpers.chat_list import _chats

GIVEN = [
    ProjectSource(1, "/home/ana/notes/rivers.md", None, 0, "The Tagus is the longest river of Iberia.", 42),
    ProjectSource(2, "/home/ana/notes/atlas.pdf", 3, 7, "Lisbon lies where the Tagus meets the Atlantic.", 43),
]
NAMES_ONLY = [
    {"n": 1, "file": "/home/ana/notes/rivers.md", "page": None, "seq": 0},
    {"n": 2, "file": "/home/ana/notes/atlas.pdf", "page": 3, "seq": 7},
]


def _project_chat(w: MainWindow) -> int:
    """A chat in a project whose answer was given two passages of the project's files."""
    project = ProjectStore(w.store).create("Iberia", instructions="Cite the notes.")
    chat = w.store.create_conversation("Rivers")
    question = w.store.add_message(chat.id, "user", "Which river is the longest?")
    answer = w.store.add_message(chat.id, "assistant", "The Tagus [1], to Lisbon [2].", parent_id=question.id)
    w.store.organise.move_chats([chat.id], project.folder_id)
    AnswerKnowledge(w.store).record(answer.id, GIVEN)
    w.chats.reload_conversations()
    return chat.id


def _choose(w: MainWindow, target: Path) -> None:
    dialog = w.chats.exports.export_dialog_open
    assert dialog is not None and dialog.isVisible()
    dialog.selectFile(str(target))
    dialog.accept()


def _question(w: MainWindow) -> QMessageBox:
    box = w.chats.chat_question
    assert isinstance(box, QMessageBox) and box.isVisible()
    return box


def _answer(qtbot: QtBot, w: MainWindow, button: str) -> None:
    """Click the question's `button` (an object name); the question goes."""
    _question(w).findChild(QPushButton, button).click()
    qtbot.waitUntil(lambda: w.chats.chat_question is None)


def _sources(tree: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for item in tree for s in item.get("project_sources", [])]


def test_a_project_chat_s_export_asks_whether_the_passages_go_too(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    w = make_window()
    cid = _project_chat(w)

    # the default: the files' names and pages, not their text
    target = tmp_path / "rivers.json"
    w.chats.exports.export_dialog("json", cid)
    _choose(w, target)
    box = _question(w)
    assert not target.exists()  # (asked before writing)
    assert box.text() == "Include the passages of your files that answers cited?"
    assert "names and pages" in box.informativeText()
    leave = box.findChild(QPushButton, "leavePassagesOut")
    assert box.defaultButton() is leave
    _answer(qtbot, w, "leavePassagesOut")
    data = json.loads(target.read_text(encoding="utf-8"))
    assert _sources(data["tree"]) == NAMES_ONLY
    assert GIVEN[0].text not in target.read_text(encoding="utf-8")
    assert data["project"]["name"] == "Iberia" and str(target) in w.banner.text()

    # asked for: with the passages' text
    with_text = tmp_path / "rivers with passages.json"
    w.chats.exports.export_dialog("json", cid)
    _choose(w, with_text)
    _answer(qtbot, w, "includePassages")
    data = json.loads(with_text.read_text(encoding="utf-8"))
    assert _sources(data["tree"]) == [{**e, "passage": g.text} for e, g in zip(NAMES_ONLY, GIVEN, strict=True)]

    # Cancel (or Escape): nothing is written
    cancelled = tmp_path / "cancelled.json"
    w.chats.exports.export_dialog("json", cid)
    _choose(w, cancelled)
    box = _question(w)
    assert box.escapeButton() is box.button(QMessageBox.StandardButton.Cancel)
    box.button(QMessageBox.StandardButton.Cancel).click()
    qtbot.waitUntil(lambda: w.chats.chat_question is None)
    assert not cancelled.exists()

    # several chats, one of them the project's: asked once for the file
    (plain,) = _chats(w, ["Plain"])
    both = tmp_path / "both.json"
    w.chats.exports.export_many([cid, plain])
    _choose(w, both)
    _answer(qtbot, w, "includePassages")
    chats = json.loads(both.read_text(encoding="utf-8"))
    assert [c["title"] for c in chats] == ["Rivers", "Plain"]
    assert [s.get("passage") for s in _sources(chats[0]["tree"])] == [g.text for g in GIVEN]
    assert _sources(chats[1]["tree"]) == []

    # Markdown names no project sources: it never asks
    markdown = tmp_path / "rivers.md"
    w.chats.exports.export_dialog("md", cid)
    _choose(w, markdown)
    assert w.chats.chat_question is None
    text = markdown.read_text(encoding="utf-8")
    assert "The Tagus [1]" in text and GIVEN[0].text not in text and "rivers.md" not in text


def test_a_chat_without_project_passages_exports_without_a_question(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    w = make_window()
    a, b = _chats(w, ["One", "Two"])
    one = tmp_path / "one.json"
    w.chats.exports.export_dialog("json", a)
    _choose(w, one)
    assert w.chats.chat_question is None
    assert json.loads(one.read_text(encoding="utf-8"))["title"] == "One"
    two = tmp_path / "two.json"
    w.chats.exports.export_many([a, b])
    _choose(w, two)
    assert w.chats.chat_question is None
    assert sorted(c["title"] for c in json.loads(two.read_text(encoding="utf-8"))) == ["One", "Two"]
