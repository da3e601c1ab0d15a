"""Projects' records (engine/projects/records.py, storage/project_tables.py) on real SQLite files: a
schema-5 database migrates; a folder made a project and back; knowledge sources added by absolute path,
paused, removed — the user's files never touched; deleting a project's folder sends its chats to the
Trash and the undo gives the project back exactly; a purge removes its knowledge index; a chat's export
carries its project and an import makes it again, with the knowledge paths it names paused and never
opened; a backup's restore keeps the projects."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember_chat.engine.errors import StoreError
from ember_chat.engine.projects.records import KnowledgeSource, Project, ProjectStore
from ember_chat.engine.storage.backups import BackupManager
from ember_chat.engine.storage.conversations import SCHEMA_VERSION, ConversationStore
from ember_chat.engine.storage.export import chats_as_json, project_export_json
from ember_chat.engine.storage.importing import import_chats
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.project_tables import insert_source
from ember_chat.engine.storage.schema import _MIGRATIONS
from tests.helpers.clock import Clock
from tests.helpers.opened_paths import opened


@pytest.fixture
def paths(tmp_path: Path) -> AppPaths:
    return AppPaths(tmp_path / "data", tmp_path / "config")


@pytest.fixture
def store(paths: AppPaths) -> Iterator[ConversationStore]:
    s = ConversationStore(paths.database, clock=Clock())
    yield s
    s.close()


@pytest.fixture
def knowledge(tmp_path: Path) -> Path:
    """The user's own files: a folder with two notes, and a PDF-like file beside it."""
    folder = tmp_path / "user" / "thesis notes"
    folder.mkdir(parents=True)
    (folder / "herons.md").write_text("Herons stand still in shallow water.")
    (folder / "egrets.txt").write_text("Egrets are herons too.")
    (tmp_path / "user" / "paper.txt").write_text("The paper.")
    return tmp_path / "user"


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _index(paths: AppPaths, folder_id: int) -> Path:
    """A knowledge index as the indexer keeps one (its own file in the project's folder)."""
    folder = paths.project_folder(folder_id)
    folder.mkdir(parents=True, exist_ok=True)
    sqlite3.connect(folder / "knowledge.sqlite3").close()
    return folder


def test_a_schema_5_database_migrates_and_its_folders_can_become_projects(tmp_path: Path) -> None:
    path = tmp_path / "v5.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    for number, script in enumerate(_MIGRATIONS[:5]):
        db.executescript(f"BEGIN; {script} PRAGMA user_version={number + 1}; COMMIT;")
    db.execute("INSERT INTO folders (id, name, position, created_at) VALUES (7, 'Thesis', 0, 1.0)")
    db.execute("INSERT INTO conversations (id, title, created_at, updated_at, folder_id) VALUES (1, 'Old', 1, 1, 7)")
    db.close()
    s = ConversationStore(path)
    try:
        assert s.schema_version == SCHEMA_VERSION == 7
        projects = ProjectStore(s)
        assert projects.projects() == [] and projects.of_chat(1) is None
        made = projects.make_project(7, instructions="Answer as a biologist.")
        assert projects.of_chat(1) == made and made.name == "Thesis" and made.sources == ()
    finally:
        s.close()


