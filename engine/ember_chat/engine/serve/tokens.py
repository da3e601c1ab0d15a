"""llama-server's /tokenize and /detokenize on the loaded model's own tokenizer (Ember's remote backend
uses them for exact token counts, as do clients that budget their prompts):

    POST /tokenize   {"content": str, "add_special": bool = false, "with_pieces": bool = false}
                     → {"tokens": [id, …]} or, with pieces, {"tokens": [{"id": id, "piece": str | [byte, …]}, …]}
    POST /detokenize {"tokens": [id, …]} → {"content": str}

Special tokens' text is read as those tokens (as llama-server does); a piece that is not whole UTF-8
(part of a character) is its list of bytes."""

from __future__ import annotations

from typing import Any

from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.openai.chat_request import CLI_UNKNOWN_FIELDS_ADVICE, check_known_fields

# vLLM's and SGLang's names too (`prompt`, `add_special_tokens`; `input`), which clients that talk
# to several servers send together, as Ember's own remote backend does: `content` is the text
_TOKENIZE_FIELDS = {"content", "add_special", "with_pieces", "parse_special", "model", "prompt", "input",
                    "add_special_tokens"}  # fmt: skip
_DETOKENIZE_FIELDS = {"tokens", "model"}


def _object(body: Any, known: set[str], allow_unknown: bool, advice: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    check_known_fields(body, known, allow_unknown, advice)
    return body


def _flag(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise ApiError(400, f"{name} must be true or false.", param=name)
    return value


def _no_tokenizer() -> ApiError:
    return ApiError(
        501,
        "The loaded model's tokenizer is not available here (no model is loaded, it is a remote model, or it is "
        "being replaced).",
        "server_error",
        code="tokenizer_unavailable",
    )


def tokenize(
    service: EngineService, body: Any, allow_unknown: bool = False, advice: str = CLI_UNKNOWN_FIELDS_ADVICE
) -> dict[str, Any]:
    body = _object(body, _TOKENIZE_FIELDS, allow_unknown, advice)
    content = body.get("content")
    if not isinstance(content, str):
        raise ApiError(400, "content must be a string.", param="content")
    add_special, with_pieces = _flag(body, "add_special"), _flag(body, "with_pieces")
    if body.get("parse_special", True) is not True:
        raise ApiError(400, "parse_special: only true is supported.", param="parse_special")
    tokens = service.tokenize(content, add_special=add_special)
    if tokens is None:
        raise _no_tokenizer()
    if not with_pieces:
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
    service: EngineService, body: Any, allow_unknown: bool = False, advice: str = CLI_UNKNOWN_FIELDS_ADVICE
) -> dict[str, Any]:
    body = _object(body, _DETOKENIZE_FIELDS, allow_unknown, advice)
    tokens = body.get("tokens")
    if not isinstance(tokens, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
        raise ApiError(400, "tokens must be an array of token ids.", param="tokens")
    try:
        pieces = service.token_pieces(tokens)
    except InvalidParameter as exc:
        raise ApiError(400, str(exc), param="tokens") from None
    if pieces is None:
        raise _no_tokenizer()
    return {"content": b"".join(pieces).decode("utf-8", errors="replace")}
