"""Answers in a project through Ember's API server with the real `openai` client (a tiny real model,
a real server on 127.0.0.1, a project's knowledge indexed from real files in tmp_path):
`"ember": {"project": NAME}` answers with the project's instructions and knowledge, and the answer's
`ember` extension carries the sources (in the body; streaming, in the final chunk). The same through
/v1/messages with the official `anthropic` client (the Message's `ember`; streaming, message_delta's)
and /v1/responses (the Response's; streaming, response.completed's). Each source says whether the
answer used it (`cited`, `quoted`: a scripted model's answers, each route and choice).
An unknown project is a 400 naming it, as is a project asked of a server that answers in none."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.core.tools import ToolRequest
from ember_chat.engine.inference.events import Event
from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.openai.responses_input import read_body as read_responses
from ember_chat.engine.projects.embedder import model_identity
from ember_chat.engine.projects.index import KnowledgeIndex, knowledge_path
from ember_chat.engine.projects.indexer import Indexer
from ember_chat.engine.projects.records import ProjectStore
from ember_chat.engine.projects.turn import ProjectKnowledge
from ember_chat.engine.serve.projects_option import ServedProjects
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.api_client import served_client
from tests.helpers.fake_backend import FakeBackend

WAIT_S = 30.0
FACT = "The lighthouse keeper's parrot is named Captain Marmalade."
QUESTION = [{"role": "user", "content": "What is the lighthouse keeper's parrot named?"}]


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("docs")
    for i in range(20):
        (root / f"note{i:02}.txt").write_text(f"Note {i}: the ferry to island {i} leaves at {i % 12 + 1} o'clock.")
    (root / "keeper.md").write_text(f"# Keeper\n\n{FACT}\n")
    return root


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory, docs: Path) -> AppPaths:
    """A data folder with the project "Harbour", its knowledge `docs` indexed."""
    base = tmp_path_factory.mktemp("ember")
    paths = AppPaths(base / "data", base / "config")
    chats = ConversationStore(paths.database)
    try:
        projects = ProjectStore(chats)
        made = projects.create("Harbour", instructions="Answer as the harbour master.")
        projects.add_source(made.folder_id, docs)
        index = KnowledgeIndex(knowledge_path(paths, made.folder_id))
        try:
            assert Indexer(index, list(projects.project(made.folder_id).sources)).run().read == 21
        finally:
            index.close()
    finally:
        chats.close()
    return paths


@pytest.fixture(scope="module")
def client(paths: AppPaths, tiny_model: Path) -> Iterator[openai.OpenAI]:
    served = ServedProjects(paths)
    try:
        with served_client(LoadConfig(tiny_model, n_ctx=4096, threads=1), "tiny", WAIT_S, projects=served) as c:
            yield c
    finally:
        served.close()


def _ask(client: openai.OpenAI, project: str | None, stream: bool = False) -> Any:
    extra = {"ember": {"project": project}} if project is not None else None
    return client.chat.completions.create(
        model="tiny", messages=QUESTION, max_tokens=4, temperature=0, stream=stream, extra_body=extra
    )  # type: ignore[call-overload]


def test_an_answer_in_a_project_carries_its_sources(client: openai.OpenAI, docs: Path) -> None:
    plain = _ask(client, None)
    response = _ask(client, "Harbour")
    assert "sources" not in (plain.model_extra or {}).get("ember", {})
    ember = response.model_extra["ember"]
    assert ember["project"] == "Harbour" and ember["knowledge"]["used"] == len(ember["sources"]) >= 1
    first = ember["sources"][0]
    assert first["n"] == 1 and first["file"] == str(docs / "keeper.md") and FACT in first["passage"]
    assert first["page"] is None and isinstance(first["passage_id"], int)
    assert response.usage is not None and plain.usage is not None
    assert response.usage.prompt_tokens > plain.usage.prompt_tokens + 20  # (instructions and passages)


def test_a_streamed_answer_gives_its_sources_in_the_final_chunk(client: openai.OpenAI, docs: Path) -> None:
    chunks = list(_ask(client, "harbour", stream=True))  # (a name in another case)
    final = next(c for c in chunks if c.choices and c.choices[0].finish_reason)
    ember = final.model_extra["ember"]
    assert ember["project"] == "Harbour" and ember["sources"][0]["file"] == str(docs / "keeper.md")
    assert all("sources" not in (c.model_extra or {}).get("ember", {}) for c in chunks if c is not final)


def test_an_unknown_project_is_a_400_naming_it(client: openai.OpenAI) -> None:
    """The 400 says only that there is no project of that name: a client (or a browser page of an
    allowed origin) learns no other project's name."""
    with pytest.raises(openai.BadRequestError) as caught:
        _ask(client, "Nowhere")
    assert caught.value.param == "ember.project"
    assert "There is no project named “Nowhere”." in caught.value.message
    assert "Harbour" not in caught.value.message and "projects:" not in caught.value.message
    with pytest.raises(openai.BadRequestError) as empty:
        _ask(client, " ")
    assert empty.value.param == "ember.project"
    with pytest.raises(openai.BadRequestError) as long:  # (a name of 100 KB is not said back whole)
        _ask(client, "A" * 100_000)
    assert long.value.param == "ember.project" and "“" + "A" * 80 + "…”" in long.value.message
    assert len(long.value.message) < 300


