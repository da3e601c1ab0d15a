"""The n-grams of a loaded model's recent answers (engine/inference/llama/answer_ngrams.py): the table's
bounds (answers, entries; the oldest dropped first), the n-gram drafter looking in it where the request's
own history has no continuation, and on the real chat starter (SmolLM2 135M, greedy) an answer that
repeats an earlier one not in its own prompt drafted from it, on the single path and in the batch
decoder, with the answer speculation off gives; unloading the model (and deleting chats, and a
benchmark's reset) forgets it. Each client has a table of its own (a few, the least recently used
dropped): an answer given to the window is not drafted from for an API request, on either path and
through the engine service."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.inference.events import Event, Finished, StepWanted
from ember_chat.engine.inference.llama import answer_ngrams, speculative
from ember_chat.engine.inference.llama.answer_ngrams import AnswerNgrams, ClientAnswers
from ember_chat.engine.inference.llama.speculative import NgramDrafter
from ember_chat.engine.inference.local.runtime import LocalRuntime
from ember_chat.engine.inference.service.engine import EngineService, GenerationRequest
from tests.helpers.listeners import Loaded
from tests.helpers.sinks import RecordingSink

# The starter's answer to it is not in the prompt: n-gram drafts from the prompt and the answer so far
# are never accepted (measured), so an accepted draft came from the recent answers.
PROMPT = "The three most important inventions of the twentieth century were"
N = 32


def test_the_table_keeps_the_last_answers_and_drops_the_oldest_first() -> None:
    table = AnswerNgrams(max_answers=2)
    table.add([10, 11, 12, 13])
    table.add([20, 21, 22, 23])
    assert table.follow((10, 11), 4) == [12, 13] and table.follow((20, 21, 22), 4) == [23]
    table.add([30, 31, 32, 33])
    assert table.answers == 2
    assert table.follow((10, 11), 4) == []  # (the oldest answer went, its n-grams with it)
    assert table.follow((20, 21), 4) == [22, 23] and table.follow((31, 32), 4) == [33]


def test_the_table_holds_at_most_its_entries() -> None:
    table = AnswerNgrams(max_answers=100, max_entries=10)
    for first in range(0, 50, 10):  # each answer of 4 tokens: 3 n-grams followed by a token
        table.add([first, first + 1, first + 2, first + 3])
        assert table.entries <= 10
    assert table.answers == 3 and table.entries == 9
    assert table.follow((10, 11), 2) == [] and table.follow((20, 21), 2) == [22, 23]
    table.add(list(range(100, 200)))  # longer than the bound alone: its start is kept (7 n-grams)
    assert table.answers == 2 and table.entries == 10  # (with the newest answer before it)
    assert table.follow((100, 101), 3) == [102, 103, 104] and table.follow((180, 181), 3) == []
    assert table.follow((30, 31), 2) == [] and table.follow((40, 41), 2) == [42, 43]


def test_the_most_recent_occurrence_wins_and_outlives_the_older_answer() -> None:
    table = AnswerNgrams(max_answers=1)
    table.add([1, 2, 3, 4, 5])
    table.add([1, 2, 3, 9])  # drops the first answer, not the n-grams both have
    assert table.follow((1, 2), 3) == [3, 9] and table.follow((2, 3), 1) == [9]
    assert table.follow((3, 4), 1) == []  # (the first answer's own)
    assert table.follow((1,), 2) == [] and table.follow((1, 2), 0) == []  # (one token is not indexed)
    table.add([7])  # (no n-gram followed by a token: nothing to keep)
    assert table.answers == 1
    table.clear()
    assert table.answers == 0 and table.entries == 0 and table.follow((1, 2), 3) == []


def test_the_drafter_looks_in_the_recent_answers_where_the_history_has_no_continuation() -> None:
    assert answer_ngrams.NGRAM_MAX == speculative.NGRAM_MAX  # (the longest n-gram looked up is indexed)
    table = AnswerNgrams()
    table.add([1, 2, 5, 6, 7])
    # "1 2" never occurred earlier in the history: the recent answer's continuation
    assert NgramDrafter([7, 3, 1, 2], k=2, answers=table).propose() == [5, 6]
    assert NgramDrafter([7, 3, 1, 2], k=2).propose() == []
    # the history first: it had "1 2" followed by 4 0
    assert NgramDrafter([1, 2, 4, 0, 1, 2], k=2, answers=table).propose() == [4, 0]
    # a 2-token match in an answer says more than a 1-token one in the history ("2" → 4 0)
    assert NgramDrafter([2, 4, 0, 1, 2], k=2, answers=table).propose() == [5, 6]
    assert NgramDrafter([2, 4, 0, 1, 2], k=2).propose() == [4, 0]
    assert NgramDrafter([7, 3, 1, 2], k=8, answers=table).propose(limit=1) == [5]


def test_each_client_has_its_own_table_the_least_recently_used_dropped() -> None:
    tables = ClientAnswers(max_clients=2)
    window = tables.of("window")
    window.add([1, 2, 3, 4])
    assert tables.of("window") is window and tables.of("api").follow((1, 2), 2) == []
    tables.of("window")  # (used again: "api" is now the least recently used)
    tables.of("bench")
    assert tables.clients == ["window", "bench"] and tables.of("window").follow((1, 2), 2) == [3, 4]
    tables.of("api")  # (made again, empty; "bench" dropped)
    assert tables.clients == ["window", "api"]
    tables.clear()
    assert tables.clients == [] and tables.of("window").follow((1, 2), 2) == []


def answer(rt: LocalRuntime, mode: str, batched: bool = False, client: str = "") -> Finished:
    params = SamplingParams(temperature=0.0, max_tokens=N, speculative=mode)
    events: Iterator[Event] = iter(rt.complete(PROMPT, params, batched=batched, client=client))
    for event in events:
        if isinstance(event, StepWanted):
            rt.step()
        elif isinstance(event, Finished):
            return event
    raise AssertionError("no Finished event")


@pytest.fixture
def starter_rt(chat_starter_model: Path, request: pytest.FixtureRequest) -> Iterator[LocalRuntime]:
    rt = LocalRuntime()
    rt.load(LoadConfig(chat_starter_model, n_ctx=1024, threads=1, parallel=request.param))
    yield rt
    rt.close()


@pytest.mark.parametrize("starter_rt", [1, 2], ids=["single", "batched"], indirect=True)
def test_an_answer_repeating_an_earlier_one_is_drafted_from_it(starter_rt: LocalRuntime) -> None:
    rt = starter_rt
    batched = rt.batch_slots > 1
    first = answer(rt, "ngram", batched)
    assert first.metrics.speculative_accepted == 0  # (nothing in its own prompt to copy)
    again = answer(rt, "ngram", batched)  # (a regenerated answer: the same prompt, the same text)
    accepted, drafted = again.metrics.speculative_accepted, again.metrics.speculative_drafted
    assert accepted is not None and drafted is not None and 0 < accepted <= drafted
    off = answer(rt, "off", batched)
    assert again.text.encode() == off.text.encode() == first.text.encode()
    assert again.metrics.output_tokens == off.metrics.output_tokens == N


@pytest.mark.parametrize("starter_rt", [1, 2], ids=["single", "batched"], indirect=True)
def test_another_clients_answer_is_not_drafted_from(starter_rt: LocalRuntime) -> None:
    rt = starter_rt
    batched = rt.batch_slots > 1
    assert answer(rt, "ngram", batched, client="window").metrics.speculative_accepted == 0
    # (an API client asking for the window's answer learns nothing from its accepted drafts)
    assert answer(rt, "ngram", batched, client="api").metrics.speculative_accepted == 0
    assert (answer(rt, "ngram", batched, client="window").metrics.speculative_accepted or 0) > 0
    assert (answer(rt, "ngram", batched, client="api").metrics.speculative_accepted or 0) > 0  # (its own)


def test_the_engine_service_drafts_from_the_requests_own_clients_answers(chat_starter_model: Path) -> None:
    svc = EngineService()
    listener = Loaded()
    svc.add_listener(listener)

    def accepted(client: str) -> int | None:
        sink = RecordingSink()
        params = SamplingParams(temperature=0.0, max_tokens=N, speculative="ngram")
        svc.submit(GenerationRequest(params, sink, prompt=PROMPT, client=client, batch_s=0))
        assert sink.done.wait(120) and sink.final is not None
        return sink.final.speculative_accepted

    try:
        svc.load(LoadConfig(chat_starter_model, n_ctx=1024, threads=1, parallel=1))
        assert listener.gate.wait(120)
        assert accepted("window") == 0
        assert accepted("api") == 0
        assert (accepted("window") or 0) > 0
    finally:
        svc.close()


def test_unloading_the_model_deleting_chats_and_a_reset_forget_the_answers(chat_starter_model: Path) -> None:
    rt = LocalRuntime()
    config = LoadConfig(chat_starter_model, n_ctx=1024, threads=1, parallel=1)
    try:
        rt.load(config)
        answer(rt, "ngram")
        rt.close()
        rt.load(config)
        assert answer(rt, "ngram").metrics.speculative_accepted == 0
        rt.forget_conversations()  # (chats deleted for good: their answers' n-grams too)
        assert answer(rt, "ngram").metrics.speculative_accepted == 0
        rt.reset_cache()  # (a benchmark's rounds do not draft from each other)
        assert answer(rt, "ngram").metrics.speculative_accepted == 0
        assert (answer(rt, "ngram").metrics.speculative_accepted or 0) > 0  # (what each of those forgot)
    finally:
        rt.close()