def test_a_folder_becomes_a_project_and_back_its_chats_staying(store: ConversationStore, paths: AppPaths) -> None:
    projects = ProjectStore(store)
    thesis = projects.create(
        "Thesis", icon="🐦", instructions="Cite the notes.", model="qwen.gguf", tools=("calculator", "calculator")
    )
    assert thesis == Project(
        thesis.folder_id, "Thesis", "🐦", "Cite the notes.", "qwen.gguf", None, ("calculator",), None, None, None, ()
    )
    sub = store.organise.create_folder("Drafts", thesis.folder_id)
    top_chat = store.create_conversation("Plan").id
    sub_chat = store.create_conversation("Draft 1").id
    loose = store.create_conversation("Elsewhere").id
    store.organise.move_chats([top_chat], thesis.folder_id)
    store.organise.move_chats([sub_chat], sub.id)
    assert projects.of_chat(top_chat) == projects.of_chat(sub_chat) == thesis
    assert projects.of_chat(loose) is None

    changed = projects.update(thesis.folder_id, name="  Thesis  2026 ", context_length=8192, model=None, preset="Exact")
    assert (changed.name, changed.context_length, changed.model, changed.preset) == ("Thesis 2026", 8192, None, "Exact")
    assert store.organise.folder(thesis.folder_id).name == "Thesis 2026"
    assert projects.projects() == [changed]

    with pytest.raises(StoreError, match="is a project already"):
        projects.make_project(thesis.folder_id)
    with pytest.raises(StoreError, match="whole number of tokens"):
        projects.update(thesis.folder_id, context_length=0)
    with pytest.raises(StoreError, match=r"at most 16 \(this one has 19\)"):
        projects.update(thesis.folder_id, icon="not an emoji at all")
    with pytest.raises(TypeError, match="colour"):
        projects.update(thesis.folder_id, colour="red")
    assert projects.project(thesis.folder_id) == changed  # (nothing of a refused change was kept)

    index = _index(paths, thesis.folder_id)
    projects.unmake(thesis.folder_id)
    assert projects.projects() == [] and projects.of_chat(top_chat) is None
    assert [c.folder_id for c in (store.conversation(top_chat), store.conversation(sub_chat))] == [
        thesis.folder_id,
        sub.id,
    ]
    assert not index.exists()  # Ember's own index of the knowledge goes with the project
    with pytest.raises(StoreError, match="no longer exists"):
        projects.project(thesis.folder_id)


