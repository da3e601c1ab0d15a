"""Batched runs on the local runtime (LocalRuntime.chat/complete(batched=True) over the batch decoder),
driven by hand as the engine service drives them: each generator is advanced until it yields
StepWanted, then `step()` once for all. On the real chat starter (SmolLM2 135M, greedy): the answers
are token for token the unbatched ones, each run has its own metrics, `cancel` stops one run only,
and what cannot be batched says so."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import llama_cpp
import pytest

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.core.tools import ToolRequest
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.inference.events import Event, Finished, PrefillProgress, PromptReady, StepWanted, Token
from ember_chat.engine.inference.kv.snapshots import SnapshotStore
from ember_chat.engine.inference.local.runtime import LocalRuntime
from tests.helpers.long_text import text

GREEDY = SamplingParams(temperature=0.0, max_tokens=16)
# llama.cpp's kernels are not batch-invariant: without flash attention, attention sums over every
# sequence's cells (masked) in another order; with it (the default), two prompts evaluated in the same
# llama_decode still round differently than each alone (measured: a haiku's first token, margin 0.09).
# So a greedy choice may differ from the lone run's where its two best tokens are this close (logits).
# A run alone gives exactly the lone tokens.
TIE = 0.5
QUESTIONS = ("Write a haiku about the sea.", "What is two plus two?", "Name three colours.")


@pytest.fixture
def rt(chat_starter_model: Path) -> Iterator[LocalRuntime]:
    runtime = LocalRuntime()
    runtime.load(LoadConfig(chat_starter_model, n_ctx=2048, threads=1, parallel=4))
    yield runtime
    runtime.close()


def drive(rt: LocalRuntime, runs: list[Iterator[Event]], after: dict | None = None) -> list[list[Event]]:
    """Advance every run until it wants a step or ends, then one step; until all ended. `after`:
    {run index: (token count, callable)} called once that run has streamed that many tokens."""
    events: list[list[Event]] = [[] for _ in runs]
    active = dict(enumerate(runs))
    steps = 0
    while active:
        for i, run in list(active.items()):
            for event in run:
                assert not isinstance(event, StepWanted) or event == StepWanted()
                if isinstance(event, StepWanted):
                    break
                events[i].append(event)
                tokens = sum(1 for e in events[i] if isinstance(e, Token) and e.count)
                if after and i in after and tokens == after[i][0]:
                    after.pop(i)[1]()
            else:
                del active[i]
        if active:
            rt.step()
            steps += 1
            assert steps < 2000
    return events


def said(events: list[Event]) -> tuple[list[str], Finished]:
    fin = events[-1]
    assert isinstance(fin, Finished)
    return [e.text for e in events if isinstance(e, Token) and e.count], fin


def agrees(
    rt: LocalRuntime, messages: list[ChatMessage], params: SamplingParams, expected: list[str], got: list[str]
) -> None:
    """`got` is the lone run's `expected`, or equal to it up to a token where the lone run's two best
    tokens were nearly tied (then what follows may differ)."""
    at = next((i for i, (a, b) in enumerate(zip(expected, got, strict=False)) if a != b), None)
    if at is None:
        assert len(got) == len(expected)
        return
    rt.reset_cache()
    probe = [e for e in rt.chat(messages, replace(params, logprobs=2)) if isinstance(e, Token) and e.count]
    logprob = probe[at].logprob
    assert logprob is not None and [probe_text.text for probe_text in probe[:at]] == expected[:at]
    margin = logprob.top[0][2] - logprob.top[1][2]
    assert margin < TIE, f"diverged at token {at} ({expected[at]!r} vs {got[at]!r}) where the best led by {margin:.3f}"


def alone(rt: LocalRuntime, question: str, params: SamplingParams = GREEDY) -> tuple[list[str], Finished]:
    rt.reset_cache()
    return said(list(rt.chat([ChatMessage("user", question)], params)))


def test_a_batched_run_alone_gives_exactly_the_unbatched_answer(rt: LocalRuntime) -> None:
    for question in QUESTIONS:
        expected = alone(rt, question)
        rt.reset_cache()
        (events,) = drive(rt, [rt.chat([ChatMessage("user", question)], GREEDY, batched=True)])
        tokens, fin = said(events)
        assert tokens == expected[0] and (fin.text, fin.reason) == (expected[1].text, expected[1].reason)


def test_two_batched_runs_give_the_unbatched_answers_with_their_own_metrics(rt: LocalRuntime) -> None:
    expected = [alone(rt, q) for q in QUESTIONS[:2]]
    rt.reset_cache()
    runs = [rt.chat([ChatMessage("user", q)], GREEDY, batched=True) for q in QUESTIONS[:2]]
    got = [said(events) for events in drive(rt, runs)]
    for q, (tokens, fin), (want_tokens, want_fin) in zip(QUESTIONS, got, expected, strict=False):
        agrees(rt, [ChatMessage("user", q)], GREEDY, want_tokens, tokens)
        m = fin.metrics
        assert m.output_tokens == len(tokens) and m.prompt_tokens == want_fin.metrics.prompt_tokens
        assert m.ttft_s is not None and m.ttft_s > 0 and m.decode_tokens_per_s
        assert m.llama_prefill_ms is None and m.llama_decode_ms is None  # (the batch's, not this run's)
    assert got[0][1].metrics.ttft_s != got[1][1].metrics.ttft_s  # each run timed on its own


def test_a_follow_up_reuses_its_slot_and_a_newcomer_joins_mid_way(rt: LocalRuntime) -> None:
    first = [ChatMessage("user", QUESTIONS[0])]
    (events,) = drive(rt, [rt.chat(first, GREEDY, batched=True)])
    answer = said(events)[1].text
    follow = [*first, ChatMessage("assistant", answer), ChatMessage("user", QUESTIONS[1])]
    newcomer = [ChatMessage("user", text(120))]  # a longer prompt joins while the follow-up streams
    run_a = rt.chat(follow, GREEDY, batched=True)
    run_b = rt.chat(newcomer, GREEDY, batched=True)
    events_a: list[Event] = []
    for event in run_a:  # the follow-up goes first, alone, for a few tokens
        if not isinstance(event, StepWanted):
            events_a.append(event)
        elif sum(isinstance(e, Token) for e in events_a) >= 3:
            break
        else:
            rt.step()
    rest = drive(rt, [run_a, run_b])
    events_a += rest[0]
    ready = next(e for e in events_a if isinstance(e, PromptReady))
    assert ready.prompt_tokens_reused > 0 and ready.restored == 0
    rt.reset_cache()
    list(rt.chat(first, GREEDY))
    agrees(rt, follow, GREEDY, said(list(rt.chat(follow, GREEDY)))[0], said(events_a)[0])
    agrees(rt, newcomer, GREEDY, alone(rt, newcomer[0].content)[0], said(rest[1])[0])


def test_cancel_stops_one_run_only(rt: LocalRuntime) -> None:
    long = SamplingParams(temperature=0.0, max_tokens=40)
    expected = alone(rt, QUESTIONS[2], long)
    rt.reset_cache()
    cancel = threading.Event()
    runs = [
        rt.chat([ChatMessage("user", QUESTIONS[0])], long, batched=True, cancel=cancel),
        rt.chat([ChatMessage("user", QUESTIONS[2])], long, batched=True, cancel=threading.Event()),
    ]
    stopped, kept = drive(rt, runs, after={0: (3, cancel.set)})
    tokens, fin = said(stopped)
    assert fin.reason == "cancelled" and len([t for t in tokens if t]) <= 4
    agrees(rt, [ChatMessage("user", QUESTIONS[2])], long, expected[0], said(kept)[0])


def test_a_cancel_during_the_prompt_ends_the_run_without_an_answer(rt: LocalRuntime) -> None:
    cancel = threading.Event()
    cancel.set()
    (events,) = drive(rt, [rt.chat([ChatMessage("user", text(200))], GREEDY, batched=True, cancel=cancel)])
    tokens, fin = said(events)
    assert fin.reason == "cancelled" and tokens == [] and fin.text == ""


def test_batched_completion_and_progress_of_a_long_prompt(rt: LocalRuntime, chat_starter_model: Path) -> None:
    rt.load(LoadConfig(chat_starter_model, n_ctx=2048, n_batch=64, threads=1, parallel=4))
    prompt = text(120)  # longer than one batch (64 tokens): evaluated over several steps
    rt.reset_cache()
    expected = said(list(rt.complete(prompt, GREEDY)))
    rt.reset_cache()
    (events,) = drive(rt, [rt.complete(prompt, GREEDY, batched=True)])
    progress = [e for e in events if isinstance(e, PrefillProgress)]
    assert progress and progress[-1].done == progress[-1].total
    assert said(events)[0] == expected[0]


def test_what_cannot_be_batched_says_so(rt: LocalRuntime) -> None:
    hello = [ChatMessage("user", "hi")]
    tools = ToolRequest(tools=())
    assert rt.batch_slots == 5 and rt.can_batch(GREEDY, None, hello)  # (parallel 4 + the window's)
    assert not rt.can_batch(GREEDY, tools, hello)
    assert not rt.can_batch(SamplingParams(grammar='root ::= "a"'), None, hello)
    assert not rt.can_batch(SamplingParams(response_format={"type": "json_object"}), None, hello)
    assert rt.can_batch(SamplingParams(response_format={"type": "text"}), None, hello)
    assert not rt.can_batch(SamplingParams(logprobs=2), None, hello)
    with pytest.raises(InvalidParameter):
        next(iter(rt.chat(hello, SamplingParams(logprobs=2), batched=True)))
    rt.close()
    assert rt.batch_slots == 0 and not rt.can_batch(GREEDY, None, hello)


def test_slots_are_saved_at_unload_and_restored_into_a_slot_after_a_restart(
    chat_starter_model: Path, tmp_path: Path
) -> None:
    conversation = [ChatMessage("user", text(220))]
    config = LoadConfig(chat_starter_model, n_ctx=2048, threads=1, parallel=4)
    store = SnapshotStore(tmp_path / "snaps", cap_bytes=2**31)
    first = LocalRuntime()
    first.snapshots = store
    first.load(config)
    try:
        (events,) = drive(first, [first.chat(conversation, GREEDY, batched=True)])
        answer = said(events)[1].text
        follow = [*conversation, ChatMessage("assistant", answer), ChatMessage("user", "And the fifth word?")]
        expected = said(list(first.chat(follow, GREEDY)))[0]  # (single path: the slot saved first)
    finally:
        first.close()
        store.close()
    assert list((tmp_path / "snaps").glob("*.kvsnap"))
    store = SnapshotStore(tmp_path / "snaps", cap_bytes=2**31)
    again = LocalRuntime()
    again.snapshots = store
    again.load(config)
    try:
        (events,) = drive(again, [again.chat(follow, GREEDY, batched=True)])
        ready = next(e for e in events if isinstance(e, PromptReady))
        assert ready.restored > 256 and said(events)[1].metrics.prompt_tokens_restored == ready.restored
        assert said(events)[0] == expected
    finally:
        again.close()
        store.close()


def test_the_single_paths_conversation_moves_to_a_slot_through_a_snapshot(
    chat_starter_model: Path, tmp_path: Path
) -> None:
    """A batched run starts with seq 0's cells given back (all sequences share the context's cells), its
    conversation saved first: coming back batched restores it into a slot."""
    conversation = [ChatMessage("user", text(220))]
    store = SnapshotStore(tmp_path / "snaps", cap_bytes=2**31)
    rt = LocalRuntime()
    rt.snapshots = store
    rt.load(LoadConfig(chat_starter_model, n_ctx=2048, threads=1, parallel=4))
    try:
        answer = said(list(rt.chat(conversation, GREEDY)))[1].text  # the single path (seq 0)
        follow = [*conversation, ChatMessage("assistant", answer), ChatMessage("user", "And the fifth word?")]
        expected = said(list(rt.chat(follow, GREEDY)))[0]
        list(rt.chat(conversation, GREEDY))  # (seq 0 holds the first turn again)
        (events,) = drive(rt, [rt.chat(follow, GREEDY, batched=True)])
        memory = llama_cpp.llama_get_memory(rt._require().ctx)
        assert llama_cpp.llama_memory_seq_pos_max(memory, 0) == -1  # seq 0 gave its cells back
        ready = next(e for e in events if isinstance(e, PromptReady))
        assert ready.restored > 256
        agrees(rt, follow, GREEDY, expected, said(events)[0])
    finally:
        rt.close()
        store.close()


def test_cancel_stops_a_single_path_run_and_request_stop_every_batched_run_already_started(rt: LocalRuntime) -> None:
    long = SamplingParams(temperature=0.0, max_tokens=40)
    cancel = threading.Event()
    events: list[Event] = []
    for event in rt.chat([ChatMessage("user", QUESTIONS[0])], long, cancel=cancel):  # the single path
        events.append(event)
        if sum(isinstance(e, Token) for e in events) == 2:
            cancel.set()
    tokens, fin = said(events)
    assert fin.reason == "cancelled" and len(tokens) == 2

    runs = [rt.chat([ChatMessage("user", q)], long, batched=True) for q in QUESTIONS[:2]]
    stopped = drive(rt, runs, after={0: (2, rt.request_stop)})
    assert [said(e)[1].reason for e in stopped] == ["cancelled", "cancelled"]
    (later,) = drive(rt, [rt.chat([ChatMessage("user", QUESTIONS[2])], GREEDY, batched=True)])
    assert said(later)[1].reason == "length"  # (a stop asked for before a run started is not its stop)


def test_runs_on_slots_holding_earlier_conversations_agree_with_the_lone_answers(rt: LocalRuntime) -> None:
    """The same prompts asked again, all at once and then one at a time, while the slots hold the earlier
    conversations: each reuses its slot's cells (all its prompt but the last token) and the answers are the
    lone ones up to a near tie. Why not exactly: llama.cpp puts a sequence's new cells in its lowest free
    cells, which after other slots were cut may lie before the sequence's own earlier cells, and its
    flash-attention kernel sums a sequence's cells in cell order (in half precision): measured on this
    starter, maximum logit change 0.5-0.9 at the first token, answers split where the lone run's best two
    tokens were 0.03-0.04 apart. The reused cells themselves are byte for byte the lone run's."""
    long = SamplingParams(temperature=0.0, max_tokens=40)
    questions = (
        "Write a short story about a lighthouse keeper.",
        "List the planets of the solar system and say one thing about each.",
        "Explain how bread rises, step by step, for a child who likes baking and asks why at every step.",
        "Hi",
    )
    expected = [alone(rt, q, long)[0] for q in questions]
    rt.reset_cache()
    for q in questions:  # one at a time: each fills a slot of its own
        drive(rt, [rt.chat([ChatMessage("user", q)], long, batched=True)])
    together = drive(rt, [rt.chat([ChatMessage("user", q)], long, batched=True) for q in questions])
    again = [drive(rt, [rt.chat([ChatMessage("user", q)], long, batched=True)])[0] for q in questions]
    for events in [*together, *again]:
        ready = next(e for e in events if isinstance(e, PromptReady))
        assert ready.prompt_tokens_reused == ready.prompt_tokens - 1  # the slot's cells, not evaluated again
    for q, want, got in zip([*questions, *questions], [*expected, *expected], [*together, *again], strict=True):
        agrees(rt, [ChatMessage("user", q)], long, want, said(got)[0])