def test_a_project_asked_for_before_any_chat_exists_is_a_400_said_back_short(tmp_path: Path) -> None:
    served = ServedProjects(AppPaths(tmp_path / "data", tmp_path / "config"), None)  # (no chat database yet)
    try:
        with pytest.raises(ApiError) as caught:
            served.open("B" * 100_000)
    finally:
        served.close()
    assert caught.value.status == 400 and str(caught.value) == f"There is no project named “{'B' * 80}…”."


def _respond(client: openai.OpenAI, text: str, project: str | None, **more: Any) -> Any:
    extra = {"ember": {"project": project}} if project is not None else None
    return client.responses.create(model="tiny", input=text, max_output_tokens=4, temperature=0, extra_body=extra,
                                   **more)  # fmt: skip


FINISHED = ("response.completed", "response.incomplete")  # (the last event: an answer cut at max_output_tokens)


def test_a_response_in_a_project_carries_its_sources(client: openai.OpenAI, docs: Path) -> None:
    """/v1/responses answers in a project as the chat route does: the instructions and passages in the
    prompt, `ember` on the Response (streamed: on response.completed's, or .incomplete's); each turn of a
    previous_response_id chain retrieves for its own input."""
    asked = QUESTION[0]["content"]
    plain, response = _respond(client, asked, None), _respond(client, asked, "Harbour")
    assert "sources" not in (plain.model_extra or {}).get("ember", {})
    ember = response.model_extra["ember"]
    assert ember["project"] == "Harbour" and ember["knowledge"]["used"] == len(ember["sources"]) >= 1
    first = ember["sources"][0]
    assert first["file"] == str(docs / "keeper.md") and FACT in first["passage"]
    assert isinstance(first["cited"], bool) and isinstance(first["quoted"], bool)
    assert response.usage is not None and plain.usage is not None
    assert response.usage.input_tokens > plain.usage.input_tokens + 20  # (instructions and passages)
    events = list(_respond(client, asked, "harbour", stream=True))
    (completed,) = [e for e in events if e.type in FINISHED]
    assert completed.response.model_extra["ember"]["sources"][0]["file"] == str(docs / "keeper.md")
    assert all("sources" not in str(e.model_extra or {}) for e in events if e is not completed)
    ferry = "When does the ferry to island 13 leave?"
    chained = _respond(client, ferry, "Harbour", previous_response_id=response.id)
    assert chained.model_extra["ember"]["sources"][0]["file"] == str(docs / "note13.txt")
    assert chained.usage is not None and chained.usage.input_tokens > response.usage.input_tokens  # (the turn before)
    events = list(_respond(client, asked, "Harbour", previous_response_id=chained.id, stream=True))
    (completed,) = [e for e in events if e.type in FINISHED]
    assert completed.response.model_extra["ember"]["sources"][0]["file"] == str(docs / "keeper.md")


