"""The Serving tab's knob sweep box: a check box, and under it (shown while checked) a check box per load
setting with the values to try (bench/serving/knobs.py loads the model loaded for chat with each
combination). A check box, not a checkable group box: a group box drew an empty frame under its title
while unchecked."""

from __future__ import annotations

from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QCheckBox, QGridLayout, QLabel, QLineEdit, QStyle, QVBoxLayout, QWidget

from ember_chat.engine.bench.serving.knobs import SPECULATIVE, Knob, parse_knob
from ember_chat.engine.core.params import SPECS
from ember_chat.engine.errors import EmberError

# The load settings a knob sweep can vary (knobs.py takes any of LOAD_SPECS; these change serving) and the
# values offered at first.
# (speculative: the temporary server's default speculative decoding, a chat's setting: not saved with the winner)
SWEEP_KNOBS = {"parallel": "1,2,4", "n_ctx": "2048,4096", "threads": "1,2", "threads_batch": "1,2",
               "n_batch": "256,512", "flash_attn": "on,off", "kv_cache_type": "f16,q8_0",
               SPECULATIVE: "off,auto,ngram"}  # fmt: skip


class KnobSweepBox(QWidget):
    """The knob sweep's check box (`box`) and the area holding it and its choices (`choices`: a check box
    per load setting, `checks`, and its values, `values`, shown when the sweep is checked)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.box = QCheckBox(self.tr("Knob sweep: load the model with each setting in turn"))
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.box)
        inner = QWidget()
        grid = QGridLayout(inner)
        indent = self.style().pixelMetric(QStyle.PixelMetric.PM_IndicatorWidth) + 6  # (under the box's words)
        grid.setContentsMargins(indent, 0, 0, 0)
        self.box.toggled.connect(inner.setEnabled)  # (unchecked, or disabled with the check box: not editable)
        self.choices = inner
        self.checks: dict[str, QCheckBox] = {}
        self.values: dict[str, QLineEdit] = {}
        for i, (name, values) in enumerate(SWEEP_KNOBS.items()):
            if name == SPECULATIVE:  # (not a load setting: the server's, for requests that do not name one)
                check = QCheckBox(self.tr("Speculative decoding"))
                check.setToolTip(
                    self.tr(
                        "The server's speculative decoding: off, auto, ngram, or draft (with the model's draft "
                        "model). A chat's setting, not the model's: the winner's is said, not saved"
                    )
                )
            else:
                check = QCheckBox(SPECS[name].label)  # (the ⚙ dialog's words for it)
                check.setToolTip(SPECS[name].description)
            edit = QLineEdit(values)
            edit.setAccessibleName(self.tr("{knob} values").format(knob=check.text()))
            edit.setToolTip(self.tr("The values to try, comma-separated"))
            edit.setEnabled(False)
            check.toggled.connect(edit.setEnabled)
            grid.addWidget(check, i // 4, (i % 4) * 2)
            grid.addWidget(edit, i // 4, (i % 4) * 2 + 1)
            self.checks[name], self.values[name] = check, edit
        self.note = QLabel(
            self.tr(
                "Every combination runs, each loading the model in an engine of its own on 127.0.0.1 (its file "
                "mapped once, shared); the chat model stays loaded."
            )
        )
        self.note.setWordWrap(True)
        self.note.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        grid.addWidget(self.note, 2, 0, 1, 8)
        column.addWidget(inner)
        inner.setVisible(False)
        self.box.toggled.connect(inner.setVisible)

    def allow(self, why: str) -> None:
        """The sweep offered (`why` empty) or not, and why not (said in the check box's tooltip)."""
        self.box.setEnabled(not why)
        self.choices.setEnabled(not why and self.box.isChecked())
        self.box.setToolTip(
            why
            or self.tr(
                "Load the model with each combination of the checked settings, run the same loads on each, and "
                "name the Pareto front (goodput and tokens/s up, TTFT p95 down) and the winner"
            )
        )

    def knobs(self) -> list[Knob] | None:
        """The knob sweep asked for (None: no sweep; EmberError naming a bad value)."""
        if not (self.box.isEnabled() and self.box.isChecked()):
            return None
        said_as = self.tr("Knob sweep,")
        knobs = [parse_knob(f"{name}={self.values[name].text()}", said_as)
                 for name, check in self.checks.items() if check.isChecked()]  # fmt: skip
        if not knobs:
            raise EmberError(self.tr("Check at least one load setting to sweep, or uncheck the knob sweep."))
        return knobs
