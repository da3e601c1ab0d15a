"""The window's local API server serves every installed model (issue 30): a request naming another model
loads it in an engine of its own, the Local API server dialog lists it (memory, idle for, Unload) and
logs its load and unload; the window's own model is served by the window's engine, and closing the
window leaves no thread behind."""

from __future__ import annotations

import json
import re
import threading
import urllib.request
from collections.abc import Callable

import openai
import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from ember_chat.app.models.manager.dialog import ModelManager
from ember_chat.app.models.manager.installed import API_COLUMN
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.settings import Settings
from tests.helpers.accessibility import _missing_names
from tests.helpers.api_dialog import WAIT_MS, start_server
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.window import load


@pytest.fixture
def paths(two_models_paths: AppPaths) -> AppPaths:
    """The tiny model as tiny.gguf and other.gguf: tests/app/conftest.py's two_models_paths."""
    return two_models_paths


def api_models(w: MainWindow) -> dict[str, dict[str, object]]:
    """GET /api/models, by name."""
    url = w.api.server.url.removesuffix("/v1") + "/api/models"
    with urllib.request.urlopen(url, timeout=30) as response:
        return {row["name"]: row for row in json.load(response)["models"]}


def table(dialog: object) -> list[tuple[str, ...]]:
    t = dialog.api_models
    return [tuple(t.item(r, c).text() for c in range(3)) for r in range(t.rowCount())]


def logged(dialog: object) -> list[str]:
    t = dialog.table
    return [t.item(r, 2).text() for r in range(t.rowCount()) if t.item(r, 1).text() == "Models"]


def answered(dialog: object) -> int:
    """The log's generations: their rows have a token count (a plain HTTP exchange shows "—")."""
    t = dialog.table
    return sum(1 for r in range(t.rowCount()) if "/v1/chat/completions" in t.item(r, 1).text()
               and t.item(r, 5).text() not in ("", "—"))  # fmt: skip


