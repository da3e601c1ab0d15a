"""Issue 20, saved conversation caches (KV snapshots) in the real window (pytest-qt) with the real store
in the data folder: the app gives its store to the engine service, Settings ▸ Conversation caches… says
"In memory: N conversations, X MB (…)" over "On disk: M files, Y MB" (counted off the GUI thread), Clear
deletes them (off the GUI thread), the cap is the setting `kv_snapshot_cap_mb` (0: off, the files deleted; on
again: a new store), and quitting closes the store after the service."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot

from ember_chat.app.models import kv_caches
from ember_chat.app.models.kv_caches import MB
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.inference.kv import snapshots as kv_snapshots
from ember_chat.engine.inference.kv.snapshot_keys import SnapshotKey
from ember_chat.engine.inference.kv.snapshots import SnapshotStore
from ember_chat.engine.storage.paths import KV_SNAPSHOT_FOLDER, AppPaths
from ember_chat.engine.storage.settings import Settings, SettingsFile
from tests.helpers.kv_caches_window import _dialog, _open


@pytest.fixture
def windows(window_list: list[MainWindow]) -> list[MainWindow]:
    """The windows a test opens, closed at teardown: tests/app/conftest.py's window_list."""
    return window_list


@pytest.fixture
def paths(bare_paths: AppPaths) -> AppPaths:
    """An empty data folder: tests/app/conftest.py's bare_paths."""
    return bare_paths


KEY = SnapshotKey("model-identity", "cache-settings")


def _saved_files(paths: AppPaths) -> list[Path]:
    return sorted((paths.data_dir / "kv-snapshots").glob("*.kvsnap"))


def _threads_of(store: SnapshotStore, name: str, seen: list[threading.Thread]) -> None:
    """Note the thread each call of the store's `name` runs on (the real method still does the work)."""
    real = getattr(store, name)

    def noted(*args: object) -> object:
        seen.append(threading.current_thread())
        return real(*args)

    setattr(store, name, noted)


def test_settings_show_the_saved_caches_and_clear_deletes_them_off_the_gui_thread(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow]
) -> None:
    w = _open(qtbot, paths, windows)
    store = w.bridge.service.snapshot_store
    assert isinstance(store, SnapshotStore)  # made by the app, given to the service
    assert kv_caches.open_snapshot_store is kv_snapshots.open_snapshot_store  # the engine's opener, one for all
    assert store.directory == paths.data_dir / KV_SNAPSHOT_FOLDER
    store.put(KEY, list(range(300)), b"a" * (3 * MB))
    store.put(KEY, list(range(1000, 1400)), b"b" * (2 * MB))
    assert store.flush(10) and len(_saved_files(paths)) == 2
    on_disk = sum(f.stat().st_size for f in _saved_files(paths))
    seen: list[threading.Thread] = []
    _threads_of(store, "tiers", seen)
    _threads_of(store, "clear", seen)

    dialog = _dialog(qtbot, w)
    assert dialog.usage.text() == f"In memory: none\nOn disk: 2 files, {on_disk / MB:,.1f} MB"
    assert dialog.clear_button.isEnabled() and dialog.cap.value() == 2048

    with qtbot.waitSignal(w.kv_caches.usage_known, timeout=10_000):  # cleared, then counted again
        dialog.clear_button.click()
    assert [t is threading.main_thread() for t in seen] == [False, False, False]  # count, clear, count: workers
    assert _saved_files(paths) == [] and store.usage() == (0, 0)
    assert dialog.usage.text() == "In memory: none\nOn disk: none" and not dialog.clear_button.isEnabled()


def test_caches_only_in_memory_are_not_called_files_on_disk(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow]
) -> None:
    """Issue 28 (8): with every snapshot still in RAM (written at quit) the dialog said "11 files, 335.3 MB"
    and the folder was empty. It says memory and disk apart, and Clear drops the RAM ones too."""
    w = _open(qtbot, paths, windows)
    store = w.bridge.service.snapshot_store
    store.put(KEY, list(range(300)), b"a" * (3 * MB))
    store.put(KEY, list(range(1000, 1400)), b"b" * (2 * MB))
    store.put(KEY, list(range(2000, 2300)), b"c" * MB)
    dialog = _dialog(qtbot, w)
    assert _saved_files(paths) == []  # (within the RAM budget: nothing written yet)
    in_ram = "In memory: 3 conversations, 6.0 MB (written to disk when Ember quits)"
    assert dialog.usage.text() == f"{in_ram}\nOn disk: none"
    assert dialog.clear_button.isEnabled()
    QCoreApplication.sendPostedEvents()  # (the layout's requests: the dialog grew for the second line)
    (intro,) = [label for label in dialog.findChildren(QLabel) if label.text().startswith("Ember keeps")]
    assert intro.height() >= intro.heightForWidth(intro.width())  # (not clipped)

    assert store.flush(10) and len(_saved_files(paths)) == 3  # what quitting does
    on_disk = sum(f.stat().st_size for f in _saved_files(paths))
    store.put(KEY, list(range(3000, 3300)), b"d" * MB)
    with qtbot.waitSignal(w.kv_caches.usage_known, timeout=10_000):
        w.kv_caches.refresh()
    in_ram = "In memory: 1 conversation, 1.0 MB (written to disk when Ember quits)"
    assert dialog.usage.text() == f"{in_ram}\nOn disk: 3 files, {on_disk / MB:,.1f} MB"
    with qtbot.waitSignal(w.kv_caches.usage_known, timeout=10_000):  # cleared, then counted again
        dialog.clear_button.click()
    assert dialog.usage.text() == "In memory: none\nOn disk: none" and store.usage() == (0, 0)


