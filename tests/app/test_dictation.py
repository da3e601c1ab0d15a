"""Dictation in the window (issue 33): the microphone button and Ctrl+Shift+Space, toggle and push-to-talk,
the listening line while the microphone is open, words at the cursor as they are recognised (partials
before the final text, typed text kept), and a sentence for each failure with the box untouched.

Real parts: speech made by espeak-ng (tests/helpers/speech.py) as 16-bit PCM at espeak's own 22050 Hz,
fed at twice real time into Microphone.feed_pcm — where QAudioSource's buffers go — so it is converted,
resampled and recognised by the shipped tiny.en model on the window's task runner, as a microphone's
would be. Only the device is replaced (InjectedMicrophone: opening it opens nothing)."""

from __future__ import annotations

import atexit
import shutil
import subprocess
import wave
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtMultimedia import QAudioFormat, QMediaDevices, QtAudio
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.app.voice.dictation import HOLD_S
from ember_chat.app.voice.microphone import ASKED, NO_MICROPHONE, PERMISSION_DENIED, Microphone, pcm_to_samples
from ember_chat.engine.speech import SpeechModelError
from ember_chat.engine.speech.wer import word_error_rate
from tests.helpers.microphone import InjectedMicrophone
from tests.helpers.speech import SENTENCES, speak

TEXT = " ".join(SENTENCES[:2])
MODEL_TIMEOUT = 60_000


