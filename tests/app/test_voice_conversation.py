"""Voice conversation (issue 33): listen → the user stops speaking → the words are sent as the user's
message → the answer streams and is read aloud sentence by sentence → listening again; speech while it
reads stops the reading (and the answer still streaming); Esc ends the mode, the microphone closed and
the words heard kept in the box.

Real parts: the question spoken by espeak-ng (tests/helpers/speech.py) fed as 16-bit PCM at 22050 Hz into
the microphone's feed_pcm, where QAudioSource's buffers go (InjectedMicrophone: only the device is left
out), recognised by the shipped tiny.en model on the dictation's worker; the chat starter model answers
the full turn; Qt's mock text-to-speech engine reads (tests/conftest.py: EMBER_TTS_ENGINE=mock)."""

from __future__ import annotations

import wave
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.app.voice.conversation import BARGE_IN_S, END_SILENCE_S, EnergyGate, State
from ember_chat.engine.speech import SAMPLE_RATE
from ember_chat.engine.speech.wer import word_error_rate
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.microphone import InjectedMicrophone
from tests.helpers.speech import speak
from tests.helpers.window import LOAD_TIMEOUT, load, set_max_tokens

QUESTION = "What is the capital city of France?"
RATE = 22_050
MODEL_TIMEOUT = 60_000
ANSWER_TIMEOUT = 180_000