def test_knowledge_sources_by_absolute_path_and_removing_one_leaves_the_files(
    store: ConversationStore, knowledge: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    projects = ProjectStore(store)
    thesis = projects.create("Thesis")
    before = _files(knowledge)
    monkeypatch.chdir(knowledge)
    folder = projects.add_source(thesis.folder_id, "thesis notes")  # relative: made absolute
    file = projects.add_source(thesis.folder_id, knowledge / "paper.txt")
    assert (folder.path, folder.kind, folder.paused, folder.from_import) == (
        str(knowledge / "thesis notes"),
        "folder",
        False,
        False,
    )
    assert (file.path, file.kind) == (str(knowledge / "paper.txt"), "file")
    with pytest.raises(StoreError, match="does not exist"):
        projects.add_source(thesis.folder_id, knowledge / "gone")
    with pytest.raises(StoreError, match="already"):
        projects.add_source(thesis.folder_id, str(knowledge / "thesis notes") + "/")

    paused = projects.set_paused(folder.id, True)
    assert paused == KnowledgeSource(folder.id, folder.path, "folder", folder.added_at, True)
    assert projects.project(thesis.folder_id).sources == (paused, file)
    projects.remove_source(folder.id)
    assert projects.project(thesis.folder_id).sources == (file,)
    projects.unmake(thesis.folder_id)
    assert _files(knowledge) == before  # neither removing a source nor unmaking the project touched a file
    with pytest.raises(StoreError, match="no longer in its project"):
        projects.remove_source(file.id)


def test_a_path_inside_a_source_is_refused_and_a_folder_around_sources_takes_their_place(
    store: ConversationStore, knowledge: Path
) -> None:
    projects = ProjectStore(store)
    thesis = projects.create("Thesis")
    notes = knowledge / "thesis notes"
    (notes / "sub").mkdir()
    (notes / "sub" / "budget.md").write_text("The budget.")
    (knowledge / "thesis notes 2").mkdir()  # (a name that starts alike is not inside)
    folder = projects.add_source(thesis.folder_id, notes)
    for inner in (notes / "sub", notes / "sub" / "budget.md", notes / "herons.md"):
        with pytest.raises(StoreError) as refused:
            projects.add_source(thesis.folder_id, inner)
        assert str(refused.value) == (
            f"{inner} is inside {notes}, which is in the project “Thesis” already: its files are read from there."
        )
    assert projects.project(thesis.folder_id).sources == (folder,)
    beside = projects.add_source(thesis.folder_id, knowledge / "thesis notes 2")
    paper = projects.add_source(thesis.folder_id, knowledge / "paper.txt")

    # the parent of sources: added, the sources inside it (a folder, a file) taken out, one beside kept
    assert projects.covered(thesis.folder_id, knowledge / "thesis notes") == []
    assert projects.covered(thesis.folder_id, knowledge) == [folder, beside, paper]
    other = projects.create("Other")
    elsewhere = projects.add_source(other.folder_id, notes)  # (another project's are its own)
    parent = projects.add_source(thesis.folder_id, knowledge)
    assert projects.project(thesis.folder_id).sources == (parent,)
    assert projects.project(other.folder_id).sources == (elsewhere,)
    # a file around nothing: no source is taken out by a file
    assert projects.covered(other.folder_id, knowledge / "paper.txt") == []


def test_a_path_inside_a_paused_or_unconfirmed_folder_is_refused_with_what_to_do(
    store: ConversationStore, knowledge: Path
) -> None:
    """Its files are not read from the holder while it is paused or not confirmed: the sentence says so,
    and what to do (added as well, they would be read twice once the holder is resumed)."""
    projects = ProjectStore(store)
    thesis = projects.create("Thesis")
    notes = knowledge / "thesis notes"
    (notes / "sub").mkdir()
    folder = projects.add_source(thesis.folder_id, notes)
    projects.set_paused(folder.id, True)
    with pytest.raises(StoreError) as refused:
        projects.add_source(thesis.folder_id, notes / "sub")
    assert str(refused.value) == (
        f"{notes / 'sub'} is inside {notes}, paused in the project “Thesis”: resume it to read its files."
    )
    projects.remove_source(folder.id)
    db, lock = store.shared_connection()
    with lock:  # (as an imported chat brings a path: paused, not confirmed)
        insert_source(db, thesis.folder_id, str(notes), "folder", 0.0, paused=True, from_import=True)
    with pytest.raises(StoreError) as refused:
        projects.add_source(thesis.folder_id, notes / "herons.md")
    assert str(refused.value) == (
        f"{notes / 'herons.md'} is inside {notes}, which came with an imported chat into the project “Thesis” "
        f"and is not confirmed yet: check and confirm {notes} to read its files."
    )
    assert [(s.path, s.from_import) for s in projects.project(thesis.folder_id).sources] == [(str(notes), True)]
    # confirmed, an imported path is checked as one added is: inside a folder of the project, refused
    imported = projects.project(thesis.folder_id).sources[0]
    projects.remove_source(imported.id)
    projects.add_source(thesis.folder_id, knowledge)
    with lock:
        insert_source(db, thesis.folder_id, str(notes), "folder", 0.0, paused=True, from_import=True)
    [_, came] = projects.project(thesis.folder_id).sources
    with pytest.raises(StoreError, match=f"is inside {knowledge}, which is in the project “Thesis” already"):
        projects.set_paused(came.id, False)
    assert projects.source(came.id).from_import  # (still to be checked: nothing read twice)


def test_a_link_to_a_source_or_into_one_is_refused_and_kept_as_typed_otherwise(
    store: ConversationStore, knowledge: Path, tmp_path: Path
) -> None:
    """Compared with links resolved too (a link into a source would have its files read twice)."""
    projects = ProjectStore(store)
    thesis = projects.create("Thesis")
    notes = knowledge / "thesis notes"
    (notes / "sub").mkdir()
    folder = projects.add_source(thesis.folder_id, notes)
    (tmp_path / "to sub").symlink_to(notes / "sub")
    (tmp_path / "to notes").symlink_to(notes)
    with pytest.raises(StoreError) as refused:
        projects.add_source(thesis.folder_id, tmp_path / "to sub")
    assert str(refused.value) == (
        f"{tmp_path / 'to sub'} is inside {notes}, which is in the project “Thesis” already: "
        "its files are read from there."
    )
    with pytest.raises(StoreError) as refused:
        projects.add_source(thesis.folder_id, tmp_path / "to notes")
    assert str(refused.value) == f"{tmp_path / 'to notes'} is in the project “Thesis” already (as {notes})."
    # a source that is a link is kept as typed; only the path being added is looked up on disk, never the
    # project's sources (one on a network share that stopped answering would hold the store and the window)
    projects.remove_source(folder.id)
    link = projects.add_source(thesis.folder_id, tmp_path / "to notes")
    assert link.path == str(tmp_path / "to notes")
    looked_up: list[str] = []
    real = os.path.realpath

    def spied(path: str, *args: object, **kwargs: object) -> str:
        looked_up.append(str(path))
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    (knowledge / "other").mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os.path, "realpath", spied)
        projects.add_source(thesis.folder_id, knowledge / "other")
    assert looked_up == [str(knowledge / "other")]


def _table(store: ConversationStore, table: str) -> list[tuple[object, ...]]:
    db, lock = store.shared_connection()
    with lock:
        return [tuple(r) for r in db.execute(f"SELECT * FROM {table} ORDER BY rowid")]


