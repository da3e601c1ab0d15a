from __future__ import annotations

import json
from pathlib import Path

import pytest

from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.storage.settings import Settings, SettingsFile


def test_defaults_and_descriptions() -> None:
    s = Settings()
    assert s.context_length == 4096 and s.temperature == 0.7 and s.repeat_penalty == 1.0
    described = Settings.describe()
    assert described["temperature"]["min"] == 0.0 and described["temperature"]["max"] == 5.0
    assert all(d["description"] for d in described.values())


def test_ranges_and_types() -> None:
    with pytest.raises(InvalidParameter):
        Settings(context_length=10)
    with pytest.raises(InvalidParameter):
        Settings(temperature="hot")
    with pytest.raises(InvalidParameter):
        Settings(theme="purple")
    assert Settings(temperature=1).temperature == 1.0


def test_round_trip_and_atomic_save(tmp_path: Path) -> None:
    f = SettingsFile(tmp_path / "cfg" / "settings.json")
    assert f.load() == Settings()
    s = Settings(temperature=0.1, theme="dark", models_dir="/models")
    f.save(s)
    assert f.load() == s
    assert sorted(p.name for p in f.path.parent.iterdir()) == ["settings.json"]  # no temp files left


def test_save_failure_keeps_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = SettingsFile(tmp_path / "settings.json")
    f.save(Settings(temperature=0.3))

    def broken_dump(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(json, "dump", broken_dump)
    with pytest.raises(OSError):
        f.save(Settings(temperature=0.9))
    monkeypatch.undo()
    assert f.load().temperature == 0.3
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]


def test_damaged_or_hand_edited_file_falls_back(tmp_path: Path) -> None:
    f = SettingsFile(tmp_path / "settings.json")
    f.path.write_text("{not json")
    assert f.load() == Settings()
    f.path.write_text(json.dumps({"temperature": 99, "top_k": 7, "unknown": 1}))
    loaded = f.load()
    assert loaded.temperature == Settings().temperature and loaded.top_k == 7


def test_a_damaged_file_is_set_aside_and_each_bad_value_is_named(tmp_path: Path) -> None:
    f = SettingsFile(tmp_path / "settings.json")
    f.path.write_text("{not json")
    assert f.load() == Settings()
    problems = f.take_problems()
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("settings.damaged-")]
    assert len(aside) == 1 and aside[0].read_text() == "{not json"  # kept, for the user to look at
    assert len(problems) == 1 and str(aside[0]) in problems[0] and "Default settings are used" in problems[0]
    assert not f.path.exists() and f.take_problems() == []

    f.path.write_text(json.dumps({"temperature": 99, "theme": "purple", "top_k": 7, "api_port": "x"}))
    loaded = f.load()
    assert (loaded.temperature, loaded.theme, loaded.top_k) == (0.7, "system", 7)  # one by one
    problems = f.take_problems()
    assert len(problems) == 3
    assert any("temperature must be between 0.0 and 5.0, got 99" in p and "default (0.7)" in p for p in problems)
    assert any("theme" in p and "'system'" in p for p in problems) and any("api_port" in p for p in problems)

    f.path.write_text("[1, 2]")
    assert f.load() == Settings() and "does not hold settings" in f.take_problems()[0]
