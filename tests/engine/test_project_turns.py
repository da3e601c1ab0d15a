"""A turn in a project (projects/turn.py over inference/prompt/knowledge.py) through the engine service,
with a real knowledge index built from real files in tmp_path: the passages retrieved for the last user
message go before its text, numbered, as many as the context left takes (said in KnowledgeUsed, never a
silent cut; measured with a real model's tokenizer), and the sources an answer was given are recorded
with it in the chat database (AnswerKnowledge), put back by an undo and gone from the file when the chat
is deleted for good."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.errors import StoreError
from ember_chat.engine.inference.service.engine import EngineService, GenerationRequest
from ember_chat.engine.projects.answers import AnswerKnowledge
from ember_chat.engine.projects.citations import CITE_INSTRUCTION, ProjectSource, distinct_labels, knowledge_block
from ember_chat.engine.projects.index import KnowledgeIndex, knowledge_path
from ember_chat.engine.projects.indexer import Indexer
from ember_chat.engine.projects.records import Project, ProjectStore
from ember_chat.engine.projects.turn import ProjectKnowledge, project_named, project_system
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.gguf_factory import TinySpec, says, write_tiny_model
from tests.helpers.listeners import Loaded
from tests.helpers.sinks import RecordingSink

WAIT_S = 30
FACT = "The lighthouse keeper's parrot is named Captain Marmalade."
QUESTION = "What is the name of the lighthouse keeper's parrot?"


def _service(backend: FakeBackend | None, config: LoadConfig) -> EngineService:
    svc = EngineService(lambda _ref: backend) if backend is not None else EngineService()
    listener = Loaded()
    svc.add_listener(listener)
    svc.load(config)
    assert listener.gate.wait(WAIT_S)
    return svc


def _project(paths: AppPaths, chats: ConversationStore, files: dict[str, str]) -> Project:
    """A project whose knowledge is a folder of these files, indexed."""
    docs = paths.data_dir.parent / "docs"
    docs.mkdir()
    for name, text in files.items():
        (docs / name).write_text(text, encoding="utf-8")
    projects = ProjectStore(chats)
    made = projects.create("Harbour", instructions="Answer as the harbour master.")
    projects.add_source(made.folder_id, docs)
    project = projects.project(made.folder_id)
    index = KnowledgeIndex(knowledge_path(paths, project.folder_id))
    try:
        run = Indexer(index, list(project.sources)).run()
        assert run.read == len(files) and run.skipped == 0
    finally:
        index.close()
    return project


def _ask(svc: EngineService, messages: list[ChatMessage], knowledge: ProjectKnowledge) -> RecordingSink:
    sink = RecordingSink()
    req = GenerationRequest(SamplingParams(max_tokens=16), sink, messages=messages, knowledge=knowledge, batch_s=0)
    svc.submit(req)
    assert sink.done.wait(WAIT_S)
    return sink


@pytest.fixture
def paths(tmp_path: Path) -> AppPaths:
    return AppPaths(tmp_path / "data", tmp_path / "config")


@pytest.fixture
def chats(paths: AppPaths) -> Iterator[ConversationStore]:
    store = ConversationStore(paths.database)
    yield store
    store.close()


def test_the_passages_go_before_the_last_question_numbered_with_the_instructions_first(
    paths: AppPaths, chats: ConversationStore
) -> None:
    files = {f"note{i:02}.txt": f"Note {i}: the ferry to island {i} leaves at {i % 12 + 1} o'clock." for i in range(30)}
    files["keeper.md"] = f"# The keeper\n\n{FACT}\n"
    project = _project(paths, chats, files)
    backend = FakeBackend(n_tokens=3)
    svc = _service(backend, LoadConfig(Path("fake.gguf")))
    knowledge = ProjectKnowledge.open(paths, project)
    try:
        system = project_system(project.instructions, "Be brief.")
        history = [ChatMessage("user", "hello"), ChatMessage("assistant", "hi")]
        sink = _ask(svc, [ChatMessage("system", system), *history, ChatMessage("user", QUESTION)], knowledge)
    finally:
        svc.close()
        knowledge.close()
    assert sink.failures == [] and sink.reason == "length"
    (used,) = sink.knowledge
    assert used.name == "Harbour" and used.estimated and used.left_out == 0
    assert [s.n for s in used.sources] == list(range(1, len(used.sources) + 1))
    first = used.sources[0]
    assert isinstance(first, ProjectSource) and Path(first.file_path).name == "keeper.md" and FACT in first.text
    sent = backend.requests[-1]
    assert sent[0] == ChatMessage("system", "Answer as the harbour master.\n\nBe brief.")
    assert sent[1:3] == history  # (only the last user turn gets the knowledge)
    block = knowledge_block(list(used.sources))  # type: ignore[arg-type]
    assert sent[-1].content == f"{block}\n\n{QUESTION}"
    assert f"[1] keeper.md: # The keeper {FACT}" in block and block.endswith(CITE_INSTRUCTION)


def test_as_many_passages_as_the_context_leaves_go_in_and_the_rest_is_said(
    tmp_path: Path, paths: AppPaths, chats: ConversationStore
) -> None:
    filler = "The lighthouse log tells of fog, of ships passing late, and of the lamp trimmed at dusk."
    files = {f"log{i:02}.txt": f"Log {i}. " + " ".join([filler] * 4) for i in range(12)}
    project = _project(paths, chats, files)
    model = write_tiny_model(tmp_path / "tiny.gguf", TinySpec(script=says("▁hello", "</s>")))
    svc = _service(None, LoadConfig(model, n_ctx=2048, threads=1))
    knowledge = ProjectKnowledge.open(paths, project)
    try:
        sink = _ask(svc, [ChatMessage("user", "What does the lighthouse log tell?")], knowledge)
        (used,) = sink.knowledge
        block_tokens = svc.count_tokens(knowledge_block(list(used.sources)))  # type: ignore[arg-type]
    finally:
        svc.close()
        knowledge.close()
    assert sink.failures == [] and sink.trimmed_messages == [] and sink.reason == "stop"
    assert not used.estimated and used.retrieved == 8
    assert 0 < len(used.sources) < used.retrieved and used.left_out == used.retrieved - len(used.sources)
    assert block_tokens <= used.budget_tokens < 2048
    assert "did not fit the context" in used.summary()
    assert sink.final is not None and sink.final.prompt_tokens > block_tokens


def test_a_question_nothing_matches_gives_no_block(paths: AppPaths, chats: ConversationStore) -> None:
    project = _project(paths, chats, {"a.txt": "Tides and ferries."})
    backend = FakeBackend(n_tokens=2)
    svc = _service(backend, LoadConfig(Path("fake.gguf")))
    knowledge = ProjectKnowledge.open(paths, project)
    try:
        sink = _ask(svc, [ChatMessage("user", "zebra quantum")], knowledge)
    finally:
        svc.close()
        knowledge.close()
    (used,) = sink.knowledge
    assert used.sources == () and used.retrieved == 0 and "No passage" in used.summary()
    assert backend.requests[-1] == [ChatMessage("user", "zebra quantum")]


def test_project_system_puts_the_instructions_first() -> None:
    assert project_system("Cite the files.", "Be brief.") == "Cite the files.\n\nBe brief."
    assert project_system("  Cite the files. ", "") == "Cite the files."
    assert project_system("", "Be brief.") == "Be brief."


def _source(n: int, text: str) -> ProjectSource:
    return ProjectSource(n, f"/docs/file{n}.pdf", n + 2, n, text, 100 + n)


def test_an_answers_sources_are_kept_undone_with_it_and_swept_when_deleted_for_good(
    paths: AppPaths, chats: ConversationStore
) -> None:
    answers = AnswerKnowledge(chats)
    chat = chats.create_conversation()
    question = chats.add_message(chat.id, "user", QUESTION)
    answer = chats.add_message(chat.id, "assistant", "Captain Marmalade [1].", parent_id=question.id)
    secret = "Zanzibar-unique-passage-words " * 20
    given = [_source(1, FACT), _source(2, secret)]
    answers.record(answer.id, given)
    assert answers.sources_of(answer.id) == given
    assert answers.sources_of_answers([answer.id, question.id]) == {answer.id: given}

    undo = chats.organise.delete_messages(answer.id)
    assert answers.sources_of(answer.id) == []
    chats.organise.undo(undo)
    assert answers.sources_of(answer.id) == given  # (the same answer id, its sources back)

    answers.record(answer.id, given[:1])  # (an answer written again: its sources replaced)
    assert answers.sources_of(answer.id) == given[:1]
    answers.record(answer.id, given)
    assert chats.organise.purge_chats([chat.id]) == 1
    assert answers.sources_of(answer.id) == []
    assert not chats.organise.sweep_pending
    on_disk = b"".join(p.read_bytes() for p in paths.database.parent.glob(paths.database.name + "*"))
    assert b"Zanzibar-unique-passage-words" not in on_disk


def test_an_index_damaged_while_open_is_a_sentence_naming_the_project(
    paths: AppPaths, chats: ConversationStore
) -> None:
    project = _project(paths, chats, {f"note{i}.txt": f"Ferry {i} leaves at dawn. " * 200 for i in range(40)})
    backend = FakeBackend(n_tokens=2)
    svc = _service(backend, LoadConfig(Path("fake.gguf")))
    knowledge = ProjectKnowledge.open(paths, project)
    try:
        file = knowledge_path(paths, project.folder_id)
        with file.open("r+b") as f:  # (garbage over its pages, the index still open)
            f.seek(0)
            f.write(b"\x5a" * file.stat().st_size)
        sink = _ask(svc, [ChatMessage("user", "When does the ferry leave?")], knowledge)
    finally:
        svc.close()
        knowledge.close()
    (said,) = sink.failure_messages  # (SQLite's reason: "database disk image is malformed" or the like)
    assert (
        said.startswith("The knowledge index of the project “Harbour” cannot be read: ")
        and str(paths.data_dir) not in said
    )
    assert backend.requests == []  # (nothing answered without its knowledge)


def test_an_unknown_name_lists_twenty_projects_and_counts_the_rest(chats: ConversationStore) -> None:
    projects = ProjectStore(chats)
    for i in range(23):
        projects.create(f"Project {i:02}")
    with pytest.raises(StoreError) as said:
        project_named(projects, "x" * 500, list_known=True)
    text = str(said.value)
    assert text.startswith(f"There is no project named “{'x' * 80}…” (projects: “Project 00”, ")
    assert text.endswith("“Project 19” and 3 more).") and "Project 20" not in text
    assert project_named(projects, "project 07", list_known=True).name == "Project 07"  # (case aside)
    with pytest.raises(StoreError) as unlisted:  # (the API server's: no other project named)
        project_named(projects, "x" * 500, list_known=False)
    assert str(unlisted.value) == f"There is no project named “{'x' * 80}…”."
    assert project_named(projects, "project 07", list_known=False).name == "Project 07"


def test_sources_sharing_a_label_are_told_apart_by_their_position_in_the_file() -> None:
    """Passages of one file (or of one PDF page) say which they are ('§' and their position, seq + 1);
    a label no other source shares stays plain."""
    made = [
        ("/d/report.pdf", 3, 5), ("/d/report.pdf", 3, 6), ("/d/report.pdf", 4, 9),
        ("/d/notes.md", None, 0), ("/d/notes.md", None, 2), ("/e/other.txt", None, 4),
    ]  # fmt: skip
    sources = [ProjectSource(n, path, page, seq, "", n) for n, (path, page, seq) in enumerate(made, start=1)]
    assert distinct_labels(sources) == {
        1: "report.pdf, p. 3 §6",
        2: "report.pdf, p. 3 §7",
        3: "report.pdf, p. 4",
        4: "notes.md §1",
        5: "notes.md §3",
        6: "other.txt",
    }


def test_files_of_one_name_in_different_folders_are_told_apart_by_their_folders() -> None:
    """Two README.md in different folders are two files: each is named with the fewest parent folders that
    tell it from the other ('a/README.md', 'b/README.md'), with no '§' where each has one passage listed;
    the '§' is added only for a file with several passages listed, and a file with no twin keeps its name."""
    made = [
        ("/p/a/README.md", None, 0), ("/p/b/README.md", None, 0), ("/p/x/a/README.md", None, 2),
        ("/p/x/a/README.md", None, 5), ("/p/c/report.pdf", 3, 1), ("/p/d/report.pdf", 3, 1),
        ("/p/notes.md", None, 0),
    ]  # fmt: skip
    sources = [ProjectSource(n, path, page, seq, "", n) for n, (path, page, seq) in enumerate(made, start=1)]
    assert distinct_labels(sources) == {
        1: "p/a/README.md",
        2: "b/README.md",
        3: "x/a/README.md §3",
        4: "x/a/README.md §6",
        5: "c/report.pdf, p. 3",
        6: "d/report.pdf, p. 3",
        7: "notes.md",
    }
    twins = [ProjectSource(1, "/a/README.md", None, 0, "", 1), ProjectSource(2, "/b/README.md", None, 0, "", 2)]
    assert distinct_labels(twins) == {1: "a/README.md", 2: "b/README.md"}