def test_deleting_a_project_sends_its_chats_to_the_trash_and_undo_gives_it_all_back(
    store: ConversationStore, paths: AppPaths, knowledge: Path
) -> None:
    projects = ProjectStore(store)
    thesis = projects.create("Thesis", icon="🐦", instructions="Cite the notes.", tools=("files",))
    sub = store.organise.create_folder("Drafts", thesis.folder_id)
    inner = projects.make_project(sub.id, instructions="Drafts only.")
    projects.add_source(thesis.folder_id, knowledge / "thesis notes")
    projects.set_paused(projects.add_source(thesis.folder_id, knowledge / "paper.txt").id, True)
    chats = [store.create_conversation(t).id for t in ("Plan", "Draft")]
    store.organise.move_chats(chats[:1], thesis.folder_id)
    store.organise.move_chats(chats[1:], sub.id)
    other = projects.create("Trip")
    files = _files(knowledge)
    before = {t: _table(store, t) for t in ("folders", "projects", "project_sources")}
    whole = projects.projects()
    index = _index(paths, thesis.folder_id)

    undo = store.organise.delete_folder(thesis.folder_id)
    assert undo.label == "Deleted the project “Thesis”; 2 chats went to the Trash."  # (not "the folder")
    assert projects.projects() == [other] and {c.id for c in store.organise.trashed()} == set(chats)
    assert index.exists()  # kept while the delete can be undone

    store.organise.undo(undo)
    assert projects.projects() == whole and projects.project(inner.folder_id) == whole[1]
    assert {t: _table(store, t) for t in before} == before  # the same rows, with the same ids
    assert store.organise.trash_count() == 0 and projects.of_chat(chats[1]) == whole[1]
    assert _files(knowledge) == files  # nothing on the user's disk changed


def test_undo_gives_a_source_a_new_id_where_one_made_since_took_its_own(
    store: ConversationStore, knowledge: Path
) -> None:
    projects = ProjectStore(store)
    thesis = projects.create("Thesis")
    source = projects.add_source(thesis.folder_id, knowledge / "paper.txt")
    trip = projects.create("Trip")
    undo = store.organise.delete_folder(thesis.folder_id)
    newer = projects.add_source(trip.folder_id, knowledge / "thesis notes")
    assert newer.id == source.id  # (SQLite gave the deleted row's id to the new one)
    store.organise.undo(undo)
    back = projects.project(thesis.folder_id).sources
    assert [(s.path, s.kind, s.added_at, s.paused) for s in back] == [
        (source.path, source.kind, source.added_at, source.paused)
    ]
    assert back[0].id != newer.id and projects.project(trip.folder_id).sources == (newer,)


def test_a_project_deleted_for_good_loses_its_index_and_only_that(
    store: ConversationStore, paths: AppPaths, knowledge: Path
) -> None:
    projects = ProjectStore(store)
    before = _files(knowledge)
    thesis = projects.create("Thesis")
    projects.add_source(thesis.folder_id, knowledge / "thesis notes")
    store.organise.move_chats([store.create_conversation("Plan").id], thesis.folder_id)
    empty = projects.create("Empty")
    kept = projects.create("Trip")
    indexes = {p.folder_id: _index(paths, p.folder_id) for p in (thesis, empty, kept)}

    store.organise.delete_folder(thesis.folder_id)
    store.organise.delete_folder(empty.folder_id)
    assert all(i.exists() for i in indexes.values())  # (the deletes may be undone)
    assert store.organise.empty_trash() == 1
    assert [f.exists() for f in indexes.values()] == [False, False, True]

    store.organise.delete_folder(kept.folder_id)  # a project with no chats: the next purge takes its index
    assert store.organise.empty_trash() == 0 and not indexes[kept.folder_id].exists()
    assert _files(knowledge) == before


def test_an_index_left_by_a_project_deleted_for_good_is_not_a_new_project_s(
    store: ConversationStore, paths: AppPaths
) -> None:
    projects = ProjectStore(store)
    folder = store.organise.create_folder("Reused")
    stale = _index(paths, folder.id)  # (a project of this id deleted for good while another process held it)
    projects.make_project(folder.id)
    assert not stale.exists()


