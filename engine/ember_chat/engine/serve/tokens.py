"""llama-server's /tokenize and /detokenize on the loaded model's own tokenizer (Ember's remote backend
uses them for exact token counts, as do clients that budget their prompts):

    POST /tokenize   {"content": str, "add_special": bool = false, "with_pieces": bool = false}
                     → {"tokens": [id, …]} or, with pieces, {"tokens": [{"id": id, "piece": str | [byte, …]}, …]}
    POST /detokenize {"tokens": [id, …]} → {"content": str}

Special tokens' text is read as those tokens (as llama-server does); a piece that is not whole UTF-8
(part of a character) is its list of bytes."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import JsonValue

from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.openai.chat_request import CLI_UNKNOWN_FIELDS_ADVICE
from ember_chat.engine.openai.typed_body import Body, Must, read_body


class TokenizeBody(Body):
    content: str
    add_special: bool = False
    with_pieces: bool = False
    parse_special: Annotated[Literal[True], Must("true: only true is supported")] = True
    # accepted and not used: vLLM's and SGLang's names too (`prompt`, `add_special_tokens`; `input`), which
    # clients that talk to several servers send together, as Ember's own remote backend does: `content`
    # is the text
    model: JsonValue = None
    prompt: JsonValue = None
    input: JsonValue = None
    add_special_tokens: JsonValue = None


class DetokenizeBody(Body):
    tokens: Annotated[list[int], Must("an array of token ids")]
    model: JsonValue = None  # (accepted, not used)


def _no_tokenizer() -> ApiError:
    return ApiError(
        501,
        "The loaded model's tokenizer is not available here (no model is loaded, it is a remote model, or it is "
        "being replaced).",
        "server_error",
        code="tokenizer_unavailable",
    )


def tokenize(
    service: EngineService, body: object, allow_unknown: bool = False, advice: str = CLI_UNKNOWN_FIELDS_ADVICE
) -> dict[str, Any]:
    request = read_body(TokenizeBody, body, allow_unknown, advice)
    tokens = service.tokenize(request.content, add_special=request.add_special)
    if tokens is None:
        raise _no_tokenizer()
    if not request.with_pieces:
        return {"tokens": tokens}
    pieces = service.token_pieces(tokens)
    if pieces is None:
        raise _no_tokenizer()
    return {"tokens": [{"id": t, "piece": _piece(p)} for t, p in zip(tokens, pieces, strict=True)]}


def _piece(raw: bytes) -> str | list[int]:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return list(raw)


def detokenize(
    service: EngineService, body: object, allow_unknown: bool = False, advice: str = CLI_UNKNOWN_FIELDS_ADVICE
) -> dict[str, Any]:
    tokens = read_body(DetokenizeBody, body, allow_unknown, advice).tokens
    try:
        pieces = service.token_pieces(tokens)
    except InvalidParameter as exc:
        raise ApiError(400, str(exc), param="tokens") from None
    if pieces is None:
        raise _no_tokenizer()
    return {"content": b"".join(pieces).decode("utf-8", errors="replace")}
