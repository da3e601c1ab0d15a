"""Presets in the real window (a real SQLite file, a real tiny GGUF): new chats start from the default
preset, or the loaded model's own; loading a model applies its default; a chat's own changes are saved
with it and win when it is reopened (after a restart too); the side panel's picker; the window's API
server answers with the loaded model's default preset (the request's own fields win)."""

from __future__ import annotations

from collections.abc import Callable

import openai
import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.presets import PresetLibrary
from tests.helpers.presets_support import load, send
from tests.helpers.window_support import start_api_in_window


@pytest.fixture
def make_window(make_presets_window: Callable[[], MainWindow]) -> Callable[[], MainWindow]:
    """Windows on that folder: tests/app/conftest.py's make_presets_window."""
    return make_presets_window


@pytest.fixture
def paths(two_models_paths: AppPaths) -> AppPaths:
    """The tiny model as tiny.gguf and other.gguf: tests/app/conftest.py's two_models_paths."""
    return two_models_paths


def panel(w: MainWindow) -> tuple[float, int, str]:
    p = w.side.params
    return round(p.temperature.value(), 2), p.max_tokens.value(), p.system_prompt.toPlainText()


def test_new_chats_start_from_the_default_preset_or_the_loaded_models_own(
    qtbot: QtBot, make_window: Callable[[], MainWindow], paths: AppPaths
) -> None:
    lib = PresetLibrary(paths.config_dir)
    daily = lib.create_from("Daily", "You are helpful.", {"temperature": 0.3, "max_tokens": 200}, None)
    short = lib.create_from("Short", "Answer in three words.", {"temperature": 0.0, "max_tokens": 3}, None)
    lib.default_id = daily.id
    lib.set_model_default("tiny.gguf", short.id)

    w = make_window()
    assert panel(w) == (0.3, 200, "You are helpful.")  # no model yet: the default preset (was 1,024 always)
    assert w.side.params.preset_picker.current_name() == "Daily"
    load(qtbot, w, "tiny.gguf")
    assert panel(w) == (0.0, 3, "Answer in three words.")  # loading the model applied its default preset
    assert w.side.params.preset_picker.current_name() == "Short"
    send(qtbot, w, "hello")
    cid = w.controller.conversation_id
    assert cid is not None
    conv = w.store.conversation(cid)
    assert conv.params["max_tokens"] == 3 and conv.system_prompt == "Answer in three words."
    answer = w.store.thread(cid)[-1]
    assert answer.metrics is not None and answer.metrics["output_tokens"] == 3  # it answered with them

    w.chats.new_chat()
    assert panel(w) == (0.0, 3, "Answer in three words.")  # a new chat with this model: its preset
    load(qtbot, w, "other.gguf")  # a model without its own: the default preset
    assert panel(w) == (0.3, 200, "You are helpful.")


def test_a_chats_own_changes_are_saved_with_it_and_win_when_reopened(
    qtbot: QtBot, make_window: Callable[[], MainWindow], paths: AppPaths
) -> None:
    lib = PresetLibrary(paths.config_dir)
    short = lib.create_from("Short", "Be short.", {"temperature": 0.0, "max_tokens": 4}, None)
    lib.set_model_default("tiny.gguf", short.id)
    w = make_window()
    load(qtbot, w, "tiny.gguf")
    send(qtbot, w, "one")
    cid = w.controller.conversation_id
    assert cid is not None
    w.side.params.temperature.setValue(1.25)  # the chat's own change, on top of the preset
    w.side.params.system_prompt.setPlainText("Be very short.")
    assert w.side.params.preset_picker.current_name() == ""  # no preset has these values: "Custom"
    w.chats.new_chat()
    assert panel(w) == (0.0, 4, "Be short.")
    load(qtbot, w, "tiny.gguf")  # loading the model again does not touch a saved chat
    w.chats.open_conversation(cid)
    assert panel(w) == (1.25, 4, "Be very short.")
    load(qtbot, w, "tiny.gguf")
    assert panel(w) == (1.25, 4, "Be very short.")  # the open chat keeps its own when a model loads
    w.close()
    assert w.join_background(30)

    again = make_window()  # after a restart, from the SQLite file
    again.chats.open_conversation(cid)
    assert panel(again) == (1.25, 4, "Be very short.")


