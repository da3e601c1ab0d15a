"""The Knowledge tab asks before a step a new user may not expect (issue 34): adding a whole home
folder, disk or drive (every file in it read), and removing sources whose passages are forgotten (adding
them again reads them again); Cancel leaves all as it was. Non-blocking message boxes, in the real
window, over real folders and a real index."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from ember_chat.app.projects.knowledge_questions import broad_folder_question
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.projects.records import ProjectStore
from tests.helpers.projects_window import answer, indexed, knowledge_tab

pytestmark = pytest.mark.usefixtures("nothing_blocks")


def test_a_whole_home_disk_or_drive_is_asked_about_by_comparing_paths(qtbot: QtBot, tmp_path: Path) -> None:
    home = tmp_path / "home" / "x"
    said = broad_folder_question(str(home), home=str(home))
    assert said is not None and said.startswith(f"Add your whole home folder “{home}”? Every file in it (not hidden")
    assert broad_folder_question(str(home) + os.sep, home=str(home)) == said  # (however it is spelt)
    holder = broad_folder_question(str(tmp_path / "home"), home=str(home))
    assert holder is not None and "the folder that holds your home folder" in holder
    root = broad_folder_question("/", home=str(home))
    assert root is not None and root.startswith("Add the whole disk “/”?")
    assert os.path.ismount("/proc")  # (a mount point on every Linux)
    drive = broad_folder_question("/proc", home=str(home))
    assert drive is not None and drive.startswith("Add the whole drive “/proc”?")
    assert broad_folder_question(str(home / "Documents"), home=str(home)) is None
    assert broad_folder_question(str(tmp_path / "home2"), home=str(home)) is None  # (a prefix only is no holder)
    link = tmp_path / "link-to-home"
    link.symlink_to(home)
    assert broad_folder_question(str(link), home=str(home)) is not None  # (a link to it is the home folder)


def test_adding_the_home_folder_asks_first_and_cancel_adds_nothing(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.md").write_text("# Notes\n\nThe Douro reaches the sea at Porto.\n")
    monkeypatch.setenv("HOME", str(home))
    w = make_window()
    fid, dialog, panel = knowledge_tab(w)
    indexed(qtbot, w, fid)

    panel.add_paths([str(home)])
    assert panel.question is not None and panel.question.isVisible()
    assert not w.projects.indexing.running(fid) and ProjectStore(w.store).project(fid).sources == ()
    said = answer(panel, "Cancel")
    assert said.startswith(f"Add your whole home folder “{home}”? Every file in it (not hidden ones) will be read")
    assert ProjectStore(w.store).project(fid).sources == () and panel.sources.topLevelItemCount() == 0

    panel.add_paths(["/"])  # (a disk's root: asked too, and cancelled)
    assert answer(panel, "Cancel").startswith("Add the whole disk “/”?")
    assert ProjectStore(w.store).project(fid).sources == ()

    panel.add_paths([str(home)])
    answer(panel, "Add")
    assert [s.path for s in ProjectStore(w.store).project(fid).sources] == [str(home)]
    indexed(qtbot, w, fid)
    qtbot.waitUntil(lambda: panel.sources.topLevelItem(0).text(1).startswith("1 file"), timeout=30_000)

    plain = tmp_path / "docs"
    plain.mkdir()
    panel.add_paths([str(plain)])  # (any other folder: added at once)
    assert panel.question is None and len(ProjectStore(w.store).project(fid).sources) == 2
    indexed(qtbot, w, fid)
    dialog.reject()


def test_removing_an_indexed_source_asks_first_saying_its_passages_and_cancel_keeps_it(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "rivers.md").write_text("# Rivers\n\nThe Tagus is the longest river of Iberia.\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    w = make_window()
    fid, dialog, panel = knowledge_tab(w)
    panel.add_paths([str(docs), str(empty)])
    indexed(qtbot, w, fid)
    qtbot.waitUntil(lambda: panel.sources.topLevelItem(0).text(1).startswith("1 file"), timeout=30_000)
    passages = panel.state.sources[panel.listed()[0].id].passages
    assert passages >= 1

    panel.sources.topLevelItem(0).setSelected(True)
    panel.remove.click()
    assert panel.question is not None and panel.question.isVisible()
    its = "Its passage is forgotten" if passages == 1 else f"Its {passages} passages are forgotten"
    assert answer(panel, "Cancel") == (
        f"Remove “{docs}” from the knowledge of “Rivers”? {its} (the files on disk are not touched); adding it "
        "again reads it again."
    )
    assert [s.path for s in ProjectStore(w.store).project(fid).sources] == [str(docs), str(empty)]
    assert panel.sources.topLevelItemCount() == 2

    panel.sources.topLevelItem(0).setSelected(True)
    panel.remove.click()
    answer(panel, "Remove")
    assert [s.path for s in ProjectStore(w.store).project(fid).sources] == [str(empty)]
    assert sorted(p.name for p in docs.iterdir()) == ["rivers.md"]  # (the files on disk untouched)
    indexed(qtbot, w, fid)

    panel.sources.clearSelection()
    panel.sources.topLevelItem(0).setSelected(True)
    panel.remove.click()  # (a folder with nothing read: nothing to forget, removed at once)
    assert panel.question is None and ProjectStore(w.store).project(fid).sources == ()
    indexed(qtbot, w, fid)
    dialog.reject()
