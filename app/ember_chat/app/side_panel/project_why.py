"""*Why this answer* in the side panel, for an answer in a project's chat (issue 34): that the project's
instructions were added before the chat's system prompt (their first line, the whole on hover), and the
passages of its knowledge the answer was given (file, page), with how many found did not fit the context.
Hidden for an answer in no project."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QGroupBox, QLabel, QVBoxLayout, QWidget

from ember_chat.app.qt.elided_label import elided
from ember_chat.app.qt.plain_text import plain_tooltip
from ember_chat.engine.inference.events import KnowledgeUsed
from ember_chat.engine.projects.citations import ProjectSource, distinct_labels
from ember_chat.engine.projects.records import Project

_RANKED = {"vectors": "meaning (the embedding model)", "reranker": "reordered by the reranker"}
FIRST_LINE = 80  # characters of the instructions' first line shown (the whole is the tooltip)
NAME_CHARS = 20  # about how many characters of the project's name the title shows (the whole on hover)


def first_line(text: str) -> str:
    """The first non-empty line, cut to FIRST_LINE characters, with "…" when there is more."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[0]
    cut = line[:FIRST_LINE].rstrip()
    return cut.rstrip(".") + "…" if len(lines) > 1 or len(line) > FIRST_LINE else cut  # ("sentences…", not ".…")


class ProjectWhy(QGroupBox):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setTitle(self.tr("Why this answer"))
        layout = QVBoxLayout(self)
        self.instructions = QLabel()
        self.sources = QLabel()
        for label, name in ((self.instructions, "Project instructions"), (self.sources, "Project sources")):
            label.setWordWrap(True)
            label.setTextFormat(Qt.TextFormat.PlainText)  # (a project's name and files: never rich text)
            label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
            label.setAccessibleName(self.tr(name))
            layout.addWidget(label)
        self.hide()  # until an answer in a project
        self._shown: tuple[Project, KnowledgeUsed | None] | None = None  # what the title and lines say
        # when the project's folder was made, by its id (None: not known): a project read again by the id
        # of the one shown is that one only if made when it was (a deleted folder's id may be given again)
        self.made_at: Callable[[int], float | None] = lambda _folder_id: None
        self._made: float | None = None  # the shown project's

    def show_project(self, project: Project | None, used: KnowledgeUsed | None) -> None:
        """An answer began in `project` (None: in no project), or its knowledge was given (`used`)."""
        if project is None:
            self.clear()
            return
        self._made = self.made_at(project.folder_id)
        self._shown = (project, used)
        icon = f"{project.icon} " if project.icon else ""
        name = elided(project.name, self, NAME_CHARS)  # (a title never wraps: the whole name on hover)
        self.setTitle(self.tr("Why this answer — {icon}{name}").format(icon=icon, name=name))
        self.setToolTip(plain_tooltip(project.name) if name != project.name else "")
        shown = first_line(project.instructions)
        if shown:
            words = self.tr("Project instructions added before the system prompt: “{line}”")
            self.instructions.setText(words.format(line=shown))
            self.instructions.setToolTip(plain_tooltip(project.instructions.strip()))
        else:
            self.instructions.setText(self.tr("The project has no instructions."))
            self.instructions.setToolTip("")
        self.sources.setText(self._sources_text(project, used))
        self.show()

    def follow_project(self, read: Callable[[int], Project | None]) -> None:
        """The chat list was read again (a project renamed, its icon changed): the title names the project
        shown as `read(folder_id)` has it now. Its instructions and sources stay the answer's (what it was
        given); a project gone, or another made since with its folder's id, keeps the name the answer was
        made in."""
        if self._shown is None:
            return
        project, used = self._shown
        now = read(project.folder_id)
        if now is None or self.made_at(project.folder_id) != self._made:
            return
        if (now.name, now.icon) != (project.name, project.icon):
            self.show_project(dataclasses.replace(project, name=now.name, icon=now.icon), used)

    def _sources_text(self, project: Project, used: KnowledgeUsed | None) -> str:
        if used is None and project.sources:
            return self.tr("No passage of its knowledge was given yet.")
        if used is None:
            return self.tr("The project has no knowledge files.")
        if not used.retrieved:
            return " ".join((used.summary(), *used.problems))
        shown = distinct_labels([ProjectSource(s.n, s.file_path, s.page, s.seq, "", 0) for s in used.sources])
        labels = [f"[{n}] {label}" for n, label in shown.items()]  # (one file's passages told apart: 'a.md §3')
        text = self.tr("Sources: {sources}").format(sources=", ".join(labels)) if labels else ""
        if used.left_out:
            more = self.tr("{n} more passages found did not fit the context.").format(n=used.left_out)
            if used.left_out == 1:
                more = self.tr("1 more passage found did not fit the context.")
            text = f"{text}. {more}" if text else more
        ranked = [_RANKED.get(r, r) for r in used.ranked_by if r != "bm25"]
        if ranked:
            text += " " + self.tr("Found by their words and {how}.").format(
                how=" and ".join(self.tr(r) for r in ranked)
            )
        return " ".join((text, *used.problems))

    def clear(self) -> None:
        self._shown = None
        self._made = None
        self.setToolTip("")
        self.instructions.clear()
        self.instructions.setToolTip("")
        self.sources.clear()
        self.hide()


__all__ = ["ProjectWhy", "first_line"]
