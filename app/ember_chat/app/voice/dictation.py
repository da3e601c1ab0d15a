"""Dictation in the message box (issue 33): the microphone button beside it and Ctrl+Shift+Space.

A click (or a tap of the shortcut) starts listening and the next one stops; holding either for
HOLD_S or longer is push-to-talk: listening stops when it is let go. While the microphone is open the
button is down and a red "● Listening…" line shows under the box; it closes the moment listening stops.

The words go in at the cursor as they are recognised, the typed text around them kept: a worker
thread of the window's task runner (engine_link/tasks.py) loads the speech model (once; never on the
GUI thread) and then re-recognises the growing buffer every PASS_S through the engine's Dictation
(engine/speech/transcriber.py), reporting each Partial; the GUI thread replaces the words it put in
last with the new ones, and the final pass's text replaces the partial. When the message is sent (or
the box emptied) while listening, dictation goes on afresh at the cursor: the words sent are not put
back (`restart`). Time to the first words and
the real-time factor show on the line under the box."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
from PySide6.QtCore import QEvent, QObject, QSize, Qt, Signal
from PySide6.QtGui import QKeyEvent, QKeySequence, QTextCursor
from PySide6.QtWidgets import QApplication, QHBoxLayout, QLabel, QPlainTextEdit, QToolButton, QWidget

from ember_chat.app.engine_link.tasks import TaskRunner
from ember_chat.app.style.icons import themed_icon
from ember_chat.app.style.theme import Colors
from ember_chat.app.voice.microphone import Microphone
from ember_chat.engine.speech import Dictation, Partial, Transcriber

SHORTCUT = QKeySequence("Ctrl+Shift+Space")
HOLD_S = 0.5  # pressed this long or longer: push-to-talk (let go to stop); shorter: a click (toggle)
PASS_S = 1.0  # a recognition pass at most this often (each re-reads the unsettled sound)
MODEL_KEY = "dictation-model"
LISTEN_KEY = "dictation"


class DictationMetrics:
    """Time to the first words (from the first sound heard to the first words shown) and the real-time
    factor of the last pass (its recognition time over the sound it read, the part not settled yet:
    under PASS_S / that sound, recognition keeps up with the speaker)."""

    def __init__(self) -> None:
        self.first_sound: float | None = None
        self.first_words_s: float | None = None
        self.real_time_factor = 0.0
        self.heard_s = 0.0
        self.words_per_s = 0.0  # the words recognised over the sound heard (the side panel's Metrics tab)


class DictationControl(QObject):
    """The button, the shortcut, the listening line and the words put in `editor`. `show_error`: the
    window's banner. `make_transcriber`: loads the speech model (a worker thread calls it); `model` names
    the model wanted now (another than the one loaded: loaded again at the next start) and `language`
    the language spoken (None: detected), as Settings ▸ Voice says (voice/speech_choice.py)."""

    figures_changed = Signal()  # the metrics or the listening changed (the side panel shows them)

    def __init__(
        self,
        tasks: TaskRunner,
        editor: QPlainTextEdit,
        show_error: Callable[[str], None],
        microphone: Microphone | None = None,
        make_transcriber: Callable[[], Transcriber] = Transcriber,
        parent: QObject | None = None,
        model: Callable[[], str] = lambda: "",
        language: Callable[[], str | None] = lambda: None,
    ) -> None:
        super().__init__(parent)
        self.tasks, self.editor, self._show_error = tasks, editor, show_error
        self.microphone = microphone or Microphone(parent=self)
        self._make_transcriber = make_transcriber
        self._model, self._language = model, language
        self._loaded_model = ""  # what `model` said when the transcriber was asked for
        self.transcriber: Transcriber | None = None  # loaded on first use, kept for the next dictations
        self.button = QToolButton()
        self.button.setCheckable(True)  # (down while the microphone is open; set by the code, not by clicks)
        self.button.setAutoRaise(True)
        self.button.setIconSize(QSize(20, 20))
        self.button.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.button.setAccessibleName(self.tr("Dictate"))
        self.button.setToolTip(
            self.tr("Dictate (Ctrl+Shift+Space): click to listen and again to stop, or hold while you speak")
        )
        self.button.pressed.connect(self.press)
        self.button.released.connect(self.release)
        self.button.clicked.connect(self._show_state)  # (undo Qt's own toggle of the check)
        self.listening_label = QLabel(self.tr("● Listening…"))
        self.listening_label.setAccessibleName(self.tr("The microphone is on"))
        self.listening_label.hide()
        self.metrics_label = QLabel()
        self.metrics_label.setAccessibleName(self.tr("Dictation figures"))
        self.metrics_label.hide()
        self.status_row = QWidget()
        row = QHBoxLayout(self.status_row)
        row.setContentsMargins(2, 0, 2, 0)
        row.addWidget(self.listening_label)
        row.addWidget(self.metrics_label, 1)
        self.status_row.hide()
        self.use_microphone(self.microphone)
        self.dictation: Dictation | None = None
        self.metrics = DictationMetrics()
        self._buffered: list[np.ndarray] = []  # heard while the model loads
        self._stop = threading.Event()  # the worker: listening stopped, make the last pass
        self._abort = threading.Event()  # the worker: stop without a last pass (the window closes)
        self._active = False  # listening, or its last pass still running
        self._anchor: QTextCursor | None = None  # where the words go (it follows edits before it)
        self._shown = ""  # the words put in last
        self._previous = (self.metrics, "")  # the figures and line before this dictation
        self._generation = 0  # a restart's number: a pass of the dictation before it puts nothing in
        self._putting = False  # our own words going in (the box emptied by them is no restart)
        self._pressed_at: float | None = None  # this press started listening (push-to-talk if held)
        self._key_down = False
        QApplication.instance().installEventFilter(self)  # the shortcut, held or tapped, anywhere in the window
        editor.textChanged.connect(self._on_text_changed)

    @property
    def busy(self) -> bool:
        """Listening, or the last pass after it still running (a new dictation waits for it)."""
        return self._active

    def use_microphone(self, microphone: Microphone) -> None:
        """Listen through `microphone` from now on (the system's default input unless told otherwise:
        the screenshots and tests give one fed with speech from a file)."""
        if microphone is not self.microphone:
            self.microphone.close()
            for signal in (self.microphone.samples, self.microphone.failed, self.microphone.opened_changed):
                signal.disconnect()
            self.microphone = microphone
        microphone.samples.connect(self.on_samples)
        microphone.failed.connect(self._on_microphone_failed)
        microphone.opened_changed.connect(self._show_state)

    # ----- press / release (the button, the shortcut)
    def press(self) -> None:
        if self.microphone.is_open:
            self.stop()
            self._pressed_at = None
        elif self.start():
            self._pressed_at = time.monotonic()

    def release(self) -> None:
        held = self._pressed_at is not None and time.monotonic() - self._pressed_at >= HOLD_S
        self._pressed_at = None
        if held:
            self.stop()  # push-to-talk: let go
        self._show_state()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # Qt override
        kind = event.type()
        if kind not in (QEvent.Type.KeyPress, QEvent.Type.KeyRelease) or not isinstance(watched, QWidget):
            return False
        if watched.window() is not self.editor.window() or not isinstance(event, QKeyEvent):
            return False
        if event.key() != Qt.Key.Key_Space or event.modifiers() != (
            Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
        ):
            return False
        if not event.isAutoRepeat():  # (a held key repeats: one press, one release)
            if kind == QEvent.Type.KeyPress and not self._key_down:
                self._key_down = True
                self.press()
            elif kind == QEvent.Type.KeyRelease and self._key_down:
                self._key_down = False
                self.release()
        return True

    # ----- listening
    def start(self) -> bool:
        """Open the microphone and start recognising (the model loads first, on a worker, the first
        time). False if the microphone cannot open (said in the window) or a last pass still runs."""
        if self._active or not self.microphone.open():
            return False
        self._active = True
        self._stop, self._abort = threading.Event(), threading.Event()
        self._buffered, self.dictation = [], None
        # (the last dictation's figures, shown again if this one hears no words)
        words = self.metrics.first_words_s is not None
        self._previous = (self.metrics, self.metrics_label.text() if words else "")
        self.metrics = DictationMetrics()
        self._anchor_at_cursor()
        if self._model() != self._loaded_model:  # (another model chosen in Settings ▸ Voice)
            self.transcriber, self._loaded_model = None, self._model()
        self.metrics_label.setText(self.tr("Loading the speech model…") if self.transcriber is None else "")
        self._show_state()  # (microphone.open() showed the state before this text: the label stayed hidden)
        if self.transcriber is None:
            self.tasks.run(self._make_transcriber, self._on_loaded, self._on_load_failed, key=MODEL_KEY)
        else:
            self._on_loaded(self.transcriber)
        return True

    def _anchor_at_cursor(self) -> None:
        self._shown = ""
        self._anchor = QTextCursor(self.editor.textCursor())
        self._anchor.clearSelection()
        self._anchor.setKeepPositionOnInsert(True)  # (our own words go in after it)

    def restart(self, *_: object) -> None:
        """The box's words went (the message sent, the box emptied) while listening: what was heard
        so far is dropped and dictation goes on afresh at the cursor (else the next pass would put
        everything said since listening began back in)."""
        if not self._active:
            return
        if self.dictation is not None and self.transcriber is not None:
            self.dictation = self.transcriber.dictation(self.dictation.language)
        self._generation += 1  # (after the new dictation: a pass that reads this number reads it too)
        self._anchor_at_cursor()
        self._buffered = []

    def _on_text_changed(self) -> None:
        if self._active and self._shown and not self._putting and self.editor.document().isEmpty():
            self.restart()

    def stop(self) -> None:
        """Stop listening: the microphone closes now; the last pass puts in the final words."""
        self.microphone.close()
        self._stop.set()

    def shutdown(self) -> None:
        """The window closes: the microphone released, the worker ends without a last pass."""
        QApplication.instance().removeEventFilter(self)
        self._abort.set()
        self.microphone.close()
        self.tasks.cancel(LISTEN_KEY)
        self.tasks.cancel(MODEL_KEY)

    def on_samples(self, samples: np.ndarray) -> None:
        """Sound from the microphone (GUI thread; cheap: the worker recognises it)."""
        if not self._active:
            return
        if self.metrics.first_sound is None:
            self.metrics.first_sound = time.perf_counter()
        if self.dictation is None:
            self._buffered.append(samples)
        else:
            self.dictation.feed(samples)

    def _on_loaded(self, transcriber: Transcriber) -> None:
        self.transcriber = transcriber
        try:
            self.dictation = transcriber.dictation(self._language())
        except Exception as exc:  # (a language the model refuses: said, not raised into Qt)
            self._end_with_error(str(exc))
            return
        for samples in self._buffered:
            self.dictation.feed(samples)
        self._buffered = []
        stop, abort = self._stop, self._abort

        def listen(report: Callable[[tuple[int, Partial]], None]) -> tuple[int, Partial] | None:
            # (self.dictation is replaced on the GUI thread at a restart: a pass reads the one of its start)
            while not stop.is_set() and not abort.is_set():
                began = time.monotonic()
                generation, dictation = self._generation, self.dictation
                if dictation is not None:
                    report((generation, dictation.update()))
                stop.wait(max(0.0, PASS_S - (time.monotonic() - began)))
            generation, dictation = self._generation, self.dictation
            return None if abort.is_set() or dictation is None else (generation, dictation.finish())

        self.tasks.run_reporting(listen, self._on_partial, self._on_final, self._on_failed, key=LISTEN_KEY,
                                 cancel=abort.set, own_thread=True)  # fmt: skip

    def _on_load_failed(self, message: str) -> None:
        self._end_with_error(message)

    def _on_failed(self, message: str) -> None:
        self._end_with_error(self.tr("Dictation stopped: {error}").format(error=message))

    def _end_with_error(self, message: str) -> None:
        self.microphone.close()
        self._abort.set()
        self._active = False
        self._show_state()
        self._show_error(message)

    def _on_microphone_failed(self, message: str) -> None:
        self._stop.set()  # (what was heard still gets its last pass)
        self._show_error(message)

    def _on_partial(self, result: tuple[int, Partial]) -> None:
        generation, partial = result
        if generation == self._generation:  # (else heard before the message went)
            self._account(partial)
            self._put(partial.text)

    def _on_final(self, result: tuple[int, Partial] | None) -> None:
        self._active = False
        if result is not None and result[0] == self._generation:
            self._account(result[1])
            self._put(result[1].text)
        self._anchor = None
        if self.metrics.first_words_s is None:  # (no words heard: the last dictation's figures stay)
            self.metrics, previous_label = self._previous
            self.metrics_label.setText(previous_label)
        self._show_state()

    def _account(self, partial: Partial) -> None:
        m = self.metrics
        m.heard_s = partial.heard_s
        if partial.read_s > 0 and partial.processing_s > 0:
            m.real_time_factor = partial.processing_s / partial.read_s
        if partial.heard_s > 0:
            m.words_per_s = len(partial.text.split()) / partial.heard_s
        if m.first_words_s is None and partial.text and m.first_sound is not None:
            m.first_words_s = time.perf_counter() - m.first_sound
        self._show_metrics()

    def _put(self, text: str) -> None:
        """Put `text` in place of the words put in last (at the cursor where dictation began)."""
        anchor = self._anchor
        if anchor is None or text == self._shown:
            return
        document = self.editor.document()
        start = anchor.position()
        cursor = QTextCursor(document)
        cursor.setPosition(start)
        end = min(start + len(self._shown), document.characterCount() - 1)
        cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        if cursor.selectedText() != self._shown:  # the user changed our words meanwhile: theirs stay
            cursor.setPosition(start)
        before = document.characterAt(start - 1) if start > 0 else ""
        after = document.characterAt(end)
        lead = " " if text and before and not before.isspace() else ""
        trail = " " if text and after and not after.isspace() and after != "\u2029" else ""
        words = lead + text + trail
        self._putting = True
        try:
            cursor.insertText(words)
        finally:
            self._putting = False
        self._shown = words
        self.editor.setTextCursor(cursor)

    # ----- what shows
    def _show_state(self, *_: object) -> None:
        listening = self.microphone.is_open
        self.button.setChecked(listening)
        self.button.setAccessibleName(self.tr("Stop dictating") if listening else self.tr("Dictate"))
        self.listening_label.setVisible(listening)
        self.metrics_label.setVisible(bool(self.metrics_label.text()))
        self.status_row.setVisible(listening or bool(self.metrics_label.text()))
        self.figures_changed.emit()

    def _show_metrics(self) -> None:
        m = self.metrics
        parts = []
        if m.first_words_s is not None:
            parts.append(self.tr("first words after {s:.2f} s").format(s=m.first_words_s))
        if m.real_time_factor > 0:
            parts.append(self.tr("real-time factor {rtf:.2f}").format(rtf=m.real_time_factor))
        if self.transcriber is not None:
            parts.append(self.tr("{model}, {threads} threads").format(
                model=self.transcriber.name, threads=self.transcriber.threads))  # fmt: skip
        self.metrics_label.setText(" · ".join(parts))
        self._show_state()

    def set_colors(self, colors: Colors) -> None:
        self.button.setIcon(themed_icon("microphone", colors))
        self.listening_label.setStyleSheet(f"color: {colors.error}; font-weight: 600;")
        # down while listening, in the listening line's colour: seen at a glance in both themes
        self.button.setStyleSheet(
            f"QToolButton:checked {{ border: 2px solid {colors.error}; border-radius: 4px; "
            f"background: {colors.error_bg}; }}"
        )
        self.metrics_label.setStyleSheet(f"color: {colors.secondary};")


__all__ = ["HOLD_S", "SHORTCUT", "DictationControl", "DictationMetrics"]
