"""Voice conversation (issue 33): Ember listens, sends when the user stops speaking, reads the answer
aloud sentence by sentence as it streams, and listens again; speaking while it reads interrupts it
(barge-in); Esc or the toggle ends the mode. The transcript is an ordinary chat: what was said is sent
as the user's message in the chat shown, and the answer is an ordinary answer.

Built from the parts that exist: the words are the dictation's (voice/dictation.py: recognised on its
worker, never on the GUI thread, put in the message box), sending is the box's own (Enter), reading is
read-aloud's streaming path (voice/read_aloud.py, told to read every answer while the mode is on).

The turn ends by the sound's energy, not the recogniser's text: a buffer whose RMS is over
max(MIN_SPEECH_RMS, NOISE_RATIO x the noise floor) is speech (the floor follows the quieter buffers);
after at least SPEECH_MIN_S of speech, END_SILENCE_S (1.0 s) of no speech ends the turn. The energy is
there every 0.1-0.2 s, at once, where the settled text lags a recognition pass (1 s) behind. The
microphone stays open while Ember thinks and reads, to hear a barge-in: BARGE_IN_S (0.3 s) of speech
stops the reading at once and, while the answer still streams, stops it too, as Stop does (the part
streamed is kept as a stopped answer): the user has moved on, and an answer nobody listens to would only
hold the model. The last PREROLL_S of sound is handed to the dictation then, so the first words of the
interruption are not lost. Without headphones, a loud speaker heard by the microphone reads as speech:
the system's echo cancellation (PipeWire's echo-cancel module, Windows' and macOS's own) is what keeps
Ember from interrupting itself."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from enum import Enum

import numpy as np
from PySide6.QtCore import QObject, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QLabel, QMenu, QToolButton

from ember_chat.app.style.icons import themed_icon
from ember_chat.app.style.theme import Colors
from ember_chat.app.voice.dictation import DictationControl
from ember_chat.app.voice.microphone import Microphone
from ember_chat.app.voice.read_aloud import ReadAloud
from ember_chat.engine.speech import SAMPLE_RATE

SHORTCUT = QKeySequence("Ctrl+Shift+V")
MIN_SPEECH_RMS = 0.02  # quieter than this is never speech (a quiet room's floor is ~0.001-0.005)
NOISE_RATIO = 3.0  # speech is this many times louder than the noise floor
SPEECH_MIN_S = 0.3  # heard this much speech before a silence can end the turn (a cough is not a turn)
END_SILENCE_S = 1.0  # this long without speech after speech: the user has stopped, the message goes
BARGE_IN_S = 0.3  # speech this long while Ember thinks or reads interrupts it
GAP_S = 0.2  # a pause this short between words does not break a barge-in's run of speech
PREROLL_S = 1.0  # sound kept while Ember reads, handed to the dictation at a barge-in
POLL_MS = 50  # how often the dictation's last pass is looked at, once the turn has ended


class State(Enum):
    OFF = "off"
    LISTENING = "listening"
    THINKING = "thinking"  # the last words recognised, the message sent, the answer not read yet
    SPEAKING = "speaking"


class EnergyGate:
    """Speech or not, buffer by buffer, by loudness over a noise floor that follows the quiet buffers."""

    def __init__(self) -> None:
        self.floor = 0.0
        self.speech_s = 0.0  # speech heard since reset
        self.silence_s = 0.0  # no speech since the last speech
        self.run_s = 0.0  # the current run of speech (pauses under GAP_S kept in it)

    def reset(self) -> None:
        self.speech_s = self.silence_s = self.run_s = 0.0

    def feed(self, samples: np.ndarray) -> bool:
        """Whether this buffer is speech (16 kHz mono float32)."""
        if samples.size == 0:
            return False
        seconds = samples.size / SAMPLE_RATE
        rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64))))
        speech = rms > max(MIN_SPEECH_RMS, NOISE_RATIO * self.floor)
        if speech:
            self.speech_s += seconds
            self.run_s += seconds
            self.silence_s = 0.0
        else:
            self.floor = rms if self.floor == 0.0 else 0.95 * self.floor + 0.05 * rms
            self.silence_s += seconds
            if self.silence_s >= GAP_S:
                self.run_s = 0.0
        return speech


class VoiceConversation(QObject):
    """The mode: its toggle button (beside the microphone), its menu entry, the indicator line under the
    box. `submit`: sends what the box holds (the composer's Enter); `generating`: whether an answer
    streams; `stop_answer`: stops it (Stop). The shell connects the chat's generating_changed to
    on_generating (features do not import each other)."""

    state_changed = Signal(str)  # a State's value

    def __init__(
        self,
        dictation: DictationControl,
        read_aloud: ReadAloud,
        submit: Callable[[], None],
        generating: Callable[[], bool],
        stop_answer: Callable[[], None],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.dictation, self.read_aloud = dictation, read_aloud
        self._submit, self._generating, self._stop_answer = submit, generating, stop_answer
        self.state = State.OFF
        self.gate = EnergyGate()
        self._preroll: deque[np.ndarray] = deque()
        self._preroll_s = 0.0
        self._watched: Microphone | None = None  # the microphone whose samples the gate hears
        self.button = QToolButton()
        self.button.setCheckable(True)
        self.button.setAutoRaise(True)
        self.button.setIconSize(QSize(20, 20))
        self.button.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.button.setAccessibleName(self.tr("Voice conversation"))
        self.button.setToolTip(self.tr("Voice conversation (Ctrl+Shift+V): talk, and Ember answers aloud; Esc ends it"))
        self.button.clicked.connect(self.toggle)
        self.action: QAction | None = None
        self.indicator = QLabel()
        self.indicator.setAccessibleName(self.tr("Voice conversation state"))
        self.indicator.hide()
        self._poll = QTimer(self)  # the dictation's last pass, after the turn ended
        self._poll.setInterval(POLL_MS)
        self._poll.timeout.connect(self._check_words)
        read_aloud.reading_changed.connect(self._on_reading)

    @property
    def active(self) -> bool:
        return self.state != State.OFF

    def add_menu_entry(self, menu: QMenu) -> QAction:
        """Chat ▸ Voice conversation (checked while on)."""
        self.action = menu.addAction(self.tr("&Voice conversation"))
        self.action.setCheckable(True)
        self.action.setShortcut(SHORTCUT)
        self.action.triggered.connect(self.toggle)
        return self.action

    # ----- on and off
    def toggle(self, *_: object) -> None:
        if self.active:
            self.end()
        else:
            self.enter()

    def enter(self) -> None:
        if self.active:
            return
        self.read_aloud.stream_always = True
        self._set_state(State.LISTENING)  # (before the microphone opens: its failure ends the mode)
        self._watch()
        self._listen([])

    def end(self) -> None:
        """Ends the mode: the microphone released and the reading stopped at once; words still being
        recognised go into the box (the dictation's last pass), not sent."""
        if not self.active:
            return
        self._set_state(State.OFF)
        self._poll.stop()
        self._unwatch()
        self.read_aloud.stream_always = False
        self.read_aloud.stop()
        self.dictation.stop()  # (closes the microphone, listening or only watching for a barge-in)

    # ----- the turn
    def _listen(self, preroll: list[np.ndarray]) -> None:
        if not self.active:
            return
        if self.dictation.busy and not self.dictation.microphone.is_open:
            QTimer.singleShot(POLL_MS, lambda: self._listen(preroll))  # (a last pass still puts words in)
            return
        self.gate.reset()
        self._set_state(State.LISTENING)
        if not self.dictation.busy and not self.dictation.start():
            self.end()  # (the microphone could not open: the window's banner says why)
            return
        for samples in preroll:
            self.dictation.on_samples(samples)
            self.gate.feed(samples)

    def _on_samples(self, samples: np.ndarray) -> None:
        """Sound from the microphone (GUI thread; the dictation has it too)."""
        if self.state == State.LISTENING:
            self.gate.feed(samples)
            if self.gate.speech_s >= SPEECH_MIN_S and self.gate.silence_s >= END_SILENCE_S:
                self._turn_ended()
        elif self.state in (State.THINKING, State.SPEAKING):
            self._preroll.append(samples)
            self._preroll_s += samples.size / SAMPLE_RATE
            while self._preroll and self._preroll_s - self._preroll[0].size / SAMPLE_RATE >= PREROLL_S:
                self._preroll_s -= self._preroll.popleft().size / SAMPLE_RATE
            self.gate.feed(samples)
            if self.gate.run_s >= BARGE_IN_S:
                self._barge_in()

    def _turn_ended(self) -> None:
        self._set_state(State.THINKING)
        self._poll.start()  # (before the microphone closes: _on_opened tells this from a lost microphone)
        self.dictation.stop()  # (the microphone closes; the last pass puts in the final words)

    def _check_words(self) -> None:
        if self.dictation.busy:
            return
        self._poll.stop()
        if not self.active:
            return
        editor = self.dictation.editor
        if not editor.toPlainText().strip():
            self._listen([])  # (nothing recognised: a noise, not words)
            return
        self._submit()
        if editor.toPlainText().strip() and not self._generating():
            self.end()  # not sent (no model; the banner says why): the words stay in the box
            return
        self._monitor()

    def _monitor(self) -> None:
        """Thinking or reading: the microphone open for a barge-in, nothing recognised."""
        self.gate.reset()
        self._preroll.clear()
        self._preroll_s = 0.0
        if not self.dictation.microphone.open():
            self.end()

    def _barge_in(self) -> None:
        self.read_aloud.stop()
        if self._generating():
            self._stop_answer()  # (as Stop: the answer so far stays, as a stopped one)
        preroll = list(self._preroll)
        self._preroll.clear()
        self._preroll_s = 0.0
        self._listen(preroll)

    def _on_reading(self, message_id: object) -> None:
        if message_id is not None and self.state == State.THINKING and not self._poll.isActive():
            self._set_state(State.SPEAKING)
        elif message_id is None and self.state in (State.THINKING, State.SPEAKING):
            QTimer.singleShot(0, self._maybe_done)  # (the answer's last sentences may still come)

    def on_generating(self, on: bool) -> None:
        if not on and self.state in (State.THINKING, State.SPEAKING):
            QTimer.singleShot(0, self._maybe_done)

    def _maybe_done(self) -> None:
        """Reading ended and the answer too: listen again."""
        if (
            self.state in (State.THINKING, State.SPEAKING)
            and not self._poll.isActive()
            and not self._generating()
            and self.read_aloud.speaker.reading is None
        ):
            self._listen([])

    # ----- the microphone the gate hears (the dictation's; tests and screenshots swap it)
    def _watch(self) -> None:
        self._unwatch()
        self._watched = microphone = self.dictation.microphone
        microphone.samples.connect(self._on_samples)
        microphone.opened_changed.connect(self._on_opened)

    def _unwatch(self) -> None:
        if self._watched is not None:
            self._watched.samples.disconnect(self._on_samples)
            self._watched.opened_changed.disconnect(self._on_opened)
            self._watched = None

    def _on_opened(self, is_open: bool) -> None:
        """The microphone closed while the mode needs it (unplugged, the speech model failed, the
        microphone button clicked): the mode ends; the window's banner said why, if something failed."""
        if not is_open and self.active and not self._poll.isActive():
            self.end()

    def shutdown(self) -> None:
        """The window closes."""
        self.end()

    # ----- what shows
    def _set_state(self, state: State) -> None:
        changed, self.state = state != self.state, state
        on = state != State.OFF
        self.button.setChecked(on)
        self.button.setAccessibleName(self.tr("End voice conversation") if on else self.tr("Voice conversation"))
        if self.action is not None:
            self.action.setChecked(on)
        words = {  # (thinking and speaking: the microphone is open too, the dictation's line says so)
            State.LISTENING: self.tr("listening"),
            State.THINKING: self.tr("thinking · speak to interrupt"),
            State.SPEAKING: self.tr("speaking · speak to interrupt"),
        }
        if on:
            self.indicator.setText(self.tr("Voice conversation — {state} · Esc to end").format(state=words[state]))
        self.indicator.setVisible(on)
        if changed:
            self.state_changed.emit(state.value)

    def set_colors(self, colors: Colors) -> None:
        self.button.setIcon(themed_icon("conversation", colors))
        self.indicator.setStyleSheet(f"color: {colors.accent}; font-weight: 600; padding: 0 2px;")
        self.button.setStyleSheet(f"QToolButton:checked {{ border: 2px solid {colors.accent}; border-radius: 4px; }}")


__all__ = ["SHORTCUT", "EnergyGate", "State", "VoiceConversation"]
