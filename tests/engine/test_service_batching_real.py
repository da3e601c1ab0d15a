"""Continuous batching through the engine service with the real local runtime on the real chat starter
(SmolLM2 135M): greedy answers decoded together, one of them joining while the others are under way,
are the answers each request gets alone on llama-cpp-python's own one-sequence path."""

from __future__ import annotations

import threading
from pathlib import Path

from ember_chat.engine.cli.common import load_blocking
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.inference.service.engine import (
    EngineService,
    GenerationRequest,
    QueueState,
    ServiceListener,
)
from tests.helpers.sinks import RecordingSink

WAIT_S = 120.0
PROMPTS = (
    "Write a short poem about the sea.",
    "List three fruits and say one thing about each.",
    "Why is the sky blue? Answer for a child.",
)
GREEDY = SamplingParams(temperature=0, max_tokens=40)


class Answer(RecordingSink):
    """A RecordingSink that gives its answer once it ends (and did not fail)."""

    def result(self) -> tuple[str, str | None, int | None]:
        assert self.done.wait(WAIT_S) and not self.failures, self.failures
        return "".join(self.text), self.reason, self.final.output_tokens if self.final else None


class MostRunning(ServiceListener):
    def __init__(self) -> None:
        self.most = 0

    def queue_changed(self, state: QueueState) -> None:
        self.most = max(self.most, len(state.running_all))


def request(prompt: str, client: str = "api") -> tuple[GenerationRequest, Answer]:
    sink = Answer()
    return GenerationRequest(GREEDY, sink, messages=[ChatMessage("user", prompt)], client=client), sink


def test_concurrent_greedy_answers_are_the_answers_alone(chat_starter_model: Path) -> None:
    service = EngineService()
    most = MostRunning()
    service.add_listener(most)
    try:
        load_blocking(service, LoadConfig(chat_starter_model, n_ctx=2048, threads=1, parallel=1))
        alone = []
        for prompt in PROMPTS:  # one at a time, on the one-sequence path
            req, sink = request(prompt)
            service.submit(req)
            alone.append(sink.result())
        assert most.most == 1

        load_blocking(service, LoadConfig(chat_starter_model, n_ctx=2048, threads=1, parallel=4))
        gate = threading.Event()
        service.run_exclusive(lambda: gate.wait(WAIT_S))  # the first two start together
        asked = [request(PROMPTS[0]), request(PROMPTS[1], client="window")]
        for req, _ in asked:
            service.submit(req)
        gate.set()
        assert asked[0][1].first_token.wait(WAIT_S)
        late = request(PROMPTS[2])  # joins while the others are decoded
        service.submit(late[0])
        asked.append(late)
        together = [sink.result() for _, sink in asked]
        assert most.most == 3
    finally:
        service.close()
    assert not service.running
    assert all(text for text, _, _ in alone)
    assert together == alone
