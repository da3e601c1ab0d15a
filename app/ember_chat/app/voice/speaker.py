"""The window's voice (issue 33): sentences said through the system's own voices with Qt's
QTextToSpeech (speech-dispatcher on Linux, SAPI / WinRT on Windows, AVSpeechSynthesizer on macOS),
one after the other from a queue that grows while an answer streams.

The engine is made the first time something is said (or the voices are asked for): with
speech-dispatcher, making it connects to the daemon (and starts it), which the window's start should
not wait for. Qt's own "mock" engine (no sound; it only pretends) is never chosen by itself: tests
and the read-aloud bench name it. No engine at all (Linux without speech-dispatcher) gives a sentence
naming the package to install instead of silence."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from PySide6.QtCore import QLocale, QObject, Signal
from PySide6.QtTextToSpeech import QTextToSpeech, QVoice

MOCK = "mock"  # Qt's test engine: says nothing, goes Speaking → Ready on a timer
ENGINE_ENV = "EMBER_TTS_ENGINE"  # a Qt engine's name to use instead of the system's (tests: mock)
NO_ENGINE_LINUX = (
    "No speech engine is installed, so answers cannot be read aloud. Install speech-dispatcher with its "
    "espeak-ng voices (Debian and Ubuntu: sudo apt install speech-dispatcher speech-dispatcher-espeak-ng), "
    "then start Ember again."
)
NO_ENGINE = "No speech engine is available on this system, so answers cannot be read aloud."


def no_engine_message() -> str:
    """What to say when the system has no speech engine (on Linux, the package that provides one)."""
    return NO_ENGINE_LINUX if sys.platform.startswith("linux") else NO_ENGINE


def choose_engine(available: list[str]) -> str | None:
    """The system's engine among Qt's: speech-dispatcher on Linux where there, else the first real one."""
    real = [name for name in available if name != MOCK]
    if "speechd" in real:
        return "speechd"
    return real[0] if real else None


class Speaker(QObject):
    """Says sentences in order. `reading` is the answer being read (its message id; 0: a test
    sentence; None: silent). `engine_name` None: the system's engine (choose_engine)."""

    reading_changed = Signal(object)  # the message id read now, or None when it stops
    sentence_said = Signal(str)  # a sentence handed to the engine (what the bench and tests time)
    problem = Signal(str)  # no engine, or the engine failed: a sentence for the window's banner

    def __init__(
        self,
        engine_name: str | None = None,
        available: Callable[[], list[str]] = QTextToSpeech.availableEngines,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._engine_name = engine_name
        self._available = available
        self._tts: QTextToSpeech | None = None
        self._queue: list[str] = []
        self._more = False  # more sentences of the answer read will come (it streams)
        self.reading: int | None = None
        self._voice_name = ""
        self._rate = 0.0
        self._pitch = 0.0

    # ----- the engine
    def engine(self) -> QTextToSpeech | None:
        """The engine (made the first time; None, said through `problem`, when there is none)."""
        if self._tts is None:
            available = list(self._available())
            name = self._engine_name or os.environ.get(ENGINE_ENV) or choose_engine(available)
            if name not in available:
                name = None
            if name is None:
                self.problem.emit(self.tr(no_engine_message()))
                return None
            self._tts = QTextToSpeech(name, self)
            self._tts.stateChanged.connect(self._state_changed)
            self._apply_voice()
        return self._tts

    @property
    def engine_name(self) -> str | None:
        """The engine in use (None until one was made)."""
        return self._tts.engine() if self._tts is not None else None

    def voices(self) -> list[str]:
        """The engine's voices' names ([] without an engine)."""
        tts = self.engine()
        return [v.name() for v in tts.availableVoices()] if tts is not None else []

    def configure(self, voice: str, rate: float, pitch: float) -> None:
        """The voice ("": one for the system's language), rate and pitch (-1 to 1, 0 normal)."""
        self._voice_name, self._rate, self._pitch = voice, rate, pitch
        if self._tts is not None:
            self._apply_voice()

    def _apply_voice(self) -> None:
        tts = self._tts
        assert tts is not None
        voices = tts.availableVoices()
        chosen = next((v for v in voices if v.name() == self._voice_name), None) or _for_language(voices)
        if chosen is not None:
            tts.setVoice(chosen)
        tts.setRate(max(-1.0, min(1.0, self._rate)))
        tts.setPitch(max(-1.0, min(1.0, self._pitch)))

    # ----- saying
    def speak(self, message_id: int, sentences: list[str]) -> None:
        """Read `sentences` of `message_id` from the start (what was being read stops)."""
        self.stop()
        self.add(message_id, sentences, more=False)

    def add(self, message_id: int, sentences: list[str], more: bool = True) -> None:
        """More sentences of the answer being read (a new answer: what was read before stops); `more`:
        whether more will come (a streaming answer), so reading goes on when the queue runs dry."""
        if self.reading != message_id:
            self.stop()
        self._more = more
        if not sentences:
            if not more and self.reading == message_id and not self._queue and not self._speaking():
                self.stop()  # (the stream ended after its last sentence was said)
            return
        tts = self.engine()
        if tts is None:
            return
        self._queue += sentences
        if self.reading != message_id:
            self.reading = message_id
            self.reading_changed.emit(message_id)
        if not self._speaking():
            self._next()

    def _speaking(self) -> bool:
        return self._tts is not None and self._tts.state() == QTextToSpeech.State.Speaking

    def stop(self) -> None:
        """Silence now: what is being said stops mid-word, and what was queued is dropped."""
        self._queue.clear()
        if self._tts is not None:
            self._tts.stop(QTextToSpeech.BoundaryHint.Immediate)
        if self.reading is not None:
            self.reading = None
            self.reading_changed.emit(None)

    def _next(self) -> None:
        tts = self._tts
        if tts is None or not self._queue:
            return
        sentence = self._queue.pop(0)
        tts.say(sentence)
        self.sentence_said.emit(sentence)

    def _state_changed(self, state: QTextToSpeech.State) -> None:
        if state == QTextToSpeech.State.Error and self._tts is not None:
            message = self._tts.errorString() or self.tr("The speech engine failed.")
            self.stop()
            self.problem.emit(self.tr("Reading aloud stopped: {message}").format(message=message))
        elif state == QTextToSpeech.State.Ready and self.reading is not None:
            if self._queue:
                self._next()
            elif not self._more:  # (a streaming answer adds more: add() starts the engine again)
                self.reading = None
                self.reading_changed.emit(None)


def _for_language(voices: list[QVoice]) -> QVoice | None:
    """A voice in the system's language, else an English one (speech-dispatcher's first voice may be any)."""
    system = QLocale.system().language()
    for language in (system, QLocale.Language.English):
        found = next((v for v in voices if v.locale().language() == language), None)
        if found is not None:
            return found
    return None