def test_an_imported_project_given_a_deleted_project_s_folder_id_does_not_inherit_its_index(
    tmp_path: Path, store: ConversationStore, paths: AppPaths
) -> None:
    elsewhere = ConversationStore(tmp_path / "elsewhere" / "chats.sqlite3")
    try:
        trip = ProjectStore(elsewhere).create("Trip", instructions="Plan the trip.")
        chat = elsewhere.create_conversation("Route")
        elsewhere.organise.move_chats([chat.id], trip.folder_id)
        exported = _export(elsewhere, [chat.id], tmp_path / "trip.json")
    finally:
        elsewhere.close()
    projects = ProjectStore(store)
    projects.create("Keep")
    gone = projects.create("Gone")  # the highest folder id
    stale = _index(paths, gone.folder_id)
    store.organise.delete_folder(gone.folder_id)

    assert import_chats(store, exported).projects == ("Trip",)
    [made] = [p for p in projects.projects() if p.name == "Trip"]
    assert made.folder_id == gone.folder_id  # (SQLite gave the deleted folder's id to the new one)
    assert not stale.exists()  # Gone's passages are not Trip's


def test_undo_keeps_a_project_s_own_index_and_never_takes_another_s(store: ConversationStore, paths: AppPaths) -> None:
    projects = ProjectStore(store)
    projects.create("First")
    thesis = projects.create("Thesis")
    own = _index(paths, thesis.folder_id)
    undo = store.organise.delete_folder(thesis.folder_id)
    store.organise.undo(undo)
    assert own.exists()  # the same folder id: its own index, kept

    # its id taken meanwhile by a plain folder: the index goes with the project to its new id
    undo = store.organise.delete_folder(thesis.folder_id)
    plain = store.organise.create_folder("Plain")
    assert plain.id == thesis.folder_id
    store.organise.undo(undo)
    [back] = [p for p in projects.projects() if p.name == "Thesis"]
    assert back.folder_id != plain.id and not own.exists()
    assert (paths.project_folder(back.folder_id) / "knowledge.sqlite3").exists()

    # its id taken meanwhile by a project: that index is the new project's, and whatever lay at the new
    # id's place (a project deleted for good there) is not Thesis's
    undo = store.organise.delete_folder(back.folder_id)
    trip = projects.create("Trip")
    assert trip.folder_id == back.folder_id
    trips = _index(paths, trip.folder_id)
    left = _index(paths, trip.folder_id + 1)
    store.organise.undo(undo)
    [again] = [p for p in projects.projects() if p.name == "Thesis"]
    assert again.folder_id == trip.folder_id + 1
    assert not left.exists() and trips.exists()


def _export(store: ConversationStore, ids: list[int], path: Path) -> Path:
    path.write_text(chats_as_json(store, ids))
    return path


def test_a_chat_s_export_carries_its_project_and_the_import_makes_it_again(
    tmp_path: Path, store: ConversationStore, knowledge: Path
) -> None:
    projects = ProjectStore(store)
    thesis = projects.create(
        "Thesis", icon="🐦", instructions="Cite the notes.", model="qwen.gguf", tools=("files",), context_length=4096
    )
    projects.add_source(thesis.folder_id, knowledge / "thesis notes")
    projects.add_source(thesis.folder_id, knowledge / "paper.txt")
    chat = store.create_conversation("Plan")
    store.add_message(chat.id, "user", "What do herons do?")
    store.organise.move_chats([chat.id], thesis.folder_id)
    loose = store.create_conversation("Loose").id
    exported = _export(store, [chat.id, loose], tmp_path / "chats.json")
    doc = json.loads(exported.read_text())
    assert doc[0]["project"] == {
        "name": "Thesis",
        "icon": "🐦",
        "instructions": "Cite the notes.",
        "model": "qwen.gguf",
        "preset": None,
        "tools": ["files"],
        "context_length": 4096,
        "embedding_model": None,
        "reranker": None,
        "knowledge": [
            {"path": str(knowledge / "thesis notes"), "kind": "folder"},
            {"path": str(knowledge / "paper.txt"), "kind": "file"},
        ],
    }
    assert "project" not in doc[1]
    assert "Herons stand still" not in exported.read_text()  # the paths, never the files' text

    other = ConversationStore(tmp_path / "other" / "chats.sqlite3")
    try:
        report = import_chats(other, exported)
        assert report.projects == ("Thesis",)
        made = ProjectStore(other).projects()
        assert len(made) == 1
        project = made[0]
        assert (
            project.name,
            project.icon,
            project.instructions,
            project.model,
            project.tools,
            project.context_length,
        ) == (
            "Thesis",
            "🐦",
            "Cite the notes.",
            "qwen.gguf",
            ("files",),
            4096,
        )
        assert [(s.path, s.kind, s.paused, s.from_import) for s in project.sources] == [
            (str(knowledge / "thesis notes"), "folder", True, True),
            (str(knowledge / "paper.txt"), "file", True, True),
        ]
        imported = {c.title: c.id for c in other.conversations()}
        assert ProjectStore(other).of_chat(imported["Plan"]) == project
        assert ProjectStore(other).of_chat(imported["Loose"]) is None
        again = _export(other, [imported["Plan"]], tmp_path / "again.json")
        assert json.loads(again.read_text())[0]["project"] == doc[0]["project"]

        # imported again: the folder of that name is there, so no second project (and no change to it)
        ProjectStore(other).update(project.folder_id, instructions="Mine now.")
        assert import_chats(other, exported).projects == ()
        assert [p.instructions for p in ProjectStore(other).projects()] == ["Mine now."]
        assert len(other.organise.folders()) == 1
        confirmed = ProjectStore(other).set_paused(project.sources[0].id, False)
        assert (confirmed.paused, confirmed.from_import) == (False, False)  # the user's confirmation
    finally:
        other.close()


