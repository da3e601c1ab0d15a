"""The request options beyond OpenAI's basic sampling ones: Ember's `ember` object, the number of
samples, log-probabilities, and constrained output (OpenAI's response_format, llama.cpp's grammar
and json_schema), each checked with a 400 naming it."""

from __future__ import annotations

from typing import Any

from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.inference.grammar.structured import json_format, response_format_grammar, wants_json
from ember_chat.engine.openai.api_error import ApiError

_EMBER_OPTIONS = ("trim_history",)
MAX_N = 16  # samples per request (each is a whole generation, in turn)


def ember_options(raw: Any) -> dict[str, bool]:
    """The request's `ember` extension object (Ember's own options)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ApiError(400, "ember must be an object.", param="ember")
    unknown = sorted(set(raw) - set(_EMBER_OPTIONS))
    if unknown:
        raise ApiError(400, f"ember: unknown option(s) {', '.join(unknown)} (known: trim_history).", param="ember")
    for name, value in raw.items():
        if not isinstance(value, bool):
            raise ApiError(400, f"ember.{name} must be true or false.", param="ember")
    return dict(raw)


def logprobs_wanted(kind: str, body: dict[str, Any]) -> int | None:
    """How many alternatives per token a request wants with its log-probabilities (None: none):
    chat's `logprobs: true` with `top_logprobs` (0-20), or the completions API's `logprobs` (0-5)."""
    logprobs, top = body.get("logprobs"), body.get("top_logprobs")

    def whole(value: Any, high: int) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= high

    if kind == "completion":
        if top is not None:
            raise ApiError(400, "top_logprobs is chat's; completions take logprobs (0 to 5).", param="top_logprobs")
        if logprobs is not None and not whole(logprobs, 5):
            raise ApiError(400, "logprobs must be a whole number from 0 to 5.", param="logprobs")
        return logprobs if isinstance(logprobs, int) else None
    if not isinstance(logprobs, bool | None):
        raise ApiError(400, "logprobs must be true or false.", param="logprobs")
    if top is not None and not whole(top, 20):
        raise ApiError(400, "top_logprobs must be a whole number from 0 to 20.", param="top_logprobs")
    if top is not None and not logprobs:
        raise ApiError(400, "top_logprobs needs logprobs: true.", param="top_logprobs")
    return (top or 0) if logprobs else None


def constraint(body: dict[str, Any]) -> dict[str, Any]:
    """SamplingParams' grammar / response_format for OpenAI's `response_format` or llama.cpp's `grammar`
    (GBNF) and `json_schema` (at most one), checked here so a bad one is a 400 naming it."""
    given = {n: body[n] for n in ("response_format", "grammar", "json_schema") if body.get(n) is not None}
    try:
        response_format_grammar(given.get("response_format"), given.get("grammar"), given.get("json_schema"))
    except InvalidParameter as exc:
        raise ApiError(400, str(exc), param=next(iter(given)) if len(given) == 1 else None) from None
    if "grammar" in given:
        return {"grammar": given["grammar"]}
    if "json_schema" in given:  # as OpenAI's shape, which a remote server behind Ember also understands
        return {"response_format": json_format(given["json_schema"])}
    fmt = given.get("response_format")
    return {"response_format": fmt} if wants_json(fmt) else {}
