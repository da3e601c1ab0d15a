"""Settings ▸ Voice: the voice answers are read aloud with, its rate and pitch, reading answers as
they stream, and Test voice; and what dictation (the voice conversation and recordings attached too)
hears with: the speech model, among those installed, and the language spoken, automatic or chosen
among those the model understands. A change is saved at once (as the other settings pages do) and
applies to the next sentence said, the next dictation, the next recording attached."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.voice.read_aloud import ReadAloud
from ember_chat.app.voice.speech_choice import SpeechChoice, languages_of

STEPS = 10  # a slider's steps each side of normal (the engine's -1…1 in tenths)
WIDE = 420  # the widest the voice list and the sliders get


class VoicePage(QWidget):
    def __init__(self, read_aloud: ReadAloud) -> None:
        super().__init__()
        self.read_aloud = read_aloud
        settings = read_aloud.ctx.settings

        self.streaming = QCheckBox(self.tr("Read answers aloud as they stream"))
        self.streaming.setToolTip(
            self.tr("Each sentence is read as soon as it is written; code blocks are announced, not read")
        )
        self.streaming.setChecked(settings.read_aloud_streaming)
        self.streaming.toggled.connect(lambda on: self._save(read_aloud_streaming=on))

        self.voice = QComboBox()
        self.voice.setAccessibleName(self.tr("Voice"))
        self.voice.setToolTip(self.tr("The system's voices (speech-dispatcher on Linux)"))
        self.voice.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.voice.setMinimumContentsLength(24)
        self.voice.setMaximumWidth(WIDE)
        self.voice.addItem(self.tr("The system's language"), "")
        self.voice.currentIndexChanged.connect(lambda _i: self._save(read_aloud_voice=self.voice.currentData()))

        self.rate, self.rate_value = self._slider(self.tr("Speed"), settings.read_aloud_rate, "read_aloud_rate")
        self.pitch, self.pitch_value = self._slider(self.tr("Pitch"), settings.read_aloud_pitch, "read_aloud_pitch")

        self.test = QPushButton(self.tr("Test voice"))
        self.test.setToolTip(self.tr("Say a sentence with this voice, speed and pitch"))
        self.test.clicked.connect(read_aloud.test_voice)
        self.engine = QLabel()
        self.engine.setWordWrap(True)
        self.engine.setAccessibleName(self.tr("Speech engine"))
        test_row = QHBoxLayout()
        test_row.addWidget(self.test)
        test_row.addStretch(1)

        reading = QGroupBox(self.tr("Read aloud"))
        form = QFormLayout(reading)
        form.addRow("", self.streaming)
        form.addRow(self.tr("Voice"), self.voice)
        form.addRow(self.tr("Speed"), self._with_value(self.rate, self.rate_value))
        form.addRow(self.tr("Pitch"), self._with_value(self.pitch, self.pitch_value))
        form.addRow("", test_row)
        form.addRow(self.tr("Engine"), self.engine)
        page = QVBoxLayout(self)
        page.addWidget(reading)
        page.addWidget(self._dictation_group())
        page.addStretch(1)
        read_aloud.speaker.engine_made.connect(self.refresh)  # (the voices come with the engine)
        self.refresh()

    def _dictation_group(self) -> QGroupBox:
        """The speech model (the installed ones) and the language of dictation."""
        self.choice = SpeechChoice(self.read_aloud.ctx)
        settings = self.read_aloud.ctx.settings
        self.speech_model = QComboBox()
        self.speech_model.setAccessibleName(self.tr("Speech model"))
        self.speech_model.setToolTip(
            self.tr("Whisper models installed: the shipped tiny.en, and those downloaded in Models ▸ Model Manager")
        )
        self.speech_model.setMaximumWidth(WIDE)
        installed = self.choice.installed()
        names = [m.name for m in installed]
        for model in installed:
            self.speech_model.addItem(f"{model.name} — {model.about}", model.name)
        if settings.dictation_model not in names:  # (chosen, then deleted: shown as it is, not silently swapped)
            label = self.tr("{name} — not installed").format(name=settings.dictation_model)
            self.speech_model.addItem(label, settings.dictation_model)
        self.speech_model.setCurrentIndex(max(0, self.speech_model.findData(settings.dictation_model)))
        self.speech_model.currentIndexChanged.connect(self._model_chosen)

        self.language = QComboBox()
        self.language.setAccessibleName(self.tr("Language spoken"))
        self.language.setMaximumWidth(WIDE)
        self.language_note = QLabel()
        self.language_note.setWordWrap(True)
        self._fill_languages(settings.dictation_model, settings.dictation_language)
        self.language.currentIndexChanged.connect(
            lambda _i: self._save(dictation_language=self.language.currentData() or "")
        )

        box = QGroupBox(self.tr("Dictation"))
        box.setToolTip(self.tr("Dictation, the voice conversation and recordings attached"))
        form = QFormLayout(box)
        form.addRow(self.tr("Speech model"), self.speech_model)
        form.addRow(self.tr("Language"), self.language)
        form.addRow("", self.language_note)
        return box

    def _fill_languages(self, model: str, chosen: str) -> None:
        """Automatic and the languages `model` understands (an English-only model: Automatic, which hears
        English there too, and English)."""
        languages = languages_of(model)
        self.language.blockSignals(True)  # (filling the list is not the user choosing)
        self.language.clear()
        self.language.addItem(self.tr("Automatic (detected)"), "")
        for code, name in languages:
            self.language.addItem(f"{name} ({code})", code)
        self.language.setCurrentIndex(max(0, self.language.findData(chosen)))
        self.language.blockSignals(False)
        english_only = [code for code, _ in languages] == ["en"]
        self.language.setToolTip(
            self.tr("The language you speak; Automatic lets the model detect it from the first seconds")
        )
        self.language_note.setText(
            self.tr("{model} understands English only: for another language, download a multilingual model "
                    "(base, small, large-v3-turbo) in Models ▸ Model Manager ▸ Speech.").format(model=model)
            if english_only
            else ""
        )  # fmt: skip
        self.language_note.setVisible(english_only)

    def _model_chosen(self, _index: int) -> None:
        model = self.speech_model.currentData()
        language = self.language.currentData() or ""
        if language and language not in [code for code, _ in languages_of(model)]:
            language = ""  # (a language the new model does not understand: automatic)
        self._save(dictation_model=model, dictation_language=language)
        self._fill_languages(model, language)

    def _slider(self, name: str, value: float, key: str) -> tuple[QSlider, QLabel]:
        """A -1…1 slider in tenths and the label that shows its value (a slider alone shows none)."""
        slider = QSlider(Qt.Orientation.Horizontal)
        slider.setRange(-STEPS, STEPS)
        slider.setValue(round(value * STEPS))
        slider.setPageStep(2)
        slider.setTickPosition(QSlider.TickPosition.TicksBelow)
        slider.setMaximumWidth(WIDE)  # (a slider across a wide window is hard to read)
        slider.setAccessibleName(name)
        slider.setToolTip(self.tr("Middle: the voice's own; left lower, right higher"))
        shown = QLabel()
        shown.setAccessibleName(self.tr("{name} value").format(name=name))
        shown.setMinimumWidth(shown.fontMetrics().horizontalAdvance("−0.0 (normal)"))

        def show(step: int) -> None:
            shown.setText(self.tr("0 (normal)") if step == 0 else f"{'+' if step > 0 else '−'}{abs(step) / STEPS:.1f}")

        show(slider.value())
        slider.valueChanged.connect(show)
        slider.valueChanged.connect(lambda v: self._save(**{key: v / STEPS}))
        return slider, shown

    @staticmethod
    def _with_value(slider: QSlider, shown: QLabel) -> QWidget:
        row = QWidget()
        layout = QHBoxLayout(row)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(slider, 1)
        layout.addWidget(shown)
        return row

    def _save(self, **changes: object) -> None:
        ctx = self.read_aloud.ctx
        ctx.save_settings(ctx.settings.with_changes(**changes))
        self.read_aloud.apply_settings()

    def refresh(self) -> None:
        """The engine and its voices (the first call makes the engine, on its thread: until it is made,
        the list has only "The system's language" and the engine says it is starting)."""
        speaker = self.read_aloud.speaker
        voices = speaker.voices()
        if voices and self.voice.count() == 1:
            self.voice.blockSignals(True)  # (filling the list is not the user choosing)
            for name in voices:
                self.voice.addItem(name, name)
            self.voice.setCurrentIndex(max(0, self.voice.findData(self.read_aloud.ctx.settings.read_aloud_voice)))
            self.voice.blockSignals(False)
        name = speaker.engine_name
        if name is None and speaker.making:
            self.engine.setText(self.tr("Starting…"))
        else:
            self.engine.setText(name or self.tr("None: answers cannot be read aloud (see the message above)"))
        self.test.setEnabled(name is not None)
