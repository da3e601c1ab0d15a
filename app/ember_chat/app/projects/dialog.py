"""Project settings… (a project folder's menu in the chat list): its name and icon, its instructions
(added before each chat's own system prompt), the defaults a new chat in it starts with (model, preset,
context length, tools) and its knowledge (knowledge_panel.py). Save writes the first three tabs through
the ProjectStore; the Knowledge tab's changes take effect at once, as its note says. Leaving with changes
not saved on the first two — Esc, Cancel, its window or the main window closed, another project's settings
opened — asks first (Discard / Keep editing): `leave`, the one way out but Save and `discard` (its project
gone: what closes it then says the changes were dropped, projects/actions.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPlainTextEdit,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.projects.indexing import ProjectIndexing
from ember_chat.app.projects.knowledge_panel import KnowledgePanel
from ember_chat.app.qt.elided_label import elided
from ember_chat.app.qt.plain_text import plain_message
from ember_chat.engine.errors import EmberError
from ember_chat.engine.projects.records import Project, ProjectStore

MAX_CONTEXT = 1_048_576  # tokens a context length field offers


MIN_WIDTH, MIN_HEIGHT = 600, 460  # the dialog's least size (a 1024x640 window leaves room around it)
SOURCE_ROWS = 4  # rows the Knowledge tab's list shows at the least


class ProjectSettingsDialog(QDialog):
    saved = Signal(int)  # folder id: its settings were written (the chat list shows its name and icon)

    def __init__(
        self,
        projects: ProjectStore,
        indexing: ProjectIndexing,
        project: Project,
        *,
        models: Sequence[str],
        presets: Sequence[tuple[str, str]],
        tool_sources: Sequence[str],
        parent: QWidget | None = None,
    ) -> None:
        """`models`: the model names installed; `presets`: (id, name) of the preset library; `tool_sources`:
        the tool servers' names (the built-in tools' included)."""
        super().__init__(parent)
        self.projects = projects
        self.folder_id = project.folder_id
        self.opened = project  # as it was when opened: what `edited` compares with
        self.leaving: QMessageBox | None = None  # Discard / Keep editing, while asked
        self.then_leave: Callable[[], None] | None = None  # what a Discard is followed by (another project opened)
        self.setWindowTitle(self.tr("Project settings — {name}").format(name=elided(project.name, self)))
        self.tabs = QTabWidget()
        self.tabs.addTab(self._general(project), self.tr("General"))
        self.tabs.addTab(self._defaults(project, models, presets, tool_sources), self.tr("Defaults"))
        self.knowledge = KnowledgePanel(projects, indexing, project.folder_id, models)
        self.tabs.addTab(self.knowledge, self.tr("Knowledge"))
        if any(s.from_import for s in project.sources):  # (a path waits for the user's check)
            self.tabs.setCurrentWidget(self.knowledge)
        self.problem = QLabel()
        self.problem.setWordWrap(True)
        self.problem.setTextFormat(Qt.TextFormat.PlainText)  # (a name typed or imported: never markup)
        self.problem.setStyleSheet("color: palette(link);")
        self.problem.hide()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.save)
        buttons.rejected.connect(self.reject)
        buttons.button(QDialogButtonBox.StandardButton.Cancel).setToolTip(
            self.tr(
                "Cancels the changes on the General and Defaults tabs; those on the Knowledge tab took effect at once."
            )
        )
        self.buttons = buttons
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs, 1)
        layout.addWidget(self.problem)
        layout.addWidget(buttons)
        self._keep_readable()
        self.resize(680, 520)

    def _keep_readable(self) -> None:
        """Not smaller than its tabs can be read at (a small screen's 1024x640 window holds it with room):
        the Knowledge tab's list shows at least SOURCE_ROWS rows under its header, its State column beside
        the names (shrunk further, it showed a row and a half and cut the state mid-word)."""
        sources = self.knowledge.sources
        row = max(sources.sizeHintForRow(0), sources.fontMetrics().height() + 8)
        frame = 2 * sources.frameWidth() + sources.header().sizeHint().height()
        sources.setMinimumHeight(frame + SOURCE_ROWS * row)
        self.setMinimumSize(MIN_WIDTH, MIN_HEIGHT)

    def _general(self, project: Project) -> QWidget:
        page = QWidget()
        self.name = QLineEdit(project.name)
        self.icon = QLineEdit(project.icon)
        # (no Qt length limit: it counts UTF-16 units and cut a family emoji of 11 characters; Save says one too long)
        self.icon.setPlaceholderText("🗂")
        self.icon.setMaximumWidth(80)
        self.icon.setToolTip(self.tr("An emoji (or a few characters), shown before the project's name in the list"))
        self.instructions = QPlainTextEdit(project.instructions)
        self.instructions.setPlaceholderText(
            self.tr("e.g. You help me write my thesis on river ecology. Answer in British English.")
        )
        self.instructions.setTabChangesFocus(True)
        hint = QLabel(
            self.tr(
                "Added before each chat's own system prompt, in every chat of this project (each chat's "
                "“Why this answer” shows them)."
            )
        )
        hint.setWordWrap(True)
        form = QFormLayout(page)
        form.addRow(self.tr("&Name:"), self.name)
        form.addRow(self.tr("&Icon:"), self.icon)
        form.addRow(self.tr("In&structions:"), self.instructions)
        form.addRow("", hint)
        self.name.setAccessibleDescription(self.tr("The project's name: its folder's in the chat list"))
        self.icon.setAccessibleDescription(self.icon.toolTip())
        self.instructions.setAccessibleDescription(hint.text())
        return page

    def _defaults(
        self, project: Project, models: Sequence[str], presets: Sequence[tuple[str, str]], tools: Sequence[str]
    ) -> QWidget:
        page = QWidget()
        self.model = QComboBox()
        self.model.addItem(self.tr("The model loaded (no default)"), None)
        for name in models:
            self.model.addItem(name, name)
        _choose(self.model, project.model, self.tr("{name} (not installed)"))
        self.preset = QComboBox()
        self.preset.addItem(self.tr("As a new chat (no default)"), None)
        for preset_id, name in presets:
            self.preset.addItem(name, preset_id)
        _choose(self.preset, project.preset, self.tr("{name} (deleted)"))
        self.context = QSpinBox()
        self.context.setRange(0, MAX_CONTEXT)
        self.context.setSingleStep(1024)
        self.context.setSpecialValueText(self.tr("As Settings (no default)"))
        self.context.setSuffix(self.tr(" tokens"))
        self.context.setValue(project.context_length or 0)
        self.tools = QListWidget()
        for name in dict.fromkeys([*tools, *project.tools]):
            item = QListWidgetItem(name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if name in project.tools else Qt.CheckState.Unchecked)
            self.tools.addItem(item)
        self.tools.setMaximumHeight(110)
        hint = QLabel(
            self.tr(
                "A new chat in this project starts with these. None ticked under Tools: the tools new chats "
                "start with. Each call still asks first."
            )
        )
        hint.setWordWrap(True)
        column = QVBoxLayout(page)
        form = QFormLayout()
        column.addLayout(form)
        column.addStretch(1)
        form.addRow(self.tr("&Model:"), self.model)
        form.addRow(self.tr("&Preset:"), self.preset)
        form.addRow(self.tr("&Context length:"), self.context)
        form.addRow(self.tr("&Tools:"), self.tools)
        form.addRow("", hint)
        self.model.setAccessibleDescription(self.tr("Loaded when a new chat starts in this project"))
        self.preset.setAccessibleDescription(self.tr("The sampling values and system prompt a new chat starts with"))
        self.context.setAccessibleDescription(self.tr("The context length a new chat starts with"))
        self.tools.setAccessibleDescription(self.tr("The tool servers turned on in a new chat"))
        return page

    def chosen_tools(self) -> tuple[str, ...]:
        items = (self.tools.item(i) for i in range(self.tools.count()))
        return tuple(i.text() for i in items if i.checkState() == Qt.CheckState.Checked)

    def edited(self) -> bool:
        """Whether the General or Defaults tab holds a change not saved (the Knowledge tab saves at once)."""
        p = self.opened
        now = (self.name.text(), self.icon.text(), self.instructions.toPlainText(), self.model.currentData())
        return now != (p.name, p.icon, p.instructions, p.model) or (
            self.preset.currentData(),
            self.context.value() or None,
            sorted(self.chosen_tools()),
        ) != (p.preset, p.context_length, sorted(p.tools))

    def leave(self, then: Callable[[], None] | None = None) -> None:
        """Close, then `then` (another project's settings opened); with changes not saved, asked first:
        Discard closes (then `then`), Keep editing leaves the dialog as it is."""
        if not self.edited():
            self.discard()
            if then is not None:
                then()
            return
        if self.leaving is not None:  # (asked already: what follows a Discard is the latest wish)
            self.then_leave = then if then is not None else self.then_leave
            self.leaving.raise_()
            return
        self.then_leave = then
        box = plain_message(
            QMessageBox(
                QMessageBox.Icon.Question,
                self.tr("Changes not saved"),
                self.tr("The settings of “{name}” have changes not saved. Discard them?").format(
                    name=elided(self.opened.name, self)
                ),
                QMessageBox.StandardButton.NoButton,
                self,
            )
        )
        discard = box.addButton(self.tr("Discard"), QMessageBox.ButtonRole.DestructiveRole)
        keep = box.addButton(self.tr("Keep editing"), QMessageBox.ButtonRole.RejectRole)
        box.setDefaultButton(keep)
        box.setEscapeButton(keep)

        def discarded() -> None:
            self.discard()
            if self.then_leave is not None:
                self.then_leave()

        discard.clicked.connect(discarded)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.destroyed.connect(lambda: setattr(self, "leaving", None))
        self.leaving = box
        self.raise_()
        self.activateWindow()
        box.open()

    def reject(self) -> None:
        """Esc, Cancel, the window's close button: `leave` (asked first when there are changes not saved)."""
        self.leave()

    def discard(self) -> None:
        """Close without asking: its project is gone, the user said Discard, or the window closes (asked first)."""
        super().reject()

    def save(self) -> None:
        """Write the name, icon, instructions and defaults; a problem is said here and nothing is lost."""
        try:
            self.projects.update(
                self.folder_id,
                name=self.name.text(),
                icon=self.icon.text(),
                instructions=self.instructions.toPlainText(),
                model=self.model.currentData(),
                preset=self.preset.currentData(),
                context_length=self.context.value() or None,
                tools=self.chosen_tools(),
            )
        except EmberError as exc:
            self.problem.setText(str(exc))
            self.problem.show()
            return
        self.saved.emit(self.folder_id)
        self.accept()


def _choose(box: QComboBox, value: str | None, missing: str) -> None:
    """Select `value` in the box; one it does not list is added, said missing (kept unless changed)."""
    if value is None:
        box.setCurrentIndex(0)
        return
    index = box.findData(value)
    if index < 0:
        box.addItem(missing.format(name=value), value)
        index = box.count() - 1
    box.setCurrentIndex(index)
