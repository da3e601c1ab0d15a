"""The preset library's editor: a preset's name, system prompt, the parameters it sets (each ticked
one is set, the others stay as the app's defaults or the chat has them) and its thinking switch."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QSpinBox,
    QWidget,
)

from ember_chat.app.side_panel.params_panel import param_spin
from ember_chat.engine.core.params import SPECS
from ember_chat.engine.storage.presets import PRESET_PARAMS, Preset

THINKING_CHOICES = (None, True, False)


class PresetEditor(QWidget):
    edited = Signal()  # the user changed something (not yet saved)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        form = QFormLayout(self)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        self.name = QLineEdit()
        self.name.setAccessibleName(self.tr("Preset name"))
        form.addRow(self.tr("Name"), self.name)
        self.system_prompt = QPlainTextEdit()
        self.system_prompt.setAccessibleName(self.tr("Preset system prompt"))
        self.system_prompt.setPlaceholderText(self.tr("None: the app's default system prompt"))
        self.system_prompt.setMaximumHeight(120)
        form.addRow(QLabel(self.tr("System prompt (also what / inserts in an empty message box)")))
        form.addRow(self.system_prompt)
        note = QLabel(self.tr("Ticked parameters are set by the preset; the others keep the app's defaults."))
        note.setWordWrap(True)
        form.addRow(note)
        self.sets: dict[str, QCheckBox] = {}
        self.values: dict[str, QSpinBox | QDoubleSpinBox] = {}
        for name in PRESET_PARAMS:
            spec = SPECS[name]
            box = param_spin(name)
            if spec.optional:
                box.setSpecialValueText(self.tr("random"))
            box.setEnabled(False)
            tick = QCheckBox(spec.label)
            tick.setAccessibleName(self.tr("Set {name}").format(name=spec.noun))
            tick.toggled.connect(box.setEnabled)
            tick.toggled.connect(self.edited)
            box.valueChanged.connect(self.edited)
            form.addRow(tick, box)
            self.sets[name], self.values[name] = tick, box
        self.thinking = QComboBox()
        self.thinking.addItems([self.tr("Leave as it is"), self.tr("On"), self.tr("Off")])
        self.thinking.setAccessibleName(self.tr("Think before answering"))
        self.thinking.setToolTip(self.tr("For models whose chat template has a thinking switch (e.g. Qwen3)"))
        self.thinking.currentIndexChanged.connect(self.edited)
        form.addRow(self.tr("Thinking"), self.thinking)
        self.name.textEdited.connect(self.edited)
        self.system_prompt.textChanged.connect(self.edited)

    def show_preset(self, preset: Preset) -> None:
        widgets: list[Any] = [self.name, self.system_prompt, self.thinking, *self.sets.values(), *self.values.values()]
        for w in widgets:
            w.blockSignals(True)
        self.name.setText(preset.name)
        self.system_prompt.setPlainText(preset.system_prompt)
        for name in PRESET_PARAMS:
            spec, given = SPECS[name], name in preset.params
            value = preset.params.get(name, spec.default)
            self.sets[name].setChecked(given)
            self.values[name].setEnabled(given)
            self.values[name].setValue(-1 if value is None else value)
        self.thinking.setCurrentIndex(THINKING_CHOICES.index(preset.thinking))
        for w in widgets:
            w.blockSignals(False)

    def values_shown(self) -> dict[str, Any]:
        """name, system_prompt, params, thinking as the form shows them (checked when saved)."""
        params: dict[str, Any] = {}
        for name in PRESET_PARAMS:
            if self.sets[name].isChecked():
                value = self.values[name].value()
                spec = SPECS[name]
                if spec.optional and value < spec.low:
                    params[name] = None
                else:
                    params[name] = round(value, 2) if spec.kind is float else int(value)
        return {
            "name": self.name.text(),
            "system_prompt": self.system_prompt.toPlainText(),
            "params": params,
            "thinking": THINKING_CHOICES[self.thinking.currentIndex()],
        }
