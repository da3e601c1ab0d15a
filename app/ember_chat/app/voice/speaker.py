"""The window's voice (issue 33): sentences said through the system's own voices with Qt's
QTextToSpeech (speech-dispatcher on Linux, SAPI / WinRT on Windows, AVSpeechSynthesizer on macOS),
one after the other from a queue that grows while an answer streams.

The engine is made the first time something is said (or the voices are asked for), on a thread of its
own: speech-dispatcher's engine takes 1.5 to 2.5 s to make here (it connects to the daemon, starting
it, and lists its 1,530 voices), which froze the window while it lasted. Making it in a Python thread
does not help: PySide holds the GIL through QTextToSpeech's constructor and setEngine(), so the GUI
thread waits for the GIL instead. So an engine-less QTextToSpeech (Qt's mock, made in under a
millisecond) is moved to a QThread whose event loop runs setEngine() queued, in C++ without the GIL;
then it is moved back and used on the GUI thread as before (so Stop still acts at once). Sentences
asked for meanwhile wait in the queue. Qt's own "mock" engine (no sound; it only pretends) is never
chosen by itself: tests and the read-aloud bench name it. No engine at all (Linux without
speech-dispatcher) gives a sentence naming the package to install instead of silence."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from PySide6.QtCore import Q_ARG, QLocale, QMetaObject, QObject, Qt, QThread, Signal, Slot
from PySide6.QtTextToSpeech import QTextToSpeech, QVoice

MOCK = "mock"  # Qt's test engine: says nothing, goes Speaking → Ready on a timer
ENGINE_ENV = "EMBER_TTS_ENGINE"  # a Qt engine's name to use instead of the system's (tests: mock)
NO_ENGINE_LINUX = (
    "No speech engine is installed, so answers cannot be read aloud. Install speech-dispatcher with its "
    "espeak-ng voices (Debian and Ubuntu: sudo apt install speech-dispatcher speech-dispatcher-espeak-ng), "
    "then start Ember again."
)
NO_ENGINE = "No speech engine is available on this system, so answers cannot be read aloud."
PLACEHOLDER = "ember-none"  # an engine-less QTextToSpeech where Qt has no mock plugin (Qt says so once)

SHUTDOWN_WAIT_MS = 3_000  # closing waits this long for an engine still being made (it takes up to 2.5 s)
_ABANDONED: list[QObject] = []  # a maker thread stuck past that, and what it works on (see Speaker.shutdown)

Loaded = Callable[[QTextToSpeech], None]  # run on the maker thread once the engine is loaded (tests hold it)


def no_engine_message() -> str:
    """What to say when the system has no speech engine (on Linux, the package that provides one)."""
    return NO_ENGINE_LINUX if sys.platform.startswith("linux") else NO_ENGINE


def choose_engine(available: list[str]) -> str | None:
    """The system's engine among Qt's: speech-dispatcher on Linux where there, else the first real one."""
    real = [name for name in available if name != MOCK]
    if "speechd" in real:
        return "speechd"
    return real[0] if real else None


class _Handback(QObject):
    """Lives on the maker thread: after the queued setEngine() (the event before it) has loaded the
    engine, moves it to the GUI thread (only the thread an object lives in may move it) and ends the
    thread's event loop."""

    made = Signal(QTextToSpeech)

    def __init__(self, tts: QTextToSpeech, home: QThread, loaded: Loaded | None) -> None:
        super().__init__()
        self._tts, self._home, self._loaded = tts, home, loaded

    @Slot()
    def hand_back(self) -> None:
        if self._loaded is not None:
            self._loaded(self._tts)
        self._tts.moveToThread(self._home)
        self.made.emit(self._tts)  # (queued to the Speaker, on the GUI thread)
        thread = self.thread()
        assert thread is not None
        thread.quit()


