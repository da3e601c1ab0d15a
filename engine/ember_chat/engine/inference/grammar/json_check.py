"""Does an answer parse as JSON, and match its JSON schema (core/json_schema.py, the validator tool
arguments are checked with too)? For the answer's "valid JSON" badge."""

from __future__ import annotations

import json
from typing import Any

from ember_chat.engine.core.json_schema import schema_errors
from ember_chat.engine.inference.grammar.structured import response_schema, wants_json


def schema_problem(value: Any, schema: object) -> str | None:
    """The first way `value` breaks `schema`, in words ("age must be integer, got number"), or None."""
    errors = schema_errors(value, schema)
    return errors[0] if errors else None


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
