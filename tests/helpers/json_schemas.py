"""A JSON schema the structured-output tests of the engine and the window ask an answer to follow."""

from __future__ import annotations

PERSON = {
    "type": "object",
    "properties": {
        # (letters: the tiny model's byte tokens would otherwise write invalid UTF-8, which a grammar over
        # characters lets through as single bytes)
        "name": {"type": "string", "pattern": "^[A-Za-z ]{1,12}$"},
        "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3},
    },
    "required": ["name", "age", "tags"],
    "additionalProperties": False,
}
