"""Does a JSON value match a JSON schema? One small validator for the schema words that tool
definitions and structured output use: type (one or a list), properties, required,
additionalProperties (false or a schema), items, min/maxItems, enum, const, anyOf/oneOf,
min/maxLength, pattern, minimum/maximum. Words it does not know are not checked, so a schema is never
refused, and a value never called invalid, for using them. No dependency (`jsonschema` is not one)."""

from __future__ import annotations

import json
import re
from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "null": (type(None),),
}


def schema_errors(value: Any, schema: Any, path: str = "") -> list[str]:
    """What in `value` breaks `schema`, in words ("arguments.city must be string, got integer"); `path`
    names the value ("" for a whole document: its parts are then named from their own keys)."""
    if not isinstance(schema, dict):
        return []
    at = path or "the JSON"
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_is_type(value, k) for k in kinds):
            return [f"{at} must be {' or '.join(kinds)}, got {_type_name(value)}"]
    errors: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{at} must be one of {json.dumps(schema['enum'], ensure_ascii=False)}")
    if "const" in schema and value != schema["const"]:
        errors.append(f"{at} must be {json.dumps(schema['const'], ensure_ascii=False)}")
    for word in ("anyOf", "oneOf"):
        options = schema.get(word)
        if isinstance(options, list) and options and all(schema_errors(value, o, path) for o in options):
            errors.append(f"{at} matches none of the allowed shapes")
    if isinstance(value, dict):
        errors += _object_errors(value, schema, path)
    elif isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", len(value)):
            errors.append(f"{at} has the wrong number of items ({len(value)})")
        if isinstance(schema.get("items"), dict):
            for i, item in enumerate(value):
                errors += schema_errors(item, schema["items"], f"{path}[{i}]")
    elif isinstance(value, str):
        errors += _string_errors(value, schema, at)
    elif _is_type(value, "number") and (value < schema.get("minimum", value) or value > schema.get("maximum", value)):
        errors.append(f"{at} is out of range")
    return errors


def _object_errors(value: dict[str, Any], schema: dict[str, Any], path: str) -> list[str]:
    at = path or "the JSON"
    properties = schema.get("properties") or {}
    errors = [f"{at} lacks required {name!r}" for name in schema.get("required") or [] if name not in value]
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        inner = f"{path}.{key}" if path else key
        if key in properties:
            errors += schema_errors(item, properties[key], inner)
        elif extra is False:
            errors.append(f"{at} has no property {key!r}")
        elif isinstance(extra, dict):
            errors += schema_errors(item, extra, inner)
    return errors


def _string_errors(value: str, schema: dict[str, Any], at: str) -> list[str]:
    if len(value) < schema.get("minLength", 0):
        return [f"{at} is shorter than {schema['minLength']} characters"]
    if len(value) > schema.get("maxLength", len(value)):
        return [f"{at} is longer than {schema['maxLength']} characters"]
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            if re.search(pattern, value) is None:
                return [f"{at} does not match {pattern}"]
        except re.error:  # an ECMA regex Python does not read: not checked
            pass
    return []


def _is_type(value: Any, kind: str) -> bool:
    if isinstance(value, bool) and kind in ("number", "integer"):
        return False  # JSON's true is not 1
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(kind, object))


def _type_name(value: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _is_type(value, name) and not (name == "integer" and isinstance(value, float)):
            return name
    return type(value).__name__
