"""`ember-chat chats ...` from a terminal, on the data folder the window uses (EMBER_DATA_DIR): list, export,
rm (to the Trash, or --purge for good), restore. The real entry point in a subprocess, and main(argv) in
this process where only the output is read."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from ember_chat.engine.cli.main import main
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.chats_cli import cli


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data folder with four chats: Plans (in "Work", pinned), Recipes, Old (archived), Gone (in the
    Trash)."""
    data_dir = tmp_path / "data"
    monkeypatch.setenv("EMBER_DATA_DIR", str(data_dir))
    monkeypatch.setenv("EMBER_CONFIG_DIR", str(tmp_path / "config"))
    store = ConversationStore(AppPaths(data_dir, tmp_path / "config").database)
    ids = {}
    for title in ("Old", "Gone", "Recipes", "Plans"):
        c = store.create_conversation(title, model="tiny")
        u = store.add_message(c.id, "user", f"a question about {title.lower()}")
        store.add_message(c.id, "assistant", f"an answer about {title.lower()}", parent_id=u.id)
        ids[title] = c.id
    work = store.organise.create_folder("Work")
    store.organise.move_chats([ids["Plans"]], work.id)
    store.organise.set_pinned([ids["Plans"]], True)
    store.organise.archive_chats([ids["Old"]], True)
    store.organise.trash_chats([ids["Gone"]])
    store.close()
    return data_dir


def ids_of(data_dir: Path) -> dict[str, int]:
    store = ConversationStore(data_dir / "chats.sqlite3")
    try:
        everything = store.conversations() + store.conversations(archived=True) + store.organise.trashed()
        return {c.title: c.id for c in everything}
    finally:
        store.close()


def test_list_rm_and_restore_through_the_real_command(data: Path) -> None:
    ids = ids_of(data)
    out = cli(data, "list", "--json")
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)
    assert [c["title"] for c in listed] == ["Plans", "Recipes"]
    assert listed[0]["folder"] == "Work" and listed[0]["pinned"] is True and listed[0]["messages"] == 2
    assert [c["title"] for c in json.loads(cli(data, "list", "--archived", "--json").stdout)] == ["Old"]
    assert [c["title"] for c in json.loads(cli(data, "list", "--trash", "--json").stdout)] == ["Gone"]
    text = cli(data, "list").stdout
    assert "Plans" in text and "Work" in text and "Recipes" in text and "Gone" not in text

    out = cli(data, "rm", str(ids["Recipes"]))
    assert out.returncode == 0 and "Moved “Recipes” to the Trash." in out.stdout
    assert f"ember-chat chats restore {ids['Recipes']}" in out.stdout
    assert {c["title"] for c in json.loads(cli(data, "list", "--trash", "--json").stdout)} == {"Gone", "Recipes"}
    out = cli(data, "restore", str(ids["Recipes"]), str(ids["Gone"]))
    assert out.returncode == 0 and out.stdout.strip() == "Restored 2 chats from the Trash."
    assert [c["title"] for c in json.loads(cli(data, "list", "--json").stdout)] == ["Plans", "Recipes", "Gone"]

    out = cli(data, "rm", "--purge", str(ids["Gone"]))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Deleted 1 chat for good; the saved conversation caches were cleared."
    assert b"about gone" not in (data / "chats.sqlite3").read_bytes()
    assert "Gone" not in ids_of(data)