def test_a_request_naming_another_model_loads_it_the_dialog_lists_it_and_unloads_it(
    qtbot: QtBot, make_window: Callable[..., MainWindow], no_api_server_key: None, no_thread_left: None
) -> None:
    w = make_window()
    load(qtbot, w, "tiny.gguf")
    window_loads = dict(w.bridge.service.load_counts())
    dialog = start_server(qtbot, w)
    names = api_models(w)
    other = next(n for n in names if n.startswith("other"))
    mine = next(n for n in names if n.startswith("tiny"))
    assert names[other]["state"] == "not loaded"
    # the window's model is pinned in the pool (off the GUI thread: the pool reads the library)
    qtbot.waitUntil(lambda: api_models(w)[mine]["loaded_by"] == "window", timeout=WAIT_MS)
    client = openai.OpenAI(base_url=w.api.server.url, api_key="none", max_retries=0)

    answer = client.chat.completions.create(model=other, messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    assert answer.model == other and answer.usage is not None and answer.usage.completion_tokens >= 1
    assert api_models(w)[other]["state"] == "loaded" and api_models(w)[other]["loaded_by"] == "api"
    qtbot.waitUntil(lambda: [row[0] for row in table(dialog)] == [other], timeout=WAIT_MS)  # the dialog lists it
    _name, memory, idle = table(dialog)[0]
    assert memory.endswith("MB") and (idle.endswith(" s") or idle == "answering")
    qtbot.waitUntil(lambda: any(line.startswith(f"loaded {other}") for line in logged(dialog)), timeout=WAIT_MS)
    # its answer is in the log with its metrics, as an answer of the window's engine is
    qtbot.waitUntil(lambda: answered(dialog) == 1, timeout=WAIT_MS)
    assert not _missing_names(dialog.api_models.parentWidget())  # the Unload buttons have names and descriptions

    # the window's model: the window's engine answers (nothing loaded a second time)
    mine_answer = client.chat.completions.create(model=mine, messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    assert mine_answer.usage is not None and mine_answer.usage.completion_tokens >= 1
    assert w.api.pool is not None and dict(w.api.pool.loads_by_model) == {other: 1}
    assert dict(w.bridge.service.load_counts()) == window_loads

    with qtbot.waitSignal(w.api.pool_changed, timeout=WAIT_MS):
        dialog.api_models.cellWidget(0, 3).click()  # Unload
    qtbot.waitUntil(lambda: dialog.api_models.rowCount() == 0, timeout=WAIT_MS)
    assert api_models(w)[other]["state"] == "not loaded"
    assert any(line.startswith(f"unloaded {other}") for line in logged(dialog))
    assert f"unloaded {other} (Unload in Ember's window)" in logged(dialog)  # (not "by request": the user did)

    # the window loads the other model: the pool now serves it with the window's engine, and the first
    # one, no longer the window's, is loaded for a request naming it
    load(qtbot, w, "other.gguf")
    qtbot.waitUntil(lambda: api_models(w)[other]["loaded_by"] == "window", timeout=WAIT_MS)
    client.chat.completions.create(model=other, messages=[{"role": "user", "content": "hi"}], max_tokens=1)
    client.chat.completions.create(model=mine, messages=[{"role": "user", "content": "hi"}], max_tokens=1)
    assert dict(w.api.pool.loads_by_model) == {other: 1, mine: 1}
    qtbot.waitUntil(lambda: [row[0] for row in table(dialog)] == [mine], timeout=WAIT_MS)
    w.close()  # the API server still serves it: quitting asks first
    assert w.api.quit_question is not None
    w.api.quit_button.click()
    assert w.join_background(30)
    left = [t.name for t in threading.enumerate() if t.name in ("ember-pool-ttl", "ember-engine", "ember-api-stop")]
    assert not left, left


def test_a_model_answering_a_request_is_not_unloaded_and_the_dialog_says_why(
    qtbot: QtBot, make_window: Callable[..., MainWindow], no_api_server_key: None, no_thread_left: None
) -> None:
    w = make_window(lambda _ref: FakeBackend(n_tokens=100_000, delay_s=0.002))  # (the pool's engines too)
    load(qtbot, w, "tiny.gguf")
    dialog = start_server(qtbot, w)
    other = next(n for n in api_models(w) if n.startswith("other"))
    client = openai.OpenAI(base_url=w.api.server.url, api_key="none", max_retries=0)
    stream = client.chat.completions.create(
        model=other, messages=[{"role": "user", "content": "go on"}], max_tokens=100_000, stream=True
    )
    next(iter(stream))  # it streams: the model is loaded and in use
    qtbot.waitUntil(lambda: [row[0] for row in table(dialog)] == [other], timeout=WAIT_MS)
    dialog._read_pool()  # (now it answers: the table says so)
    qtbot.waitUntil(lambda: table(dialog)[0][2] == "answering", timeout=WAIT_MS)
    dialog.api_models.cellWidget(0, 3).click()
    qtbot.waitUntil(lambda: "answering 1 request" in dialog.api_models_note.text(), timeout=WAIT_MS)
    assert api_models(w)[other]["state"] == "loaded"
    stream.close()
    # the stream ends (the log gets its row): the table says idle at once, and the refusal goes
    qtbot.waitUntil(lambda: table(dialog)[0][2].endswith(" s"), timeout=WAIT_MS)
    assert dialog.api_models_note.isHidden() and not dialog.api_models_note.text()
    last = dialog.table.item(dialog.table.rowCount() - 1, 2)
    assert last.toolTip() == last.text()  # (a narrow column elides it)


def api_column(manager: ModelManager) -> dict[str, str]:
    """The Model Manager's Installed tab: what its API column says of each model (by library name)."""
    t = manager.installed
    return {t.item(r, 0).data(Qt.ItemDataRole.UserRole).name: t.item(r, API_COLUMN).text() for r in range(t.rowCount())}


def loaded_by_the_api(manager: ModelManager) -> dict[str, str]:
    return {name: text for name, text in api_column(manager).items() if text}


def test_the_model_manager_and_the_model_bar_show_a_model_the_api_loaded_and_unload_it(
    qtbot: QtBot, make_window: Callable[..., MainWindow], no_api_server_key: None, no_thread_left: None
) -> None:
    w = make_window()
    load(qtbot, w, "tiny.gguf")
    start_server(qtbot, w)
    other = next(n for n in api_models(w) if n.startswith("other"))
    bar = w.model_bar.api_models
    assert bar.isHidden()  # nothing loaded by the API yet
    client = openai.OpenAI(base_url=w.api.server.url, api_key="none", max_retries=0)
    client.chat.completions.create(model=other, messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    qtbot.waitUntil(lambda: not bar.isHidden(), timeout=WAIT_MS)  # the model bar counts it
    assert bar.text() == "API: 1 model" and bar.toolTip().startswith("API: 1 model loaded") and other in bar.toolTip()
    assert bar.accessibleName() and bar.accessibleDescription()

    bar.click()  # the Model Manager's Installed tab, where it is said
    manager = w.models.manager
    assert manager is not None and manager.isVisible() and manager.tabs.currentIndex() == 1
    tab = manager.installed_tab
    qtbot.waitUntil(lambda: len(loaded_by_the_api(manager)) == 1, timeout=WAIT_MS)
    ((name, said),) = loaded_by_the_api(manager).items()
    assert name.startswith("other") and not manager.installed.isColumnHidden(API_COLUMN)
    assert re.fullmatch(r"Loaded by the API · [\d.,]+ [kMG]?B · (idle \d+ s|answering)", said), said
    assert tab.unload_api_btn.isHidden()  # (nothing selected)
    assert manager.select_installed(name)
    assert not tab.unload_api_btn.isHidden() and tab.unload_api_btn.isEnabled()
    manager.select_installed(next(n for n in api_column(manager) if n != name))  # the window's: not the API's
    assert tab.unload_api_btn.isHidden()

    manager.select_installed(name)
    with qtbot.waitSignal(w.api.pool_changed, timeout=WAIT_MS):
        tab.unload_api_btn.click()  # Unload from API
    qtbot.waitUntil(lambda: manager.installed.isColumnHidden(API_COLUMN), timeout=WAIT_MS)
    assert api_models(w)[other]["state"] == "not loaded"
    assert not loaded_by_the_api(manager) and tab.unload_api_btn.isHidden()
    qtbot.waitUntil(bar.isHidden, timeout=WAIT_MS)
    client.close()  # (its connection's thread on the server ends)


def test_the_model_manager_does_not_unload_a_model_answering_a_request_and_says_why(
    qtbot: QtBot, make_window: Callable[..., MainWindow], no_api_server_key: None, no_thread_left: None
) -> None:
    w = make_window(lambda _ref: FakeBackend(n_tokens=100_000, delay_s=0.002))  # (the pool's engines too)
    load(qtbot, w, "tiny.gguf")
    start_server(qtbot, w)
    other = next(n for n in api_models(w) if n.startswith("other"))
    client = openai.OpenAI(base_url=w.api.server.url, api_key="none", max_retries=0)
    stream = client.chat.completions.create(
        model=other, messages=[{"role": "user", "content": "go on"}], max_tokens=100_000, stream=True
    )
    next(iter(stream))  # it streams: the model is loaded and in use
    w.models.open_api_models()
    manager = w.models.manager
    assert manager is not None
    tab = manager.installed_tab
    qtbot.waitUntil(lambda: len(loaded_by_the_api(manager)) == 1, timeout=WAIT_MS)
    tab.read_api_models()  # (now it answers: the column says so)
    qtbot.waitUntil(lambda: next(iter(loaded_by_the_api(manager).values())).endswith(" · answering"), timeout=WAIT_MS)
    assert manager.select_installed(next(iter(loaded_by_the_api(manager))))
    tab.unload_api_btn.click()
    qtbot.waitUntil(lambda: "answering 1 request" in manager.banner.text(), timeout=WAIT_MS)
    assert manager.banner.isVisible() and api_models(w)[other]["state"] == "loaded"
    assert len(loaded_by_the_api(manager)) == 1  # still said loaded
    stream.close()
    client.close()


def test_the_pools_settings_are_saved_from_the_dialog(
    qtbot: QtBot, make_window: Callable[..., MainWindow], no_api_server_key: None
) -> None:
    w = make_window()
    dialog = w.api.open_dialog()
    assert (dialog.budget.value(), dialog.models_max.value(), dialog.model_ttl.value()) == (0, 0, 3600)
    assert dialog.budget.text() == "3/4 of the free memory" and dialog.models_max.text() == "no limit"
    dialog.budget.setValue(4000)
    dialog.models_max.setValue(2)
    dialog.model_ttl.setValue(600)
    with qtbot.waitSignal(dialog.applied, timeout=WAIT_MS):
        dialog.apply()
    s = w.ctx.settings
    assert (s.api_memory_budget_mb, s.api_models_max, s.api_model_ttl_s) == (4000, 2, 600)
    described = Settings.describe()
    assert described["api_model_ttl_s"]["default"] == 3600 and described["api_memory_budget_mb"]["min"] == 0


def test_a_read_of_the_pool_still_out_when_the_server_stops_shows_nothing_stale(
    qtbot: QtBot, make_window: Callable[..., MainWindow], no_api_server_key: None, no_thread_left: None
) -> None:
    """A view that asked for the pool's models just before Stop is not shown the stopped server's models
    when that read comes back (the model bar kept saying "API: 1 model" until the next change)."""
    w = make_window()
    load(qtbot, w, "tiny.gguf")
    start_server(qtbot, w)
    other = next(n for n in api_models(w) if n.startswith("other"))
    client = openai.OpenAI(base_url=w.api.server.url, api_key="none", max_retries=0)
    client.chat.completions.create(model=other, messages=[{"role": "user", "content": "hi"}], max_tokens=1)
    pool = w.api.pool
    assert pool is not None
    reading, go_on, read = threading.Event(), threading.Event(), threading.Event()  # (the read: begun, let go, done)
    states = pool.states

    def slow_states() -> list:
        reading.set()
        go_on.wait(30)
        try:
            return states()
        finally:
            read.set()

    pool.states = slow_states  # type: ignore[method-assign]
    shown: list[list[str]] = []
    w.api.read_pool(lambda rows: shown.append([r.name for r in rows]))
    assert reading.wait(30)
    w.api.stop()
    with qtbot.waitSignal(w.api.pool_tasks.settled, timeout=WAIT_MS):  # (the read's callback has run)
        go_on.set()
    assert read.is_set() and all(not rows for rows in shown), shown
    assert w.join_background(30)
