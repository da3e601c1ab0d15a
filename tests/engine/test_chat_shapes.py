"""The bodies of /v1/chat/completions and /v1/completions as typed shapes (openai/chat_shapes.py, built by
openai/responses.py's ResponseBuilder): a key a shape does not declare is refused where the builder writes
it, and every body, whole or streamed, is read by the official client's own types with nothing left over
but Ember's `ember` (and the thinking's `reasoning_content`, llama.cpp's and vLLM's key)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import openai.types
import openai.types.chat
import pydantic
import pytest
from pydantic import BaseModel

from ember_chat.engine.core.logprobs import TokenLogprob
from ember_chat.engine.core.states import StopReason
from ember_chat.engine.core.tools import ToolCall
from ember_chat.engine.openai.chat_shapes import ChatCompletionChunk, ChoiceDelta, ChunkChoice
from ember_chat.engine.openai.responses import ResponseBuilder
from ember_chat.engine.openai.tool_wire import ChoiceCalls, call_deltas

# What the client's types do not declare and Ember writes on purpose
EXTENSIONS = {"ember", "reasoning_content"}


@dataclass(frozen=True)
class _Figures:
    prompt_tokens: int = 7
    prompt_tokens_reused: int = 2
    output_tokens: int = 5
    thinking_tokens: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _leftovers(model: BaseModel, where: str = "") -> set[str]:
    """Every key the client's types kept as extra, with its place (`choices.0.message.reasoning_content`)."""
    out = {f"{where}{key}" for key in (model.model_extra or {}) if key not in EXTENSIONS}
    for name in type(model).model_fields:
        value = getattr(model, name)
        items = value if isinstance(value, list) else [value]
        for i, item in enumerate(items):
            if isinstance(item, BaseModel):
                place = f"{where}{name}.{i}." if isinstance(value, list) else f"{where}{name}."
                out |= _leftovers(item, place)
    return out


def _logprobs() -> list[TokenLogprob]:
    return [TokenLogprob(1, b"yes", -0.25, ((1, b"yes", -0.25), (2, b"no", -1.5)))]


def test_a_key_the_shape_does_not_declare_is_refused_where_the_builder_writes_it() -> None:
    with pytest.raises(pydantic.ValidationError, match="service_tier"):
        ChatCompletionChunk(
            id="c", object="chat.completion.chunk", created=1, model="m", choices=[], service_tier="auto"
        )
    with pytest.raises(pydantic.ValidationError, match="text"):
        ChunkChoice(index=0, delta=ChoiceDelta(), logprobs=None, finish_reason=None, text="")
    out = ResponseBuilder("chat", "m")
    with pytest.raises(pydantic.ValidationError, match="name"):  # a call's piece with a key out of place
        out.tool_chunk([{"index": 0, "name": "f"}])


def test_every_body_is_the_official_clients_type_with_nothing_left_over() -> None:
    call = ToolCall("call_1", "lookup", {"q": "x"})
    calls = ChoiceCalls(valid=[call])
    chat = ResponseBuilder("chat", "tiny")
    chunks = [
        chat.chunk("", first=True),
        chat.chunk("<think>hmm</think>yes", logprobs=_logprobs()),
        *(chat.tool_chunk(deltas) for deltas in call_deltas(0, call)),
        chat.final_chunk(StopReason.TOOL_CALLS, _Figures(), calls=calls),
        chat.usage_chunk([_Figures()]),
    ]
    for body in chunks:
        assert _leftovers(openai.types.chat.ChatCompletionChunk.model_validate(body)) == set(), body
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[-2]["ember"]["output_tokens"] == 5 and "system_fingerprint" not in chunks[-1]
    whole = ResponseBuilder("chat", "tiny").response(
        [
            ("<think>hmm</think>", StopReason.TOOL_CALLS, _Figures(), _logprobs(), calls),
            ("yes", StopReason.LENGTH, None, None, ChoiceCalls()),
        ]
    )
    parsed = openai.types.chat.ChatCompletion.model_validate(whole)
    assert _leftovers(parsed) == set()
    assert parsed.choices[0].message.tool_calls and parsed.choices[0].message.content is None
    assert whole["choices"][0]["message"]["reasoning_content"] == "hmm"
    assert list(whole) == ["id", "object", "created", "model", "system_fingerprint", "choices", "usage", "ember"]

    text = ResponseBuilder("completion", "tiny")
    text_chunks = [
        text.chunk("yes", first=True, logprobs=_logprobs()),
        text.final_chunk(StopReason.STOP, _Figures()),
        text.usage_chunk([_Figures()]),
    ]
    text_whole = ResponseBuilder("completion", "tiny").response(
        [("yes", StopReason.STOP, _Figures(), _logprobs(), ChoiceCalls())]
    )
    # (A streamed completion's finish_reason is null until its choice ends, as OpenAI's own streams; the
    # client's type says it is always one of its words, and the client reads stream events unvalidated.)
    assert text_chunks[0]["choices"][0]["finish_reason"] is None
    ended = {**text_chunks[0], "choices": [{**text_chunks[0]["choices"][0], "finish_reason": "stop"}]}
    for body in [ended, *text_chunks[1:], text_whole]:
        assert _leftovers(openai.types.Completion.model_validate(body)) == set(), body
    assert text_whole["choices"][0]["logprobs"]["text_offset"] == [0]
    assert list(text_whole) == ["id", "object", "created", "model", "choices", "usage", "ember"]
