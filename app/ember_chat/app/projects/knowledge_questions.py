"""The questions the Knowledge tab (knowledge_panel.py) asks before a step a new user may not expect:
adding a folder that holds a whole home, disk or drive (thousands of files read). Each is a message box the panel opens
without blocking; the words come from what the panel already knows and from comparing paths (a mount
point: the two stats of os.path.ismount): nothing here walks a folder or reads the index. Translated in
the panel's context ("KnowledgePanel")."""

from __future__ import annotations

import os
from collections.abc import Callable

from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QMessageBox, QWidget

from ember_chat.app.qt.plain_text import plain_message


def _tr(text: str) -> str:
    return QCoreApplication.translate("KnowledgePanel", text)


def _key(path: str) -> str:
    return os.path.normcase(os.path.abspath(path))


def broad_folder_question(path: str, home: str | None = None) -> str | None:
    """The question to ask before adding `path` when it is the user's home folder (`home`; None: this
    user's), a folder holding it ("/home"), a filesystem's root ("/", "C:\\") or a drive's mount point;
    None for any other path (asked nothing)."""
    key, home_key = _key(path), _key(home if home is not None else os.path.expanduser("~"))
    shown = os.path.abspath(path)
    every = _tr(
        "Every file in it (not hidden ones) will be read and searched by this project's chats: that can be "
        "thousands of files, and hours of reading. A folder inside it, such as your documents, is usually "
        "what a project needs."
    )
    if key == home_key:
        said = _tr("Add your whole home folder “{path}”?")
    elif os.path.dirname(key) == key:
        said = _tr("Add the whole disk “{path}”?")
    elif home_key.startswith(key.rstrip(os.sep) + os.sep):
        said = _tr("Add “{path}”, the folder that holds your home folder?")
    else:
        try:
            mounted = os.path.ismount(shown)
        except (OSError, ValueError):  # (a name no path can have: add_source says why)
            mounted = False
        if not mounted:
            return None
        said = _tr("Add the whole drive “{path}”?")
    return said.format(path=shown) + " " + every


def question_box(
    parent: QWidget, title: str, text: str, act: str, then: Callable[[], None], *, destructive: bool = False
) -> QMessageBox:
    """A message box asking `text` with `act` (its button, which calls `then`) and Cancel (the default),
    not shown yet: the caller opens it."""
    box = plain_message(QMessageBox(QMessageBox.Icon.Question, title, text, QMessageBox.StandardButton.Cancel, parent))
    role = QMessageBox.ButtonRole.DestructiveRole if destructive else QMessageBox.ButtonRole.AcceptRole
    button = box.addButton(act, role)
    button.clicked.connect(then)
    box.setDefaultButton(QMessageBox.StandardButton.Cancel)
    return box
