"""An answer's project sources in a chat's export (issue 34): each answer made with its project's
knowledge carries the passages it was given (`project_sources`: number, file, page, position, passage
text); the import keeps them with the answer as text to read (IMPORTED_PASSAGE: in no index, so the
window never opens their paths), leaves out the ill-formed ones, and exports them again unchanged."""

from __future__ import annotations

import json
from pathlib import Path

from ember_chat.engine.projects.answers import AnswerKnowledge
from ember_chat.engine.projects.citations import ProjectSource
from ember_chat.engine.projects.records import ProjectStore
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.export import chats_as_json
from ember_chat.engine.storage.import_plan import IMPORTED_PASSAGE
from ember_chat.engine.storage.importing import import_chats

GIVEN = [
    ProjectSource(1, "/home/ana/notes/rivers.md", None, 0, "The Tagus is the longest river of Iberia.", 42),
    ProjectSource(2, "/home/ana/notes/atlas.pdf", 3, 7, "Lisbon lies where the Tagus meets the Atlantic.", 43),
]


def _chat(store: ConversationStore) -> tuple[int, int]:
    project = ProjectStore(store).create("Iberia", instructions="Cite the notes.")
    chat = store.create_conversation("Rivers")
    question = store.add_message(chat.id, "user", "Which river is the longest?")
    answer = store.add_message(chat.id, "assistant", "The Tagus [1], to Lisbon [2].", parent_id=question.id)
    store.organise.move_chats([chat.id], project.folder_id)
    AnswerKnowledge(store).record(answer.id, GIVEN)
    return chat.id, answer.id


def test_an_answer_s_project_sources_go_out_and_come_back_as_text(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path / "chats.sqlite3")
    other = ConversationStore(tmp_path / "other" / "chats.sqlite3")
    try:
        cid, _answer = _chat(store)
        exported = tmp_path / "chats.json"
        exported.write_text(chats_as_json(store, [cid], passages=True))  # (asked: with the files' text)
        tree = json.loads(exported.read_text())[0]["tree"]
        assert "project_sources" not in tree[0]  # (the question)
        assert tree[1]["project_sources"] == [
            {"n": 1, "file": "/home/ana/notes/rivers.md", "page": None, "seq": 0, "passage": GIVEN[0].text},
            {"n": 2, "file": "/home/ana/notes/atlas.pdf", "page": 3, "seq": 7, "passage": GIVEN[1].text},
        ]

        import_chats(other, exported)
        (chat,) = other.conversations()
        answer = other.thread(chat.id)[-1]
        kept = AnswerKnowledge(other).sources_of(answer.id)
        assert [(s.n, s.file_path, s.page, s.seq, s.text) for s in kept] == [
            (g.n, g.file_path, g.page, g.seq, g.text) for g in GIVEN
        ]
        assert {s.passage_id for s in kept} == {IMPORTED_PASSAGE}  # in no index: never opened
        again = tmp_path / "again.json"
        again.write_text(chats_as_json(other, [chat.id], passages=True))
        assert json.loads(again.read_text())[0]["tree"][1]["project_sources"] == tree[1]["project_sources"]
    finally:
        store.close()
        other.close()


def test_by_default_the_export_names_the_sources_without_the_files_text(tmp_path: Path) -> None:
    """Issue 34: a project's export carries the list of its files, not their text unless asked; the
    passages an answer was given are its files' text."""
    store = ConversationStore(tmp_path / "chats.sqlite3")
    other = ConversationStore(tmp_path / "other" / "chats.sqlite3")
    try:
        cid, _answer = _chat(store)
        exported = tmp_path / "chats.json"
        exported.write_text(chats_as_json(store, [cid]))
        text = exported.read_text()
        assert all(g.text not in text for g in GIVEN)
        assert json.loads(text)[0]["tree"][1]["project_sources"] == [
            {"n": 1, "file": "/home/ana/notes/rivers.md", "page": None, "seq": 0},
            {"n": 2, "file": "/home/ana/notes/atlas.pdf", "page": 3, "seq": 7},
        ]
        import_chats(other, exported)  # the sources come back, named, without a passage
        (chat,) = other.conversations()
        kept = AnswerKnowledge(other).sources_of(other.thread(chat.id)[-1].id)
        assert [(s.n, s.file_path, s.page, s.text) for s in kept] == [(g.n, g.file_path, g.page, "") for g in GIVEN]
    finally:
        store.close()
        other.close()


def test_ill_formed_project_sources_are_left_out_and_the_answer_stays(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path / "chats.sqlite3")
    other = ConversationStore(tmp_path / "other" / "chats.sqlite3")
    try:
        cid, _answer = _chat(store)
        doc = json.loads(chats_as_json(store, [cid]))
        good = {"n": 3, "file": "c.txt", "page": None, "seq": 0, "passage": "ok"}
        doc[0]["tree"][1]["project_sources"] = [
            {"n": "1", "file": "a.txt", "page": None, "seq": 0, "passage": "n as text"},
            {"n": 0, "file": "a.txt", "page": None, "seq": 0, "passage": "no [0]"},
            {"n": 2, "file": ["/etc"], "page": None, "seq": 0, "passage": "a list for a path"},
            {"n": 4, "file": "b.txt", "page": "3", "seq": 0, "passage": "page as text"},
            good,
            {**good, "passage": "the same number again"},
            "not a source",
        ]
        doc[0]["tree"][0]["project_sources"] = [good]  # (on a question: not kept)
        hostile = tmp_path / "hostile.json"
        hostile.write_text(json.dumps(doc))
        import_chats(other, hostile)
        (chat,) = other.conversations()
        question, answer = other.thread(chat.id)
        assert answer.content == "The Tagus [1], to Lisbon [2]."
        kept = AnswerKnowledge(other).sources_of(answer.id)
        assert [(s.n, s.file_path, s.text, s.passage_id) for s in kept] == [(3, "c.txt", "ok", IMPORTED_PASSAGE)]
        assert AnswerKnowledge(other).sources_of(question.id) == []
    finally:
        store.close()
        other.close()