def test_a_hostile_import_s_knowledge_comes_in_paused_and_is_never_opened(
    tmp_path: Path, store: ConversationStore
) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key.txt").write_text("do not read")
    named = ["/etc/passwd", "/etc", str(secret), str(secret / "key.txt"), "../../../etc/shadow", "~/.ssh/id_rsa"]
    knowledge = [{"path": p, "kind": "file" if "." in Path(p).name else "folder"} for p in named]
    knowledge += [{"path": 5}, {"path": "x" * 5000}, {"path": "/bad", "kind": "device"}, "not a dict"]
    knowledge += [{"path": f"/many/{i}"} for i in range(3000)]
    doc = {
        "title": "Hostile",
        "tree": [{"parent": None, "role": "user", "content": "hi"}],
        "project": {"name": "  Evil\nproject ", "icon": "x" * 100, "instructions": 7, "tools": ["a", 3, "a"],
                    "context_length": -4, "model": ["no"], "knowledge": knowledge},
    }  # fmt: skip
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps([doc]))
    with opened() as seen:
        report = import_chats(store, path)
    assert str(path) in seen  # (the hook sees what the import opens: the file itself)
    assert [p for p in seen if p.startswith(("/etc", str(secret), "/many", "/bad")) or "ssh" in p] == []
    project = ProjectStore(store).projects()[0]
    assert report.projects == ("Evil project",) and project.name == "Evil project"
    assert (project.icon, project.instructions, project.tools, project.context_length, project.model) == (
        "",
        "",
        ("a",),
        None,
        None,
    )
    sources = project.sources
    assert all(s.paused and s.from_import for s in sources)
    assert [s.path for s in sources[:6]] == named  # kept as the file named them, not resolved or looked up
    assert sources[6].path == "/bad" and sources[6].kind == "folder"
    assert len(sources) == 1000  # (the rest of the file's 3,000 paths left out)


def test_a_restored_backup_keeps_the_projects(store: ConversationStore, knowledge: Path) -> None:
    projects = ProjectStore(store)
    thesis = projects.create("Thesis", instructions="Cite the notes.")
    projects.add_source(thesis.folder_id, knowledge / "paper.txt")
    store.organise.move_chats([store.create_conversation("Plan").id], thesis.folder_id)
    whole = projects.projects()
    manager = BackupManager(store)
    copy = manager.backup()
    projects.unmake(thesis.folder_id)
    projects.create("Made after the backup")
    manager.restore(copy)
    assert ProjectStore(store).projects() == whole == projects.projects()


def test_two_projects_never_share_a_name(store: ConversationStore) -> None:
    """The CLI, the API and a chat file name a project by its name (ignoring case): a second project of
    a name is refused with a sentence, however it would be made."""
    projects = ProjectStore(store)
    kitchen = projects.create("Kitchen")
    with pytest.raises(StoreError, match="There is a project named “Kitchen” already"):
        projects.create(" kitchen ")
    plain = store.organise.create_folder("KITCHEN")
    with pytest.raises(StoreError, match="already"):
        projects.make_project(plain.id)
    garden = projects.create("Garden")
    with pytest.raises(StoreError, match="already"):
        projects.update(garden.folder_id, name="kitchen")
    assert projects.update(kitchen.folder_id, name="kitchen").name == "kitchen"  # (its own name, recased)
    assert [p.name for p in projects.projects()] == ["kitchen", "Garden"]
    volcano = projects.create("Café research")
    for look_alike in ("Café  research", "café\tresearch", "Café\u00a0research", "Cafe\u0301 research"):
        with pytest.raises(StoreError, match="There is a project named “Café research” already"):
            projects.update(garden.folder_id, name=look_alike)  # (two spaces, a tab, a no-break space, é as e + ´)
    assert (
        projects.project(volcano.folder_id).name == "Café research"
        and projects.project(garden.folder_id).name == "Garden"
    )