def test_mistakes_are_one_line_and_change_nothing(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = ids_of(data)
    assert main(["chats", "rm", str(ids["Plans"]), "999"]) == 2
    err = capsys.readouterr().err
    assert err == "ember-chat: No chat has the id 999; `ember-chat chats list` shows the ids.\n"
    assert main(["chats", "restore", str(ids["Plans"])]) == 2
    assert "Chat " + str(ids["Plans"]) + " is not in the Trash" in capsys.readouterr().err
    assert main(["chats", "export"]) == 2
    assert "--all" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:  # argparse: not a number
        main(["chats", "rm", "abc"])
    assert usage.value.code == 2
    assert "invalid int value" in capsys.readouterr().err
    assert ids_of(data) == ids and main(["chats", "list", "--trash", "--json"]) == 0
    assert [c["title"] for c in json.loads(capsys.readouterr().out)] == ["Gone"]


def test_a_damaged_database_or_a_data_folder_that_cannot_be_made_is_one_line(data: Path, tmp_path: Path) -> None:
    """Errors from the database or the file system after the store opened (a damaged page read by `list`,
    a data folder that is a file) are one line on stderr and exit status 2, never a traceback."""
    database = data / "chats.sqlite3"
    with sqlite3.connect(database) as db:
        root = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'conversations'").fetchone()[0]
        page = db.execute("PRAGMA page_size").fetchone()[0]
    store = ConversationStore(database)
    for i in range(200):  # (the chats' table spans several pages)
        store.create_conversation(f"chat {i} " + "x" * 300)
    store.close()
    damaged = bytearray(database.read_bytes())
    damaged[root * page : (root + 3) * page] = b"\xff" * (3 * page)  # pages after the table's root
    database.write_bytes(bytes(damaged))
    done = cli(data, "list")
    assert (done.returncode, done.stdout, len(done.stderr.splitlines())) == (2, "", 1), done.stderr
    assert done.stderr.startswith(f"ember-chat: The chat database {database} could not be read (")

    (tmp_path / "a-file").write_text("not a folder")
    done = cli(tmp_path / "a-file" / "data", "list")
    assert (done.returncode, done.stdout, len(done.stderr.splitlines())) == (2, "", 1), done.stderr
    assert "cannot be used (Not a directory)" in done.stderr


def test_export_markdown_to_a_file_and_to_the_terminal(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = ids_of(data)
    target = data.parent / "out" / "plans.md"
    assert main(["chats", "export", str(ids["Plans"]), "--format", "md", "-o", str(target)]) == 0
    assert capsys.readouterr().out.strip() == f"Exported 1 chat to {target}."
    text = target.read_text(encoding="utf-8")
    assert text.startswith("# Plans\n") and "a question about plans" in text and "an answer about plans" in text
    assert main(["chats", "export", "--all", "--format", "md"]) == 0
    out = capsys.readouterr().out
    assert "# Plans" in out and "# Recipes" in out and "# Old" in out and "# Gone" not in out  # not the Trash
    inside_a_file = target / "plans.md"  # its "folder" is a file
    assert main(["chats", "export", str(ids["Plans"]), "--format", "md", "-o", str(inside_a_file)]) == 2
    assert "cannot be written" in capsys.readouterr().err


def test_backup_now_and_list_the_backups_kept_as_the_setting_says(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (data.parent / "config").mkdir(exist_ok=True)
    (data.parent / "config" / "settings.json").write_text(json.dumps({"backups_keep": 2}), encoding="utf-8")
    assert main(["chats", "backup", "--list"]) == 0
    assert capsys.readouterr().out.strip() == "No backups yet; `ember-chat chats backup` makes one."
    for _ in range(3):
        assert main(["chats", "backup"]) == 0
    said = capsys.readouterr().out.strip().splitlines()
    assert len(said) == 3 and all(line.startswith("Backed up 4 chats, 1 of them in the Trash to ") for line in said)
    assert main(["chats", "backup", "--list", "--json"]) == 0
    kept = json.loads(capsys.readouterr().out)
    assert len(kept) == 2 and {b["reason"] for b in kept} == {"manual"} and {b["chats"] for b in kept} == {3}
    assert all(Path(b["path"]).is_file() and Path(b["path"]).parent == data / "backups" for b in kept)
    assert main(["chats", "backup", "--list"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["CREATED", "SIZE", "CHATS", "REASON", "FILE"] and len(table) == 3


def test_purging_says_the_backups_made_before_still_hold_the_chat(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = ids_of(data)
    assert main(["chats", "rm", "--purge", str(ids["Gone"])]) == 0
    assert capsys.readouterr().out.strip() == "Deleted 1 chat for good; the saved conversation caches were cleared."
    assert main(["chats", "backup"]) == 0
    capsys.readouterr()
    assert main(["chats", "rm", "--purge", str(ids["Old"])]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0] == "Deleted 1 chat for good; the saved conversation caches were cleared."
    assert out[1] == (
        f"The backups in {data / 'backups'} made earlier still hold this chat; delete those files too if this chat"
        " must be gone."
    )


def test_export_everything_as_json_and_import_it_into_another_data_folder(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ember_chat.engine.attachments import AttachmentStore, read_attachment_bytes

    paths = AppPaths(data, tmp_path / "config")
    store = ConversationStore(paths.database)
    atts = AttachmentStore(paths, store)
    plans = next(c for c in store.conversations() if c.title == "Plans")
    note = atts.save(read_attachment_bytes("note.md", b"# Plan\n\nShip on Friday."))
    atts.link(store.messages(plans.id)[0].id, [note.id])
    store.close()
    target = tmp_path / "all.json"
    assert main(["chats", "export", "--all", "-o", str(target)]) == 0
    assert capsys.readouterr().out.strip() == f"Exported 3 chats to {target}."
    assert [c["title"] for c in json.loads(target.read_text(encoding="utf-8"))] == ["Plans", "Recipes", "Old"]

    other = tmp_path / "other"
    out = cli(other, "import", str(target))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        f"Imported 3 chats (6 messages) from {target} (ember).",
        "Chat 3 “Old”: into Archived (archived in the file; chats list --archived).",  # where it went
    ]
    listed = json.loads(cli(other, "list", "--json").stdout)
    assert [(c["title"], c["pinned"], c["messages"]) for c in listed] == [("Plans", True, 2), ("Recipes", False, 2)]
    assert [c["title"] for c in json.loads(cli(other, "list", "--archived", "--json").stdout)] == ["Old"]
    back = ConversationStore(other / "chats.sqlite3")
    try:
        plans_back = next(c for c in back.conversations() if c.title == "Plans")
        first = back.messages(plans_back.id)[0]
        (kept,) = AttachmentStore(AppPaths(other, tmp_path / "config"), back).of_message(first.id)
        assert kept.name == "note.md" and kept.sha256 == note.sha256
    finally:
        back.close()


def test_importing_a_chatgpt_export_and_files_that_are_not_one(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.helpers.import_fixtures import photosynthesis

    conversation, _ = photosynthesis()
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps([conversation]), encoding="utf-8")
    before = ids_of(data)
    assert main(["chats", "import", str(export)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("Imported 1 chat (") and lines[0].endswith(f"from {export} (chatgpt).")
    assert any(line.startswith("Skipped: ") and "image" in line for line in lines[1:])
    assert len(ids_of(data)) == len(before) + 1

    broken = tmp_path / "broken.json"
    broken.write_text('[{"title": "x", "mapping": ', encoding="utf-8")
    assert main(["chats", "import", str(broken)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ember-chat: ") and err.count("\n") == 1 and "broken.json" in err
    assert main(["chats", "import", str(tmp_path / "missing.json")]) == 2
    assert "There is no file at" in capsys.readouterr().err
    assert len(ids_of(data)) == len(before) + 1


def test_a_title_with_line_breaks_stays_on_its_row(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = ConversationStore(data / "chats.sqlite3")
    store.create_conversation("Two\nlines\tand a tab")
    store.close()
    assert main(["chats", "list"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert len(rows) == 4 and rows[1].endswith("  Two lines and a tab")


def test_purge_while_the_window_holds_the_folder_says_what_it_still_holds(data: Path) -> None:
    """The window's model keeps what it read and writes its caches at quit: the command says so rather than
    promising they are all gone (the window's own lock file, taken as the window takes it)."""
    from PySide6.QtCore import QLockFile

    lock = QLockFile(str(data / "ember.lock"))
    assert lock.tryLock(0)
    try:
        out = cli(data, "rm", "--purge", str(ids_of(data)["Gone"]))
    finally:
        lock.unlock()
    assert out.returncode == 0, out.stderr
    assert "Ember's window is open on this data folder" in out.stdout
    out = cli(data, "rm", "--purge", str(ids_of(data)["Old"]))
    assert "window" not in out.stdout  # no window now
