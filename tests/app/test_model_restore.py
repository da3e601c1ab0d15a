"""While a model loads the window says which one, and how big (issue 16, item 12); the next start loads
the model of the last session, unless Ember crashed while it was loaded (or loading)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from pytestqt.qtbot import QtBot

from ember_chat.app.models.manager.tables import human_size
from ember_chat.app.qt.crash import MODEL_IN_USE, RUNNING, CrashReporter
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.core.states import ModelState
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.settings import SettingsFile
from tests.helpers.models_window import HeldLoads
from tests.helpers.paths import REPO
from tests.helpers.window import LOAD_TIMEOUT, load

ROOT = REPO


def test_a_loading_model_is_named_with_its_size(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    backend = HeldLoads()
    w = make_window(lambda _ref: backend)
    size = human_size((paths.default_models_dir / "tiny.gguf").stat().st_size).replace(" ", "\u00a0")
    try:
        with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == ModelState.LOADING):
            w.models.load_model("tiny.gguf")  # as at start, or from the Model Manager: not a pick in the picker
        assert w.model_picker.currentData() == "tiny.gguf"
        assert w.model_status.text() == f"Loading tiny.gguf ({size})…"
        # no chat is open: the centre says what is loading, with its progress and a way to cancel
        panel = w.centre_stack.currentWidget()
        assert panel is w.loading_panel
        assert "tiny.gguf" in panel.title.text() and size in panel.title.text()
        w.models.on_load_progress(0.4)
        assert panel.progress.value() == 40
        backend.release("tiny.gguf")
        qtbot.waitUntil(lambda: w.controller.model_ready, timeout=LOAD_TIMEOUT)
        assert w.centre_stack.currentWidget() is w.transcript and w.model_picker.currentData() == "tiny.gguf"

        # with a chat open, the chat stays in view and the model bar names the model loading
        conv = w.store.create_conversation("a chat")
        w.store.add_message(conv.id, "user", "a question")
        w.chats.reload_conversations()
        w.chats.open_conversation(conv.id)
        backend.gate("tiny.gguf").clear()
        with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == ModelState.LOADING):
            w.models.load_model("tiny.gguf")
        assert w.centre_stack.currentWidget() is w.transcript and "tiny.gguf" in w.model_status.text()
        with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == ModelState.NONE):
            w.loading_panel.cancel.click()  # the panel's Cancel (hidden here) does what the bar's does
            backend.release("tiny.gguf")  # (the held load sees its cancel once released)
    finally:
        backend.release_all()


def test_the_next_start_loads_the_last_model(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    load(qtbot, w)
    w.close()
    w2 = make_window()
    with qtbot.waitSignal(
        w2.model_state_changed, check_params_cb=lambda s: s == ModelState.READY, timeout=LOAD_TIMEOUT
    ):
        w2.models.restore_last_model(crashed=None)
    assert w2.model_picker.currentData() == "tiny.gguf" and w2.controller.model_ready


def test_a_model_ember_crashed_with_is_not_loaded_again(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    load(qtbot, w)
    w.close()
    w2 = make_window()
    w2.models.restore_last_model(crashed="tiny.gguf")
    assert not w2.models.loading and w2.model is None
    assert w2.banner.isVisible() and "tiny.gguf" in w2.banner.text() and "crash" in w2.banner.text()
    assert w2.settings_file.load().last_model == "tiny.gguf"  # picked again by hand, it loads as before


def test_unloading_forgets_the_last_model(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    load(qtbot, w)
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == ModelState.NONE, timeout=LOAD_TIMEOUT):
        w.models.unload_model()
    assert w.settings_file.load().last_model == ""


def test_the_crash_reporter_remembers_the_model_in_use(tmp_path: Path) -> None:
    crashes = tmp_path / "crashes"
    crash = CrashReporter(crashes)
    crash.install()
    try:
        crash.note_model("big.gguf")
        assert CrashReporter(crashes).model_at_crash() == "big.gguf"  # what a start finds if this run dies now
        crash.note_model(None)  # unloaded
        assert CrashReporter(crashes).model_at_crash() is None
        crash.note_model("big.gguf")
    finally:
        crash.uninstall()
    assert CrashReporter(crashes).model_at_crash() is None  # a clean exit


def _start(tmp_path: Path) -> str:
    """`ember-chat` in its own process (offscreen), quitting once the window is shown: what it said."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "QT_QPA_PLATFORM": "offscreen",
        "EMBER_DATA_DIR": str(tmp_path / "data"),
        "EMBER_CONFIG_DIR": str(tmp_path / "config"),
    }
    out = subprocess.run(
        [sys.executable, "-m", "ember_chat.app.main", "--quit-when-ready"],
        env=env,
        timeout=120,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    return out.stderr


def test_ember_chat_starts_with_the_last_model_unless_it_crashed_with_it(tmp_path: Path) -> None:
    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    settings = SettingsFile(paths.settings_file)
    settings.save(settings.load().with_changes(last_model="tiny.gguf"))
    assert "loading tiny.gguf, the model of the last session" in _start(tmp_path)

    crashes = paths.data_dir / "crashes"  # a run that died while tiny.gguf was loaded
    crashes.mkdir(parents=True, exist_ok=True)
    (crashes / RUNNING).write_text("1")
    (crashes / MODEL_IN_USE).write_text("tiny.gguf")
    said = _start(tmp_path)
    assert "not loading tiny.gguf" in said and "loading tiny.gguf, the model" not in said
