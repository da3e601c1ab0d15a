"""The speech model and language of dictation in settings.json (issue 33): saved and read back; a hostile
file's unknown model or language, or a language the model cannot understand, falls back to the default
and says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ember_chat.engine.core.speech_catalog import WHISPER_LANGUAGES, model_languages
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.storage.settings import Settings, SettingsFile


def test_the_dictation_settings_round_trip(tmp_path: Path) -> None:
    file = SettingsFile(tmp_path / "settings.json")
    file.save(Settings(dictation_model="small", dictation_language="fr"))
    loaded = SettingsFile(tmp_path / "settings.json").load()
    assert (loaded.dictation_model, loaded.dictation_language) == ("small", "fr")
    assert (Settings().dictation_model, Settings().dictation_language) == ("tiny.en", "")


@pytest.mark.parametrize(
    ("raw", "expected", "said"),
    [
        ({"dictation_model": "../../etc/passwd", "dictation_language": "fr"}, ("tiny.en", ""), "dictation_model"),
        ({"dictation_model": "x" * 100_000}, ("tiny.en", ""), "dictation_model"),
        ({"dictation_model": "base", "dictation_language": "klingon"}, ("base", ""), "dictation_language"),
        ({"dictation_model": "base.en", "dictation_language": "de"}, ("base.en", ""), "English (en) only"),
        ({"dictation_model": 3, "dictation_language": ["en"]}, ("tiny.en", ""), "dictation_model"),
    ],
)
def test_a_hostile_value_falls_back_and_is_said(
    tmp_path: Path, raw: dict[str, object], expected: tuple[str, str], said: str
) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    file = SettingsFile(path)
    loaded = file.load()
    assert (loaded.dictation_model, loaded.dictation_language) == expected
    assert any(said in p for p in file.problems)
    assert all(len(p) < 600 for p in file.problems)  # (a huge value is not echoed whole)


def test_an_english_only_model_understands_english_only() -> None:
    assert model_languages("tiny.en") == ("en",) and model_languages("distil-large-v3") == ("en",)
    assert set(model_languages("large-v3-turbo")) == set(WHISPER_LANGUAGES) and len(WHISPER_LANGUAGES) == 100
    assert model_languages("nonsense") == ()
    with pytest.raises(InvalidParameter, match="English"):
        Settings(dictation_language="ja")