class Speaker(QObject):
    """Says sentences in order. `reading` is the answer being read (its message id; 0: a test
    sentence; None: silent). `engine_name` None: the system's engine (choose_engine). `loaded`: see
    Loaded (tests)."""

    reading_changed = Signal(object)  # the message id read now, or None when it stops
    sentence_said = Signal(str)  # a sentence handed to the engine (what the bench and tests time)
    problem = Signal(str)  # no engine, or the engine failed: a sentence for the window's banner
    engine_made = Signal()  # the engine is ready (Settings ▸ Voice lists its voices then)

    def __init__(
        self,
        engine_name: str | None = None,
        available: Callable[[], list[str]] = QTextToSpeech.availableEngines,
        parent: QObject | None = None,
        loaded: Loaded | None = None,
    ) -> None:
        super().__init__(parent)
        self._engine_name = engine_name
        self._available = available
        self._loaded = loaded
        self._tts: QTextToSpeech | None = None
        self._maker: QThread | None = None  # the thread making the engine (until it has ended)
        self._handback: _Handback | None = None
        # the engine being made, held until _made has it: Python owns it, and the queued `made` only
        # carries its pointer (dropped with the maker, it was deleted before _made ran: a crash)
        self._pending: QTextToSpeech | None = None
        self._closed = False
        self._queue: list[str] = []
        self._more = False  # more sentences of the answer read will come (it streams)
        self.reading: int | None = None
        self._voice_name = ""
        self._rate = 0.0
        self._pitch = 0.0

    # ----- the engine
    def engine(self) -> QTextToSpeech | None:
        """The engine once made. The first call starts making it on its thread and returns None, as
        every call does until `engine_made` (and always where there is none: said through `problem`)."""
        if self._tts is None and self._maker is None and not self._closed:
            available = list(self._available())
            name = self._engine_name or os.environ.get(ENGINE_ENV) or choose_engine(available)
            if name not in available:
                name = None
            if name is None:
                self.problem.emit(self.tr(no_engine_message()))
                return None
            self._make(name, available)
        return self._tts

    def _make(self, name: str, available: list[str]) -> None:
        tts = QTextToSpeech(MOCK if MOCK in available else PLACEHOLDER)  # (under 1 ms, no daemon)
        maker = QThread()
        maker.setObjectName("ember-tts-maker")
        handback = _Handback(tts, self.thread(), self._loaded)
        tts.moveToThread(maker)
        handback.moveToThread(maker)
        handback.made.connect(self._made)
        self._maker, self._handback, self._pending = maker, handback, tts
        maker.start()
        # both run on the maker thread, in this order; setEngine in C++ only (no Python: no GIL)
        QMetaObject.invokeMethod(tts, "setEngine", Qt.ConnectionType.QueuedConnection, Q_ARG(str, name))
        QMetaObject.invokeMethod(handback, "hand_back", Qt.ConnectionType.QueuedConnection)

    @property
    def making(self) -> bool:
        """The engine is being made (sentences said now wait for it)."""
        return self._maker is not None and self._tts is None

    def _made(self, tts: QTextToSpeech) -> None:
        self.join(-1)  # (it has handed the engine back: its loop ends at once)
        self._pending = None
        if self._closed:
            return  # (dropped: Python owns it until it has a parent)
        tts.setParent(self)
        self._tts = tts
        tts.stateChanged.connect(self._state_changed)
        if tts.state() == QTextToSpeech.State.Error:
            self._failed()
        else:
            self._apply_voice()
            if self.reading is not None and not self._speaking():
                self._next()
        self.engine_made.emit()

    def join(self, timeout_ms: int) -> bool:
        """Wait up to `timeout_ms` (-1: as long as it takes) for the thread making the engine to end."""
        maker = self._maker
        if maker is None:
            return True
        if not (maker.wait(timeout_ms) if timeout_ms >= 0 else maker.wait()):
            return False
        self._maker = self._handback = None
        return True

    def shutdown(self) -> None:
        """The window closes: silence, and an engine still being made is dropped when it comes. Its thread
        is waited for (SHUTDOWN_WAIT_MS): Qt aborts the process when a running QThread is destroyed, as it
        would be with this Speaker. One stuck past that (speech-dispatcher can hang without a sound
        server) is in libspeechd's C code, holding no Python state: it is terminated, and the objects it
        worked on are kept to the process's end (deleting them mid-construction could crash)."""
        self.stop()
        self._closed = True
        maker = self._maker
        if maker is None or self.join(SHUTDOWN_WAIT_MS):
            return
        maker.terminate()
        maker.wait(1_000)
        _ABANDONED.extend(o for o in (maker, self._handback, self._pending) if o is not None)
        self._maker = self._handback = self._pending = None

    @property
    def engine_name(self) -> str | None:
        """The engine in use (None until one was made)."""
        return self._tts.engine() if self._tts is not None else None

    def voices(self) -> list[str]:
        """The engine's voices' names ([] until it is made, and without one)."""
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
        if self.engine() is None and not self.making:
            return  # (no engine: said through `problem`)
        self._queue += sentences
        if self.reading != message_id:
            self.reading = message_id
            self.reading_changed.emit(message_id)
        if not self._speaking():
            self._next()  # (while the engine is made, nothing: _made says the first sentence)

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

    def _failed(self) -> None:
        assert self._tts is not None
        message = self._tts.errorString() or self.tr("The speech engine failed.")
        self.stop()
        self.problem.emit(self.tr("Reading aloud stopped: {message}").format(message=message))

    def _state_changed(self, state: QTextToSpeech.State) -> None:
        if state == QTextToSpeech.State.Error and self._tts is not None:
            self._failed()
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
