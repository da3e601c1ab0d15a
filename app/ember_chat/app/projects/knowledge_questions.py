"""The questions the Knowledge tab (knowledge_panel.py) asks before a step a new user may not expect:
adding a folder that holds a whole home, disk or drive (thousands of files read), and removing sources
whose passages are forgotten (adding them again reads them again). Each is a message box the panel opens
without blocking; the words come from what the panel already knows and from comparing paths (a mount
point: the two stats of os.path.ismount; links resolved, as Add resolves them): nothing here walks a
folder or reads the index. Translated in the panel's context ("KnowledgePanel")."""

from __future__ import annotations

import os
from collections.abc import Callable

from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QMessageBox, QWidget

from ember_chat.app.qt.plain_text import plain_message


def _tr(text: str) -> str:
    return QCoreApplication.translate("KnowledgePanel", text)


def _key(path: str) -> str:
    """The path compared: links resolved (a link to the home folder is the home folder), as add_source
    resolves the path it adds, so no look at the disk that Add does not make anyway."""
    return os.path.normcase(os.path.realpath(path))


def _count(n: int, one: str, many: str) -> str:
    return one if n == 1 else many.format(n=f"{n:,}")


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


def remove_question(names: list[str], project: str, passages: int) -> str:
    """The question to ask before removing the sources `names` (as their rows show them) that hold
    `passages` passages of the project `project` (0: files were read, none made a passage)."""
    if len(names) == 1:
        what = _tr("Remove “{name}” from the knowledge of “{project}”?").format(name=names[0], project=project)
        if passages:
            gone = _count(passages, _tr("Its passage is forgotten"), _tr("Its {n} passages are forgotten"))
        else:
            gone = _tr("What was read of it is forgotten")
        again = _tr("adding it again reads it again.")
    else:
        what = _tr("Remove these {n} from the knowledge of “{project}”?").format(n=f"{len(names):,}", project=project)
        if passages:
            gone = _count(passages, _tr("Their passage is forgotten"), _tr("Their {n} passages are forgotten"))
        else:
            gone = _tr("What was read of them is forgotten")
        again = _tr("adding them again reads them again.")
    return _tr("{what} {gone} (the files on disk are not touched); {again}").format(what=what, gone=gone, again=again)


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