def test_the_side_panels_picker_applies_a_preset_to_the_open_chat(
    qtbot: QtBot, make_window: Callable[[], MainWindow], paths: AppPaths
) -> None:
    lib = PresetLibrary(paths.config_dir)
    poet = lib.create_from("Poet", "Answer in verse.", {"temperature": 1.1, "max_tokens": 5}, None)
    w = make_window()
    load(qtbot, w, "tiny.gguf")
    w.side.params.max_tokens.setValue(2)
    send(qtbot, w, "one")
    cid = w.controller.conversation_id
    assert cid is not None
    picker = w.side.params.preset_picker
    assert picker.current_name() == ""  # max tokens 2 is no preset's
    picker.combo.setCurrentIndex(picker.combo.findData(poet.id))
    picker.combo.activated.emit(picker.combo.currentIndex())  # (as a click on the item does)
    assert panel(w) == (1.1, 5, "Answer in verse.")
    conv = w.store.conversation(cid)
    assert conv.params["temperature"] == 1.1 and conv.system_prompt == "Answer in verse."  # saved with the chat
    assert picker.current_name() == "Poet"


def test_the_windows_api_server_answers_with_the_loaded_models_default_preset(
    qtbot: QtBot, make_window: Callable[[], MainWindow], paths: AppPaths
) -> None:
    lib = PresetLibrary(paths.config_dir)
    pirate = "You are a pirate captain. Answer every question as a pirate would, with many nautical words."
    short = lib.create_from("Short pirate", pirate, {"temperature": 0.0, "max_tokens": 3}, None)
    lib.set_model_default("tiny.gguf", short.id)
    w = make_window()
    load(qtbot, w, "tiny.gguf")
    url = start_api_in_window(qtbot, w)
    hi = [{"role": "user", "content": "Hi"}]
    with openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=60) as client:
        out = client.chat.completions.create(model=client.models.list().data[0].id, messages=hi)  # type: ignore[arg-type]
        assert out.usage is not None and out.usage.completion_tokens == 3  # the preset's, not the API's 1,024
        own = client.chat.completions.create(model=out.model, messages=hi, max_tokens=5)  # type: ignore[arg-type]
        assert own.usage is not None and own.usage.completion_tokens == 5  # the request's own wins
    load(qtbot, w, "other.gguf")  # another model, without a default preset: no system prompt added
    with openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=60) as client:
        other = client.chat.completions.create(model=client.models.list().data[0].id, messages=hi, max_tokens=1)  # type: ignore[arg-type]
        assert other.usage is not None and out.usage.prompt_tokens - other.usage.prompt_tokens >= len(pirate) // 2


def test_a_damaged_presets_file_is_set_aside_and_said_and_the_window_starts(
    make_window: Callable[[], MainWindow], paths: AppPaths
) -> None:
    paths.config_dir.mkdir(parents=True, exist_ok=True)
    (paths.config_dir / "presets.json").write_text('{"presets": [{"name": "half', encoding="utf-8")
    w = make_window()
    text = w.banner.text()
    assert "presets file" in text and "presets.damaged-" in text and "Default preset is used" in text
    assert [p.name for p in w.presets.library.presets()] == ["Default"]
    assert panel(w) == (0.7, 1024, "")  # the app's defaults
    aside = [p for p in paths.config_dir.iterdir() if p.name.startswith("presets.damaged-")]
    assert len(aside) == 1 and aside[0].read_text(encoding="utf-8") == '{"presets": [{"name": "half'


def test_values_set_in_a_new_chat_stay_when_a_model_without_its_own_preset_loads(
    qtbot: QtBot, make_window: Callable[[], MainWindow], paths: AppPaths
) -> None:
    """What a user (or `ember-chat --temperature 0 --max-tokens 160 --send …`) sets in the new chat before the
    model is ready is not reset by the load: only a model with a default preset of its own changes it."""
    lib = PresetLibrary(paths.config_dir)
    short = lib.create_from("Short", "Be short.", {"temperature": 0.0, "max_tokens": 4}, None)
    lib.set_model_default("tiny.gguf", short.id)
    w = make_window()
    w.side.params.temperature.setValue(0.0)
    w.side.params.max_tokens.setValue(160)
    load(qtbot, w, "other.gguf")  # no preset of its own: the new chat keeps what was set
    assert panel(w) == (0.0, 160, "")
    load(qtbot, w, "tiny.gguf")  # its own preset: applied to the new chat
    assert panel(w) == (0.0, 4, "Be short.")
