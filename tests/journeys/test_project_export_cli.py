"""`ember-chat projects export NAME FILE` and `chats import FILE` as a user runs them (real subprocesses, data
folders in tmp_path): a project with no chats goes to a file and comes back in another data folder, made
with its knowledge waiting to be confirmed, and the import says so; its chats come too, and a second
import joins the project that is there; an unknown project is one line and exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

from ember_chat.engine.projects.records import ProjectStore
from ember_chat.engine.storage.conversations import ConversationStore
from tests.helpers.cli import cli


def _made(data: Path, tmp_path: Path) -> None:
    """A project “Research” with two knowledge folders (not indexed) and instructions."""
    for name in ("notes", "papers"):
        (tmp_path / "user" / name).mkdir(parents=True)
    made = cli(
        "projects", "new", "Research", "--folder", str(tmp_path / "user" / "notes"),
        "--folder", str(tmp_path / "user" / "papers"), "--instructions", "Cite the notes.", "--no-index",
        data_dir=data,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr


def _chats(data: Path) -> None:
    """Two chats, “Tides” and “Moons” (a question and its answer each), in the data folder's one project."""
    store = ConversationStore(data / "chats.sqlite3")
    try:
        (project,) = ProjectStore(store).projects()
        for title in ("Tides", "Moons"):
            chat = store.create_conversation(title)
            question = store.add_message(chat.id, "user", f"About {title.lower()}?")
            store.add_message(chat.id, "assistant", "Yes.", parent_id=question.id)
            store.organise.move_chats([chat.id], project.folder_id)
    finally:
        store.close()


def test_an_empty_project_goes_out_and_comes_back_in_a_fresh_data_folder(tmp_path: Path) -> None:
    here, there = tmp_path / "here", tmp_path / "there"
    _made(here, tmp_path)
    out = tmp_path / "out" / "Research.json"
    done = cli("projects", "export", "Research", str(out), data_dir=here)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"Exported the project “Research” with 0 chats and 2 knowledge paths to {out}.\n"
    assert [d["project"]["name"] for d in json.loads(out.read_text())] == ["Research"]

    came = cli("chats", "import", str(out), data_dir=there)
    assert came.returncode == 0, came.stderr
    assert came.stdout == (
        f"Imported the project “Research” (no chats yet) from {out} (ember); its 2 folders wait to be confirmed in "
        "the window's Project settings ▸ Knowledge.\n"
    )
    listed = cli("projects", "list", "--json", data_dir=there)
    ((row),) = json.loads(listed.stdout)
    assert row["name"] == "Research" and all(s["paused"] and s["from_import"] for s in row["sources"])


def test_a_project_s_chats_come_with_it_and_a_second_import_joins_it(tmp_path: Path) -> None:
    here, there = tmp_path / "here", tmp_path / "there"
    _made(here, tmp_path)
    _chats(here)
    out = tmp_path / "Research.json"
    done = cli("projects", "export", "research", str(out), "--with-passages", data_dir=here)  # (any case)
    assert done.returncode == 0, done.stderr
    assert "with 2 chats and 2 knowledge paths" in done.stdout

    came = cli("chats", "import", str(out), data_dir=there)
    assert came.returncode == 0, came.stderr
    assert came.stdout == (
        f"Imported 2 chats (4 messages) from {out} (ember) into the new project “Research”; its 2 folders wait "
        "to be confirmed in the window's Project settings ▸ Knowledge.\n"
    )
    again = cli("chats", "import", str(out), data_dir=there)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[0] == (
        f"Imported 2 chats (4 messages) from {out} (ember); they joined your project “Research”, which was left "
        "as it was."
    )


def test_an_unknown_project_is_one_line_and_exit_2(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _made(data, tmp_path)
    done = cli("projects", "export", "Nope", str(tmp_path / "x.json"), data_dir=data)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().endswith("There is no project named “Nope” (projects: “Research”).")
    assert not (tmp_path / "x.json").exists()


def test_a_plain_folder_of_the_name_is_left_as_it_is_and_the_chats_go_into_a_new_project(tmp_path: Path) -> None:
    here, there = tmp_path / "here", tmp_path / "there"
    _made(here, tmp_path)
    _chats(here)
    out = tmp_path / "Research.json"
    assert cli("projects", "export", "Research", str(out), data_dir=here).returncode == 0
    store = ConversationStore(there / "chats.sqlite3")
    try:
        folder = store.organise.create_folder("Research")
        mine = store.create_conversation("Mine")
        store.organise.move_chats([mine.id], folder.id)
    finally:
        store.close()
    came = cli("chats", "import", str(out), data_dir=there)
    assert came.returncode == 0, came.stderr
    assert came.stdout == (
        f"Imported 2 chats (4 messages) from {out} (ember) into the new project “Research”; its 2 folders wait "
        "to be confirmed in the window's Project settings ▸ Knowledge.\n"
    )
    listed = cli("projects", "list", "--json", data_dir=there)
    ((row),) = json.loads(listed.stdout)  # (the user's folder is not one)
    assert row["id"] != folder.id and row["name"] == "Research" and row["instructions"] == "Cite the notes."
    store = ConversationStore(there / "chats.sqlite3")
    try:  # (the user's folder: plain, its chat kept, the imported chats beside it in the new project)
        assert store.organise.folder(folder.id).name == "Research" and ProjectStore(store).of_chat(mine.id) is None
        assert store.conversation(mine.id).folder_id == folder.id
        assert sorted(c.folder_id for c in store.conversations()) == sorted([folder.id, row["id"], row["id"]])
    finally:
        store.close()


def test_a_project_block_whose_chats_are_in_no_project_says_it_was_made_with_none(tmp_path: Path) -> None:
    block = {"format": "ember-chat", "version": 1, "project": {"name": "B", "knowledge": [{"path": "/data/b"}]}}
    chat = {"title": "Loose", "tree": [{"parent": None, "role": "user", "content": "hi"}]}
    path = tmp_path / "b.json"
    path.write_text(json.dumps([block, chat]), encoding="utf-8")
    came = cli("chats", "import", str(path), data_dir=tmp_path / "there")
    assert came.returncode == 0, came.stderr
    assert came.stdout.splitlines()[:2] == [
        f"Imported 1 chat (1 messages) from {path} (ember).",
        "It also made the new project “B”, with no chats in it; its folder waits to be confirmed in the window's "
        "Project settings ▸ Knowledge.",
    ]
