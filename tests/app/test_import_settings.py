"""A chat's saved settings come from anyone (a chat file imported, an older Ember's database): an Ember
export whose `params` hold values of the wrong type or out of range (tests/hostile/
chat_export_bad_settings.json: `"stop": 5` raised a TypeError, `"context_length": "x"` a ValueError on
the GUI thread) is imported through File ▸ Import and opened with the banner's Open: only the valid
settings are kept, the rest take their defaults, nothing fails. A chat already stored with such values
opens the same way and says which could not be used."""

from __future__ import annotations

from collections.abc import Callable

from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.core.params import SPECS
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.settings import Settings
from tests.helpers.import_window import imported_and_opened
from tests.helpers.paths import TESTS

HOSTILE = TESTS / "hostile"
KEPT = {"top_p": 0.5, "repeat_penalty": 1.1, "seed": 7}  # the valid ones of the hostile file


def shown(w: MainWindow) -> dict[str, object]:
    """The Parameters panel's values."""
    panel = w.side.params
    return {
        "temperature": panel.temperature.value(),
        "top_k": panel.top_k.value(),
        "top_p": panel.top_p.value(),
        "min_p": panel.min_p.value(),
        "repeat_penalty": panel.repeat_penalty.value(),
        "max_tokens": panel.max_tokens.value(),
        "seed": panel.seed.value(),
        "context": panel.context.value(),
        "json": panel.json_answer.response_format(),
    }


DEFAULTS = {name: SPECS[name].default for name in ("temperature", "top_k", "min_p", "max_tokens")}


def test_an_imported_chat_keeps_only_valid_settings_and_opens(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    chat_id = imported_and_opened(qtbot, w, HOSTILE / "chat_export_bad_settings.json")
    assert w.store.conversation(chat_id).params == KEPT  # the rest never reached the database
    assert shown(w) == {
        **DEFAULTS,
        **KEPT,
        "context": Settings().context_length,
        "json": None,
    }


def test_a_chat_stored_with_bad_settings_opens_with_the_defaults_and_says_so(
    qtbot: QtBot, paths: AppPaths, make_window: Callable[..., MainWindow]
) -> None:
    """As an import before this check stored them (the database is the user's, from an older Ember)."""
    store = ConversationStore(paths.database)
    bad = {"stop": 5, "context_length": "x", "temperature": 0.3, "top_k": "many"}
    cid = store.create_conversation("Stored long ago", params=bad).id
    store.add_message(cid, "user", "hello")
    store.close()
    w = make_window()
    w.chats.open_conversation(cid)
    assert w.controller.conversation_id == cid
    assert shown(w) == {
        **DEFAULTS,
        "temperature": 0.3,
        "top_p": SPECS["top_p"].default,
        "repeat_penalty": SPECS["repeat_penalty"].default,
        "seed": -1,  # (random)
        "context": Settings().context_length,
        "json": None,
    }
    assert w.banner.isVisible() and "stop, context_length, top_k" in w.banner.text(), w.banner.text()
    assert "could not be used" in w.banner.text()