@pytest.fixture(scope="module")
def question_pcm(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    wav = speak(QUESTION, tmp_path_factory.mktemp("voice") / "question.wav")
    with wave.open(str(wav)) as f:
        return f.readframes(f.getnframes())


def _feed(qtbot: QtBot, w: MainWindow, pcm: bytes, speed: float = 2.0) -> None:
    """`pcm` (22050 Hz 16-bit) into the microphone in 0.1 s buffers, `speed` times real time."""
    step = RATE // 10 * 2
    for at in range(0, len(pcm), step):
        w.dictation.microphone.feed_pcm(pcm[at : at + step])
        qtbot.wait(int(100 / speed))


def _silence(seconds: float) -> bytes:
    return bytes(int(seconds * RATE) * 2)


def _window(make_window: Callable[..., MainWindow], backend: Callable[[object], object] | None = None) -> MainWindow:
    w = make_window(backend) if backend else make_window()
    w.dictation.use_microphone(InjectedMicrophone())
    return w


def _ask(qtbot: QtBot, w: MainWindow, pcm: bytes) -> None:
    """The question spoken, then the silence that ends the turn."""
    _feed(qtbot, w, pcm)
    _feed(qtbot, w, _silence(END_SILENCE_S + 0.5))


def test_the_energy_gate_ends_a_turn_on_silence_and_hears_a_barge_in() -> None:
    gate = EnergyGate()
    tone = (0.2 * np.sin(np.arange(SAMPLE_RATE // 10) / 5)).astype(np.float32)  # 0.1 s of sound
    quiet = np.full(SAMPLE_RATE // 10, 0.003, dtype=np.float32)  # a room's floor
    for _ in range(5):
        assert not gate.feed(quiet)
    assert gate.floor == pytest.approx(0.003, rel=0.01)
    for _ in range(round(BARGE_IN_S * 10)):
        assert gate.feed(tone)
    assert gate.run_s >= BARGE_IN_S and gate.silence_s == 0
    gate.feed(quiet)  # a pause between words: the run goes on
    assert gate.run_s >= BARGE_IN_S
    for _ in range(round(END_SILENCE_S * 10)):
        gate.feed(quiet)
    assert gate.silence_s >= END_SILENCE_S and gate.run_s == 0


def test_a_spoken_question_is_sent_answered_read_aloud_and_ember_listens_again(
    qtbot: QtBot, make_window: Callable[..., MainWindow], chat_starter_model: Path, question_pcm: bytes
) -> None:
    w = _window(make_window)
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "ready", timeout=LOAD_TIMEOUT):
        w.welcome.starter.click()
    w.side.params.temperature.setValue(0.0)
    set_max_tokens(w, 40)
    said: list[str] = []
    w.read_aloud.speaker.sentence_said.connect(said.append)
    states: list[str] = []
    w.voice.state_changed.connect(states.append)
    w.voice.button.click()  # the toggle beside the microphone
    assert w.voice.state == State.LISTENING and w.dictation.microphone.is_open
    assert w.voice.indicator.isVisible() and "listening · Esc to end" in w.voice.indicator.text()
    _ask(qtbot, w, question_pcm)
    qtbot.waitUntil(lambda: w.controller.conversation_id is not None, timeout=MODEL_TIMEOUT)  # sent by itself
    assert w.composer.editor.toPlainText() == ""
    qtbot.waitUntil(lambda: State.SPEAKING.value in states, timeout=ANSWER_TIMEOUT)
    assert "speaking" in w.voice.indicator.text()
    assert w.dictation.microphone.is_open  # (open while it reads: a barge-in is heard)
    qtbot.waitUntil(lambda: w.voice.state == State.LISTENING and not w.controller.generating, timeout=ANSWER_TIMEOUT)
    assert w.dictation.microphone.is_open and w.dictation.busy  # listening again
    user, answer = w.store.thread(w.controller.conversation_id)[-2:]
    assert user.role == "user" and word_error_rate(QUESTION, user.content) <= 0.25, user.content
    assert answer.role == "assistant" and answer.content.strip()
    assert said and said[0].split()[0] in answer.content, (said, answer.content)  # read as it streamed
    assert states[:4] == ["listening", "thinking", "speaking", "listening"], states
    w.voice.button.click()  # the toggle ends it
    assert w.voice.state == State.OFF and not w.dictation.microphone.is_open and not w.voice.indicator.isVisible()


def test_speech_while_it_reads_stops_the_reading_and_the_answer_and_esc_ends_the_mode(
    qtbot: QtBot, make_window: Callable[..., MainWindow], question_pcm: bytes
) -> None:
    script = ["This is ", "a sentence. "] * 400  # a long answer, streamed slowly
    w = _window(make_window, lambda _ref: FakeBackend(script=script, delay_s=0.02))
    load(qtbot, w)
    set_max_tokens(w, 100_000)
    chat_action = next(a for a in w.menuBar().actions() if a.text() == "&Chat")
    entry = next(a for a in chat_action.menu().actions() if a.text() == "&Voice conversation")
    assert entry.shortcut().toString() == "Ctrl+Shift+V"
    entry.trigger()  # the menu entry
    assert w.voice.state == State.LISTENING and entry.isChecked()
    _ask(qtbot, w, question_pcm)
    qtbot.waitUntil(lambda: w.voice.state == State.SPEAKING, timeout=MODEL_TIMEOUT)
    assert w.controller.generating and w.read_aloud.speaker.reading is not None
    _feed(qtbot, w, question_pcm[: int(RATE * 2 * (BARGE_IN_S + 0.3))])  # the user talks over it
    assert w.voice.state == State.LISTENING and w.read_aloud.speaker.reading is None  # stopped at once
    qtbot.waitUntil(lambda: not w.controller.generating, timeout=10_000)  # the answer stopped, as Stop does
    answer = w.store.thread(w.controller.conversation_id)[-1]
    assert answer.role == "assistant" and 0 < len(answer.content) < len("".join(script))
    _feed(qtbot, w, question_pcm[int(RATE * 2 * (BARGE_IN_S + 0.3)) :])  # the rest of what they say
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Escape)  # Esc ends the mode
    assert w.voice.state == State.OFF and not entry.isChecked()
    assert not w.dictation.microphone.is_open  # released at once
    qtbot.waitUntil(lambda: not w.dictation.busy, timeout=MODEL_TIMEOUT)
    kept = w.composer.editor.toPlainText()
    assert "capital" in kept.lower() or "france" in kept.lower(), kept  # what was said stays in the box, unsent
    assert w.store.thread(w.controller.conversation_id)[-1].id == answer.id


def test_a_microphone_lost_mid_conversation_ends_the_mode_and_says_why(
    qtbot: QtBot, make_window: Callable[..., MainWindow], question_pcm: bytes
) -> None:
    w = _window(make_window)
    w.voice.button.click()
    _feed(qtbot, w, question_pcm[: RATE * 2])
    mic = w.dictation.microphone
    assert isinstance(mic, InjectedMicrophone)
    mic.unplug()
    assert w.voice.state == State.OFF and not w.voice.button.isChecked() and not w.voice.indicator.isVisible()
    assert "stopped giving sound" in w.banner.label.text()
    qtbot.waitUntil(lambda: not w.dictation.busy, timeout=MODEL_TIMEOUT)  # (what was heard goes into the box)
