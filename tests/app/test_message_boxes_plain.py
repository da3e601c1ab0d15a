"""A name from someone else's file is shown as written in every question the app asks: a project named
`<img src="…">` (made by an imported chat) is never drawn as markup, which would read that local file.
Every message box of the app is made through qt/plain_text (`ask`, `plain_message`): checked in the
source, and in the real window for the project questions a user meets."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest
from PIL import Image
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QMessageBox
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.projects.records import ProjectStore
from tests.helpers.paths import REPO

APP = REPO / "app" / "ember_chat" / "app"
STATIC = {"question", "warning", "information", "critical"}  # (About Ember: the app's own markup)


def _unplain_boxes(source: str, filename: str) -> list[int]:
    """Lines making a QMessageBox not passed straight to plain_message, or calling one of its static
    functions (their text format cannot be set)."""
    tree = ast.parse(source, filename)
    wrapped = {
        id(arg)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "plain_message"
        for arg in node.args
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(
            isinstance(b, ast.Name) and b.id == "QMessageBox" for b in node.bases
        ):
            made_plain = any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "plain_message"
                and any(isinstance(a, ast.Name) and a.id == "self" for a in n.args)
                for n in ast.walk(node)
            )  # fmt: skip
            if not made_plain:
                found.append(node.lineno)  # (a message box of its own: plain_message(self) in it)
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        made = isinstance(f, ast.Name) and f.id == "QMessageBox"
        static = isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "QMessageBox"
        if (made and id(node) not in wrapped) or (static and f.attr in STATIC):
            found.append(node.lineno)
    return found


def test_every_message_box_of_the_app_shows_its_text_as_written() -> None:
    found = {
        str(path.relative_to(APP)): lines
        for path in sorted(APP.rglob("*.py"))
        if (lines := _unplain_boxes(path.read_text(encoding="utf-8"), str(path)))
    }
    assert found == {}
    assert _unplain_boxes("box = QMessageBox(parent)\nQMessageBox.warning(p, 't', 'x')\n", "x.py") == [1, 2]
    assert _unplain_boxes("box = plain_message(QMessageBox(parent))\n", "x.py") == []
    assert _unplain_boxes("class Q(QMessageBox):\n    def __init__(self):\n        pass\n", "x.py") == [1]
    assert _unplain_boxes("class Q(QMessageBox):\n    def __init__(self):\n        plain_message(self)\n", "x.py") == []


def _labels(box: QMessageBox) -> dict[str, QLabel]:
    return {label.objectName(): label for label in box.findChildren(QLabel)}


@pytest.mark.usefixtures("nothing_blocks")
def test_a_project_named_like_markup_is_asked_about_as_written(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    picture = tmp_path / "secret.png"
    Image.new("RGB", (80, 80), (200, 30, 30)).save(picture)
    name = f'<img src="{picture}" width=80> <b>Bold</b> &amp;'
    w = make_window()
    project = w.projects.new_project(name)
    assert project is not None
    dialog = w.projects.settings_dialog
    assert dialog is not None
    shown = (dialog.problem, dialog.knowledge.progress_text, dialog.knowledge.add_problems)  # (names and paths)
    assert all(label.textFormat() == Qt.TextFormat.PlainText for label in shown)
    dialog.reject()

    # a knowledge path of that name (an imported chat's): its row's tooltip shows it as written
    folder = tmp_path / '<img src="secret.png"> notes'
    folder.mkdir()
    ProjectStore(w.store).add_source(project.folder_id, str(folder))
    w.projects.open_settings(project.folder_id)
    dialog = w.projects.settings_dialog
    assert dialog is not None
    qtbot.waitUntil(lambda: dialog.knowledge.sources.topLevelItemCount() == 1, timeout=10_000)
    row = dialog.knowledge.sources.topLevelItem(0)
    assert "&lt;img" in row.toolTip(0) and "<img" not in row.toolTip(0)
    dialog.reject()
    w.banner.set_action("Open", lambda: None, f"The knowledge of “{name}”, to confirm")
    assert "&lt;img" in w.banner.action_button.toolTip()

    w.chats.organise.delete_folder(project.folder_id)  # asks first
    box = w.chats.chat_question
    assert isinstance(box, QMessageBox)
    text = _labels(box)["qt_msgbox_label"]
    assert text.textFormat() == Qt.TextFormat.PlainText and name in text.text()
    next(b for b in box.buttons() if b.text() == "Cancel").click()

    w.projects.unmake(project.folder_id)  # asks first
    box = w.projects.question
    assert isinstance(box, QMessageBox)
    text = _labels(box)["qt_msgbox_label"]
    assert text.textFormat() == Qt.TextFormat.PlainText and f"“{name}”" in text.text()
    box.reject()