def test_the_responses_api_refuses_an_unknown_project_in_its_shape(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        _respond(client, "Hello", "Nowhere")
    assert caught.value.param == "ember.project" and caught.value.body is not None
    assert "There is no project named “Nowhere”." in caught.value.message and "Harbour" not in caught.value.message
    with pytest.raises(openai.BadRequestError) as streamed:  # (before the stream opens: the 400 is the answer)
        list(_respond(client, "Hello", "Nowhere", stream=True))
    assert streamed.value.param == "ember.project"
    read = read_responses({"model": "tiny", "input": "Hi", "truncation": "auto", "ember": {"project": "Harbour"}})
    assert read.chat["ember"] == {"project": "Harbour", "trim_history": True}
    with pytest.raises(ApiError) as trim:  # (the Responses API's own field says it)
        read_responses({"model": "tiny", "input": "Hi", "ember": {"trim_history": True}})
    assert trim.value.param == "ember" and "truncation" in trim.value.message
    with pytest.raises(openai.BadRequestError) as odd:
        client.responses.create(model="tiny", input="Hi", extra_body={"ember": "Harbour"})
    assert odd.value.param == "ember"


def test_a_server_without_projects_refuses_one(tiny_model: Path) -> None:
    with (
        served_client(LoadConfig(tiny_model, n_ctx=1024, threads=1), "tiny", WAIT_S) as bare,
        pytest.raises(openai.BadRequestError) as caught,
    ):
        _ask(bare, "Harbour")
    assert caught.value.param == "ember.project" and "“Harbour”" in caught.value.message


def test_the_windows_store_is_used_and_left_open(paths: AppPaths, docs: Path) -> None:
    chats = ConversationStore(paths.database)
    try:
        served = ServedProjects(paths, chats)
        knowledge = served.open("Harbour")
        try:
            assert knowledge.name == "Harbour" and knowledge.project.instructions == "Answer as the harbour master."
        finally:
            knowledge.close()
        served.close()
        assert chats.conversations() == []  # (still open: the window's store is the window's to close)
    finally:
        chats.close()


def _messages(client: openai.OpenAI) -> anthropic.Anthropic:
    base = str(client.base_url).rstrip("/").removesuffix("/v1")
    return anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0, timeout=WAIT_S)


def test_a_messages_answer_in_a_project_carries_its_sources(client: openai.OpenAI, docs: Path) -> None:
    messages = _messages(client)
    ask: dict[str, Any] = {"model": "tiny", "max_tokens": 4, "messages": QUESTION}
    plain = messages.messages.create(**ask)
    message = messages.messages.create(**ask, extra_body={"ember": {"project": "Harbour"}})
    assert "sources" not in (plain.model_extra or {}).get("ember", {})
    ember = message.model_extra["ember"]
    assert ember["project"] == "Harbour" and ember["knowledge"]["ranked_by"] == ["bm25"]
    assert ember["sources"][0]["file"] == str(docs / "keeper.md") and FACT in ember["sources"][0]["passage"]

    def prompt(m: anthropic.types.Message) -> int:
        return m.usage.input_tokens + (m.usage.cache_read_input_tokens or 0)

    assert prompt(message) > prompt(plain) + 20  # (instructions and passages)
    with messages.messages.stream(**ask, extra_body={"ember": {"project": "Harbour"}}) as stream:
        events = list(stream)
    (delta,) = [e for e in events if e.type == "message_delta"]
    assert delta.model_extra["ember"]["sources"][0]["file"] == str(docs / "keeper.md")
    assert all("sources" not in str(e.model_extra or {}) for e in events if e is not delta)
    with pytest.raises(anthropic.BadRequestError) as caught:
        messages.messages.create(**ask, extra_body={"ember": {"project": "Nowhere"}})
    assert "There is no project named “Nowhere”." in str(caught.value) and "Harbour" not in str(caught.value)


def test_a_project_unmade_and_made_again_is_served_from_its_new_index(tmp_path: Path, tiny_model: Path) -> None:
    """The server reopens a project's index when its file is another (the project unmade: its index
    deleted; made again: a new one at the same path) or its sources changed: never the old one's passages."""
    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "keeper.md").write_text(f"# Keeper\n\n{FACT}\n")
    (second / "parrot.md").write_text("The lighthouse keeper's parrot is named Admiral Crumpet.\n")
    chats = ConversationStore(paths.database)
    served = ServedProjects(paths, chats)

    def index(folder_id: int) -> None:
        ix = KnowledgeIndex(knowledge_path(paths, folder_id))
        try:
            Indexer(ix, list(projects.project(folder_id).sources)).run()
        finally:
            ix.close()

    try:
        projects = ProjectStore(chats)
        made = projects.create("Harbour")
        projects.add_source(made.folder_id, first)
        index(made.folder_id)
        with served_client(LoadConfig(tiny_model, n_ctx=4096, threads=1), "tiny", WAIT_S, projects=served) as c:
            assert _ask(c, "Harbour").model_extra["ember"]["sources"][0]["file"] == str(first / "keeper.md")
            projects.unmake(made.folder_id)
            projects.make_project(made.folder_id)
            projects.add_source(made.folder_id, second)
            index(made.folder_id)
            sources = _ask(c, "Harbour").model_extra["ember"]["sources"]
            assert [s["file"] for s in sources] == [str(second / "parrot.md")]
    finally:
        served.close()
        chats.close()


