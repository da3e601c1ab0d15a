"""The bar above the transcript: model picker (local and remote models), load progress, model
status, unload, backend badge."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QProgressBar, QPushButton, QToolButton, QWidget

from ember_chat.app.engine_link.model_names import model_choices
from ember_chat.app.engine_link.wording import window_wording
from ember_chat.app.models.manager.tables import human_size
from ember_chat.app.qt.elided_label import ElidedLabel
from ember_chat.engine.core.states import ModelState
from ember_chat.engine.inference.backend import ModelDescription
from ember_chat.engine.models.library import ModelEntry
from ember_chat.engine.storage.connections import Connection


class ModelBar(QWidget):
    loading_shown = Signal(str)  # "Loading NAME (SIZE)…": shown for the model loading (and again when listed)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("modelBar")
        self._sizes: dict[str, int] = {}  # file sizes of the local models listed
        self._loading: str | None = None  # the model loading, while one is
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 6, 10, 6)
        label = QLabel(self.tr("Model"))
        row.addWidget(label)
        self.picker = QComboBox()
        label.setBuddy(self.picker)
        self.picker.setAccessibleName(self.tr("Model picker"))
        self.picker.setToolTip(self.tr("The model to chat with: local models first, then remote connections"))
        self.picker.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.picker.setMinimumContentsLength(12)
        narrowest = self.picker.minimumSizeHint().width()  # 12 characters: how narrow it gets
        self.picker.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)  # its names, given the room
        self.picker.setMinimumWidth(narrowest)
        self.picker.setMaximumWidth(narrowest * 3)
        row.addWidget(self.picker)
        self.tune = QToolButton()
        self.tune.setAutoRaise(True)
        self.tune.setAccessibleName(self.tr("Load settings"))
        self.tune.setToolTip(
            self.tr("This model's load settings: context, GPU layers, threads, batch, flash attention, KV cache")
        )
        row.addWidget(self.tune)
        self.progress = QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.setMaximumWidth(120)
        self.progress.setMinimumWidth(60)
        self.progress.setAccessibleName(self.tr("Model load progress"))
        self.progress.hide()  # only while a model loads
        row.addWidget(self.progress)
        self.status = ElidedLabel()  # long model names and details shorten with "…" (all of it in the tooltip)
        self.status.setAccessibleName(self.tr("Model status"))
        row.addWidget(self.status)
        self.unload = QPushButton(self.tr("Unload"))
        self.unload.setAccessibleName(self.tr("Unload model"))
        self.unload.setToolTip(self.tr("Unload the model and free its memory"))
        row.addWidget(self.unload)
        self.unload.setMinimumWidth(  # "Unload" and "Cancel" take the same room
            max(QPushButton(text).sizeHint().width() for text in (self.tr("Unload"), self.tr("Cancel")))
        )
        row.addStretch(1)
        # the models the local API server loaded for requests (its own, beside the window's): shown while there are
        self.api_models = QToolButton()
        self.api_models.setObjectName("apiModels")
        self.api_models.setAutoRaise(True)
        self.api_models.setAccessibleName(self.tr("Models loaded by the API"))
        self.api_models.setAccessibleDescription(
            self.tr("How many models the local API server loaded for requests; opens them in the Model Manager")
        )
        self.api_models.hide()
        row.addWidget(self.api_models)
        self.badge = ElidedLabel(
            description=self.tr("Where the model runs: backend, CPU threads and GPU layers, or the remote connection")
        )
        self.badge.setObjectName("backendBadge")
        self.badge.setAccessibleName(self.tr("Backend"))
        row.addWidget(self.badge)

    def show_api_models(self, names: list[str]) -> None:
        """ "API: 2 models" (its tooltip: "API: 2 models loaded…", naming them): the models the local API
        server loaded for requests; hidden while there are none. Short: the bar's room goes to the model's
        status and badge first."""
        n = len(names)
        self.api_models.setText(self.tr("API: %n model", "", n) if n == 1 else self.tr("API: %n models", "", n))
        loaded = self.tr("API: %n model loaded", "", n) if n == 1 else self.tr("API: %n models loaded", "", n)
        self.api_models.setToolTip(
            self.tr("{loaded} by the local API server for requests: {models}. Click to see them in the Model Manager")
            .format(loaded=loaded, models=", ".join(names))
        )  # fmt: skip
        self.api_models.setVisible(n > 0)

    def minimumSizeHint(self) -> QSize:  # Qt override
        """As narrow as it gets while a model loads too (the progress bar shown): the window's minimum
        size does not change when a load starts, so the window never grows for it."""
        hint = super().minimumSizeHint()
        if self.progress.isHidden():
            hint.setWidth(hint.width() + self.progress.minimumWidth() + self.layout().spacing())
        return hint

    def set_models(
        self,
        entries: list[ModelEntry],
        connections: list[Connection] | None = None,
        no_projector: frozenset[str] | set[str] = frozenset(),
    ) -> None:
        """`no_projector`: the names of vision models without their projector file (they are said so)."""
        current = self.picker.currentData()
        sizes = self._sizes = {e.name: e.size for e in entries}
        seeing = {e.name: e.mmproj.name for e in entries if e.mmproj is not None}
        self.picker.clear()
        self.picker.addItem(self.tr("Choose a model…"), None)
        for label, name in model_choices(entries, connections or []):
            tip = f"{sizes[name] / 1e6:,.0f} MB" if name in sizes else self.tr("Served by a remote server")
            if name in seeing:
                label = self.tr("{model} · vision").format(model=label)
                tip += " · " + self.tr("sees images (projector {file})").format(file=seeing[name])
            elif name in no_projector:
                label = self.tr("{model} · vision needs the projector file").format(model=label)
                tip += " · " + self.tr(
                    "a vision model: put its mmproj-….gguf file beside it (or download it with the model in the "
                    "Model Manager) to let it see images"
                )
            self.picker.addItem(label, name)
            self.picker.setItemData(self.picker.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)
        self.picker.setCurrentIndex(max(0, self.picker.findData(current)))
        if self._loading is not None:  # listed after the load began: its label and size are known now
            self._show_loading(self._loading)

    def choices(self) -> list[tuple[str, str]]:
        """(label, name) of every model the picker offers, in its order."""
        picker = self.picker
        return [(picker.itemText(i), picker.itemData(i)) for i in range(picker.count()) if picker.itemData(i)]

    def loading_text(self, name: str) -> str:
        """ "Loading NAME (SIZE)…": the model as the picker names it, with its file size when known."""
        if not name:
            return self.tr("Loading…")
        index = self.picker.findData(name)
        label = self.picker.itemText(index) if index > 0 else name
        if name in self._sizes:
            size = human_size(self._sizes[name]).replace(" ", "\u00a0")  # one line: "456.0 KB"
            return self.tr("Loading {model} ({size})…").format(model=label, size=size)
        return self.tr("Loading {model}…").format(model=label)

    def _show_loading(self, name: str) -> None:
        self.status.setText(self.loading_text(name))
        self.loading_shown.emit(self.loading_text(name))
        index = self.picker.findData(name)
        if index > 0:
            self.picker.setCurrentIndex(index)  # (not a pick: picks are `activated`)

    def show_state(self, state: ModelState, model: ModelDescription | None, loading: str | None = None) -> None:
        """`loading`: the name of the model loading (LOADING)."""
        self.progress.setVisible(state is ModelState.LOADING)
        self._loading = loading if state is ModelState.LOADING else None
        if state is ModelState.LOADING:
            self.progress.setValue(0)
            self._show_loading(loading or "")
            self.unload.setText(self.tr("Cancel"))
            self.unload.setAccessibleName(self.tr("Cancel loading"))
            self.unload.setToolTip(self.tr("Stop loading the model"))
            self.unload.setEnabled(True)
        elif state is ModelState.READY and model is not None:
            self.status.setText(model.status(window_wording()))
            self.unload.setText(self.tr("Unload"))
            self.unload.setAccessibleName(self.tr("Unload model"))
            self.unload.setToolTip(self.tr("Unload the model and free its memory"))
            self.unload.setEnabled(True)
        else:
            self.status.setText(self.tr("No model loaded"))
            self.unload.setText(self.tr("Unload"))
            self.unload.setAccessibleName(self.tr("Unload model"))
            self.unload.setToolTip(self.tr("Unload the model and free its memory"))
            self.unload.setEnabled(False)
            self.picker.setCurrentIndex(0)
        self.badge.setText(model.badge(window_wording()) if model is not None else self.tr("No model"))
