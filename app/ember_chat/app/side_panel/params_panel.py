"""The Parameters tab of the side panel: the preset picker, the system prompt and the sampling
parameters of the chat shown (saved per conversation), each spin box made from the parameter table."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QPlainTextEdit,
    QSpinBox,
    QWidget,
)

from ember_chat.app.side_panel.json_answer import JsonAnswerBox
from ember_chat.app.side_panel.preset_picker import PresetPicker
from ember_chat.engine.core.params import SPECS, SPECULATIVE_MODES, SamplingParams


def param_spin(name: str) -> QSpinBox | QDoubleSpinBox:
    """A spin box for a sampling parameter whose range, step, name and tooltip come from the parameter
    table (an optional one goes one below its minimum: "none"; the caller names that value)."""
    spec = SPECS[name]
    w: QSpinBox | QDoubleSpinBox
    if spec.kind is float:
        w = QDoubleSpinBox()
        w.setDecimals(2)
    else:
        w = QSpinBox()
    w.setRange(spec.low - 1 if spec.optional else spec.low, spec.high)  # type: ignore[arg-type]
    w.setSingleStep(spec.step)  # type: ignore[arg-type]
    w.setAccessibleName(spec.label)
    w.setToolTip(spec.description)
    return w


class ParamsPanel(QWidget):
    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        form = QFormLayout(self)
        self.preset_picker = PresetPicker()  # (filled and acted on by the window's presets: presets/actions.py)
        form.addRow(self.preset_picker)
        self.system_prompt = QPlainTextEdit()
        self.system_prompt.setPlaceholderText(self.tr("e.g. You are a concise assistant."))
        self.system_prompt.setAccessibleName(self.tr("System prompt"))
        self.system_prompt.setAccessibleDescription(
            self.tr("Instructions sent before every message of this chat; saved with the chat")
        )
        self.system_prompt.setMaximumHeight(110)
        form.addRow(QLabel(self.tr("System prompt")))
        form.addRow(self.system_prompt)

        def spin(name: str) -> QSpinBox | QDoubleSpinBox:
            w = param_spin(name)
            w.valueChanged.connect(self.changed)
            form.addRow(SPECS[name].label, w)
            return w

        self.temperature = spin("temperature")
        self.top_k = spin("top_k")
        self.top_p = spin("top_p")
        self.min_p = spin("min_p")
        self.repeat_penalty = spin("repeat_penalty")
        self.max_tokens = spin("max_tokens")
        self.seed = spin("seed")
        self.seed.setSpecialValueText(self.tr("random"))  # one below the minimum: no seed
        self.speculative = QComboBox()
        # (the item's data: SamplingParams.speculative's value)
        texts = (
            self.tr("Off"),
            self.tr("Auto (when it pays)"),
            self.tr("N-gram (copies from the conversation)"),
            self.tr("Draft model (loaded with the model)"),
        )
        for mode, text in zip(SPECULATIVE_MODES, texts, strict=True):
            self.speculative.addItem(text, mode)
        tip = self.tr(
            "N-gram: drafts the next tokens from text already in the conversation and lets the model check "
            "several at once. For greedy decoding (temperature 0, no penalties): the answer is identical, "
            "only faster when it repeats text from the conversation (an edited file, a quoted passage). "
            "Draft model: a smaller model of the same family, loaded with the model (--draft-model), drafts "
            "instead (n-grams without one). Auto does so (with the draft model when one is loaded) and stops for "
            "an answer where the drafts cost more than they save. Saved with the chat."
        )
        # (as wide as a short choice: the longest would widen the whole side panel on a narrow window)
        self.speculative.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.speculative.setMinimumContentsLength(8)
        self.speculative.setToolTip(tip)
        self.speculative.setAccessibleName(self.tr("Speculative decoding"))
        self.speculative.setAccessibleDescription(tip)
        self.speculative.currentIndexChanged.connect(self.changed)
        # (its label above it, as the system prompt's: beside it, the long label widened the panel)
        label = QLabel(self.tr("Speculative decoding"))
        label.setBuddy(self.speculative)
        form.addRow(label)
        form.addRow(self.speculative)
        self.context = spin("n_ctx")
        self.context_note = QLabel()  # while the loaded model runs with another context
        self.context_note.setWordWrap(True)
        self.context_note.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.context_note.setAccessibleName(self.tr("Context length note"))
        self.context_note.hide()
        form.addRow(self.context_note)
        self._loaded_context: int | None = None
        self.context.valueChanged.connect(lambda _v: self._show_context_note())
        self.think = QCheckBox(self.tr("Think before answering"))
        self.think.setAccessibleName(self.tr("Think before answering"))
        # The chat's wish (saved with it): shown while the loaded model can think; a greyed box is
        # always unticked, or it reads as "on" for a model that cannot think (its tooltip says why).
        self._thinking_wanted = True
        self.think.toggled.connect(self._think_toggled)
        self.set_thinking_switch(False, self.tr("No model is loaded."))
        form.addRow(self.think)
        self.json_answer = JsonAnswerBox()
        self.json_answer.changed.connect(self.changed)
        form.addRow(self.json_answer)
        self.system_prompt.textChanged.connect(self.changed)
        self.set_params(SamplingParams(), "", 4096)

    def set_params(self, p: SamplingParams, system_prompt: str, context: int) -> None:
        widgets = (self.temperature, self.top_k, self.top_p, self.min_p, self.repeat_penalty)
        for w in (*widgets, self.max_tokens, self.seed, self.speculative, self.context, self.system_prompt, self.think):
            w.blockSignals(True)
        self.temperature.setValue(p.temperature)
        self.top_k.setValue(p.top_k)
        self.top_p.setValue(p.top_p)
        self.min_p.setValue(p.min_p)
        self.repeat_penalty.setValue(p.repeat_penalty)
        self.max_tokens.setValue(p.max_tokens)
        self.seed.setValue(-1 if p.seed is None else p.seed)
        self.speculative.setCurrentIndex(SPECULATIVE_MODES.index(p.speculative))
        self.context.setValue(context)
        self._thinking_wanted = p.thinking is not False
        self.think.setChecked(self._thinking_wanted and self.think.isEnabled())
        self.system_prompt.setPlainText(system_prompt)
        self.json_answer.set_format(p.response_format)
        for w in (*widgets, self.max_tokens, self.seed, self.speculative, self.context, self.system_prompt, self.think):
            w.blockSignals(False)
        self._show_context_note()

    def params(self) -> SamplingParams:
        return SamplingParams(
            temperature=round(self.temperature.value(), 2),
            top_k=self.top_k.value(),
            top_p=round(self.top_p.value(), 2),
            min_p=round(self.min_p.value(), 2),
            repeat_penalty=round(self.repeat_penalty.value(), 2),
            max_tokens=self.max_tokens.value(),
            seed=None if self.seed.value() < 0 else self.seed.value(),
            thinking=self._thinking_wanted if self.think.isEnabled() else None,
            response_format=self.json_answer.response_format(),
            speculative=self.speculative.currentData(),
        )

    def show_loaded_context(self, n_ctx: int | None) -> None:
        """The context the loaded local model runs with (None: none loaded, or a remote one)."""
        self._loaded_context = n_ctx
        self._show_context_note()

    def _show_context_note(self) -> None:
        loaded = self._loaded_context
        differs = loaded is not None and loaded != self.context.value()
        if differs:
            self.context_note.setText(
                self.tr(
                    "The model runs with {n} tokens of context: this value applies at the next load "
                    "(a model's own load settings, ⚙, come first)."
                ).format(n=f"{loaded:,}")
            )
        self.context_note.setVisible(differs)

    def set_thinking_switch(self, available: bool, why_not: str = "") -> None:
        """The loaded model's template can (or cannot) turn its thinking on and off; `why_not`: the
        tooltip's reason when it cannot (the default: the model's template has no switch)."""
        self.think.setEnabled(available)
        self.think.blockSignals(True)  # (what is shown follows the model: the chat's wish is unchanged)
        self.think.setChecked(available and self._thinking_wanted)
        self.think.blockSignals(False)
        if available:
            tip = self.tr("The model thinks (reasons step by step) before it answers; saved per chat")
        else:
            tip = why_not or self.tr(
                "Off: the loaded model cannot think on request (its chat template has no thinking switch, "
                "as Qwen3's has)."
            )
        self.think.setToolTip(tip)
        self.think.setAccessibleDescription(tip)

    def _think_toggled(self, on: bool) -> None:
        if self.think.isEnabled():  # (only a user's click on an enabled box changes the chat's wish)
            self._thinking_wanted = on
        self.changed.emit()

    def to_dict(self) -> dict[str, Any]:
        return {**self.params().to_dict(), "context_length": self.context.value()}
