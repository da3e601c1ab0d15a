"""The envelope of a /v1/chat/completions or /v1/completions body as typed models (openai/typed_body):
every top-level field Ember knows (chat_request.KNOWN_BY_KIND, one model per kind) with its JSON type, so
a field Ember does not know, or one of the wrong type, is the 400 naming it before anything is read.

Only the envelope: what a field's own reader checks stays there, raw here — the messages (roles, content
parts, tool calls: chat_request.read_messages), `tools` and `tool_choice` (tool_wire), `response_format`,
`grammar` and `json_schema` (request_options.constraint), `logit_bias` (read_logit_bias), `ember`
(ember_options); bounds are SamplingParams' (its messages name the parameter as people read it) and n's."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, Field

from ember_chat.engine.openai.typed_body import Body, Must

# A JSON number as sent (an integer stays one: SamplingParams' messages show it as it was written)
Number = Annotated[int | float, Must("a number")]
Raw = dict[str, object]  # an object its own reader checks


def _one_or_many(value: object) -> object:
    return [value] if isinstance(value, str) else value


# `stop`: one string or up to 16 (a wrong item is named by its place: stop[1])
Stop = Annotated[
    list[str], Field(max_length=16), BeforeValidator(_one_or_many), Must("a string or an array of up to 16 strings")
]


LogitBias = Annotated[Raw | list[object], Must('an object of token ids to biases, like {"1234": -100}')]


class _Envelope(Body):
    """The fields both kinds know (chat_request: SAMPLING_FIELDS, NEUTRAL, REFUSED, _IGNORED, _NO_OP, _READ);
    None is a field not sent, as the hand parser read `body.get(name)`."""

    # sampling (chat_request.SAMPLING_FIELDS)
    temperature: Number | None = None
    top_p: Number | None = None
    top_k: int | None = None
    min_p: Number | None = None
    repeat_penalty: Number | None = None
    repetition_penalty: Number | None = None
    seed: int | None = None
    presence_penalty: Number | None = None
    frequency_penalty: Number | None = None
    ignore_eos: bool | None = None
    # accepted at their neutral value only (NEUTRAL), refused (REFUSED)
    echo: bool | None = None
    best_of: int | None = None
    functions: list[Raw] | None = None
    function_call: Annotated[str | Raw, Must("a string or an object")] | None = None
    # ignored (_IGNORED), no-ops (_NO_OP)
    user: str | None = None
    stream_options: Raw | None = None
    store: bool | None = None
    metadata: Raw | None = None
    service_tier: str | None = None
    cache_prompt: bool | None = None
    continue_final_message: bool | None = None
    add_generation_prompt: bool | None = None
    # read (_READ)
    model: str | None = None
    stream: bool = False  # (null is no answer to "stream or not": refused, as before)
    n: int | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    stop: Stop | None = None
    chat_template_kwargs: Raw | None = None
    response_format: Raw | None = None
    grammar: str | None = None
    json_schema: Raw | None = None
    top_logprobs: int | None = None
    ember: Raw | None = None
    tools: Annotated[list[object], Must("an array of function tools")] | None = None
    tool_choice: Annotated[str | Raw, Must("auto, none, required or a function")] | None = None
    parallel_tool_calls: bool | None = None
    logit_bias: Annotated[Raw | list[object], Must('an object of token ids to biases, like {"1234": -100}')] | None = (
        None
    )


class ChatBody(_Envelope):
    """A /v1/chat/completions body."""

    messages: Annotated[list[Raw], Field(min_length=1), Must("a non-empty array of messages")]
    logprobs: bool | None = None


class CompletionBody(_Envelope):
    """A /v1/completions body."""

    prompt: Annotated[str | list[str], Must("a string")]  # (a list of one string is taken as that string)
    suffix: str | None = None  # fill-in-the-middle: the text after the middle
    logprobs: int | None = None  # the completions API's: alternatives per token (0 to 5)


BODY_BY_KIND: dict[str, type[ChatBody] | type[CompletionBody]] = {"chat": ChatBody, "completion": CompletionBody}
