"""Start the desktop app: `ember-chat` with no command.

Optional scripted mode for CI and demos: `--model NAME` loads a model, `--send TEXT` sends a message,
`--screenshot FILE` saves the window once the answer is complete and quits (shell/scripted_run.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (imported where used: the window's modules load after the command line is read)
    from ember_chat.app.shell.main_window import MainWindow
    from ember_chat.engine.core.refs import ModelRef
    from ember_chat.engine.inference.backend import InferenceBackend
    from ember_chat.engine.storage.paths import AppPaths

T0 = time.perf_counter()

os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_DISABLE_XET", "1")
os.environ.setdefault("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")


def build_window(
    paths: AppPaths | None = None,
    backend_factory: Callable[[ModelRef], InferenceBackend] | None = None,
    notices: list[str] | None = None,
) -> MainWindow:
    """Everything the app needs, wired; the caller shows the window and runs the event loop.
    `backend_factory(ref)`: the backend for a model reference (default: local runtime or remote)."""
    from PySide6.QtCore import QSettings

    from ember_chat.app.engine_link.bridge import EngineBridge
    from ember_chat.app.models.kv_caches import open_snapshot_store
    from ember_chat.app.shell.compose import app_context, compose
    from ember_chat.app.shell.main_window import MainWindow
    from ember_chat.engine.inference.service.engine import EngineService
    from ember_chat.engine.inference.service.model import default_backend_factory
    from ember_chat.engine.models.download_queue import DownloadQueue
    from ember_chat.engine.models.downloader import Downloader
    from ember_chat.engine.models.library import ModelLibrary
    from ember_chat.engine.storage.connections import ConnectionStore
    from ember_chat.engine.storage.model_settings import ModelSettingsStore
    from ember_chat.engine.storage.paths import AppPaths
    from ember_chat.engine.storage.recovery import open_conversations
    from ember_chat.engine.storage.secrets import TokenStore
    from ember_chat.engine.storage.settings import SettingsFile

    paths = paths or AppPaths.default()
    settings_file = SettingsFile(paths.settings_file)
    settings = settings_file.load()
    models_dir = settings.models_folder(paths.default_models_dir)
    opened = open_conversations(paths.database)  # a damaged database is set aside, never fatal
    service = EngineService(backend_factory or default_backend_factory, queue_limit=settings.api_queue_limit)
    # saved conversation caches (KV snapshots): the model restores a chat's state from them; None when off
    service.snapshot_store = open_snapshot_store(paths.data_dir, settings.kv_snapshot_cap_mb)
    bridge = EngineBridge(service)
    state = QSettings(str(paths.config_dir / "window.ini"), QSettings.Format.IniFormat)
    endpoint = settings.hub_endpoint()
    tokens = TokenStore()
    library = ModelLibrary(models_dir)
    downloads = DownloadQueue(lambda: Downloader(endpoint, tokens.get()), models_dir)
    downloads.restore_partials(library.partial_downloads())  # unfinished downloads come back paused
    connections = ConnectionStore(paths.connections_file)
    model_settings = ModelSettingsStore(paths.model_settings_file)
    ctx = app_context(opened.store, bridge, library, settings_file, connections, model_settings, paths.data_dir)
    window = MainWindow(ctx, state, downloads)
    compose(window, [*(notices or []), *([opened.notice] if opened.notice else [])], endpoint, tokens)  # its features
    return window


def install_translations(app: object, folder: Path | None = None, locale: object = None) -> bool:
    """Ember's strings in the system language, when a translation for it ships in resources/i18n
    (English, the source language, needs none)."""
    from PySide6.QtCore import QLocale, QTranslator

    from ember_chat.engine.resources import resources_dir

    translator = QTranslator(app)
    folder = folder or resources_dir() / "i18n"
    if not translator.load(locale or QLocale.system(), "ember", "_", str(folder)):
        return False
    return app.installTranslator(translator)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ember-chat", description="Ember desktop app")
    ap.add_argument("--model", help="load this model at start ('starter' or a name/path)")
    ap.add_argument("--send", help="send this message once the model is loaded")
    ap.add_argument("--screenshot", help="save a screenshot of the window when the answer is done, then quit")
    ap.add_argument("--max-tokens", type=int, help="answer length for --send")
    ap.add_argument("--temperature", type=float, help="sampling temperature for --send (0: greedy)")
    ap.add_argument("--quit-when-ready", action="store_true", help="quit once the window is shown (timing)")
    args = ap.parse_args(argv)

    from PySide6.QtWidgets import QApplication

    from ember_chat.app.qt.platform_help import PlatformFailureWatch

    with PlatformFailureWatch():  # the xcb plugin failing to load: say which libraries it needs
        app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Ember")
    app.setDesktopFileName("io.emberchat.Ember")  # Wayland/X11: the menu entry and its icon

    from ember_chat.app.style.theme import app_icon

    app.setWindowIcon(app_icon())
    app.setStyle("Fusion")
    install_translations(app)
    from ember_chat.app.qt.gc_guard import MainThreadGc

    collector = MainThreadGc(app)  # noqa: F841 - Python's garbage collector on the GUI thread only (see there)
    from ember_chat.app.qt.single_instance import SingleInstance, bring_to_front
    from ember_chat.engine.storage.paths import AppPaths

    paths = AppPaths.default()
    guard = SingleInstance(paths.data_dir)
    if not guard.acquire():
        print("ember: Ember is already running with this data folder; its window was brought to the front.",
              file=sys.stderr)  # fmt: skip
        return 0
    from ember_chat.app.qt.crash import CrashReporter

    crash = CrashReporter(paths.data_dir / "crashes")
    last_run = crash.previous_crash()
    crashed_model = crash.model_at_crash()
    crash.install()
    window = build_window(paths, notices=[last_run] if last_run else [])
    crash.window = window
    window.model_state_changed.connect(lambda _state: crash.note_model(window.models.model_in_use))
    guard.activated.connect(lambda: bring_to_front(window))
    app.aboutToQuit.connect(guard.release)
    app.aboutToQuit.connect(crash.uninstall)
    from ember_chat.app.qt.session_end import SessionEnd

    def session_ends() -> None:  # (SIGTERM, SIGHUP: quit as a close does, asking nothing)
        window.end_session()
        app.quit()

    ending = SessionEnd(session_ends, app)
    window.show()
    if args.quit_when_ready:
        from PySide6.QtCore import QTimer

        def ready() -> None:
            print(f"ember: window ready in {time.perf_counter() - T0:.3f} s", file=sys.stderr, flush=True)
            window.api.stop()  # a scripted run quits without asking about the API server
            window.close()

        QTimer.singleShot(0, ready)  # after the first paint events have been processed

    def command_line_params() -> None:  # they win over presets (as `ember-chat run`'s flags do)
        if args.max_tokens:
            window.side.params.max_tokens.setValue(args.max_tokens)
        if args.temperature is not None:
            window.side.params.temperature.setValue(args.temperature)

    command_line_params()
    if args.max_tokens or args.temperature is not None:  # and over the first model's default preset

        def first_ready(state: str) -> None:
            if state == "ready":
                window.model_state_changed.disconnect(first_ready)  # (later loads: the user's values stay)
                if window.controller.conversation_id is None:
                    command_line_params()

        window.model_state_changed.connect(first_ready)
    from ember_chat.app.shell.scripted_run import ScriptedRun

    script = ScriptedRun(window, args.send, args.screenshot)  # noqa: F841 - kept by parent
    if args.model:
        window.models.load_model(args.model)
    elif window.settings.last_model:
        last = window.settings.last_model
        if last == crashed_model:
            print(f"ember: not loading {last}: the last run crashed while it was in use.", file=sys.stderr)
        else:
            print(f"ember: loading {last}, the model of the last session.", file=sys.stderr, flush=True)
        window.models.restore_last_model(crashed_model)
    app.aboutToQuit.connect(window.shutdown)
    app.aboutToQuit.connect(lambda: close_store(window))
    app.aboutToQuit.connect(ending.uninstall)  # (last: a second SIGTERM while the store closes changes nothing)
    return app.exec()


def close_store(window: MainWindow) -> None:
    """At quit, once the window has shut its parts down: the background threads get a moment to end,
    then the chat store closes (its privacy sweep of messages deleted this session runs then)."""
    window.join_background(2.0)
    window.store.close()


if __name__ == "__main__":
    sys.exit(main())
