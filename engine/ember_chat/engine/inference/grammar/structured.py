"""Structured output: GBNF grammars that constrain generation to JSON (any object, or one matching a
JSON schema), from OpenAI's `response_format` or llama.cpp's `grammar` / `json_schema` request fields.

The converter and the JSON grammar are llama-cpp-python's own (`llama_cpp.llama_grammar`, a port of
llama.cpp's json_schema_to_grammar); llama_cpp is imported only when a grammar is asked for, so the
modules the CLI and the window import at start stay light. Every input is checked here, with a
sentence that says what is wrong, before a generation starts — every schema is held to
schema_limits.py's limits before the converter sees it, and every grammar, given or made from
a schema, to limits.py's before llama.cpp's parser sees it (over them, the converter or the
parser uses up the memory, crashes or hangs the process, where no exception can be caught)."""

from __future__ import annotations

import json
from typing import Any

from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.inference.grammar.limits import check_grammar_limits
from ember_chat.engine.inference.grammar.schema_limits import HELD_REPEAT, check_schema_limits, small_range

_LOOSE_CHAR = r'char ::= [^"\\] |'
_JSON_CHAR = r'char ::= [^"\\\x7F\x00-\x1F] |'


def json_grammar() -> str:
    """The grammar of any JSON object (OpenAI's `{"type": "json_object"}`)."""
    from llama_cpp.llama_grammar import JSON_GBNF

    return JSON_GBNF


def schema_grammar(schema: object) -> str:
    """The grammar of the JSON documents that match `schema` (a JSON schema, as a dict). Raises
    InvalidParameter when it is not a schema the converter understands."""
    if not isinstance(schema, dict):
        raise InvalidParameter(f"A JSON schema must be a JSON object, got {json.dumps(schema)[:80]}.")
    check_schema_limits(schema)
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    try:
        gbnf = json_schema_to_gbnf(json.dumps(_as_the_grammar_holds(schema)))
    except RecursionError as exc:
        raise InvalidParameter("The JSON schema refers to itself too deeply to be turned into a grammar.") from exc
    except Exception as exc:  # the converter asserts and indexes; its messages name the bad part
        detail = str(exc).strip() or type(exc).__name__
        raise InvalidParameter(f"The JSON schema cannot be used to constrain the answer: {detail}.") from exc
    # llama-cpp-python's port lets a string hold raw control characters, which JSON forbids (and the
    # tiny test model does write them); llama.cpp's own converter excludes them, as here.
    gbnf = gbnf.replace(_LOOSE_CHAR, _JSON_CHAR)
    try:  # (a schema writes grammars a request could not: a pattern's {1,5000} is 5,000 nested groups)
        check_grammar_limits(gbnf)
    except InvalidParameter as exc:
        raise InvalidParameter(f"The JSON schema cannot be used to constrain the answer: {exc}") from None
    return gbnf


def _as_the_grammar_holds(node: Any) -> Any:
    """The schema as the grammar holds it; what it does not hold is checked after the answer
    (json_check.py, and a tool call's arguments against the schema). llama-cpp-python's converter
    ignores `minimum`/`maximum`: an integer with a small range becomes the list of its values. It
    writes a string's `maxLength` or an array's `maxItems` as that many groups nested in each other
    (a maxLength of 20,000 overflowed llama.cpp's parser): past HELD_REPEAT, the limit is left out."""
    if isinstance(node, list):
        return [_as_the_grammar_holds(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _as_the_grammar_holds(value) for key, value in node.items()}
    for key in ("maxLength", "maxItems"):
        if isinstance(out.get(key), int) and out[key] > HELD_REPEAT:
            del out[key]
    values = small_range(out)
    if values is not None:
        kept = {k: v for k, v in out.items() if k in ("description", "title", "default")}
        return {**kept, "enum": list(values)}
    return out


def check_grammar(text: object) -> str:
    """`text` if it is a GBNF grammar llama.cpp can parse (with a `root` rule); else InvalidParameter."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidParameter("A grammar must be GBNF text with a root rule, not empty.")
    check_grammar_limits(text)  # (before llama.cpp's parser: one over them crashes or hangs it)
    import llama_cpp

    from ember_chat.engine.inference.llama.log import route_llama_log

    route_llama_log()  # llama.cpp's parse error goes to the log, not the terminal
    sampler = llama_cpp.llama_sampler_init_grammar(None, text.encode("utf-8"), b"root")
    if not sampler:
        raise InvalidParameter("The grammar is not valid GBNF (llama.cpp could not parse it, or it has no root rule).")
    llama_cpp.llama_sampler_free(sampler)
    return text


def parse_schema_text(text: str) -> dict[str, Any] | None:
    """A schema typed by a user: empty → None (any JSON object), else a JSON object that converts to a
    grammar; InvalidParameter with a plain sentence otherwise."""
    if not text.strip():
        return None
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidParameter(
            f"The schema is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})."
        ) from exc
    schema_grammar(schema)
    return schema


def response_format_grammar(
    response_format: dict[str, Any] | None, grammar: str | None = None, json_schema: dict[str, Any] | None = None
) -> str | None:
    """The GBNF grammar a request asks for, or None for free text.

    `response_format`: OpenAI's `{"type": "text" | "json_object" | "json_schema", ...}` (json_schema:
    `{"json_schema": {"name": ..., "schema": {...}}}`; llama-server's `json_object` with a `schema`
    is honoured too). `grammar`: llama.cpp's GBNF text. `json_schema`: llama.cpp's bare schema. At most
    one of them. Raises InvalidParameter with a plain sentence on a bad format, schema or grammar."""
    given = [
        n for n, v in (("response_format", response_format), ("grammar", grammar), ("json_schema", json_schema))
        if v is not None
    ]  # fmt: skip
    if len(given) > 1:
        raise InvalidParameter(f"Give only one of {' and '.join(given)}: each one constrains the whole answer.")
    if grammar is not None:
        return check_grammar(grammar)
    if json_schema is not None:
        return schema_grammar(json_schema)
    if response_format is None:
        return None
    if not isinstance(response_format, dict):
        raise InvalidParameter('response_format must be an object such as {"type": "json_object"}.')
    kind = response_format.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        schema = response_format.get("schema")
        return json_grammar() if schema is None else schema_grammar(schema)
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else response_format.get("schema")
        if schema is None:
            raise InvalidParameter(
                'response_format of type json_schema needs {"json_schema": {"name": ..., "schema": {...}}}.'
            )
        return schema_grammar(schema)
    raise InvalidParameter(f"response_format type must be text, json_object or json_schema, got {kind!r}.")


def wants_json(response_format: dict[str, Any] | None) -> bool:
    return isinstance(response_format, dict) and response_format.get("type") in ("json_object", "json_schema")


def response_schema(response_format: dict[str, Any] | None) -> dict[str, Any] | None:
    """The JSON schema a response_format asks for (None: any JSON, or not JSON at all)."""
    if not wants_json(response_format):
        return None
    assert response_format is not None
    spec = response_format.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, dict) else response_format.get("schema")
    return schema if isinstance(schema, dict) else None


def json_format(schema: dict[str, Any] | None) -> dict[str, Any]:
    """The response_format for "answer as JSON", with this schema or none."""
    if schema is None:
        return {"type": "json_object"}
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}


def params_grammar(params: SamplingParams) -> str | None:
    """The grammar a generation with these parameters is constrained by: `grammar` if given, else the
    one of `response_format` (checked: InvalidParameter with a plain sentence)."""
    if params.grammar is not None:
        return check_grammar(params.grammar)
    return response_format_grammar(params.response_format)
