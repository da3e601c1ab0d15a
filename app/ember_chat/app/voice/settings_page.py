"""Settings ▸ Voice: the voice answers are read aloud with, its rate and pitch, reading answers as
they stream, and Test voice. A change is saved at once (as the other settings pages do) and applies
to the next sentence said."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QComboBox, QFormLayout, QHBoxLayout, QLabel, QPushButton, QSlider, QWidget

from ember_chat.app.voice.read_aloud import ReadAloud

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

        self.rate = self._slider(self.tr("Speed"), settings.read_aloud_rate, "read_aloud_rate")
        self.pitch = self._slider(self.tr("Pitch"), settings.read_aloud_pitch, "read_aloud_pitch")

        self.test = QPushButton(self.tr("Test voice"))
        self.test.setToolTip(self.tr("Say a sentence with this voice, speed and pitch"))
        self.test.clicked.connect(read_aloud.test_voice)
        self.engine = QLabel()
        self.engine.setWordWrap(True)
        self.engine.setAccessibleName(self.tr("Speech engine"))
        test_row = QHBoxLayout()
        test_row.addWidget(self.test)
        test_row.addStretch(1)

        form = QFormLayout(self)
        form.addRow("", self.streaming)
        form.addRow(self.tr("Voice"), self.voice)
        form.addRow(self.tr("Speed"), self.rate)
        form.addRow(self.tr("Pitch"), self.pitch)
        form.addRow("", test_row)
        form.addRow(self.tr("Engine"), self.engine)
        read_aloud.speaker.engine_made.connect(self.refresh)  # (the voices come with the engine)
        self.refresh()

    def _slider(self, name: str, value: float, key: str) -> QSlider:
        slider = QSlider(Qt.Orientation.Horizontal)
        slider.setRange(-STEPS, STEPS)
        slider.setValue(round(value * STEPS))
        slider.setPageStep(2)
        slider.setTickPosition(QSlider.TickPosition.TicksBelow)
        slider.setMaximumWidth(WIDE)  # (a slider across a wide window is hard to read)
        slider.setAccessibleName(name)
        slider.setToolTip(self.tr("Middle: the voice's own; left lower, right higher"))
        slider.valueChanged.connect(lambda v: self._save(**{key: v / STEPS}))
        return slider

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
