"""Read aloud (issue 33): the speaker action on an answer reads its sentences and becomes Stop while it
reads; Stop silences it at once; with "Read answers aloud as they stream" each sentence is said the moment
it is finished in the stream; Settings ▸ Voice saves voice, speed and pitch and has Test voice; with no
speech engine a sentence names speech-dispatcher.

These run through Qt's own "mock" text-to-speech engine (tests/conftest.py sets EMBER_TTS_ENGINE=mock):
the real speechd engine loads offscreen here, but speech-dispatcher with no sound server never leaves
Speaking (its audio output fails to open) and a later connection can hang, so it is no engine to test
with in CI. The mock engine goes through the same QTextToSpeech states (Ready → Speaking → Ready)."""

from __future__ import annotations

import itertools
import sys
import threading
import time
from collections.abc import Callable

import pytest
from PySide6.QtCore import Qt, QThread, QTimer
from PySide6.QtTextToSpeech import QTextToSpeech
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.app.voice.read_aloud import TEST_SENTENCE
from ember_chat.app.voice.speaker import MOCK, Speaker
from ember_chat.engine.speech.read_aloud import speakable_sentences
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.window import load, send, set_max_tokens


def _answered(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> tuple[MainWindow, int]:
    w = make_window(lambda _ref: FakeBackend(n_tokens=100))
    load(qtbot, w)
    set_max_tokens(w, 12)
    send(qtbot, w, "say something")
    qtbot.waitUntil(lambda: not (w.transcript.rendering or w.transcript.backfilling), timeout=10_000)
    return w, w.store.thread(w.controller.conversation_id)[-1].id


def _engine_made(qtbot: QtBot, speaker: Speaker) -> None:
    speaker.engine()
    qtbot.waitUntil(lambda: speaker.engine() is not None, timeout=5_000)


def _speak_icon(w: MainWindow, answer: int) -> tuple[str, str]:
    """The image and tooltip of the answer's speaker action, as the transcript shows it."""
    block = w.transcript.document().begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fmt = it.fragment().charFormat()
            if fmt.isImageFormat() and fmt.anchorHref() == f"ember:speak/{answer}":
                return fmt.toImageFormat().name(), fmt.toolTip()
            it += 1
        block = block.next()
    raise AssertionError("no speaker action on the answer")


def test_the_speaker_action_reads_the_answer_and_stop_stops_it(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w, answer = _answered(qtbot, make_window)
    content = w.store.message(answer).content
    speaker = w.read_aloud.speaker
    said: list[str] = []
    speaker.sentence_said.connect(said.append)
    assert _speak_icon(w, answer) == ("icon:speaker", "Read this answer aloud")

    w.transcript.action.emit("speak", answer, 0)  # (what a click on the icon gives: transcript/links.py)
    assert speaker.reading == answer and speaker.making  # Stop at once; the engine is made on its thread
    # the first sentence once the engine is made, the rest as each ends
    qtbot.waitUntil(lambda: said == speakable_sentences(content)[:1], timeout=5_000)
    assert speaker.engine_name == "mock"
    tts = speaker.engine()
    assert tts is not None
    qtbot.waitUntil(lambda: tts.state() == QTextToSpeech.State.Speaking, timeout=2_000)
    assert speaker.reading == answer
    assert _speak_icon(w, answer) == ("icon:stop", "Stop reading aloud")

    w.transcript.action.emit("speak", answer, 0)  # its Stop
    assert tts.state() != QTextToSpeech.State.Speaking  # at once, not at the sentence's end
    assert speaker.reading is None
    assert _speak_icon(w, answer) == ("icon:speaker", "Read this answer aloud")
    qtbot.wait(100)
    assert len(said) == 1  # nothing more is said after Stop


def _reading(qtbot: QtBot, w: MainWindow, answer: int) -> QTextToSpeech:
    speaker = w.read_aloud.speaker
    speaker.speak(answer, ["One sentence.", "Another sentence.", "A third sentence."])
    qtbot.waitUntil(lambda: speaker.engine() is not None, timeout=5_000)
    tts = speaker.engine()
    assert tts is not None
    qtbot.waitUntil(lambda: tts.state() == QTextToSpeech.State.Speaking, timeout=2_000)
    return tts


def test_esc_stops_reading_aloud(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    # the answer's Stop may be out of view: Esc stops the reading too (it went on before)
    w, answer = _answered(qtbot, make_window)
    tts = _reading(qtbot, w, answer)
    qtbot.keyClick(w.composer.editor, Qt.Key.Key_Escape)
    assert w.read_aloud.speaker.reading is None and tts.state() != QTextToSpeech.State.Speaking


def test_deleting_the_answer_read_or_its_chat_stops_reading(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w, answer = _answered(qtbot, make_window)
    speaker = w.read_aloud.speaker
    _reading(qtbot, w, answer)
    w.read_aloud.stop_if_gone()  # (the answer still there: reading goes on)
    assert speaker.reading == answer
    question = w.store.thread(w.controller.conversation_id)[-2].id
    w.chats.organise.delete_message(question)  # the question and its answer go
    qtbot.waitUntil(lambda: speaker.reading is None, timeout=5_000)

    w, answer = _answered(qtbot, make_window)
    speaker = w.read_aloud.speaker
    _reading(qtbot, w, answer)
    w.chats.organise.trash([w.controller.conversation_id])
    qtbot.waitUntil(lambda: speaker.reading is None, timeout=5_000)


def test_a_short_answer_is_read_to_its_end_then_the_action_is_a_speaker_again(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w, answer = _answered(qtbot, make_window)
    speaker = w.read_aloud.speaker
    said: list[str] = []
    speaker.sentence_said.connect(said.append)
    speaker.speak(answer, ["One.", "Two."])
    assert speaker.reading == answer
    qtbot.waitUntil(lambda: speaker.reading is None, timeout=5_000)  # (the mock says each in about a second)
    assert said == ["One.", "Two."]
    assert _speak_icon(w, answer)[0] == "icon:speaker"


def test_answers_are_read_sentence_by_sentence_as_they_stream(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    w.ctx.save_settings(w.ctx.settings.with_changes(read_aloud_streaming=True))
    speaker = w.read_aloud.speaker
    _engine_made(qtbot, speaker)  # (the first read's wait for the engine: test_the_engine_is_made_off_…)
    said: list[str] = []
    speaker.sentence_said.connect(said.append)
    c = w.controller
    c.stream_began.emit(7, None)
    c.stream_appended.emit("The **first** sentence")
    assert said == []
    c.stream_appended.emit(" is here. Then")
    assert said == ["The first sentence is here."]  # said as soon as it is finished, not at the answer's end
    assert speaker.reading == 7
    c.stream_appended.emit(" code:\n```\nx = 1. y = 2.\n```\nDone")
    c.stream_ended.emit("", None, "stop")
    qtbot.waitUntil(lambda: speaker.reading is None, timeout=10_000)
    assert said == ["The first sentence is here.", "Then code:", "Code block.", "Done"]


def test_streaming_answers_are_not_read_unless_asked(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    assert not w.ctx.settings.read_aloud_streaming
    said: list[str] = []
    w.read_aloud.speaker.sentence_said.connect(said.append)
    w.controller.stream_began.emit(7, None)
    w.controller.stream_appended.emit("A sentence. Another one. ")
    w.controller.stream_ended.emit("", None, "stop")
    assert said == [] and w.read_aloud.speaker.reading is None


def test_the_voice_settings_are_saved_and_test_voice_speaks(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    from ember_chat.app.voice.settings_page import VoicePage

    w = make_window()
    w.settings_window.open_section("voice")
    page = w.settings_window.page("voice")
    assert isinstance(page, VoicePage) and page.isVisible()
    assert page.engine.text() == "Starting…" and not page.test.isEnabled()  # (the engine is made on its thread)
    qtbot.waitUntil(lambda: page.engine.text() != "Starting…", timeout=5_000)
    assert page.engine.text() == "mock" and page.voice.count() > 1  # the system's language, then the voices
    page.rate.setValue(5)
    page.pitch.setValue(-3)
    page.voice.setCurrentIndex(2)
    page.streaming.setChecked(True)
    saved = w.ctx.settings_file.load()
    assert (saved.read_aloud_rate, saved.read_aloud_pitch, saved.read_aloud_streaming) == (0.5, -0.3, True)
    assert saved.read_aloud_voice == page.voice.itemText(2)
    tts = w.read_aloud.speaker.engine()
    assert tts is not None
    assert (round(tts.rate(), 2), round(tts.pitch(), 2), tts.voice().name()) == (0.5, -0.3, saved.read_aloud_voice)
    said: list[str] = []
    w.read_aloud.speaker.sentence_said.connect(said.append)
    page.test.click()
    assert said == [TEST_SENTENCE]


def test_no_speech_engine_says_which_package_to_install(qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    speaker = Speaker(available=lambda: [])  # (a Linux without speech-dispatcher: Qt lists no engine)
    problems: list[str] = []
    speaker.problem.connect(problems.append)
    speaker.speak(3, ["Hello."])
    assert speaker.reading is None and speaker.engine_name is None
    assert len(problems) == 1 and "speech-dispatcher" in problems[0] and "apt install" in problems[0]


def test_the_engine_is_made_off_the_gui_thread_and_the_first_sentence_said_when_it_comes(qtbot: QtBot) -> None:
    release = threading.Event()
    loaded_on: list[int] = []

    def loaded(_tts: QTextToSpeech) -> None:  # (on the maker thread: speech-dispatcher takes ~2 s here)
        loaded_on.append(threading.get_ident())
        assert release.wait(10)

    speaker = Speaker(MOCK, loaded=loaded)
    said: list[str] = []
    speaker.sentence_said.connect(said.append)
    speaker.speak(5, ["Hello.", "Bye."])
    assert speaker.reading == 5 and speaker.making and speaker.engine() is None
    ticks: list[float] = []
    beat = QTimer()
    beat.timeout.connect(lambda: ticks.append(time.perf_counter()))
    beat.start(10)
    qtbot.waitUntil(lambda: len(ticks) >= 10 and bool(loaded_on), timeout=2_000)  # the GUI thread runs meanwhile
    beat.stop()
    assert loaded_on and loaded_on[0] != threading.get_ident() and said == [] and speaker.making
    assert max(b - a for a, b in itertools.pairwise(ticks)) < 0.5

    release.set()
    qtbot.waitUntil(lambda: said == ["Hello."], timeout=5_000)
    tts = speaker.engine()
    assert tts is not None and tts.engine() == MOCK and tts.thread() is QThread.currentThread()
    assert not speaker.making and speaker.join(0)  # (the maker thread has ended)
    qtbot.waitUntil(lambda: tts.state() == QTextToSpeech.State.Speaking, timeout=2_000)
    speaker.stop()
    assert tts.state() != QTextToSpeech.State.Speaking and speaker.reading is None  # Stop: at once


def test_stop_or_closing_while_the_engine_is_made_says_nothing_when_it_comes(qtbot: QtBot) -> None:
    release = threading.Event()
    speaker = Speaker(MOCK, loaded=lambda _tts: release.wait(10) and None)
    said: list[str] = []
    speaker.sentence_said.connect(said.append)
    speaker.speak(5, ["Hello."])
    speaker.stop()
    assert speaker.reading is None and speaker.making
    release.set()
    qtbot.waitUntil(lambda: speaker.engine() is not None, timeout=5_000)
    qtbot.wait(50)
    assert said == [] and speaker.reading is None

    closing = Speaker(MOCK, loaded=lambda _tts: release.wait(10) and None)
    closing.speak(6, ["Hello."])
    closing.shutdown()  # (the window closes while the engine is made)
    assert closing.join(5_000)  # the maker thread ends by itself once it has handed the engine back
    qtbot.wait(50)
    assert closing.engine() is None and closing.reading is None
