"""A project's own export (Export project…, `ember-chat projects export`; issue 34): one Ember export file
with the project first, on its own (name, icon, instructions, defaults, knowledge paths, never the files'
text), then its chats, also when it has none; the ordinary import makes the project (its knowledge paused
until confirmed) and its report names the project the chats went into, made or joined. A project block
of the wrong shape is cleaned or refused with a sentence, and nothing is written."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember_chat.engine.errors import StoreError
from ember_chat.engine.projects.answers import AnswerKnowledge
from ember_chat.engine.projects.citations import ProjectSource
from ember_chat.engine.projects.records import ProjectStore
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.export import project_export_json
from ember_chat.engine.storage.import_ember import MAX_IMPORTED_SOURCES
from ember_chat.engine.storage.import_plan import ImportCancelled, ImportFailed
from ember_chat.engine.storage.importing import ImportedProject, import_chats
from ember_chat.engine.storage.organise import Folder
from ember_chat.engine.storage.project_tables import MAX_NAME
from ember_chat.engine.storage.records import Conversation


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ConversationStore]:
    s = ConversationStore(tmp_path / "here" / "chats.sqlite3")
    yield s
    s.close()


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[ConversationStore]:
    s = ConversationStore(tmp_path / "fresh" / "chats.sqlite3")
    yield s
    s.close()


@pytest.fixture
def research(store: ConversationStore, tmp_path: Path) -> int:
    """A project with two knowledge folders and a file, no chats; its folder id."""
    notes, papers = tmp_path / "user" / "notes", tmp_path / "user" / "papers"
    notes.mkdir(parents=True)
    papers.mkdir()
    (tmp_path / "user" / "tides.md").write_text("Spring tides come after a full moon.")
    projects = ProjectStore(store)
    project = projects.create("Research", icon="🔭", instructions="Cite the notes.", context_length=8192)
    for path in (notes, papers, tmp_path / "user" / "tides.md"):
        projects.add_source(project.folder_id, path)
    return project.folder_id


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_a_project_with_no_chats_exports_and_imports_into_a_fresh_store(
    tmp_path: Path, store: ConversationStore, fresh: ConversationStore, research: int
) -> None:
    exported = _write(tmp_path / "Research.json", project_export_json(store, research))
    text = exported.read_text()
    (only,) = json.loads(text)
    assert only["format"] == "ember-chat" and only["project"]["name"] == "Research"
    assert [k["kind"] for k in only["project"]["knowledge"]] == ["folder", "folder", "file"]
    assert "Spring tides" not in text  # the paths, never the files' text

    report = import_chats(fresh, exported)
    (project,) = ProjectStore(fresh).projects()
    assert (project.name, project.icon, project.instructions, project.context_length) == (
        "Research",
        "🔭",
        "Cite the notes.",
        8192,
    )
    assert all(s.paused and s.from_import for s in project.sources)
    assert (report.chats, report.messages, report.projects) == (0, 0, ("Research",))
    assert report.into == (ImportedProject(project.folder_id, "Research", True, True, 0, 2, 1),)
    assert fresh.conversations() == []

    # the same file again: the project is here, so it is joined and left as it is
    ProjectStore(fresh).update(project.folder_id, instructions="Mine now.")
    again = import_chats(fresh, exported)
    assert again.projects == () and [p.instructions for p in ProjectStore(fresh).projects()] == ["Mine now."]
    assert [(p.made, p.chats, p.name) for p in again.into] == [(False, 0, "Research")]


def test_a_project_with_two_chats_goes_whole_and_its_chats_land_in_it(
    tmp_path: Path, store: ConversationStore, fresh: ConversationStore, research: int
) -> None:
    first = store.create_conversation("Tides")
    question = store.add_message(first.id, "user", "When are spring tides?")
    answer = store.add_message(first.id, "assistant", "After a full moon [1].", parent_id=question.id)
    given = [ProjectSource(1, "/home/ana/notes/tides.md", None, 0, "Spring tides come after a full moon.", 5)]
    AnswerKnowledge(store).record(answer.id, given)
    second = store.create_conversation("Moons")
    store.add_message(second.id, "user", "How many moons has Mars?")
    loose = store.create_conversation("Not in it")
    inner = store.organise.create_folder("Drafts", research)
    store.organise.move_chats([first.id], research)
    store.organise.move_chats([second.id], inner.id)  # (a folder inside the project: its chat is the project's)
    store.organise.archive_chats([second.id], True)
    gone = store.create_conversation("Trashed")
    store.organise.move_chats([gone.id], research)
    store.organise.trash_chats([gone.id])

    plain = json.loads(project_export_json(store, research))
    assert [d.get("title") for d in plain] == [None, "Moons", "Tides"]  # the project, then its chats
    assert all(d["project"]["name"] == "Research" for d in plain)
    assert "passage" not in plain[2]["tree"][1]["project_sources"][0]  # asked for: not given
    withtext = json.loads(project_export_json(store, research, passages=True))
    assert withtext[2]["tree"][1]["project_sources"][0]["passage"] == given[0].text
    assert loose.id and "Not in it" not in json.dumps(plain)

    report = import_chats(fresh, _write(tmp_path / "Research.json", json.dumps(withtext)))
    (project,) = ProjectStore(fresh).projects()
    assert (report.chats, report.messages) == (2, 3)
    assert report.into == (ImportedProject(project.folder_id, "Research", True, True, 2, 2, 1),)
    titles = {c.title: c for c in fresh.conversations() + fresh.conversations(archived=True)}
    assert set(titles) == {"Tides", "Moons"}
    assert all(ProjectStore(fresh).of_chat(c.id) == project for c in titles.values())
    assert titles["Moons"].archived_at is not None


def test_chats_joining_a_project_that_is_here_already(
    tmp_path: Path, store: ConversationStore, fresh: ConversationStore, research: int
) -> None:
    chat = store.create_conversation("Tides")
    store.add_message(chat.id, "user", "When are spring tides?")
    store.organise.move_chats([chat.id], research)
    exported = _write(tmp_path / "Research.json", project_export_json(store, research))
    mine = ProjectStore(fresh).create("research", instructions="Mine.")  # (names compare without case)
    report = import_chats(fresh, exported)
    assert report.projects == ()
    assert report.into == (ImportedProject(mine.folder_id, "research", False, True, 1, 0, 0),)
    assert ProjectStore(fresh).project(mine.folder_id).sources == ()  # a file never adds to a project here


HUGE = "x" * 3_000_000


@pytest.mark.parametrize(
    ("block", "said"),
    [
        (5, "item 1 should be a project but has no name"),
        ({"name": 7}, "item 1 should be a project but has no name"),
        ({"name": "   \n "}, "item 1 should be a project but has no name"),
        ([{"name": "In a list"}], "item 1 should be a project but has no name"),
    ],
)
def test_a_project_block_with_no_usable_name_is_refused_with_a_sentence(
    tmp_path: Path, fresh: ConversationStore, block: object, said: str
) -> None:
    chat = {"title": "Kept out", "tree": [{"parent": None, "role": "user", "content": "hi"}]}
    path = _write(tmp_path / "odd.json", json.dumps([{"format": "ember-chat", "version": 1, "project": block}, chat]))
    with pytest.raises(ImportFailed, match=said) as refused:
        import_chats(fresh, path)
    assert str(refused.value).startswith("In odd.json, ")
    assert fresh.conversations() == [] and fresh.organise.folders() == []  # nothing written


def test_a_project_block_of_odd_types_and_huge_strings_is_cleaned(tmp_path: Path, fresh: ConversationStore) -> None:
    block = {
        "name": f"  Big\t{HUGE}",
        "icon": HUGE,
        "instructions": HUGE,
        "model": {"no": 1},
        "preset": 3.5,
        "tools": "files",
        "context_length": True,
        "embedding_model": ["x"],
        "reranker": None,
        "knowledge": [{"path": HUGE}, {"path": None}, 4, {"path": "/data/ok", "kind": 9}],
    }
    path = _write(tmp_path / "big.json", json.dumps([{"format": "ember-chat", "version": "?", "project": block}]))
    report = import_chats(fresh, path)
    (project,) = ProjectStore(fresh).projects()
    assert project.name == f"Big {HUGE}"[:MAX_NAME]
    cut = "x" * (MAX_NAME - 1) + " tail"  # (the cut falls on a space: not kept at the name's end)
    path = _write(tmp_path / "cut.json", json.dumps([{"format": "ember-chat", "version": 1, "project": {"name": cut}}]))
    import_chats(fresh, path)
    assert {p.name for p in ProjectStore(fresh).projects()} == {project.name, "x" * (MAX_NAME - 1)}
    assert len(project.instructions) == 100_000 and project.icon == ""
    assert (project.model, project.preset, project.tools, project.context_length, project.embedding_model) == (
        None,
        None,
        (),
        None,
        None,
    )
    assert [(s.path, s.kind, s.paused) for s in project.sources] == [("/data/ok", "folder", True)]
    assert [(p.name, p.made, p.chats, p.folders, p.files) for p in report.into] == [(project.name, True, 0, 1, 0)]


def test_a_folder_inside_a_project_never_takes_an_imported_project_s_chats(
    tmp_path: Path, store: ConversationStore, fresh: ConversationStore, research: int
) -> None:
    chat = store.create_conversation("Tides")
    store.add_message(chat.id, "user", "When are spring tides?")
    store.organise.move_chats([chat.id], research)
    exported = _write(tmp_path / "Research.json", project_export_json(store, research))
    projects = ProjectStore(fresh)
    secret = projects.create("Secret", instructions="Secret instructions.")
    inside = fresh.organise.create_folder("Research", secret.folder_id)  # (a plain folder inside Secret)
    report = import_chats(fresh, exported)
    (made,) = report.into
    assert made.folder_id not in (inside.id, secret.folder_id) and made.made and made.project
    (imported,) = report.imported
    project = projects.of_chat(imported.id)
    assert project is not None and project.folder_id == made.folder_id
    assert project.instructions == "Cite the notes." and fresh.organise.folder(made.folder_id).parent_id is None
    assert fresh.conversation(imported.id).folder_id == made.folder_id != inside.id


@pytest.mark.parametrize("look_alike", ["Research\u200b", "\u202eResearch", "Re\u2066search\u2069", "\ufeffresearch"])
def test_an_imported_name_that_only_looks_like_a_project_s_joins_it(
    tmp_path: Path, fresh: ConversationStore, look_alike: str
) -> None:
    mine = ProjectStore(fresh).create("Research", instructions="Mine.")
    block = {"name": look_alike, "knowledge": [{"path": "/etc", "kind": "folder"}]}
    path = _write(tmp_path / "alike.json", json.dumps([{"format": "ember-chat", "version": 1, "project": block}]))
    report = import_chats(fresh, path)
    assert report.projects == () and [p.folder_id for p in report.into] == [mine.folder_id]
    assert [p.name for p in ProjectStore(fresh).projects()] == ["Research"]
    assert ProjectStore(fresh).project(mine.folder_id).sources == ()


def test_an_imported_project_s_name_is_kept_without_format_characters(tmp_path: Path, fresh: ConversationStore) -> None:
    block = {"name": "\u202eTides\u200b  notes"}
    path = _write(tmp_path / "odd.json", json.dumps([{"format": "ember-chat", "version": 1, "project": block}]))
    import_chats(fresh, path)
    assert [p.name for p in ProjectStore(fresh).projects()] == ["Tides notes"]


def test_a_project_block_s_default_names_and_tools_are_bounded(tmp_path: Path, fresh: ConversationStore) -> None:
    block = {
        "name": "Big defaults",
        "model": "m" * 5_000_000,
        "preset": "p" * 1_000_000,
        "embedding_model": "e" * 1_000_000,
        "reranker": "r" * 1_000_000,
        "tools": ["t" * 1_000_000, "files", *(f"server {i}" for i in range(50_000))],
    }
    path = _write(tmp_path / "big.json", json.dumps([{"format": "ember-chat", "version": 1, "project": block}]))
    import_chats(fresh, path)
    (project,) = ProjectStore(fresh).projects()
    assert (project.model, project.preset, project.embedding_model, project.reranker) == (None, None, None, None)
    assert len(project.tools) == MAX_IMPORTED_SOURCES and project.tools[:2] == ("files", "server 0")
    block = {"name": "Kept", "model": "/models/qwen.gguf", "preset": "Precise", "tools": ["files"]}
    path = _write(tmp_path / "kept.json", json.dumps([{"format": "ember-chat", "version": 1, "project": block}]))
    import_chats(fresh, path)
    kept = next(p for p in ProjectStore(fresh).projects() if p.name == "Kept")
    assert (kept.model, kept.preset, kept.tools) == ("/models/qwen.gguf", "Precise", ("files",))


def _with_a_chat(store: ConversationStore, research: int) -> None:
    chat = store.create_conversation("Tides")
    store.add_message(chat.id, "user", "When are spring tides?")
    store.organise.move_chats([chat.id], research)


def _plain_folder_with_a_chat(store: ConversationStore, name: str) -> tuple[Folder, Conversation]:
    """The user's own plain folder `name` with their chat "Mine" in it."""
    folder = store.organise.create_folder(name)
    mine = store.create_conversation("Mine")
    store.organise.move_chats([mine.id], folder.id)
    return folder, mine


