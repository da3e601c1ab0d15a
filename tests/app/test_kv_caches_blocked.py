"""Saved conversation caches are written to disk at quit, where nothing can be shown any more: so when they
cannot be saved there (a file where their folder should be, a disk almost full) the store finds it when it
opens (the first answer, or Settings ▸ Conversation caches…) and the user reads it in the dialog and in the
banner. Real store, real folders and files, the real window."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.inference.kv.snapshots import SnapshotStore
from ember_chat.engine.storage.paths import KV_SNAPSHOT_FOLDER, AppPaths
from tests.helpers.kv_caches_window import _dialog, _open


@pytest.fixture
def windows(window_list: list[MainWindow]) -> list[MainWindow]:
    """The windows a test opens, closed at teardown: tests/app/conftest.py's window_list."""
    return window_list


@pytest.fixture
def paths(bare_paths: AppPaths) -> AppPaths:
    """An empty data folder: tests/app/conftest.py's bare_paths."""
    return bare_paths


@pytest.fixture
def make_store() -> Iterator[Callable[..., SnapshotStore]]:
    made: list[SnapshotStore] = []

    def make(directory: Path) -> SnapshotStore:
        store = SnapshotStore(directory, 2**30, 2**20)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


def test_a_file_where_the_folder_should_be_is_said_when_the_store_opens(
    tmp_path: Path, make_store: Callable[..., SnapshotStore]
) -> None:
    folder = tmp_path / KV_SNAPSHOT_FOLDER
    folder.write_text("not a folder")
    store = make_store(folder)
    assert store.blocked is None  # (nothing is read before it is first asked)
    assert store.usage() == (0, 0)
    assert store.blocked is not None and str(folder) in store.blocked and "cannot be saved" in store.blocked
    assert store.problems == [store.blocked]
    assert folder.read_text() == "not a folder"  # left as it is


def test_a_disk_almost_full_is_said_when_the_store_opens(
    tmp_path: Path, make_store: Callable[..., SnapshotStore]
) -> None:
    store = make_store(tmp_path / KV_SNAPSHOT_FOLDER)
    store.FREE_MARGIN_BYTES = 2**62  # (more than any disk has free: this one is "almost full" for the store)
    store.usage()
    assert store.blocked is not None and "almost full" in store.blocked and "MB free" in store.blocked
    healthy = make_store(tmp_path / "other")
    healthy.usage()
    assert healthy.blocked is None and healthy.problems == [] and (tmp_path / "other").is_dir()


def test_the_dialog_and_the_banner_say_why_no_cache_can_be_saved(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow]
) -> None:
    paths.data_dir.mkdir(parents=True)
    (paths.data_dir / KV_SNAPSHOT_FOLDER).write_text("in the way")
    w = _open(qtbot, paths, windows)
    dialog = _dialog(qtbot, w)
    assert dialog.status.isVisible() and "cannot be saved" in dialog.status.text()
    assert dialog.usage.text() == "In memory: none\nOn disk: none" and not dialog.clear_button.isEnabled()
    assert dialog.height() >= dialog.layout().totalHeightForWidth(dialog.width())  # the sentence is not cut
    dialog.reject()
    w.kv_caches.say_problems()  # (what the window does when an answer ends)
    assert w.banner.isVisible() and "cannot be saved" in w.banner.text()


def test_on_a_small_screen_the_dialog_is_as_tall_as_its_wrapped_introduction(
    qtbot: QtBot, paths: AppPaths, windows: list[MainWindow]
) -> None:
    """At its narrowest (an 800x600 screen) the introduction wraps to more lines than its size hint had
    room for: the dialog grows to them when it opens."""
    w = _open(qtbot, paths, windows)
    dialog = _dialog(qtbot, w)
    dialog.reject()
    dialog.resize(dialog.minimumWidth(), 120)
    with qtbot.waitSignal(w.kv_caches.usage_known, timeout=10_000):
        w.kv_caches.open_dialog()
    needed = dialog.layout().totalHeightForWidth(dialog.width())
    assert needed > 120 and dialog.height() >= needed