def test_a_models_identity_is_hashed_once_per_file_version(tmp_path: Path) -> None:
    """model_identity reads a file's bytes once per (path, inode, size, mtime): the same bytes changed in
    place with size and mtime put back keep the identity read first; another mtime reads them again."""
    model = tmp_path / "model.gguf"
    model.write_bytes(b"a" * 4096)
    first = model_identity(model)
    stat = model.stat()
    with model.open("r+b") as f:
        f.write(b"b" * 4096)
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert model_identity(model) == first  # (not hashed again)
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert model_identity(model) != first


def test_a_project_s_model_loading_does_not_hold_up_another_project(tmp_path: Path, docs: Path) -> None:
    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    chats = ConversationStore(paths.database)
    resolving, release = threading.Event(), threading.Event()

    def resolve(name: str) -> Path:  # (the first project's model takes until released)
        resolving.set()
        release.wait(WAIT_S)
        return tmp_path / "models" / name

    served = ServedProjects(paths, chats, resolve=resolve)
    opened: list[ProjectKnowledge] = []
    try:
        projects = ProjectStore(chats)
        projects.add_source(projects.create("Slow", embedding_model="big.gguf").folder_id, docs)
        projects.add_source(projects.create("Plain").folder_id, docs)
        slow = threading.Thread(target=lambda: opened.append(served.open("Slow")))
        slow.start()
        try:
            assert resolving.wait(WAIT_S)
            started = time.monotonic()
            plain = served.open("Plain")  # (while Slow's model is being loaded)
            assert time.monotonic() - started < WAIT_S / 2 and not release.is_set()
            plain.close()
        finally:
            release.set()
            slow.join()
        assert opened and "big.gguf" in opened[0].problems[0]
        opened[0].close()
    finally:
        served.close()
        chats.close()


def test_a_damaged_index_is_a_clear_error_without_its_path(tmp_path: Path, tiny_model: Path, docs: Path) -> None:
    """A project's index file replaced by one that is not an index: a request in the project is answered
    with a sentence naming the project (never the index's path, nor "see the log"), in each API's own
    error shape."""
    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    chats = ConversationStore(paths.database)
    served = ServedProjects(paths, chats)
    try:
        projects = ProjectStore(chats)
        made = projects.create("Wreck")
        projects.add_source(made.folder_id, docs)
        path = knowledge_path(paths, made.folder_id)
        index = KnowledgeIndex(path)
        try:
            Indexer(index, list(projects.project(made.folder_id).sources)).run()
        finally:
            index.close()
        with served_client(LoadConfig(tiny_model, n_ctx=4096, threads=1), "tiny", WAIT_S, projects=served) as c:
            assert _ask(c, "Wreck").model_extra["ember"]["sources"]
            path.unlink()
            path.write_bytes(b"not an index" * 1000)  # (another file: the server opens it again)
            with pytest.raises(openai.InternalServerError) as opened:
                _ask(c, "Wreck")
            code = {"code": "knowledge_unreadable"}
            assert opened.value.code == code["code"]
            said = "The knowledge index of the project “Wreck” cannot be opened: file is not a database."
            assert opened.value.body == {"message": said, "type": "server_error", "param": None, **code}
            with _messages(c) as m, pytest.raises(anthropic.InternalServerError) as messages:
                wreck = {"ember": {"project": "Wreck"}}
                m.messages.create(model="tiny", max_tokens=4, messages=QUESTION, extra_body=wreck)
            assert said in str(messages.value) and str(tmp_path) not in str(messages.value)
            with pytest.raises(openai.InternalServerError) as responses:
                _respond(c, "Hello", "Wreck")
            assert responses.value.body == {"message": said, "type": "server_error", "param": None, **code}
            # its folder made a file: the system's reason (whose own text names the path) said without a path
            shutil.rmtree(path.parent)
            path.parent.write_text("not a folder")
            with pytest.raises(openai.InternalServerError) as blocked:
                _ask(c, "Wreck")
            assert blocked.value.body["message"] == (
                "The knowledge index of the project “Wreck” cannot be opened: File exists."
            ) and str(tmp_path) not in str(blocked.value.body)
    finally:
        served.close()
        chats.close()


