"""Parameters ▸ "Answer as JSON": a chat's answers constrained to JSON, optionally to a JSON schema
typed here. The schema is checked as it is typed (off the GUI thread: the check builds its grammar
with llama.cpp's converter), and what is wrong is said in plain words under the field; a schema that
does not pass is not used (the last one that did stays in force, and the answer is any JSON object
until one does)."""

from __future__ import annotations

import json
from typing import Any

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QCheckBox, QLabel, QPlainTextEdit, QVBoxLayout, QWidget

from ember_chat.app.engine_link.tasks import TaskRunner
from ember_chat.app.style.theme import active_colors
from ember_chat.engine.inference.grammar.structured import json_format, parse_schema_text, response_schema, wants_json

CHECK_DELAY_MS = 300  # after the last key press


class JsonAnswerBox(QWidget):
    changed = Signal()  # the chat's response_format changed (to be saved)
    checked = Signal()  # a typed schema was checked (accepted or refused): tests wait on it

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.enabled = QCheckBox(self.tr("Answer as JSON"))
        self.enabled.setAccessibleName(self.tr("Answer as JSON"))
        self.enabled.setToolTip(
            self.tr("The model can only write JSON (a grammar constrains it); with a schema, JSON that matches it")
        )
        self.schema = QPlainTextEdit()
        self.schema.setPlaceholderText(self.tr('Optional JSON schema, e.g. {"type": "object", "properties": {…}}'))
        self.schema.setAccessibleName(self.tr("JSON schema"))
        self.schema.setAccessibleDescription(
            self.tr("The shape the answer must have; empty: any JSON object. Saved with the chat")
        )
        self.schema.setFixedHeight(110)  # (a fixed row: the form's spare height stays below it, not inside)
        self.error = QLabel()
        self.error.setWordWrap(True)
        self.error.setAccessibleName(self.tr("JSON schema error"))
        self.error.setStyleSheet(f"color: {active_colors().error}")
        for w in (self.enabled, self.schema, self.error):
            layout.addWidget(w)
        layout.addStretch(1)  # the last row of the panel: its spare height goes below the field, not between
        self._schema: dict[str, Any] | None = None  # the last schema that passed
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(CHECK_DELAY_MS)
        self._timer.timeout.connect(self._check)
        self.tasks = TaskRunner(self, workers=1)
        self.enabled.toggled.connect(self._on_toggled)
        self.schema.textChanged.connect(self._timer.start)
        self._show(None)

    def set_format(self, response_format: dict[str, Any] | None) -> None:
        """Show a chat's saved response_format (no `changed`: it is already saved)."""
        self._timer.stop()
        self.tasks.cancel("schema")
        self._schema = response_schema(response_format)
        for w in (self.enabled, self.schema):
            w.blockSignals(True)
        self.enabled.setChecked(wants_json(response_format))
        self.schema.setPlainText(json.dumps(self._schema, indent=2) if self._schema is not None else "")
        for w in (self.enabled, self.schema):
            w.blockSignals(False)
        self._show(None)

    def response_format(self) -> dict[str, Any] | None:
        return json_format(self._schema) if self.enabled.isChecked() else None

    def _on_toggled(self, on: bool) -> None:
        self.schema.setVisible(on)
        self.error.setVisible(on and bool(self.error.text()))
        self.changed.emit()

    def _check(self) -> None:
        text = self.schema.toPlainText()
        self.tasks.run(lambda: parse_schema_text(text), self._accepted, self._refused, key="schema")

    def _accepted(self, schema: dict[str, Any] | None) -> None:
        self._show(None)
        if schema != self._schema:
            self._schema = schema
            self.changed.emit()
        self.checked.emit()

    def _refused(self, message: str) -> None:
        self._show(message)
        self.checked.emit()

    def _show(self, problem: str | None) -> None:
        if problem is None:
            self.error.clear()
        else:
            if self._schema is not None:
                kept = self.tr("Answers follow the last schema that was valid.")
            else:
                kept = self.tr("Until it is, answers are any JSON object.")
            self.error.setText(f"{problem} {kept}")
        self.schema.setVisible(self.enabled.isChecked())
        self.error.setVisible(self.enabled.isChecked() and problem is not None)
