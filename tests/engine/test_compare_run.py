"""Comparing models (engine/inference/compare.py): two tiny GGUFs with different weights, one after
another through the engine service's exclusive job, and a remote model on the fault-injecting server
on 127.0.0.1 streaming at the same time; the same seed and params for all; cancel; the service's own
model loaded back afterwards."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.core.refs import Endpoint, RemoteModelRef
from ember_chat.engine.errors import EmberError
from ember_chat.engine.inference.backend import ModelDescription
from ember_chat.engine.inference.compare import CompareAnswer, CompareListener, CompareTarget, run_comparison
from ember_chat.engine.inference.service.engine import EngineService, ServiceListener
from tests.helpers.gguf_factory import TinySpec, write_tiny_model
from tests.helpers.remote_support import free_port
from tests.helpers.sse_server import DONE, FakeOpenAI, chunk, usage_chunk

pytestmark = pytest.mark.usefixtures("no_thread_left")

WAIT_S = 10
MESSAGES = [ChatMessage("system", "Be brief."), ChatMessage("user", "Hello"), ChatMessage("assistant", "Hi!"),
            ChatMessage("user", "Tell me a story")]  # fmt: skip
PARAMS = SamplingParams(temperature=0.8, max_tokens=12, seed=1234)
REMOTE = [chunk("Once", role="assistant"), chunk(" upon"), chunk(" a time", finish="stop"), usage_chunk(9, 3), DONE]


@pytest.fixture(scope="module")
def two_models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("compare-models")
    a = write_tiny_model(folder / "tiny-a.gguf", TinySpec(seed=3, name="Tiny A"))
    b = write_tiny_model(folder / "tiny-b.gguf", TinySpec(seed=11, name="Tiny B"))
    return a, b


class Loads(ServiceListener):
    def __init__(self) -> None:
        self.loaded_models: list[ModelDescription] = []
        self.unloads = 0
        self.gate = threading.Event()

    def loaded(self, model: ModelDescription) -> None:
        self.loaded_models.append(model)
        self.gate.set()

    def unloaded(self) -> None:
        self.unloads += 1


@pytest.fixture
def service(two_models: tuple[Path, Path]) -> Iterator[tuple[EngineService, Loads]]:
    svc = EngineService()
    loads = Loads()
    svc.add_listener(loads)
    svc.load(LoadConfig(two_models[0], n_ctx=512), "window-model")
    assert loads.gate.wait(WAIT_S)
    loads.gate.clear()
    yield svc, loads
    svc.close()


class Log(CompareListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []
        self.progress: dict[int, list[float]] = {}
        self.text: dict[int, str] = {}
        self.finished_answers: dict[int, CompareAnswer] = {}
        self.lock = threading.Lock()
        self.first_token = threading.Event()

    def loading(self, index: int, fraction: float) -> None:
        with self.lock:
            self.progress.setdefault(index, []).append(fraction)

    def started(self, index: int) -> None:
        with self.lock:
            self.events.append(("started", index))

    def tokens(self, index: int, text: str, output_tokens: int) -> None:
        with self.lock:
            self.text[index] = self.text.get(index, "") + text
        self.first_token.set()

    def finished(self, index: int, answer: CompareAnswer) -> None:
        with self.lock:
            self.events.append(("finished", index))
            self.finished_answers[index] = answer


def remote_target(url: str, name: str = "Peer") -> CompareTarget:
    return CompareTarget(f"remote:{name}/test-model", RemoteModelRef(Endpoint(name, url), "test-model"))


def test_two_local_models_and_a_remote_one_answer_the_same_prompt_with_the_same_seed(
    service: tuple[EngineService, Loads], two_models: tuple[Path, Path], server: FakeOpenAI
) -> None:
    svc, loads = service
    server.stream(REMOTE)
    a, b = two_models
    targets = [
        CompareTarget("tiny-a", LoadConfig(a, n_ctx=512)),
        CompareTarget("tiny-b", LoadConfig(b, n_ctx=512)),
        remote_target(server.base_url),
    ]
    log = Log()
    answers = run_comparison(svc, targets, MESSAGES, PARAMS, log, restore=(LoadConfig(a, n_ctx=512), "window-model"))

    assert [x.reason for x in answers] == ["length", "length", "stop"], answers
    assert answers[0].text and answers[1].text and answers[0].text != answers[1].text  # other weights
    assert answers[2].text == "Once upon a time"
    for i, ans in enumerate(answers):
        assert ans.error is None and ans.metrics is not None
        assert ans.metrics.ttft_s is not None and ans.metrics.output_tokens > 0
        assert ans.metrics_dict() == ans.metrics.to_dict()
        assert log.text[i] == ans.text and log.finished_answers[i] == ans
    assert [answers[0].metrics.output_tokens, answers[1].metrics.output_tokens] == [12, 12]
    assert answers[0].metrics.seed == answers[1].metrics.seed == 1234
    (body,) = [r.body for r in server.generate_requests()]
    assert body["seed"] == 1234 and body["temperature"] == 0.8 and body["max_tokens"] == 12
    assert [m["content"] for m in body["messages"]] == [m.content for m in MESSAGES]  # the chat up to the prompt
    # local models one after another, each with its load progress
    local = [e for e in log.events if e[1] in (0, 1)]
    assert local == [("started", 0), ("finished", 0), ("started", 1), ("finished", 1)]
    assert log.progress[0][-1] == 1.0 and log.progress[1][-1] == 1.0
    # the window's model was unloaded for them and is loaded back
    assert loads.unloads == 1
    assert loads.gate.wait(WAIT_S)
    assert svc.model is not None and svc.model.path == a and svc.model_alias == "window-model"


def test_the_same_seed_gives_the_same_answer_and_a_model_compared_with_itself_agrees(
    service: tuple[EngineService, Loads], two_models: tuple[Path, Path]
) -> None:
    svc, _ = service
    a, _b = two_models
    targets = [CompareTarget("one", LoadConfig(a, n_ctx=512)), CompareTarget("two", LoadConfig(a, n_ctx=512))]
    first = run_comparison(svc, targets, MESSAGES, PARAMS)
    assert first[0].text == first[1].text
    # no seed set: one is drawn, and both models get it
    unseeded = run_comparison(svc, targets, MESSAGES, SamplingParams(temperature=1.0, max_tokens=8))
    assert unseeded[0].metrics.seed == unseeded[1].metrics.seed is not None
    assert unseeded[0].text == unseeded[1].text
    assert svc.model is not None  # never unloaded without `restore`


def test_remote_and_local_stream_at_the_same_time(
    service: tuple[EngineService, Loads], two_models: tuple[Path, Path], server: FakeOpenAI
) -> None:
    """Each side waits, inside its stream, for the other to have produced something: only streams that
    run at the same time both get through without waiting out the timeout."""
    svc, _ = service
    server.stream(REMOTE)
    remote_began, local_began = threading.Event(), threading.Event()
    waited: dict[str, bool] = {}

    class Meet(CompareListener):
        def tokens(self, index: int, text: str, output_tokens: int) -> None:
            if index == 1 and "remote" not in waited:
                remote_began.set()
                waited["remote"] = local_began.wait(WAIT_S)
            if index == 0 and "local" not in waited:
                local_began.set()
                waited["local"] = remote_began.wait(WAIT_S)

    targets = [CompareTarget("tiny-a", LoadConfig(two_models[0], n_ctx=512)), remote_target(server.base_url)]
    answers = run_comparison(svc, targets, MESSAGES, PARAMS, Meet())
    assert waited == {"remote": True, "local": True}
    assert [x.reason for x in answers] == ["length", "stop"]


def test_cancel_stops_a_stalled_remote_stream_and_the_local_models_still_waiting(
    service: tuple[EngineService, Loads], two_models: tuple[Path, Path], server: FakeOpenAI
) -> None:
    svc, loads = service
    server.stream(REMOTE, stall_after=1)  # one chunk, then nothing
    a, b = two_models
    cancel = threading.Event()

    class CancelOnRemote(Log):
        def tokens(self, index: int, text: str, output_tokens: int) -> None:
            super().tokens(index, text, output_tokens)
            if index == 0:
                cancel.set()

    log = CancelOnRemote()
    targets = [
        remote_target(server.base_url),
        CompareTarget("tiny-a", LoadConfig(a)),
        CompareTarget("b", LoadConfig(b)),
    ]
    # the engine is busy with another exclusive job until the remote stream is cancelled: the local
    # models never get their turn
    blocker = svc.run_exclusive(lambda: cancel.wait(WAIT_S), "Busy")
    t0 = time.monotonic()
    answers = run_comparison(svc, targets, MESSAGES, PARAMS, log, cancel, restore=(LoadConfig(a, n_ctx=512), None))
    assert time.monotonic() - t0 < 5
    blocker.result(WAIT_S)
    assert [x.reason for x in answers] == ["cancelled", "cancelled", "cancelled"]
    assert answers[0].text == "Once" or answers[0].text == ""  # what arrived before the cancel, at most
    assert sorted(i for kind, i in log.events if kind == "finished") == [0, 1, 2]
    assert server.disconnected.wait(WAIT_S)
    assert loads.gate.wait(WAIT_S) and svc.model is not None and svc.model.path == a  # loaded back all the same


def test_an_unreachable_server_and_a_missing_file_are_sentences_and_the_others_answer(
    service: tuple[EngineService, Loads], two_models: tuple[Path, Path], tmp_path: Path
) -> None:
    svc, _ = service
    targets = [
        CompareTarget("tiny-a", LoadConfig(two_models[0], n_ctx=512)),
        remote_target(f"http://127.0.0.1:{free_port()}/v1"),
        CompareTarget("gone", LoadConfig(tmp_path / "gone.gguf")),
    ]
    answers = run_comparison(svc, targets, MESSAGES, PARAMS)
    assert answers[0].reason == "length" and answers[0].text
    for ans in answers[1:]:
        assert ans.reason == "error" and ans.metrics is None
        assert ans.error and "Error" not in ans.error.split()[0], ans.error
    with pytest.raises(EmberError, match="two to four"):
        run_comparison(svc, [], MESSAGES, PARAMS)
    with pytest.raises(EmberError, match="two to four"):
        run_comparison(svc, targets * 2, MESSAGES, PARAMS)


def test_a_prompts_text_file_goes_to_every_model_as_the_chat_sends_it(
    service: tuple[EngineService, Loads], two_models: tuple[Path, Path], server: FakeOpenAI, tmp_path: Path
) -> None:
    from ember_chat.engine.attachments import AttachmentStore, read_attachment_bytes
    from ember_chat.engine.storage.conversations import ConversationStore
    from ember_chat.engine.storage.paths import AppPaths

    svc, _ = service
    server.stream(REMOTE)
    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    chats = ConversationStore(paths.database)
    try:
        atts = AttachmentStore(paths, chats)
        note = atts.save(read_attachment_bytes("note.txt", b"The spare key is under the blue flowerpot."))
        asked = [ChatMessage("user", "Where is the key?", attachments=(atts.ref(note),))]
        targets = [CompareTarget("tiny-a", LoadConfig(two_models[0], n_ctx=512)), remote_target(server.base_url)]
        answers = run_comparison(svc, targets, asked, PARAMS, attachment_store=atts)
        assert [a.error for a in answers] == [None, None] and answers[1].text == "Once upon a time"
        (body,) = [r.body for r in server.generate_requests()]
        assert "blue flowerpot" in body["messages"][-1]["content"]  # the file, in the prompt
        assert answers[0].metrics is not None and answers[0].metrics.prompt_tokens > 20  # (the local one read it too)
        svc.attachment_store = None
        (failed, _remote) = run_comparison(svc, targets, asked, PARAMS)  # nowhere to read it from: said so
        assert failed.reason == "error" and "attachment" in (failed.error or "")
    finally:
        chats.close()
