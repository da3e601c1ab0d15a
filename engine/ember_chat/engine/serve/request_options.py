"""A request's constrained output (OpenAI's response_format, llama.cpp's grammar and json_schema),
checked against what the grammar can hold, with a 400 naming it."""

from __future__ import annotations

from typing import Any

from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.inference.grammar.structured import json_format, response_format_grammar, wants_json
from ember_chat.engine.openai.api_error import ApiError


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
