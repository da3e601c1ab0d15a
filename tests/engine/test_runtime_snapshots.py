"""KV snapshots on the local runtime's single path (seq 0), on the real chat starter (SmolLM2 135M,
greedy) and a real snapshot store on files in tmp_path: a conversation replaced by another is saved,
and coming back to it restores its state and evaluates only what is new; the continuation is token for
token the one the live KV cache gives, at several lengths, after an edit and a branch switch, and after
a restart from disk. A damaged snapshot file is evaluated as usual."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.inference.events import Event, Finished, PromptReady, Token
from ember_chat.engine.inference.kv.snapshots import SnapshotStore
from ember_chat.engine.inference.local.runtime import LocalRuntime
from ember_chat.engine.inference.metrics import MetricsRecorder, RunContext
from tests.helpers.long_text import text

GREEDY = SamplingParams(temperature=0.0, max_tokens=12)


def user(content: str) -> ChatMessage:
    return ChatMessage("user", content)


def assistant(content: str) -> ChatMessage:
    return ChatMessage("assistant", content)


def answer(rt: LocalRuntime, messages: list[ChatMessage]) -> tuple[list[str], Finished, PromptReady]:
    events: list[Event] = list(rt.chat(messages, GREEDY))
    ready = next(e for e in events if isinstance(e, PromptReady))
    fin = events[-1]
    assert isinstance(fin, Finished), fin
    return [e.text for e in events if isinstance(e, Token) and e.count], fin, ready


class Runtimes:
    """Runtimes on the chat starter, each with its own store (None: without snapshots); all closed after."""

    def __init__(self, model: Path) -> None:
        self.model = model
        self.made: list[LocalRuntime] = []
        self._plain: LocalRuntime | None = None

    def open(self, folder: Path | None = None, n_ctx: int = 2048) -> LocalRuntime:
        rt = LocalRuntime()
        rt.snapshots = SnapshotStore(folder, cap_bytes=2**31)
        rt.load(LoadConfig(self.model, n_ctx=n_ctx, threads=1))
        self.made.append(rt)
        return rt

    def shut(self, rt: LocalRuntime) -> None:
        """Unload (saving seq 0 and flushing the store), then close the store."""
        rt.close()
        store, rt.snapshots = rt.snapshots, None
        if store is not None:
            store.close()

    def reference(self, before: list[ChatMessage], messages: list[ChatMessage]) -> tuple[list[str], PromptReady]:
        """Without snapshots: `before` answered, then `messages` from the live KV cache."""
        if self._plain is None:
            self._plain = LocalRuntime()
            self._plain.load(LoadConfig(self.model, n_ctx=2048, threads=1))
            self.made.append(self._plain)
        self._plain.reset_cache()
        answer(self._plain, before)
        said, _, ready = answer(self._plain, messages)
        assert ready.restored == 0
        return said, ready


@pytest.fixture
def runtimes(chat_starter_model: Path) -> Iterator[Runtimes]:
    made = Runtimes(chat_starter_model)
    yield made
    for rt in made.made:
        made.shut(rt)


def test_the_recorder_says_how_many_reused_tokens_were_restored() -> None:
    rec = MetricsRecorder(RunContext("m", None, "CPU", 2, 0, 2048))
    rec.prefill_started(600, 590, restored=512)
    rec.token()
    metrics = rec.finish("stop")
    assert (metrics.prompt_tokens_reused, metrics.prompt_tokens_restored) == (590, 512)
    assert type(metrics).from_dict(metrics.to_dict()) == metrics
    assert PromptReady(600, 590, 2048, 0, 1).restored == 0  # (paths without snapshots)


@pytest.mark.parametrize("words", [200, 400])
def test_a_conversation_switched_away_and_back_is_restored_and_continues_identically(
    runtimes: Runtimes, tmp_path: Path, words: int
) -> None:
    first = [user(text(words))]
    rt = runtimes.open(tmp_path / "snaps")
    fin = answer(rt, first)[1]
    follow = [*first, assistant(fin.text), user("And the fifth word?")]
    expected, expected_ready = runtimes.reference(first, follow)
    assert expected_ready.prompt_tokens_reused > 256

    answer(rt, [user(text(words, seed=3))])  # seq 0's conversation is replaced: it is saved first
    got, got_fin, ready = answer(rt, follow)
    assert got == expected
    assert ready.restored == expected_ready.prompt_tokens_reused == ready.prompt_tokens_reused
    assert got_fin.metrics.prompt_tokens_restored == got_fin.metrics.prompt_tokens_reused == ready.restored
    runtimes.shut(rt)  # saves seq 0 and flushes the store to disk
    assert list((tmp_path / "snaps").glob("*.kvsnap"))

    # a restart: a new runtime and a new store on the same folder
    again = runtimes.open(tmp_path / "snaps")
    once_more = [*follow, assistant(got_fin.text), user("And the first word?")]
    expected_more, expected_more_ready = runtimes.reference(follow, once_more)
    got_more, _, ready_more = answer(again, once_more)
    assert got_more == expected_more
    assert ready_more.restored == expected_more_ready.prompt_tokens_reused > 256


def test_after_an_edit_only_the_shared_part_is_restored(runtimes: Runtimes, tmp_path: Path) -> None:
    base = [user(text(210)), assistant("The third word is lantern."), user("Now tell me the fifth word.")]
    edited = [*base[:2], user("Now tell me the seventh word, please.")]
    expected, expected_ready = runtimes.reference(base, edited)  # reused up to where the edit starts

    rt = runtimes.open(tmp_path / "snaps")
    answer(rt, base)
    answer(rt, [user(text(210, seed=2))])
    got, _, ready = answer(rt, edited)
    assert got == expected
    assert 256 < ready.restored == expected_ready.prompt_tokens_reused < ready.prompt_tokens


def test_a_branch_switch_restores_each_branch_up_to_where_it_is_its_own(runtimes: Runtimes, tmp_path: Path) -> None:
    stem = [user(text(210)), assistant("The third word is lantern.")]
    branch_a = [*stem, user("What was the last word?")]
    branch_b = [*stem, user("How many words were there?")]
    rt = runtimes.open(tmp_path / "snaps")
    a_text = answer(rt, branch_a)[1].text
    b_text = answer(rt, branch_b)[1].text  # (seq 0 cut back to the stem: branch a saved first)
    for branch, said, question in ((branch_a, a_text, "And the first?"), (branch_b, b_text, "And the second?")):
        back = [*branch, assistant(said), user(question)]
        expected, expected_ready = runtimes.reference(branch, back)
        got, _, ready = answer(rt, back)
        assert got == expected
        assert ready.restored == expected_ready.prompt_tokens_reused > 256


def test_a_damaged_snapshot_file_is_evaluated_as_usual(runtimes: Runtimes, tmp_path: Path) -> None:
    first = [user(text(200))]
    rt = runtimes.open(tmp_path / "snaps")
    fin = answer(rt, first)[1]
    runtimes.shut(rt)
    (snap,) = list((tmp_path / "snaps").glob("*.kvsnap"))
    data = bytearray(snap.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)  # zeros in the middle of the state
    snap.write_bytes(bytes(data))

    follow = [*first, assistant(fin.text), user("And the fifth word?")]
    again = runtimes.open(tmp_path / "snaps")
    got, got_fin, ready = answer(again, follow)
    expected, _ = runtimes.reference([user("Hi")], follow)  # evaluated from the start
    assert got == expected and got_fin.reason in ("stop", "length")
    assert ready.restored == 0 and ready.prompt_tokens_reused == 0
    assert again.snapshots is not None and again.snapshots.problems  # a sentence says what happened
    assert not snap.exists()


def test_a_snapshot_of_other_load_settings_is_never_restored(runtimes: Runtimes, tmp_path: Path) -> None:
    first = [user(text(210))]
    rt = runtimes.open(tmp_path / "snaps")
    fin = answer(rt, first)[1]
    runtimes.shut(rt)
    other = runtimes.open(tmp_path / "snaps", n_ctx=1024)  # the cache's size changed: another key
    follow = [*first, assistant(fin.text), user("And the fifth word?")]
    assert answer(other, follow)[2].restored == 0


def test_the_base_starters_text_is_restored_too(starter_model: Path, tmp_path: Path) -> None:
    """Gemma 3 270M (sliding-window attention: llama.cpp keeps its whole window cache, so a restored
    state is whole), in notebook mode: a text switched away from and back continues as from the live cache."""
    config = LoadConfig(starter_model, n_ctx=1024, threads=1)
    prompt = text(300)

    def run(rt: LocalRuntime, text_: str) -> tuple[list[str], Finished, PromptReady]:
        events = list(rt.complete(text_, GREEDY))
        fin = events[-1]
        assert isinstance(fin, Finished)
        ready = next(e for e in events if isinstance(e, PromptReady))
        return [e.text for e in events if isinstance(e, Token) and e.count], fin, ready

    plain = LocalRuntime()
    rt = LocalRuntime()
    store = SnapshotStore(tmp_path / "snaps", cap_bytes=2**31)
    rt.snapshots = store
    try:
        plain.load(config)
        first = run(plain, prompt)[1].text
        more = prompt + first + " Then"
        expected, _, expected_ready = run(plain, more)
        rt.load(config)
        run(rt, prompt)
        run(rt, text(300, seed=4))  # another text: the first is saved
        got, _, ready = run(rt, more)
        assert got == expected
        assert ready.restored == expected_ready.prompt_tokens_reused > 256
    finally:
        plain.close()
        rt.close()
        store.close()


def test_the_next_turn_of_the_conversation_seq_0_holds_does_not_search_the_store(
    runtimes: Runtimes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = runtimes.open(tmp_path / "snaps")
    assert rt.snapshots is not None
    searched: list[int] = []
    search = rt.snapshots.best

    def best(key, tokens):  # (the store's own search, counted)
        searched.append(len(tokens))
        return search(key, tokens)

    monkeypatch.setattr(rt.snapshots, "best", best)
    first = [user(text(200))]
    fin = answer(rt, first)[1]
    assert len(searched) == 1  # (seq 0 held nothing: a snapshot may have it)
    ready = answer(rt, [*first, assistant(fin.text), user("And the fifth word?")])[2]
    assert ready.prompt_tokens_reused > 256 and len(searched) == 1
