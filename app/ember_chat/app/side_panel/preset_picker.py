"""The preset picker above the parameters in the side panel: which saved preset the chat's values are
(or "Custom" when they are none's), a pick applies one, and "…" opens the preset library."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSizePolicy, QToolButton, QWidget


class PresetPicker(QWidget):
    chosen = Signal(str)  # the id of the preset picked
    manage = Signal()  # the library was asked for

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        label = QLabel(self.tr("Preset"))
        self.combo = QComboBox()
        self.combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.combo.setMinimumContentsLength(8)
        self.combo.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.combo.setAccessibleName(self.tr("Preset"))
        self.combo.setToolTip(
            self.tr("Apply a saved preset (system prompt and parameters) to this chat; “Custom”: the chat's own values")
        )
        label.setBuddy(self.combo)
        self.combo.activated.connect(self._on_activated)
        self.library_button = QToolButton()
        self.library_button.setText(self.tr("Presets…"))
        self.library_button.setAccessibleName(self.tr("Preset library"))
        self.library_button.setToolTip(self.tr("Search, create, edit, import and export presets (Settings ▸ Presets…)"))
        self.library_button.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.library_button.clicked.connect(self.manage)
        row.addWidget(label)
        row.addWidget(self.combo, 1)
        row.addWidget(self.library_button)

    def set_presets(self, presets: list[tuple[str, str]], current: str | None) -> None:
        """`presets`: (id, name) in order; `current`: the one the chat's values are, None for "Custom"."""
        self.combo.blockSignals(True)
        self.combo.clear()
        if current is None:
            self.combo.addItem(self.tr("Custom"), "")
        for preset_id, name in presets:
            self.combo.addItem(name, preset_id)
        self.combo.setCurrentIndex(max(0, self.combo.findData(current)) if current is not None else 0)
        self.combo.blockSignals(False)

    def current_name(self) -> str:
        """The preset shown, "" for "Custom"."""
        return self.combo.currentText() if self.combo.currentData() else ""

    def _on_activated(self, index: int) -> None:
        preset_id = self.combo.itemData(index)
        if preset_id:
            self.chosen.emit(preset_id)
