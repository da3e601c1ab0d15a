"""An answer that stops inside a multi-byte character (max tokens, Stop) keeps that character's first
bytes back: never shown nor saved as U+FFFD, but kept with its metrics (`held_utf8`), and a Continue
puts them back at the end of the prompt, so the model completes the character (issue 28, item 1: an
Arabic answer read `الت��ربع` after a Continue). Real llama.cpp, a scripted model whose byte-fallback
vocabulary spells 日 as three byte tokens; the chat starter's byte-level BPE for the byte tokens."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.inference.events import Event, Finished, PromptReady, Token
from ember_chat.engine.inference.local.runtime import LocalRuntime
from tests.helpers.gguf_factory import TinySpec, says, write_tiny_model
from tests.helpers.runtime_support import loaded

NICHI = "日".encode()  # E6 97 A5
ASK = [ChatMessage("user", "Say hello in Japanese.")]


@pytest.fixture(scope="module")
def cut_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Says " hello", then 日 one byte token at a time, then ends its turn."""
    script = says("▁hello", "<0xE6>", "<0x97>", "<0xA5>", "</s>")
    return write_tiny_model(tmp_path_factory.mktemp("cut") / "cut.gguf", TinySpec(script=script))


def answer(rt: LocalRuntime, messages: list[ChatMessage], max_tokens: int) -> tuple[Finished, list[Event]]:
    events = list(rt.chat(messages, SamplingParams(max_tokens=max_tokens, temperature=0.0)))
    done = events[-1]
    assert isinstance(done, Finished)
    return done, events


def continued(text: str, done: Finished) -> ChatMessage:
    """The answer to continue, as the window sends it: its text and the bytes it held back."""
    return ChatMessage("assistant", text, held_bytes=bytes.fromhex(done.metrics.held_utf8 or ""))


def test_a_cut_character_is_held_back_and_continue_completes_it(cut_model: Path) -> None:
    with loaded(cut_model, n_ctx=512) as rt:
        cut, events = answer(rt, ASK, max_tokens=2)  # " hello" and the first byte of 日
        streamed = "".join(e.text for e in events if isinstance(e, Token))
        assert cut.reason == "length" and cut.text == streamed == " hello"  # no U+FFFD, streamed or final
        assert cut.metrics.held_utf8 == "e6" and cut.metrics.output_tokens == 2
        more, events = answer(rt, [*ASK, continued(cut.text, cut)], max_tokens=20)
        assert more.text == "日" and more.reason == "stop" and more.metrics.held_utf8 is None
        ready = next(e for e in events if isinstance(e, PromptReady))
        # the prompt is the first answer's prompt, its text and its held byte: all in the KV cache already
        # (but the last token, evaluated again for its logits)
        assert ready.prompt_tokens_reused == ready.prompt_tokens - 1


def test_a_character_cut_twice_is_completed_by_the_second_continue(cut_model: Path) -> None:
    with loaded(cut_model, n_ctx=512) as rt:
        cut, _ = answer(rt, ASK, max_tokens=2)
        again, _ = answer(rt, [*ASK, continued(cut.text, cut)], max_tokens=1)  # one more byte: still cut
        assert again.text == "" and again.metrics.held_utf8 == "e697" and again.reason == "length"
        done, _ = answer(rt, [*ASK, continued(cut.text + again.text, again)], max_tokens=20)
        assert cut.text + again.text + done.text == " hello日"


def test_a_continue_without_the_held_bytes_writes_the_character_anew(cut_model: Path) -> None:
    """(A chat from before this fix, or a model whose vocabulary has no token for the byte.)"""
    with loaded(cut_model, n_ctx=512) as rt:
        cut, _ = answer(rt, ASK, max_tokens=2)
        more, _ = answer(rt, [*ASK, ChatMessage("assistant", cut.text)], max_tokens=4)
        assert "\ufffd" not in more.text


def test_only_an_answer_holds_bytes_and_only_those_of_an_unfinished_character() -> None:
    ChatMessage("assistant", "x", held_bytes=b"\xe6\x97")
    for role, held in (("user", b"\xe6"), ("assistant", NICHI), ("assistant", b"\x97"), ("assistant", b"a")):
        with pytest.raises(InvalidParameter):
            ChatMessage(role, "x", held_bytes=held)


def test_the_chat_starters_byte_level_vocabulary_has_a_token_for_each_held_byte(chat_starter_model: Path) -> None:
    """SmolLM2's BPE: llama.cpp would read the bytes as U+FFFD if they were tokenized as text."""
    with loaded(chat_starter_model, n_ctx=512) as rt:
        held = "ت".encode()[:1]
        prompt = rt.chat_prompt([*ASK, ChatMessage("assistant", "ال", held_bytes=held)], SamplingParams())
        assert prompt.held == held and "\ufffd" not in prompt.text
        assert rt.token_piece(prompt.tokens[-1]) == held