@pytest.fixture(scope="module")
def wav(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return speak(TEXT, tmp_path_factory.mktemp("dictation") / "speech.wav")


@pytest.fixture(scope="module")
def pcm(wav: Path) -> bytes:
    with wave.open(str(wav)) as f:
        assert (f.getframerate(), f.getnchannels(), f.getsampwidth()) == (22_050, 1, 2)
        return f.readframes(f.getnframes())


def _pcm(wav: Path) -> bytes:
    with wave.open(str(wav)) as f:
        return f.readframes(f.getnframes())


@pytest.fixture
def window(make_window: Callable[..., MainWindow]) -> MainWindow:
    w = make_window()
    w.dictation.use_microphone(InjectedMicrophone())
    return w


def _feed(qtbot: QtBot, mic: Microphone, pcm: bytes, seconds: float | None = None, speed: float = 2.0) -> None:
    """`pcm` (22050 Hz 16-bit) into the microphone in 0.1 s buffers, `speed` times real time."""
    step = 2205 * 2
    end = len(pcm) if seconds is None else min(len(pcm), int(seconds * 22_050) * 2)
    for at in range(0, end, step):
        mic.feed_pcm(pcm[at : at + step])
        qtbot.wait(int(100 / speed))


def _click(w: MainWindow) -> None:
    w.dictation.button.pressed.emit()
    w.dictation.button.released.emit()


def test_dictated_words_appear_at_the_cursor_partials_first_typed_text_kept(
    qtbot: QtBot, window: MainWindow, pcm: bytes
) -> None:
    w = window
    editor = w.composer.editor
    editor.setPlainText("Note: and thanks")
    cursor = editor.textCursor()
    cursor.setPosition(len("Note:"))
    editor.setTextCursor(cursor)
    seen: list[str] = []
    editor.textChanged.connect(lambda: seen.append(editor.toPlainText()))
    _click(w)  # a click: listening until the next one
    assert w.dictation.microphone.is_open and w.dictation.button.isChecked()
    assert w.dictation.listening_label.isVisible() and "Listening" in w.dictation.listening_label.text()
    _feed(qtbot, w.dictation.microphone, pcm, seconds=4.0)
    qtbot.waitUntil(lambda: len(seen) > 0, timeout=MODEL_TIMEOUT)  # (the model loads on first use)
    _feed(qtbot, w.dictation.microphone, pcm[4 * 22_050 * 2 :])
    partials = list(seen)
    _click(w)  # the second click stops: the microphone closes at once
    assert not w.dictation.microphone.is_open and not w.dictation.button.isChecked()
    assert not w.dictation.listening_label.isVisible()
    qtbot.waitUntil(lambda: not w.dictation.busy, timeout=30_000)
    final = editor.toPlainText()
    assert final.startswith("Note: ") and final.endswith(" and thanks"), final
    heard = final[len("Note: ") : -len(" and thanks")]
    assert word_error_rate(TEXT, heard) <= 0.25, heard
    # partial words came before the final text, each with the typed text around it
    assert partials and all(p.startswith("Note:") and p.endswith("and thanks") for p in partials)
    assert len(partials[0]) < len(final)
    metrics = w.dictation.metrics
    assert metrics.first_words_s is not None and metrics.real_time_factor > 0
    assert "first words after" in w.dictation.metrics_label.text()
    assert "real-time factor" in w.dictation.metrics_label.text()


def test_the_model_load_is_shown_and_a_dictation_without_words_keeps_the_last_figures(
    qtbot: QtBot, window: MainWindow, pcm: bytes
) -> None:
    w = window
    label = w.dictation.metrics_label
    w.dictation.button.pressed.emit()  # (held: push-to-talk)
    # (microphone.open() showed the line before this text was set: hidden while the button was held)
    assert label.text() == "Loading the speech model…" and label.isVisible()
    w.dictation.button.released.emit()
    _feed(qtbot, w.dictation.microphone, pcm, seconds=3.0, speed=3.0)
    _click(w)
    qtbot.waitUntil(lambda: not w.dictation.busy, timeout=MODEL_TIMEOUT)
    figures, line = w.dictation.metrics, label.text()
    assert figures.first_words_s is not None and "first words after" in line
    side = w.side.metrics
    shown = (side.dictation_rtf.text(), side.dictation_first.text(), side.dictation_words.text())
    assert "—" not in shown
    # the microphone opened and closed with no speech: the side panel went to dashes and a bare
    # "tiny.en, 2 threads" line stayed under the box
    _click(w)
    w.dictation.microphone.feed_pcm(bytes(22_050 * 2))  # (a second of silence)
    qtbot.wait(1500)
    _click(w)
    qtbot.waitUntil(lambda: not w.dictation.busy, timeout=30_000)
    assert w.dictation.metrics is figures and label.text() == line and label.isVisible()
    assert (side.dictation_rtf.text(), side.dictation_first.text(), side.dictation_words.text()) == shown
    assert side.dictation_box.title() == "Last dictation"


def test_sending_while_dictating_does_not_put_the_sent_words_back(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    # Enter sent the box and emptied it, but the next pass put everything said since listening began
    # back in: dictation goes on afresh after the message goes
    w = window
    editor = w.composer.editor
    sent: list[str] = []
    w.composer.send.disconnect(w.compose.send)  # (no model here: the chat would put the message back)
    w.composer.send.connect(sent.append)
    first, second = (_pcm(speak(SENTENCES[i], tmp_path / f"{i}.wav")) for i in (0, 1))
    _click(w)
    _feed(qtbot, w.dictation.microphone, first, speed=4.0)
    qtbot.waitUntil(lambda: "weekly" in editor.toPlainText().lower(), timeout=MODEL_TIMEOUT)
    w.composer.submit()  # Enter, still listening
    assert sent and "weekly" in sent[0].lower() and w.dictation.microphone.is_open
    qtbot.wait(1500)  # (passes after the send: what they heard before it is not put back)
    assert "weekly" not in editor.toPlainText().lower()
    _feed(qtbot, w.dictation.microphone, second, speed=4.0)
    _click(w)
    qtbot.waitUntil(lambda: not w.dictation.busy, timeout=30_000)
    text = editor.toPlainText()
    assert "weekly" not in text.lower() and word_error_rate(SENTENCES[1], text) <= 0.25, text


def test_push_to_talk_with_the_shortcut_stops_when_let_go(qtbot: QtBot, window: MainWindow, pcm: bytes) -> None:
    w = window
    w.composer.editor.setFocus()
    mods = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    QApplication.sendEvent(w.composer.editor, QKeyEvent(QEvent.Type.KeyPress, Qt.Key.Key_Space, mods, " "))
    assert w.dictation.microphone.is_open
    # held: the key repeats, which changes nothing
    QApplication.sendEvent(w.composer.editor, QKeyEvent(QEvent.Type.KeyPress, Qt.Key.Key_Space, mods, " ", True))
    _feed(qtbot, w.dictation.microphone, pcm, seconds=4 * HOLD_S, speed=2.0)  # (held 2 x HOLD_S)
    assert w.dictation.microphone.is_open
    QApplication.sendEvent(w.composer.editor, QKeyEvent(QEvent.Type.KeyRelease, Qt.Key.Key_Space, mods, " "))
    assert not w.dictation.microphone.is_open  # let go: released at once
    qtbot.waitUntil(lambda: not w.dictation.busy, timeout=MODEL_TIMEOUT)
    assert "please" in w.composer.editor.toPlainText().lower()
    assert " " not in w.composer.editor.toPlainText()[:1]  # (no space typed by the shortcut)


def test_a_device_unplugged_mid_dictation_keeps_the_words_and_says_so(
    qtbot: QtBot, window: MainWindow, pcm: bytes
) -> None:
    w = window
    w.composer.editor.setPlainText("typed")
    w.composer.editor.moveCursor(w.composer.editor.textCursor().MoveOperation.End)
    _click(w)
    _feed(qtbot, w.dictation.microphone, pcm, seconds=3.0, speed=4.0)
    mic = w.dictation.microphone
    assert isinstance(mic, InjectedMicrophone)
    mic.unplug()
    assert "stopped giving sound" in w.banner.text()
    assert not w.dictation.listening_label.isVisible()
    qtbot.waitUntil(lambda: not w.dictation.busy, timeout=MODEL_TIMEOUT)
    text = w.composer.editor.toPlainText()
    assert text.startswith("typed ") and "please" in text.lower()


def test_a_missing_speech_model_is_said_and_the_box_kept(
    qtbot: QtBot, window: MainWindow, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = window

    def missing() -> None:
        raise SpeechModelError("The speech model tiny.en is missing: install Ember's starter set.")

    monkeypatch.setattr(w.dictation, "_make_transcriber", missing)
    w.composer.editor.setPlainText("keep me")
    _click(w)
    qtbot.waitUntil(lambda: "tiny.en is missing" in w.banner.text(), timeout=10_000)
    assert not w.dictation.microphone.is_open and not w.dictation.listening_label.isVisible()
    assert w.composer.editor.toPlainText() == "keep me"
    assert not w.dictation.busy  # a next click may try again


def test_no_microphone_and_a_refused_permission_are_said(qtbot: QtBot, window: MainWindow) -> None:
    w = window
    w.composer.editor.setPlainText("keep me")
    said: list[str] = []
    none = Microphone(inputs=lambda: [])
    none.failed.connect(said.append)
    assert not none.open() and said == [NO_MICROPHONE]
    refused = Microphone(permission=lambda: Qt.PermissionStatus.Denied)
    refused.failed.connect(said.append)
    assert not refused.open() and said[-1] == PERMISSION_DENIED
    not_asked = Microphone(permission=lambda: Qt.PermissionStatus.Undetermined)  # (macOS, Windows: first use)
    not_asked.failed.connect(said.append)
    assert not not_asked.open() and said[-1] == ASKED and not not_asked.is_open
    # in the window: the sentence in the banner, the box as it was, the button up
    w.dictation.microphone.failed.emit(NO_MICROPHONE)
    assert w.banner.text() == NO_MICROPHONE
    assert w.composer.editor.toPlainText() == "keep me" and not w.dictation.button.isChecked()


def _start_pulseaudio() -> bool:
    """PulseAudio's daemon, started if none runs (True: ours, ended at exit). Called as this module is
    collected, before any test runs: Qt Multimedia connects to the sound server at its first use and
    never again, so a server started later (by a fixture) would be missed by a run where an earlier
    test used audio."""
    pulseaudio, pactl = shutil.which("pulseaudio"), shutil.which("pactl")
    if not (pulseaudio and pactl) or subprocess.run([pactl, "info"], capture_output=True, timeout=10).returncode == 0:
        return False
    started = subprocess.run([pulseaudio, "-D", "--exit-idle-time=-1"], capture_output=True, timeout=30)
    if started.returncode != 0:
        return False
    atexit.register(subprocess.run, [pulseaudio, "-k"], timeout=10)
    return True


_start_pulseaudio()


@pytest.fixture(scope="module")
def pulse_microphone() -> Iterator[str]:
    """A real input device: PulseAudio (.ci/run installs it) with a null sink whose sound is remapped as
    the default input (Qt lists no monitor sources; a pipe source lost two thirds of its sound on the way
    to QAudioSource here): what is played to the sink (its name, yielded) is what the microphone hears."""
    pactl = shutil.which("pactl")
    assert pactl, "PulseAudio is missing: apt-get install pulseaudio pulseaudio-utils (.ci/run)"
    assert subprocess.run([pactl, "info"], capture_output=True, timeout=10).returncode == 0, "PulseAudio did not start"

    def load(*args: str) -> str:
        return subprocess.run([pactl, "load-module", *args], check=True, capture_output=True, text=True,
                              timeout=10).stdout.strip()  # fmt: skip

    sink = load("module-null-sink", "sink_name=ember_test_speaker", "rate=16000", "channels=1")
    source = load("module-remap-source", "source_name=ember_test_mic", "master=ember_test_speaker.monitor")
    subprocess.run([pactl, "set-default-source", "ember_test_mic"], check=True, timeout=10)
    yield "ember_test_speaker"
    for module in (source, sink):
        subprocess.run([pactl, "unload-module", module], timeout=10)


def _wait_for_the_default_input(qtbot: QtBot) -> None:
    """Qt Multimedia hears of the new source and the new default from the server, a moment later."""
    qtbot.waitUntil(lambda: "Remapped" in QMediaDevices.defaultAudioInput().description(), timeout=10_000)


def test_a_real_microphone_through_pulseaudio(
    qtbot: QtBot, make_window: Callable[..., MainWindow], pulse_microphone: str, wav: Path
) -> None:
    """The whole path with a device: QAudioSource on PulseAudio's default input, hearing espeak-ng
    speech played (in real time) to the sink behind it; the words land in the box, partials first, and
    stopping closes the device."""
    w = make_window()
    mic = w.dictation.microphone
    _wait_for_the_default_input(qtbot)
    seen: list[str] = []
    w.composer.editor.textChanged.connect(lambda: seen.append(w.composer.editor.toPlainText()))
    _click(w)
    assert mic.is_open and "Remapped" in mic.device_name
    player = subprocess.Popen([shutil.which("paplay") or "paplay", "-d", pulse_microphone, str(wav)])
    qtbot.waitUntil(lambda: player.poll() is not None, timeout=60_000)  # (the window reads meanwhile)
    assert player.returncode == 0
    qtbot.wait(1000)  # (the end of the speech through the sink, and a pause)
    _click(w)
    assert not mic.is_open and mic._source is None  # released at once
    qtbot.waitUntil(lambda: not w.dictation.busy, timeout=MODEL_TIMEOUT)
    heard = w.composer.editor.toPlainText()
    assert len(seen) >= 2 and seen[-1] == heard  # (a partial, then the final text)
    assert word_error_rate(TEXT, heard) <= 0.25, heard


def test_a_device_error_mid_recording_closes_the_microphone(qtbot: QtBot, pulse_microphone: str) -> None:
    """The real Microphone open on PulseAudio's input; the source then stopping in an error state (as
    an unplugged device does; forced here, since unplugging cannot be) closes it and says so."""
    _wait_for_the_default_input(qtbot)
    mic = Microphone()
    said: list[str] = []
    mic.failed.connect(said.append)
    assert mic.open() and mic.is_open
    source = mic._source
    assert source is not None
    mic._source_error = lambda: QtAudio.Error.IOError  # type: ignore[method-assign]
    source.stop()
    mic._on_state()
    assert not mic.is_open and "stopped giving sound" in said[0]


def test_pcm_is_converted_to_16_khz_mono_float() -> None:
    fmt = QAudioFormat()
    fmt.setSampleRate(48_000)
    fmt.setChannelCount(2)
    fmt.setSampleFormat(QAudioFormat.SampleFormat.Int16)
    stereo = np.full((4800, 2), 16384, dtype=np.int16)  # 0.1 s at half scale
    samples = pcm_to_samples(stereo.tobytes() + b"\x01", fmt)  # (a torn last frame is dropped)
    assert samples.dtype == np.float32 and samples.size == 1600
    assert np.allclose(samples, 0.5)


def test_in_a_narrow_window_the_microphone_button_shows_while_it_listens(qtbot: QtBot, window: MainWindow) -> None:
    """At 800x600 the voice buttons give way to the message box, but not while the microphone is open: the
    button is then the way to stop listening (the dictating window at 1024x640 had lost it)."""
    w = window
    w.resize(800, 600)
    qtbot.waitUntil(lambda: w.width() == 800 and w.height() == 600, timeout=5_000)
    QApplication.processEvents()
    button = w.dictation.button
    assert button.isHidden()
    _click(w)
    qtbot.waitUntil(lambda: button.isChecked(), timeout=MODEL_TIMEOUT)
    assert not button.isHidden()
    _click(w)
    qtbot.waitUntil(lambda: not button.isChecked() and not w.dictation.busy, timeout=MODEL_TIMEOUT)
    assert button.isHidden()
