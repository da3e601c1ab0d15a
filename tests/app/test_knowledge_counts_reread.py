"""While a run goes, the Knowledge tab's rows follow it by reading the index's counts only (one grouped
query), one read at a time, on the window's shared workers; the skipped files (many rows in a large index)
are read when the run is over. Real window, real SQLite index of 20,000 files beside the run's folder."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import QObject
from pytestqt.qtbot import QtBot

from ember_chat.app.projects.indexing import KnowledgeState
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.attachments import isolated
from ember_chat.engine.projects.index import KnowledgeIndex
from ember_chat.engine.projects.records import ProjectStore
from tests.helpers.projects_window import indexed as _indexed
from tests.helpers.projects_window import settings_dialog as _dialog
from tests.hostile import hanging_text_reader

pytestmark = pytest.mark.usefixtures("nothing_blocks")
FILES = 600  # read by the run
KEPT = 20_000  # rows of a paused source already in the index (every fifth skipped)


def test_a_run_reads_only_counts_one_read_at_a_time_and_the_skipped_files_at_its_end(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(FILES):
        (docs / f"note-{n}.txt").write_text(f"Note {n}: site {n} has {n % 5} herons.\n")
    big = tmp_path / "big"
    big.mkdir()
    w = make_window()
    project = w.projects.new_project("Survey")
    assert project is not None
    fid = project.folder_id
    store = ProjectStore(w.store)
    kept = store.add_source(fid, big)
    store.set_paused(kept.id, True)
    path = w.projects.indexing.index_path(fid)
    KnowledgeIndex(path).close()
    db = sqlite3.connect(path)
    rows = [
        (kept.id, f"{big}/f{i:06d}.txt", 10, 1, "skipped" if i % 5 == 0 else "indexed", "r" if i % 5 == 0 else None)
        for i in range(KEPT)
    ]
    db.executemany("INSERT INTO files (source_id, path, size, mtime_ns, state, reason) VALUES (?,?,?,?,?,?)", rows)
    db.commit()
    db.close()
    dialog = _dialog(w)
    panel = dialog.knowledge
    dialog.tabs.setCurrentWidget(panel)
    k = w.projects.indexing
    _indexed(qtbot, w, fid)
    panel.refresh()  # (the dialog opened with the project, before these rows)
    qtbot.waitUntil(lambda: len(panel.skipped_files()) == KEPT // 5, timeout=30_000)

    reads: list[tuple[bool, bool]] = []  # (counts only, asked while the run went) per read asked
    out = [0, 0]  # counts reads out now, the most out at once
    counted: list[KnowledgeState] = []  # counts reads delivered while the run went
    asked = k.read_state

    def read_state(
        folder_id: int,
        done: Callable[[KnowledgeState], None],
        owner: QObject,
        counts_only: bool = False,
        failed: Callable[[str], None] | None = None,
    ) -> None:
        reads.append((counts_only, k.running(fid)))
        if not counts_only:
            asked(folder_id, done, owner, counts_only, failed)
            return
        out[0] += 1
        out[1] = max(out)

        def delivered(state: KnowledgeState) -> None:
            out[0] -= 1
            if k.running(fid):
                counted.append(state)
            done(state)

        def not_read(reason: str) -> None:
            out[0] -= 1
            assert failed is not None
            failed(reason)

        asked(folder_id, delivered, owner, counts_only, not_read)

    k.read_state = read_state  # type: ignore[method-assign]
    panel.add_paths([str(docs)])
    added = next(s for s in panel.listed() if s.path == str(docs))
    _indexed(qtbot, w, fid)
    qtbot.waitUntil(lambda: panel.state.sources.get(added.id) is not None and not panel.counting, timeout=30_000)
    qtbot.waitUntil(lambda: panel.state.sources[added.id].indexed == FILES, timeout=30_000)

    assert counted, "the rows were not read again while the run went"
    assert out[1] == 1  # (never a read of the counts while the one before was out)
    assert all(s.skipped is None for s in counted)  # (no skipped files read while the run went)
    assert not [r for r in reads if not r[0] and r[1]][1:]  # (the whole state: once as the files were added)
    assert any(not only and not running for only, running in reads[1:])  # (and once more at the run's end)
    assert all(s.sources[kept.id].files == KEPT for s in counted)
    assert any(s.sources.get(added.id, s.sources[kept.id]).files > 0 for s in counted)
    assert len(panel.skipped_files()) == KEPT // 5 and panel.state.sources[kept.id].skipped == KEPT // 5
    assert f"{KEPT // 5:,} skipped" in panel.sources.topLevelItem(0).text(1)
    dialog.reject()


def test_a_whole_read_that_comes_back_after_a_later_read_of_the_counts_does_not_take_the_rows_back(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole state read as the folder is added, held back until a read of the counts asked after it
    has been shown: its older counts are not shown over the newer ones (its skipped files are)."""
    monkeypatch.setattr(isolated, "_read_batch_in_child", hanging_text_reader.reads_a_batch)
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(FILES):
        (docs / f"note-{n}.txt").write_text(f"Note {n}: site {n} has {n % 5} herons.\n")
    for n in range(4):  # (read last, each taking SLOW_S: the run goes on while the rows are read again)
        (docs / f"zz-slow-{n}.txt").write_text(f"SLOW {n}\n")
    w = make_window()
    project = w.projects.new_project("Survey")
    assert project is not None
    fid = project.folder_id
    dialog = _dialog(w)
    panel = dialog.knowledge
    k = w.projects.indexing
    _indexed(qtbot, w, fid)
    qtbot.waitUntil(lambda: not panel.counting, timeout=30_000)
    held: list[tuple[Callable[[KnowledgeState], None], KnowledgeState]] = []
    armed = [False]  # (the first whole read once the folder is added: held)
    shown: list[int] = []  # the files of the folder as each read of the counts showed them
    asked = k.read_state

    def read_state(
        folder_id: int,
        done: Callable[[KnowledgeState], None],
        owner: QObject,
        counts_only: bool = False,
        failed: Callable[[str], None] | None = None,
    ) -> None:
        if not counts_only and armed[0]:
            armed[0] = False
            asked(folder_id, lambda state: held.append((done, state)), owner, counts_only, failed)
            return
        if counts_only:

            def counted(state: KnowledgeState) -> None:
                done(state)
                added = next((s for s in panel.listed() if s.path == str(docs)), None)
                if added is not None and added.id in state.sources:
                    shown.append(state.sources[added.id].files)

            asked(folder_id, counted, owner, counts_only, failed)
            return
        asked(folder_id, done, owner, counts_only, failed)

    k.read_state = read_state  # type: ignore[method-assign]
    armed[0] = True
    panel.add_paths([str(docs)])
    added = next(s for s in panel.listed() if s.path == str(docs))
    qtbot.waitUntil(lambda: bool(held) and any(n > 0 for n in shown), timeout=30_000)
    done, stale = held[0]
    before = panel.state.sources[added.id].files
    assert stale.sources.get(added.id) is None or stale.sources[added.id].files < before  # (older, truly)
    done(stale)  # (it comes back now, late)
    assert panel.state.sources[added.id].files == before and panel.state.skipped is not None
    _indexed(qtbot, w, fid)
    qtbot.waitUntil(lambda: panel.state.sources[added.id].indexed == FILES + 4, timeout=30_000)
    dialog.reject()
