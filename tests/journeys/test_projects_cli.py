"""`ember-chat projects` and `ember-chat run --project` as a user runs them (real subprocesses, a data
folder in tmp_path, real files indexed in child processes): a project made with its folder indexed at
once, listed with its files, passages and skipped files; knowledge added and indexed again; an answer
with the project's knowledge lists its sources in --json (found by meaning too with the project's
embedding model, said when that model is gone); mistakes are one line and exit status 2. And
end to end with the real chat starter: 200 project files, one holding a made-up fact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ember_chat.engine.projects.index import KnowledgeIndex, knowledge_path
from ember_chat.engine.projects.indexer import Indexer
from ember_chat.engine.projects.records import ProjectStore
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.project_tables import insert_source
from ember_chat.engine.storage.rows import transaction
from tests.helpers.cli import cli
from tests.helpers.gguf_factory import write_word_bert
from tests.helpers.permissions import locked, permissions_enforced

FACT = "The lighthouse keeper's parrot is named Captain Marmalade."


def _folder(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def _listed(data: Path) -> list[dict[str, Any]]:
    out = cli("projects", "list", "--json", data_dir=data)
    assert out.returncode == 0, out.stderr
    rows: list[dict[str, Any]] = json.loads(out.stdout)
    return rows


def _notes(n: int) -> dict[str, str]:
    return {f"note{i:03}.txt": f"Note {i}: the ferry to island {i} leaves at {i % 12 + 1} o'clock." for i in range(n)}


def test_a_project_is_made_indexed_listed_and_given_more_knowledge(tmp_path: Path) -> None:
    data = tmp_path / "data"
    docs = _folder(tmp_path / "docs", {**_notes(5), "keeper.md": f"# Keeper\n\n{FACT}\n", "bad.txt": ""})
    (docs / "bad.txt").write_bytes(b"\x00\x01\x02binary\xff" * 100)
    made = cli("projects", "new", "Harbour", "--folder", str(docs), "--instructions", "Be brief.", data_dir=data)
    assert made.returncode == 0, made.stderr
    assert "Made the project “Harbour” with 1 knowledge source." in made.stdout
    assert "Indexed “Harbour” in " in made.stderr and "In all: 6 files indexed" in made.stderr
    assert "1 file skipped." in made.stderr and "bad.txt" in made.stderr
    (row,) = _listed(data)
    assert row["name"] == "Harbour" and row["instructions"] == "Be brief." and row["state"] == "indexed"
    assert row["files"] == {"total": 7, "indexed": 6, "skipped": 1, "pending": 0} and row["passages"] == 6
    assert row["sources"] == [{"path": str(docs), "kind": "folder", "paused": False, "from_import": False}]
    ((skipped),) = row["skipped"]
    assert skipped["path"] == str(docs / "bad.txt") and skipped["reason"]

    more = _folder(tmp_path / "more", {"tides.txt": "High tide at noon."})
    added = cli("projects", "add", "harbour", str(more), data_dir=data)  # (a name in another case)
    assert added.returncode == 0, added.stderr
    assert f"Added {more} to “Harbour”." in added.stdout and "1 new or changed file (1 read, 0 skipped)" in added.stderr
    (row,) = _listed(data)
    assert row["files"]["indexed"] == 7 and len(row["sources"]) == 2

    (docs / "note000.txt").unlink()
    again = cli("projects", "index", "Harbour", data_dir=data)
    assert again.returncode == 0 and "0 new or changed files (0 read, 0 skipped), 1 gone." in again.stderr
    plain = cli("projects", "list", data_dir=data)
    assert plain.returncode == 0 and plain.stdout.startswith("Harbour  (indexed: 6 files")


def test_the_progress_and_the_summary_count_the_same_files_and_say_one_in_the_singular(tmp_path: Path) -> None:
    """The progress line counts this run's new or changed files (read or skipped); the summary says
    them again (how many read, how many skipped), then what the project holds in all. One of a thing is
    “1 file”, “1 passage”, never “1 files”."""
    data = tmp_path / "data"
    docs = _folder(tmp_path / "docs", {"one.txt": "The ferry leaves at noon."})
    made = cli("projects", "new", "One", "--folder", str(docs), data_dir=data)
    assert made.returncode == 0, made.stderr
    assert "[indexing “One”: 1/1 new or changed file, 0 pages, 1 passage]" in made.stderr
    assert "1 new or changed file (1 read, 0 skipped), 0 gone." in made.stderr
    assert "In all: 1 file indexed (0 pages, 1 passage), 0 files skipped." in made.stderr
    listed = cli("projects", "list", data_dir=data)
    assert listed.stdout.startswith("One  (indexed: 1 file, 0 pages, 1 passage, 0 skipped, 0 pending)")

    (docs / "old.bin.txt").write_bytes(b"\x00\x01binary\xff" * 100)  # (skipped, and not looked at again)
    assert cli("projects", "index", "One", data_dir=data).returncode == 0
    for name in ("two.txt", "three.md"):
        (docs / name).write_text(f"{name}: the tide is high at six.")
    for name in ("bad1.txt", "bad2.txt"):
        (docs / name).write_bytes(b"\x00\x01binary\xff" * 100)
    again = cli("projects", "index", "One", data_dir=data)
    assert again.returncode == 0, again.stderr
    assert "[indexing “One”: 4/4 new or changed files, 0 pages, 2 passages]" in again.stderr
    assert "4 new or changed files (2 read, 2 skipped), 0 gone." in again.stderr
    assert "In all: 3 files indexed (0 pages, 3 passages), 3 files skipped." in again.stderr


def test_a_path_inside_a_source_is_refused_and_a_parent_takes_the_sources_place_unread(tmp_path: Path) -> None:
    data = tmp_path / "data"
    docs = _folder(tmp_path / "all" / "docs", _notes(3))
    sub = _folder(docs / "sub", {"budget.md": "# Budget\n\nThe ferry costs 4 euros.\n"})
    assert cli("projects", "new", "Harbour", "--folder", str(docs), data_dir=data).returncode == 0
    for inner in (sub, sub / "budget.md"):
        out = cli("projects", "add", "Harbour", str(inner), data_dir=data)
        assert out.returncode == 2, out.stderr
        assert out.stderr.strip().endswith(
            f"{inner} is inside {docs}, which is in the project “Harbour” already: its files are read from there."
        )
    (row,) = _listed(data)
    assert [s["path"] for s in row["sources"]] == [str(docs)]
    # a folder beside it, added after it: the folder around docs gets an id of its own (not docs' again)
    beside = _folder(tmp_path / "beside", {"tides.txt": "High tide at noon."})
    assert cli("projects", "add", "Harbour", str(beside), data_dir=data).returncode == 0

    # the folder around it: added, docs taken out, its 4 files given to the parent, not read again
    (tmp_path / "all" / "extra.txt").write_text("The harbour opens at six.")
    out = cli("projects", "add", "Harbour", str(tmp_path / "all"), data_dir=data)
    assert out.returncode == 0, out.stderr
    assert f"{docs} is inside it: taken out of the project" in out.stdout
    assert "(1 read, 0 skipped), 0 gone." in out.stderr and "In all: 6 files indexed" in out.stderr
    (row,) = _listed(data)
    assert [s["path"] for s in row["sources"]] == [str(beside), str(tmp_path / "all")]
    assert row["files"]["indexed"] == 6


def test_a_project_made_without_indexing_says_so(tmp_path: Path) -> None:
    data = tmp_path / "data"
    docs = _folder(tmp_path / "docs", _notes(2))
    made = cli("projects", "new", "Later", "--folder", str(docs), "--no-index", data_dir=data)
    assert made.returncode == 0 and "Indexed" not in made.stderr
    (row,) = _listed(data)
    assert row["state"] == "not indexed" and row["passages"] == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["projects", "add", "Nope", "DOCS"], "There is no project named “Nope”"),
        (["projects", "index", "Nope"], "There is no project named “Nope”"),
        (["projects", "new", "P", "--folder", "MISSING"], "is not there"),
        (["projects", "add", "Harbour", "MISSING"], "is not there"),
        (["projects", "new", "Harbour"], "already exists"),
        (["projects", "new", " "], "A project needs a name; type one and try again."),
        (["run", "--model", "MODEL", "--prompt", "x", "--project", "Nope"], "There is no project named “Nope”"),
        (["run", "--model", "MODEL", "--prompt", "x", "--project", "Harbour", "--mode", "complete"], "--mode chat"),
    ],
)
def test_mistakes_are_one_line_exit_2_and_change_nothing(
    tmp_path: Path, tiny_model: Path, args: list[str], message: str
) -> None:
    data = tmp_path / "data"
    docs = _folder(tmp_path / "docs", _notes(1))
    assert cli("projects", "new", "Harbour", "--folder", str(docs), data_dir=data).returncode == 0
    before = _listed(data)
    swap = {"DOCS": str(docs), "MISSING": str(tmp_path / "missing"), "MODEL": str(tiny_model)}
    out = cli(*[swap.get(a, a) for a in args], data_dir=data)
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and out.stdout == ""
    assert _listed(data) == before


def test_run_with_a_project_answers_with_its_knowledge_and_lists_the_sources(tmp_path: Path, tiny_model: Path) -> None:
    data = tmp_path / "data"
    docs = _folder(tmp_path / "docs", {**_notes(20), "keeper.md": f"# Keeper\n\n{FACT}\n"})
    assert cli("projects", "new", "Harbour", "--folder", str(docs), data_dir=data).returncode == 0
    out = cli("run", "--model", str(tiny_model), "--project", "Harbour", "--prompt", "What is the parrot named?",
              "--json", "--max-tokens", "8", "--ctx", "2048", "--threads", "1", data_dir=data)  # fmt: skip
    assert out.returncode == 0, out.stderr
    line = json.loads(out.stdout.rstrip("\n").split("\n")[-1])
    assert line["project"] == "Harbour" and line["knowledge"]["used"] == len(line["sources"]) >= 1
    first = line["sources"][0]
    assert first["n"] == 1 and first["file"] == str(docs / "keeper.md") and FACT in first["passage"]
    assert first["page"] is None and isinstance(first["cited"], bool) and isinstance(first["quoted"], bool)
    assert "passage" in out.stderr and "from “Harbour” in the prompt" in out.stderr


@pytest.mark.slow
def test_the_chat_starter_answers_from_one_of_200_project_files(tmp_path: Path, chat_starter_model: Path) -> None:
    data = tmp_path / "data"
    files = {
        f"island{i:03}.md": f"# Island {i}\n\nThe ferry to island {i} leaves the harbour at {i % 12 + 1} o'clock. "
        f"The island has {i % 7 + 2} wells and a chapel built in {1700 + i}."
        for i in range(199)
    }
    files["keeper.md"] = f"# The lighthouse keeper\n\n{FACT} He feeds it mango every morning.\n"
    docs = _folder(tmp_path / "docs", files)
    made = cli("projects", "new", "Islands", "--folder", str(docs), data_dir=data)
    assert made.returncode == 0 and "In all: 200 files indexed" in made.stderr, made.stderr
    question = "What is the name of the lighthouse keeper's parrot?"
    out = cli("run", "--model", str(chat_starter_model), "--project", "Islands", "--prompt", question, "--json",
              "--temperature", "0", "--max-tokens", "48", data_dir=data)  # fmt: skip
    assert out.returncode == 0, out.stderr
    *answer, last = out.stdout.rstrip("\n").split("\n")
    line = json.loads(last)
    files_given = [s["file"] for s in line["sources"]]
    assert str(docs / "keeper.md") in files_given  # the fact's passage is among the sources given
    used = [Path(s["file"]).name for s in line["sources"] if s["cited"] or s["quoted"]]
    print("answer:", "\n".join(answer), "| sources:", [Path(f).name for f in files_given], "| used:", used)
    # the starter writes no [n] (SmolLM2 135M: measured), but its answer has the passage's words
    assert "Marmalade" in "\n".join(answer) and used == ["keeper.md"]


def test_a_projects_embedding_model_indexes_and_answers_and_a_missing_one_is_said(
    tmp_path: Path, tiny_model: Path
) -> None:
    data = tmp_path / "data"
    lamp = "The harbour master repaired the lighthouse lamp after the winter storms."
    docs = _folder(tmp_path / "docs", {"lamp.txt": lamp, **_notes(5)})
    meanings = {w: w for w in lamp.lower().rstrip(".").split()} | {"fixed": "repaired", "beacon": "lamp"}
    words = write_word_bert(tmp_path / "words.gguf", meanings)
    assert cli("projects", "new", "Harbour", "--folder", str(docs), "--no-index", data_dir=data).returncode == 0
    chats = ConversationStore(AppPaths(data, tmp_path / "config").database)
    try:
        projects = ProjectStore(chats)
        projects.update(projects.projects()[0].folder_id, embedding_model=str(words))
    finally:
        chats.close()
    indexed = cli("projects", "index", "Harbour", data_dir=data)  # (its passages embedded with the model)
    assert indexed.returncode == 0 and "In all: 6 files indexed" in indexed.stderr, indexed.stderr

    def ask() -> tuple[dict[str, Any], str]:
        out = cli("run", "--model", str(tiny_model), "--project", "Harbour", "--prompt", "Who fixed the beacon?",
                  "--json", "--max-tokens", "2", "--ctx", "2048", "--threads", "1", data_dir=data)  # fmt: skip
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.rstrip("\n").split("\n")[-1]), out.stderr

    line, _ = ask()
    assert line["knowledge"]["ranked_by"] == ["bm25", "vectors"] and line["knowledge"]["problems"] == []
    assert line["sources"][0]["file"] == str(docs / "lamp.txt")  # (by meaning: no word of the question in it)
    words.unlink()
    line, stderr = ask()
    assert line["knowledge"]["ranked_by"] == ["bm25"] and "lamp.txt" not in str(line["sources"])
    (problem,) = line["knowledge"]["problems"]
    assert f"embedding model {words} is not there" in problem and problem in stderr


def test_list_says_a_folder_the_last_run_could_not_list_with_its_files_kept(tmp_path: Path) -> None:
    data = tmp_path / "data"
    notes = _folder(tmp_path / "notes", {"heron.md": "# Herons\n\nThe heron count is 11.\n"})
    _folder(notes / "locked", {"secret.md": "# Secret\n\nThe vault opens with MARIGOLD.\n"})
    assert cli("projects", "new", "Birds", "--folder", str(notes), data_dir=data).returncode == 0
    (row,) = _listed(data)
    assert row["unread"] == [] and row["files"]["indexed"] == 2
    conversations = ConversationStore(data / "chats.sqlite3")
    try:
        project = ProjectStore(conversations).project(row["id"])
    finally:
        conversations.close()
    index = KnowledgeIndex(knowledge_path(AppPaths(data, tmp_path / "config"), row["id"]))
    try:  # (the index run as the window's watcher runs it, meeting the folder locked)
        with locked(notes / "locked"), permissions_enforced():
            Indexer(index, project.sources).run()
    finally:
        index.close()
    (row,) = _listed(data)
    (unread,) = row["unread"]
    assert unread["path"] == str(notes / "locked") and unread["cause"] == "permission denied"
    assert (unread["files_kept"], unread["passages_kept"], unread["missing"]) == (1, 1, False)
    assert "cannot be listed (permission denied)" in unread["reason"] and row["files"]["indexed"] == 2
    plain = cli("projects", "list", data_dir=data)
    assert f"  could not read {notes / 'locked'} (permission denied): 1 file kept" in plain.stdout

    again = cli("projects", "index", "Birds", data_dir=data)  # (listed again: walked, the report gone)
    assert again.returncode == 0 and "permission denied" not in again.stderr
    (row,) = _listed(data)
    assert row["unread"] == [] and row["files"]["indexed"] == 2


def test_list_does_not_say_what_a_source_removed_since_could_not_list(tmp_path: Path) -> None:
    data = tmp_path / "data"
    notes = _folder(tmp_path / "notes", {"heron.md": "# Herons\n\nThe heron count is 11.\n"})
    boxes = _folder(tmp_path / "boxes", {})
    (boxes / "locked").mkdir()
    made = cli("projects", "new", "Birds", "--folder", str(notes), "--folder", str(boxes), data_dir=data)
    assert made.returncode == 0, made.stderr
    (row,) = _listed(data)
    conversations = ConversationStore(data / "chats.sqlite3")
    try:
        store = ProjectStore(conversations)
        sources = store.project(row["id"]).sources
        index = KnowledgeIndex(knowledge_path(AppPaths(data, tmp_path / "config"), row["id"]))
        try:  # (the walk meets the second source's only folder locked)
            with locked(boxes / "locked"), permissions_enforced():
                Indexer(index, sources).run()
        finally:
            index.close()
        assert [u["path"] for u in _listed(data)[0]["unread"]] == [str(boxes / "locked")]
        store.remove_source(next(s.id for s in sources if s.path == str(boxes)))  # (not indexed since)
    finally:
        conversations.close()
    (row,) = _listed(data)
    assert row["unread"] == [] and [s["path"] for s in row["sources"]] == [str(notes)]
    assert "could not read" not in cli("projects", "list", data_dir=data).stdout


def test_a_folder_two_nested_sources_could_not_list_is_said_once(tmp_path: Path) -> None:
    """Nested sources (an older Ember, or an import, let them be) both meet the locked folder: `list` says
    it once."""
    data = tmp_path / "data"
    notes = _folder(tmp_path / "notes", {"heron.md": "# Herons\n\nThe heron count is 11.\n"})
    (notes / "inner" / "locked").mkdir(parents=True)
    made = cli("projects", "new", "Birds", "--folder", str(notes), data_dir=data)
    assert made.returncode == 0, made.stderr
    (row,) = _listed(data)
    conversations = ConversationStore(data / "chats.sqlite3")
    try:
        db, lock = conversations.shared_connection()
        with transaction(db, lock):  # (inside the first: the window and the CLI refuse it now)
            insert_source(db, row["id"], str(notes / "inner"), "folder", 0.0, paused=False, from_import=False)
        sources = ProjectStore(conversations).project(row["id"]).sources
        index = KnowledgeIndex(knowledge_path(AppPaths(data, tmp_path / "config"), row["id"]))
        try:
            with locked(notes / "inner" / "locked"), permissions_enforced():
                Indexer(index, sources).run()
            assert len(index.unread_folders()) == 2  # (one for each source that walked it)
        finally:
            index.close()
    finally:
        conversations.close()
    assert [u["path"] for u in _listed(data)[0]["unread"]] == [str(notes / "inner" / "locked")]
    assert cli("projects", "list", data_dir=data).stdout.count("could not read") == 1
