"""Does an answer parse as JSON, and match a JSON schema? A small validator for the parts of JSON
schema that structured output uses (type, properties, required, additionalProperties, items, enum,
const, anyOf/oneOf, min/max length and items, pattern, minimum/maximum), so the window's "valid JSON" badge
needs no extra dependency. Parts it does not know are not checked (never a false "invalid")."""

from __future__ import annotations

import json
import re
from typing import Any

from ember_chat.engine.inference.grammar import response_schema, wants_json

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "null": (type(None),),
}


def _is(value: object, kind: str) -> bool:
    if kind in ("number", "integer") and isinstance(value, bool):
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(kind, (object,)))


def _where(path: str, problem: str) -> str:
    return f"{path}: {problem}" if path else problem


def schema_problem(value: Any, schema: object, path: str = "") -> str | None:
    """The first way `value` breaks `schema`, in words ("age: not an integer"), or None."""
    if not isinstance(schema, dict):
        return None
    kinds = schema.get("type")
    if isinstance(kinds, str):
        kinds = [kinds]
    if isinstance(kinds, list) and not any(_is(value, k) for k in kinds):
        return _where(path, f"not {'an' if kinds[0][:1] in 'aeiou' else 'a'} {' or '.join(kinds)}")
    if "enum" in schema and value not in schema["enum"]:
        return _where(path, "not one of the allowed values")
    if "const" in schema and value != schema["const"]:
        return _where(path, f"not {json.dumps(schema['const'])}")
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and all(schema_problem(value, s, path) for s in options):
            return _where(path, "matches none of the allowed shapes")
    if isinstance(value, dict):
        return _object_problem(value, schema, path)
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", len(value)):
            return _where(path, "wrong number of items")
        for i, item in enumerate(value):
            if problem := schema_problem(item, schema.get("items"), f"{path}[{i}]"):
                return problem
    if isinstance(value, str):
        return _string_problem(value, schema, path)
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number and (value < schema.get("minimum", value) or value > schema.get("maximum", value)):
        return _where(path, "out of range")
    return None


def _string_problem(value: str, schema: dict[str, Any], path: str) -> str | None:
    if len(value) < schema.get("minLength", 0):
        return _where(path, f"shorter than {schema['minLength']} characters")
    if len(value) > schema.get("maxLength", len(value)):
        return _where(path, f"longer than {schema['maxLength']} characters")
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            if re.search(pattern, value) is None:
                return _where(path, f"does not match {pattern}")
        except re.error:  # an ECMA regex Python does not read: not checked
            return None
    return None


def _object_problem(value: dict[str, Any], schema: dict[str, Any], path: str) -> str | None:
    props = schema.get("properties") or {}
    prefix = f"{path}." if path else ""
    for name in schema.get("required") or ():
        if name not in value:
            return f"{prefix}{name} is required"
    for name, item in value.items():
        if name in props:
            if problem := schema_problem(item, props[name], prefix + name):
                return problem
        elif schema.get("additionalProperties") is False:
            return f"{prefix}{name} is not allowed"
        elif problem := schema_problem(item, schema.get("additionalProperties"), prefix + name):
            return problem
    return None


def json_problem(text: str, schema: dict[str, Any] | None) -> str | None:
    """None when `text` is JSON (matching `schema` when one is given); else what is wrong, in words."""
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return "not JSON"
    return schema_problem(value, schema) if schema is not None else None


def answer_check(response_format: dict[str, Any] | None, text: str) -> str | None:
    """For GenerationMetrics.json_check: "valid", or what is wrong; None when no JSON was asked for."""
    if not wants_json(response_format):
        return None
    return json_problem(text, response_schema(response_format)) or "valid"
