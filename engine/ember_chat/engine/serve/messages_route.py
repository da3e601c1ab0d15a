"""Anthropic's Messages API on Ember's server: POST /v1/messages (its body read as the chat route's
request, anthropic/messages_input.py; answered as a Message, anthropic/messages_output.py, streamed as
Anthropic's events) and POST /v1/messages/count_tokens (the prompt's tokens by the same rendering as
the generation's). Every error on these paths, the guards' included, is in Anthropic's shape."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ember_chat.engine.anthropic.messages_input import CHAT_TO_MESSAGES, read_body
from ember_chat.engine.anthropic.messages_output import MessagesBuilder, error_body
from ember_chat.engine.errors import ImagesNotSupported, InvalidParameter
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.openai.chat_request import CLI_UNKNOWN_FIELDS_ADVICE
from ember_chat.engine.serve.api_request import ApiRequest, parse_request
from ember_chat.engine.serve.event_stream import NamedEventStream
from ember_chat.engine.serve.file_reading import Reading
from ember_chat.engine.storage.presets import Preset

PATH = "/v1/messages"
COUNT_PATH = "/v1/messages/count_tokens"


def is_messages_path(path: str) -> bool:
    """Whether a request's path is the Messages API's (its errors are then in Anthropic's shape)."""
    path = path.split("?", 1)[0].rstrip("/")
    return path == PATH or path.startswith(PATH + "/")


@dataclass(frozen=True)
class Turn:
    """One POST /v1/messages: the request for the engine, and the stop sequences its Message names."""

    request: ApiRequest
    stop_sequences: tuple[str, ...]

    def builder(self, model: str) -> MessagesBuilder:
        return MessagesBuilder(model, self.stop_sequences)


def read_turn(
    body: Any,
    allow_unknown: bool = False,
    preset: Preset | None = None,
    reading: Reading | None = None,
    advice: str = CLI_UNKNOWN_FIELDS_ADVICE,
    *,
    count: bool = False,
    speculative: str = "auto",
) -> Turn:
    """The turn a body asks for, read and checked as the chat route reads its fields (errors renamed to
    the Messages fields). `count`: a count_tokens body; `speculative`: the server's (parse_request's)."""
    read = read_body(body, allow_unknown, advice, count=count)
    try:
        request = parse_request("chat", read.chat, False, preset, reading, advice, speculative=speculative)
    except ApiError as exc:
        param = CHAT_TO_MESSAGES.get(exc.param or "", exc.param)
        message = exc.message.replace("stop must", "stop_sequences must") if param == "stop_sequences" else exc.message
        raise ApiError(exc.status, message, exc.type, param=param, code=exc.code, headers=exc.headers) from None
    return Turn(replace(request, include_usage=False), read.stop_sequences)


def count_tokens(service: EngineService, turn: Turn) -> dict[str, Any]:
    """{"input_tokens": N}: the tokens of the prompt the model would be given for this conversation (over
    the context too: a client counts to know whether to shorten it)."""
    req = turn.request
    assert req.messages is not None
    if req.files:  # (no document blocks reach here: messages_input refuses them)
        raise ApiError(400, "count_tokens reads no files.", param="messages")
    try:
        tokens = service.prompt_tokens(req.messages, req.params, req.tools)
    except (InvalidParameter, ImagesNotSupported) as exc:
        raise ApiError(400, str(exc), param="messages") from None
    if tokens is None:
        raise ApiError(501, "The loaded model's prompt cannot be counted here (no model is loaded, it is a remote "
                       "model, or it is being replaced).", "server_error", code="tokenizer_unavailable")  # fmt: skip
    return {"input_tokens": tokens}


class MessagesStream(NamedEventStream):
    """A Message's event stream: an error is an `error` event in Anthropic's shape."""

    def error_events(self, error: ApiError) -> list[dict[str, Any]]:
        return [error_body(error)]