# A scripted model's answers: the thinking cites [1] and its answer neither cites nor quotes; the second quotes
# the passage's words ("Captain Marmalade") without a marker; the third cites it with [1] in other words.
THINKS = ["<think>", "Passage [1] says so.", "</think>", "I cannot say."]
QUOTES = ["The parrot is named ", "Captain Marmalade."]
CITES = ["It has a grand name [1]."]


class Scripted(FakeBackend):
    """Answers each run with the next of `answers` (a script each)."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[list[str]] = []

    def answer(self, messages: list[ChatMessage], params: SamplingParams, tools: ToolRequest | None) -> Iterator[Event]:
        self.script = self.answers.pop(0)
        self.n_tokens = len(self.script)
        return self._run(params)


def _marks(ember: dict[str, Any], docs: Path) -> tuple[bool, bool]:
    """(cited, quoted) of the keeper's passage; no other source is used by these answers."""
    keeper = [s for s in ember["sources"] if s["file"] == str(docs / "keeper.md")]
    assert len(keeper) == 1 and not any(s["cited"] or s["quoted"] for s in ember["sources"] if s not in keeper)
    return keeper[0]["cited"], keeper[0]["quoted"]


def test_each_source_says_whether_the_answer_cited_or_quoted_it(paths: AppPaths, docs: Path) -> None:
    """In every route's `ember.sources`: `cited` (the answer has its [n]; its thinking's does not count) and
    `quoted` (the answer has its words). Streamed, on the final chunk, from the whole text; with n choices,
    each streamed choice's final chunk says its own, and a whole response's `ember.sources` the first
    choice's, with each choice's numbers in `ember.choices[i]`."""
    backend = Scripted()
    served = ServedProjects(paths)
    harbour = {"ember": {"project": "Harbour"}}
    try:
        with served_client(LoadConfig(Path("scripted.gguf")), "scripted", WAIT_S, projects=served,
                           backend=backend) as c:  # fmt: skip
            chat: dict[str, Any] = {"model": "scripted", "messages": QUESTION, "extra_body": harbour}
            backend.answers = [THINKS, QUOTES, CITES]
            for script in (THINKS, QUOTES, CITES):
                ember = c.chat.completions.create(**chat).model_extra["ember"]
                assert _marks(ember, docs) == (script is CITES, script is QUOTES)
            backend.answers = [QUOTES, CITES]
            both = c.chat.completions.create(**chat, n=2).model_extra["ember"]
            assert _marks(both, docs) == (False, True)  # (the first choice's)
            assert [(e["cited"], e["quoted"]) for e in both["choices"]] == [([], [1]), ([1], [])]
            backend.answers = [CITES, THINKS]
            chunks = list(c.chat.completions.create(**chat, n=2, stream=True))
            finals = {ch.choices[0].index: ch.model_extra["ember"] for ch in chunks if ch.choices[0].finish_reason}
            assert _marks(finals[0], docs) == (True, False) and _marks(finals[1], docs) == (False, False)
            backend.answers = [QUOTES, THINKS, CITES, QUOTES]
            respond: dict[str, Any] = {"model": "scripted", "input": QUESTION[0]["content"], "extra_body": harbour}
            assert _marks(c.responses.create(**respond).model_extra["ember"], docs) == (False, True)
            for script in (THINKS, CITES, QUOTES):  # streamed: from the whole text, not what was held back last
                events = list(c.responses.create(**respond, stream=True))
                assert _marks(events[-1].response.model_extra["ember"], docs) == (script is CITES, script is QUOTES)
            backend.answers = [CITES, QUOTES]
            with _messages(c) as m:
                ask: dict[str, Any] = {
                    "model": "scripted",
                    "max_tokens": 64,
                    "messages": QUESTION,
                    "extra_body": harbour,
                }
                assert _marks(m.messages.create(**ask).model_extra["ember"], docs) == (True, False)
                with m.messages.stream(**ask) as stream:
                    (delta,) = [e for e in stream if e.type == "message_delta"]
                assert _marks(delta.model_extra["ember"], docs) == (False, True)
    finally:
        served.close()