def test_a_refresh_right_after_clear_does_not_drop_the_clear(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow]
) -> None:
    w = _open(qtbot, paths, windows)
    store = w.bridge.service.snapshot_store
    store.put(KEY, list(range(300)), b"a" * MB)
    assert store.flush(10) and len(_saved_files(paths)) == 1
    dialog = _dialog(qtbot, w)
    with qtbot.waitSignal(w.kv_caches.cleared, timeout=10_000):
        dialog.clear_button.click()
        w.kv_caches.refresh()  # (the dialog opened again, a cap changed: usage asked while Clear is out)
    assert _saved_files(paths) == []
    qtbot.waitUntil(lambda: dialog.usage.text() == "In memory: none\nOn disk: none", timeout=10_000)


def test_the_cap_is_saved_zero_turns_caches_off_and_deletes_them_and_a_restart_keeps_it(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow]
) -> None:
    w = _open(qtbot, paths, windows)
    store = w.bridge.service.snapshot_store
    store.put(KEY, list(range(300)), b"a" * MB)
    assert store.flush(10) and len(_saved_files(paths)) == 1
    dialog = _dialog(qtbot, w)
    with qtbot.waitSignal(w.kv_caches.usage_known, timeout=10_000):
        dialog.cap.setValue(100)
    assert SettingsFile(paths.settings_file).load().kv_snapshot_cap_mb == 100
    assert w.bridge.service.snapshot_store is store and len(_saved_files(paths)) == 1  # within 100 MB: kept

    with qtbot.waitSignal(w.kv_caches.usage_known, timeout=10_000):  # off: the files are deleted
        dialog.cap.setValue(0)
    assert w.bridge.service.snapshot_store is None and _saved_files(paths) == []
    assert dialog.cap.text() == "Off" and "off" in dialog.usage.text() and not dialog.clear_button.isEnabled()
    w.close()

    again = _open(qtbot, paths, windows)  # the next start: still off
    assert again.settings.kv_snapshot_cap_mb == 0 and again.bridge.service.snapshot_store is None
    dialog = _dialog(qtbot, again)
    with qtbot.waitSignal(again.kv_caches.usage_known, timeout=10_000):  # on again: a new store
        dialog.cap.setValue(512)
    fresh = again.bridge.service.snapshot_store
    assert isinstance(fresh, SnapshotStore) and dialog.usage.text() == "In memory: none\nOn disk: none"
    fresh.put(KEY, list(range(300)), b"c" * MB)
    assert fresh.flush(10) and len(_saved_files(paths)) == 1  # in the data folder, as before


def test_turning_caches_off_leaves_no_file_even_if_the_engine_puts_one_meanwhile(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow]
) -> None:
    w = _open(qtbot, paths, windows)
    store = w.bridge.service.snapshot_store
    store.put(KEY, list(range(300)), b"a" * MB)
    assert store.flush(10) and len(_saved_files(paths)) == 1
    dialog = _dialog(qtbot, w)
    steps: list[str] = []

    def engine_puts_after(name: str) -> None:  # the engine still held the store: it puts between two steps
        real = getattr(store, name)

        def step(*args: object, **kwargs: object) -> object:
            result = real(*args, **kwargs)
            steps.append(name)
            if len(steps) == 1:
                store.put(KEY, list(range(500, 900)), b"b" * MB)
            return result

        setattr(store, name, step)

    engine_puts_after("clear")
    engine_puts_after("close")
    with qtbot.waitSignal(w.kv_caches.usage_known, timeout=10_000):  # off: closed, its files deleted
        dialog.cap.setValue(0)
    assert sorted(steps) == ["clear", "close"] and w.bridge.service.snapshot_store is None
    assert _saved_files(paths) == []
    w.close()  # (the retired store is closed again at quit: nothing written)
    assert _saved_files(paths) == []


def test_at_quit_the_window_is_hidden_before_the_store_writes_what_it_holds(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow]
) -> None:
    w = _open(qtbot, paths, windows)
    store = w.bridge.service.snapshot_store
    store.put(KEY, list(range(300)), b"a" * MB)  # in RAM: written at quit, which may take the disk's time
    visible_at_close: list[bool] = []
    real = store.close

    def close(*args: object, **kwargs: object) -> None:
        visible_at_close.append(w.isVisible())
        real(*args, **kwargs)

    store.close = close  # type: ignore[method-assign]
    assert w.isVisible()
    w.close()
    assert visible_at_close and not any(visible_at_close)  # no frozen window on screen meanwhile
    assert len(_saved_files(paths)) == 1


def test_quitting_closes_the_store_after_the_service_so_ram_caches_reach_the_disk(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow]
) -> None:
    SettingsFile(paths.settings_file).save(Settings(kv_snapshot_cap_mb=64))
    w = _open(qtbot, paths, windows)
    store = w.bridge.service.snapshot_store
    store.put(KEY, list(range(300)), b"a" * MB)  # in RAM only, so far
    w.close()
    assert len(_saved_files(paths)) == 1  # written at quit
    assert w.join_background(30)
    again = _open(qtbot, paths, windows)
    restored = again.bridge.service.snapshot_store
    match = restored.best(KEY, [*range(300), 7])
    assert match is not None and match.shared == 300 and match.source == "disk"
    assert restored.load(match) == b"a" * MB