def test_a_plain_folder_of_the_name_is_left_as_it_is_and_a_new_project_is_made(
    tmp_path: Path, store: ConversationStore, fresh: ConversationStore, research: int
) -> None:
    # A file never changes what the user has: the user's plain folder "research" (its chats) is not made
    # the file's project, whose instructions would then answer the user's older chats in it.
    _with_a_chat(store, research)
    exported = _write(tmp_path / "Research.json", project_export_json(store, research))
    folder, mine = _plain_folder_with_a_chat(fresh, "research")
    report = import_chats(fresh, exported)
    (project,) = ProjectStore(fresh).projects()
    assert project.folder_id != folder.id and report.projects == ("Research",)
    assert report.into == (ImportedProject(project.folder_id, "Research", True, True, 1, 2, 1),)
    assert (project.name, project.instructions, project.context_length) == ("Research", "Cite the notes.", 8192)
    assert len(project.sources) == 3 and all(s.paused and s.from_import for s in project.sources)
    (imported,) = report.imported
    assert fresh.conversation(imported.id).folder_id == project.folder_id
    with pytest.raises(StoreError):  # (the user's folder: still plain, its name and its chat kept)
        ProjectStore(fresh).project(folder.id)
    assert fresh.organise.folder(folder.id).name == "research" and ProjectStore(fresh).of_chat(mine.id) is None
    assert fresh.conversation(mine.id).folder_id == folder.id
    assert sorted(f.id for f in fresh.organise.folders()) == sorted([folder.id, project.folder_id])


def test_a_cancelled_import_leaves_a_plain_folder_of_the_name_as_it_was(
    tmp_path: Path, store: ConversationStore, fresh: ConversationStore, research: int
) -> None:
    _with_a_chat(store, research)
    exported = _write(tmp_path / "Research.json", project_export_json(store, research))
    folder, mine = _plain_folder_with_a_chat(fresh, "Research")
    cancel = threading.Event()
    with pytest.raises(ImportCancelled):
        import_chats(fresh, exported, progress=lambda done, _total: cancel.set() if done else None, cancel=cancel)
    assert ProjectStore(fresh).projects() == [] and [f.id for f in fresh.organise.folders()] == [folder.id]
    assert [c.id for c in fresh.conversations()] == [mine.id]
    assert fresh.conversation(mine.id).folder_id == folder.id
