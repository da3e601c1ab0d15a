"""The bar above the transcript: model picker, load progress, model status, unload, backend badge."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

from engine.models.gguf_inspect import ModelInfo
from engine.models.library import ModelEntry


class ModelBar(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("modelBar")
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 6, 10, 6)
        row.addWidget(QLabel("Model"))
        self.picker = QComboBox()
        self.picker.setAccessibleName("Model picker")
        self.picker.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.picker.setMinimumContentsLength(22)
        row.addWidget(self.picker)
        self.progress = QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.setMaximumWidth(120)
        self.progress.setAccessibleName("Model load progress")
        row.addWidget(self.progress)
        self.status = QLabel()
        self.status.setAccessibleName("Model status")
        row.addWidget(self.status)
        self.unload = QPushButton("Unload")
        self.unload.setAccessibleName("Unload model")
        row.addWidget(self.unload)
        row.addStretch(1)
        self.badge = QLabel()
        self.badge.setObjectName("backendBadge")
        self.badge.setAccessibleName("Backend")
        self.badge.setToolTip("Inference backend, CPU threads and layers offloaded to the GPU")
        row.addWidget(self.badge)

    def set_models(self, entries: list[ModelEntry]) -> None:
        current = self.picker.currentData()
        self.picker.clear()
        self.picker.addItem("Choose a model…", None)
        for e in entries:
            self.picker.addItem("Gemma 3 270M (starter)" if e.is_starter else e.name, e.name)
            self.picker.setItemData(self.picker.count() - 1, f"{e.size / 1e6:,.0f} MB", Qt.ItemDataRole.ToolTipRole)
        self.picker.setCurrentIndex(max(0, self.picker.findData(current)))

    def show_state(self, state: str, info: ModelInfo | None, backend: str, threads: int, gpu_layers: int) -> None:
        self.progress.setVisible(state == "loading")
        if state == "loading":
            self.progress.setValue(0)
            self.status.setText("Loading…")
            self.unload.setText("Cancel")
            self.unload.setEnabled(True)
        elif state == "ready" and info is not None:
            self.status.setText(f"{info.quantization} · {info.parameter_count / 1e6:,.0f}M params")
            self.unload.setText("Unload")
            self.unload.setEnabled(True)
        else:
            self.status.setText("No model loaded")
            self.unload.setText("Unload")
            self.unload.setEnabled(False)
            self.picker.setCurrentIndex(0)
        self.badge.setText(f"{backend} · {threads} threads · {gpu_layers} GPU layers")
