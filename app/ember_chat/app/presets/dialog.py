"""Settings ▸ Presets…: the preset library. Search; create one from the current chat; duplicate, edit
(the editor on the right, "Save"), delete (asked); import and export JSON files; "Use for new chats";
"Default for <the loaded model>". A file or JSON that cannot be used says why in the dialog and
changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QStandardPaths, Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.engine_link.model_names import model_label
from ember_chat.app.presets.editor import PresetEditor
from ember_chat.app.qt.plain_text import plain_message
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.storage.presets import Preset, PresetError, PresetLibrary

ChatValues = Callable[[], tuple[str, str, dict[str, Any], bool | None]]


def _shown(name: str) -> str:
    """A model's name as the picker shows it (a bundled starter by its name, not its alias)."""
    return model_label(name)


MESSAGE_LINES = 2  # the room kept for the library's message, in lines of text


class PresetsDialog(QDialog):
    changed = Signal()  # the library changed (the window's picker and new chat follow)

    def __init__(
        self,
        library: PresetLibrary,
        chat_values: ChatValues,
        model: tuple[str, str] | None,
        parent: QWidget | None = None,
    ) -> None:
        """`chat_values`: (title, system prompt, params, thinking) of the chat on screen; `model`: the
        loaded model's (key, name), None when none is loaded."""
        super().__init__(parent)
        self.setWindowTitle(self.tr("Presets"))
        self.library = library
        self.chat_values = chat_values
        self.model = model
        self.question: QMessageBox | None = None  # the delete question, while open (and for tests)
        self.file_dialog: QFileDialog | None = None  # import/export, while open (and for tests)

        self.search = QLineEdit()
        self.search.setPlaceholderText(self.tr("Search presets (name or prompt)"))
        self.search.setAccessibleName(self.tr("Search presets"))
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(lambda _: self.refresh())
        self.list = QListWidget()
        self.list.setAccessibleName(self.tr("Presets"))
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)  # export several
        self.list.currentItemChanged.connect(lambda *_: self._show_current())
        self.new_button = QPushButton(self.tr("New from chat"))
        self.new_button.setToolTip(self.tr("A new preset with the system prompt and parameters of the chat on screen"))
        self.duplicate_button = QPushButton(self.tr("Duplicate"))
        self.delete_button = QPushButton(self.tr("Delete…"))
        self.import_button = QPushButton(self.tr("Import…"))
        self.export_button = QPushButton(self.tr("Export…"))
        self.export_button.setToolTip(self.tr("Save the selected presets to a JSON file (Ctrl+click selects several)"))
        self.new_button.clicked.connect(self.create_from_chat)
        self.duplicate_button.clicked.connect(self.duplicate)
        self.delete_button.clicked.connect(lambda: self.delete())
        self.import_button.clicked.connect(self._choose_import)
        self.export_button.clicked.connect(self._choose_export)
        left = QVBoxLayout()
        left.addWidget(self.search)
        left.addWidget(self.list, 1)
        for pair in ((self.new_button, self.duplicate_button), (self.delete_button, self.import_button)):
            row = QHBoxLayout()
            for b in pair:
                row.addWidget(b)
            left.addLayout(row)
        left.addWidget(self.export_button)

        self.editor = PresetEditor()
        self.editor.edited.connect(self._on_edited)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.editor)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        self.save_button = QPushButton(self.tr("Save changes"))
        self.save_button.setEnabled(False)
        self.save_button.clicked.connect(self.save)
        self.default_button = QPushButton(self.tr("Use for new chats"))
        self.default_button.setToolTip(self.tr("New chats start from this preset (unless the model has its own)"))
        self.default_button.clicked.connect(self.use_for_new_chats)
        self.model_button = QPushButton()
        self.model_button.setCheckable(True)
        self.model_button.clicked.connect(self.set_model_default)
        right = QVBoxLayout()
        right.addWidget(scroll, 1)
        actions = QHBoxLayout()
        actions.addWidget(self.save_button)
        actions.addWidget(self.default_button)
        actions.addWidget(self.model_button)
        right.addLayout(actions)

        body = QHBoxLayout()
        body.addLayout(left, 2)
        body.addLayout(right, 3)
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setAccessibleName(self.tr("Presets message"))
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self._reserve_message()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        outer = QVBoxLayout(self)
        outer.addLayout(body, 1)
        outer.addWidget(self.message)
        outer.addWidget(buttons)
        self.resize(760, 560)
        self.set_model(model)
        self.refresh()

    def _reserve_message(self) -> None:
        """The message line's room is kept while it says nothing: shown mid-edit ("Saved …", an
        error), it took its height from the form above, whose rows moved up by as much as 23 px.
        MESSAGE_LINES lines fit what the library says; a longer message (a long path) grows it."""
        self.message.setMinimumHeight(MESSAGE_LINES * self.message.fontMetrics().lineSpacing())

    def changeEvent(self, event: QEvent) -> None:  # Qt override
        if event.type() == QEvent.Type.FontChange:
            self._reserve_message()
        super().changeEvent(event)

    # ----- the list
    def set_model(self, model: tuple[str, str] | None) -> None:
        self.model = model
        name = "" if model is None else _shown(model[1])
        name = name if len(name) <= 28 else name[:12] + "…" + name[-15:]
        self.model_button.setText(
            self.tr("Default for {model}").format(model=name) if model else self.tr("Default for the loaded model")
        )
        self.model_button.setToolTip(
            self.tr(
                "{model}: applied whenever it is loaded, in the window, ember-chat run/serve and the API server"
            ).format(model=_shown(model[1]))
            if model
            else self.tr("Load a model first")
        )
        self._show_current()

    def refresh(self, select: str | None = None) -> None:
        """The list again (filtered by the search), the preset `select` (else the same one) current."""
        keep = select or self.current_id()
        default_id = self.library.default_id
        model_ids = self.library.model_defaults()
        self.list.blockSignals(True)
        self.list.clear()
        for preset in self.library.search(self.search.text()):
            marks = []
            if preset.id == default_id:
                marks.append(self.tr("new chats"))
            marks += sorted(_shown(key) for key, pid in model_ids.items() if pid == preset.id)
            text = preset.name + (f"  · {', '.join(marks)}" if marks else "")
            item = QListWidgetItem(text)
            item.setData(Qt.ItemDataRole.UserRole, preset.id)
            item.setToolTip(preset.system_prompt or self.tr("No system prompt"))
            self.list.addItem(item)
            if preset.id == keep:
                self.list.setCurrentItem(item)
        if self.list.currentItem() is None and self.list.count():
            self.list.setCurrentRow(0)
        self.list.blockSignals(False)
        self._show_current()
        problems = self.library.take_problems()  # (a file damaged since the window started)
        if problems:
            self._say(" ".join(problems), error=True)

    def names(self) -> list[str]:
        return [self.library.get(i).name for i in self._ids()]  # type: ignore[union-attr]

    def _ids(self) -> list[str]:
        return [self.list.item(i).data(Qt.ItemDataRole.UserRole) for i in range(self.list.count())]

    def current_id(self) -> str | None:
        item = self.list.currentItem()
        return item.data(Qt.ItemDataRole.UserRole) if item is not None else None

    def current(self) -> Preset | None:
        pid = self.current_id()
        return self.library.get(pid) if pid else None

    def select(self, preset_id: str) -> None:
        for i, pid in enumerate(self._ids()):
            if pid == preset_id:
                self.list.setCurrentRow(i)

    def _show_current(self) -> None:
        preset = self.current()
        has = preset is not None
        for w in (self.editor, self.duplicate_button, self.default_button, self.export_button):
            w.setEnabled(has)
        self.delete_button.setEnabled(has and not preset.builtin)  # type: ignore[union-attr]
        self.model_button.setEnabled(has and self.model is not None)
        self.save_button.setEnabled(False)
        if preset is None:
            return
        self.editor.show_preset(preset)
        is_default = preset.id == self.library.default_id
        self.default_button.setText(self.tr("Used for new chats") if is_default else self.tr("Use for new chats"))
        self.default_button.setEnabled(not is_default)
        chosen = self.model is not None and self.library.model_default(self.model[0]) == preset
        self.model_button.setChecked(chosen)

    def _on_edited(self) -> None:
        self.save_button.setEnabled(self.current() is not None)

    # ----- acting
    def _say(self, text: str, error: bool = False) -> None:
        self.message.setText(text)
        self.message.setForegroundRole(QPalette.ColorRole.BrightText if error else QPalette.ColorRole.WindowText)
        self.message.setProperty("error", error)

    def _done(self, text: str, select: str | None = None) -> None:
        self.refresh(select)
        self._say(text)
        self.changed.emit()

    def _try(self, action: Callable[[], Any]) -> Any:
        try:
            return action()
        except (PresetError, InvalidParameter) as exc:
            self._say(str(exc), error=True)
            return None

    def create_from_chat(self) -> Preset | None:
        title, prompt, params, thinking = self.chat_values()
        preset = self._try(lambda: self.library.create_from(title, prompt, params, thinking))
        if preset is not None:
            self.search.clear()
            self._done(
                self.tr("Created “{name}” from the chat: rename it and save.").format(name=preset.name), preset.id
            )
            self.editor.name.setFocus()
            self.editor.name.selectAll()
        return preset

    def duplicate(self) -> Preset | None:
        pid = self.current_id()
        copy = self._try(lambda: self.library.duplicate(pid)) if pid else None
        if copy is not None:
            self._done(self.tr("Created “{name}”.").format(name=copy.name), copy.id)
        return copy

    def save(self) -> Preset | None:
        preset = self.current()
        if preset is None:
            return None
        values = self.editor.values_shown()
        saved = self._try(lambda: self.library.save(replace(preset, **values)))
        if saved is not None:
            self._done(self.tr("Saved “{name}”.").format(name=saved.name), saved.id)
        return saved

    def delete(self, confirmed: bool = False) -> None:
        preset = self.current()
        if preset is None or preset.builtin:
            return
        if not confirmed:
            box = plain_message(
                QMessageBox(
                    QMessageBox.Icon.Question,
                    self.tr("Delete preset"),
                    self.tr("Delete the preset “{name}”? Chats that used it keep their values.").format(
                        name=preset.name
                    ),
                    QMessageBox.StandardButton.Cancel,
                    self,
                )
            )
            delete = box.addButton(self.tr("Delete"), QMessageBox.ButtonRole.DestructiveRole)
            delete.clicked.connect(lambda: self.delete(confirmed=True))
            box.setDefaultButton(QMessageBox.StandardButton.Cancel)
            box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            box.destroyed.connect(lambda: setattr(self, "question", None))
            self.question = box
            box.open()
            return
        if self._try(lambda: self.library.delete(preset.id)) is None and self.library.get(preset.id) is None:
            self._done(self.tr("Deleted “{name}”.").format(name=preset.name))

    def use_for_new_chats(self) -> None:
        preset = self.current()
        if preset is None:
            return
        self._try(lambda: setattr(self.library, "default_id", preset.id))
        if self.library.default_id == preset.id:
            self._done(self.tr("New chats start from “{name}”.").format(name=preset.name), preset.id)

    def set_model_default(self, on: bool) -> None:
        preset, model = self.current(), self.model
        if preset is None or model is None:
            return
        self._try(lambda: self.library.set_model_default(model[0], preset.id if on else None))
        if on and self.library.model_default(model[0]) == preset:
            text = self.tr("{model} starts from “{name}” whenever it is loaded.")
            self._done(text.format(model=_shown(model[1]), name=preset.name))
        elif not on:
            self._done(self.tr("{model} has no default preset of its own now.").format(model=_shown(model[1])))

    # ----- files
    def _folder(self) -> str:
        docs = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
        return docs if docs and Path(docs).is_dir() else str(Path.home())

    def _file_dialog(self, title: str, save: bool, proposed: str, then: Callable[[Path], None]) -> None:
        dialog = QFileDialog(self, title, proposed, self.tr("JSON (*.json)"))
        if save:
            dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
            dialog.setDefaultSuffix("json")
        else:
            dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.fileSelected.connect(lambda path: then(Path(path)))
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.destroyed.connect(lambda: setattr(self, "file_dialog", None))
        self.file_dialog = dialog
        dialog.open()

    def _choose_import(self) -> None:
        self._file_dialog(self.tr("Import presets"), False, self._folder(), self.import_file)

    def _choose_export(self) -> None:
        proposed = str(Path(self._folder()) / "ember-presets.json")
        self._file_dialog(self.tr("Export presets"), True, proposed, self.export_file)

    def import_file(self, path: Path) -> list[Preset]:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or exc
            text = self.tr("Could not read {path} ({reason}); nothing was imported.")
            self._say(text.format(path=path, reason=reason), error=True)
            return []
        imported = self._try(lambda: self.library.import_json(text)) or []
        if imported:
            names = ", ".join(f"“{p.name}”" for p in imported)
            self.search.clear()
            text = self.tr("Imported {n} from {path}: {names}.")
            self._done(text.format(n=len(imported), path=path.name, names=names), imported[0].id)
        return imported

    def export_file(self, path: Path, ids: list[str] | None = None) -> bool:
        chosen = ids or [item.data(Qt.ItemDataRole.UserRole) for item in self.list.selectedItems()]
        if not chosen and self.current_id():
            chosen = [self.current_id()]  # type: ignore[list-item]
        try:
            path.write_text(self.library.export_json(chosen), encoding="utf-8")
        except OSError as exc:
            text = self.tr("Could not export to {path} ({reason}).")
            self._say(text.format(path=path, reason=exc.strerror or exc), error=True)
            return False
        self._say(self.tr("Exported {n} to {path}.").format(n=len(chosen), path=path))
        return True
