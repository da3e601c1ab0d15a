"""Settings ▸ Voice ▸ Dictation (issue 33): the speech model (the installed ones) and the language spoken
(automatic, or among those the model understands) reach dictation and recordings attached; the side panel's
Metrics tab shows dictation's figures while listening and after.

Real parts as tests/app/test_dictation.py: espeak-ng speech fed into InjectedMicrophone, recognised by the
shipped tiny.en model on the window's task runner."""

from __future__ import annotations

import json
import wave
from collections.abc import Callable
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.app.voice.settings_page import VoicePage
from ember_chat.engine.speech import Transcriber, Transcript
from ember_chat.engine.speech.models import MANIFEST, known, model_folder
from ember_chat.engine.speech.wer import word_error_rate
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.settings import Settings, SettingsFile
from tests.helpers.microphone import InjectedMicrophone
from tests.helpers.speech import SENTENCES, speak

MODEL_TIMEOUT = 60_000


def _voice_page(w: MainWindow) -> VoicePage:
    w.settings_window.open_section("voice")
    page = w.settings_window.page("voice")
    assert isinstance(page, VoicePage)
    return page


def _items(combo: object) -> list[str]:
    return [combo.itemData(i) for i in range(combo.count())]  # type: ignore[attr-defined]


def _fake_download(models_dir: Path, name: str) -> None:
    """A finished download of the Hub model `name` as the Model Manager leaves it (files and manifest):
    enough to be listed as installed, never loaded here."""
    folder = model_folder(models_dir, known(name))  # type: ignore[arg-type]
    folder.mkdir(parents=True)
    files = {"model.bin": b"\0" * 16, "config.json": b"{}", "tokenizer.json": b"{}"}
    for file, data in files.items():
        (folder / file).write_bytes(data)
    manifest = {"files": {f: {"size": len(d), "sha256": ""} for f, d in files.items()}}
    (folder / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")


def test_the_page_offers_the_installed_models_and_the_languages_each_understands(
    make_window: Callable[..., MainWindow],
) -> None:
    w = make_window()
    page = _voice_page(w)
    # only the shipped tiny.en: English-only, so Automatic and English alone, and the page says why
    assert _items(page.speech_model) == ["tiny.en"]
    assert _items(page.language) == ["", "en"]
    assert page.language_note.isVisible() and "English only" in page.language_note.text()

    _fake_download(w.ctx.library.models_dir, "base")  # a multilingual model downloaded
    page = VoicePage(w.read_aloud)
    assert _items(page.speech_model) == ["tiny.en", "base"]
    page.speech_model.setCurrentIndex(1)
    languages = _items(page.language)
    assert languages[0] == "" and len(languages) == 101 and {"fr", "de", "ja", "en"} <= set(languages)
    assert page.language_note.isHidden()
    page.language.setCurrentIndex(page.language.findData("fr"))
    saved = w.ctx.settings_file.load()
    assert (saved.dictation_model, saved.dictation_language) == ("base", "fr")
    # back to the English-only model: French cannot be kept, the language goes back to automatic
    page.speech_model.setCurrentIndex(0)
    assert _items(page.language) == ["", "en"] and page.language.currentData() == ""
    saved = w.ctx.settings_file.load()
    assert (saved.dictation_model, saved.dictation_language) == ("tiny.en", "")


def test_the_speed_and_pitch_sliders_show_their_values(make_window: Callable[..., MainWindow]) -> None:
    page = _voice_page(make_window())  # (a slider alone showed no value)
    assert page.rate_value.isVisible() and page.rate_value.text() == "0 (normal)"
    page.rate.setValue(5)
    page.pitch.setValue(-3)
    assert (page.rate_value.text(), page.pitch_value.text()) == ("+0.5", "−0.3")
    assert VoicePage(page.read_aloud).rate_value.text() == "+0.5"  # (the saved value, shown again)


def test_a_chosen_model_no_longer_installed_is_shown_not_swapped(
    paths: AppPaths, make_window: Callable[..., MainWindow]
) -> None:
    SettingsFile(paths.settings_file).save(Settings(dictation_model="small", dictation_language="de"))
    w = make_window()
    page = _voice_page(w)
    assert page.speech_model.currentData() == "small" and "not installed" in page.speech_model.currentText()
    assert page.language.currentData() == "de"


def test_the_chosen_language_reaches_dictation_and_recordings_and_the_side_panel_shows_the_figures(
    qtbot: QtBot, make_window: Callable[..., MainWindow], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    asked: list[tuple[str, str | None]] = []
    dictation, transcribe = Transcriber.dictation, Transcriber.transcribe

    def spy_dictation(self: Transcriber, language: str | None = None) -> object:
        asked.append(("dictation", language))
        return dictation(self, language)

    recordings: list[Transcript] = []

    def spy_transcribe(self: Transcriber, audio: object, **kwargs: object) -> Transcript:
        result = transcribe(self, audio, **kwargs)  # type: ignore[arg-type]
        if "on_segment" in kwargs:  # (a recording attached: dictation's passes tell no segments)
            asked.append(("recording", kwargs.get("language")))  # type: ignore[arg-type]
            recordings.append(result)
        return result

    monkeypatch.setattr(Transcriber, "dictation", spy_dictation)
    monkeypatch.setattr(Transcriber, "transcribe", spy_transcribe)
    w = make_window()
    w.dictation.use_microphone(InjectedMicrophone())
    page = _voice_page(w)
    page.language.setCurrentIndex(page.language.findData("en"))  # chosen, not automatic
    assert w.ctx.settings.dictation_language == "en"
    panel = w.side.metrics
    assert panel.dictation_box.isHidden()  # (no dictation yet)

    wav = speak(SENTENCES[0], tmp_path / "speech.wav")
    with wave.open(str(wav)) as f:
        pcm = f.readframes(f.getnframes())
    w.dictation.button.pressed.emit()
    w.dictation.button.released.emit()
    assert panel.dictation_box.isVisibleTo(panel) and "listening" in panel.dictation_box.title()
    step = 2205 * 2
    for at in range(0, len(pcm), step):
        w.dictation.microphone.feed_pcm(pcm[at : at + step])
        qtbot.wait(25)
    qtbot.waitUntil(lambda: panel.dictation_rtf.text() != "—", timeout=MODEL_TIMEOUT)
    w.dictation.button.pressed.emit()
    w.dictation.button.released.emit()
    qtbot.waitUntil(lambda: not w.dictation.busy, timeout=30_000)
    assert ("dictation", "en") in asked
    assert word_error_rate(SENTENCES[0], w.composer.editor.toPlainText()) <= 0.25
    # the last dictation's figures, the same as the line under the box computes
    m = w.dictation.metrics
    assert panel.dictation_box.title() == "Last dictation"
    assert panel.dictation_rtf.text() == f"{m.real_time_factor:.2f}"
    assert panel.dictation_first.text() == f"{m.first_words_s:.2f} s"
    assert m.words_per_s > 0 and panel.dictation_words.text() == f"{m.words_per_s:.1f}"
    assert panel.dictation_model.text() == f"tiny.en, {w.dictation.transcriber.threads} threads"  # type: ignore[union-attr]

    # a recording attached is transcribed in the chosen language too, the engine's result saying it
    w.composer.attach_paths([wav])
    qtbot.waitUntil(lambda: bool(recordings), timeout=MODEL_TIMEOUT)
    assert ("recording", "en") in asked and recordings[0].language == "en"