def test_projects_named_alike_before_the_check_can_still_be_saved_and_an_import_finds_them(
    tmp_path: Path, store: ConversationStore
) -> None:
    """Two projects whose names look alike (kept from before the check compared them so): each can still
    be saved under its own name; an imported chat of such a name goes to the project there, not a new one."""
    projects = ProjectStore(store)
    first = projects.create("Café research")
    second = projects.create("Other")
    store.organise.rename_folder(second.folder_id, "Cafe\u0301 research")  # (as an older Ember let it be)
    assert projects.update(second.folder_id, name="Cafe\u0301 research", instructions="Mine.").instructions == "Mine."
    assert projects.update(first.folder_id, name="Café research", model="qwen.gguf").model == "qwen.gguf"
    chat = store.create_conversation("Plan")
    store.organise.move_chats([chat.id], first.folder_id)
    exported = _export(store, [chat.id], tmp_path / "chats.json")
    doc = json.loads(exported.read_text())
    doc[0]["project"]["name"] = "café  RESEARCH"
    exported.write_text(json.dumps(doc))
    other = ConversationStore(tmp_path / "other" / "chats.sqlite3")
    try:
        ProjectStore(other).create("Café research")
        assert import_chats(other, exported).projects == ()
        assert [p.name for p in ProjectStore(other).projects()] == ["Café research"]
    finally:
        other.close()


def test_a_project_without_a_name_is_refused_as_a_project(store: ConversationStore) -> None:
    """An empty name is said of the project (not of the folder it is made in), made or renamed."""
    projects = ProjectStore(store)
    with pytest.raises(StoreError, match=r"^A project needs a name; type one and try again\.$"):
        projects.create(" \t")
    made = projects.create("Herons")
    with pytest.raises(StoreError, match=r"^A project needs a name; type one and try again\.$"):
        projects.update(made.folder_id, name="")
    assert [p.name for p in projects.projects()] == ["Herons"] and len(store.organise.folders()) == 1


def test_a_typed_or_renamed_project_name_is_kept_without_format_characters(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path / "chats.sqlite3")
    try:
        projects = ProjectStore(store)
        research = projects.create("Research")
        with pytest.raises(StoreError, match="There is a project named “Research” already"):
            projects.create("Research\u200b")
        with pytest.raises(StoreError, match="A project needs a name"):
            projects.create("\u202e\u200b")
        other = projects.create("\u202eOther\u2069")
        assert other.name == "Other"
        with pytest.raises(StoreError, match="There is a project named “Research” already"):
            projects.update(other.folder_id, name="\u2066research")
        assert projects.update(research.folder_id, name="Research \u200bnotes").name == "Research notes"
    finally:
        store.close()


def test_a_name_saved_with_format_characters_before_they_were_cleaned_reads_cleaned(
    store: ConversationStore, paths: AppPaths
) -> None:
    project = ProjectStore(store).create("Research")
    plain = store.organise.create_folder("Notes")
    store.close()
    db = sqlite3.connect(paths.database)  # (as an older Ember kept a name as typed)
    with db:
        db.execute("UPDATE folders SET name = ? WHERE id = ?", ("Re\u202esearch\u200b", project.folder_id))
        db.execute("UPDATE folders SET name = ? WHERE id = ?", ("\u200b", plain.id))
    db.close()
    again = ConversationStore(paths.database, clock=Clock())
    try:
        assert ProjectStore(again).project(project.folder_id).name == "Research"
        assert {f.id: f.name for f in again.organise.folders()}[project.folder_id] == "Research"
        assert {f.id: f.name for f in again.organise.folders()}[plain.id] == "\u200b"  # (nothing else to show)
        (exported,) = json.loads(project_export_json(again, project.folder_id))  # (the project alone: no chats)
        assert exported["project"]["name"] == "Research"
    finally:
        again.close()
