"""Checks of a response body against the official clients' own types (anthropic.types, openai.types):
what they read of it without declaring it, and a generation's figures to build one with."""

from __future__ import annotations

from typing import Any

import pydantic

from ember_chat.engine.core.tools import InvalidCall, ToolCall
from ember_chat.engine.openai.tool_wire import ChoiceCalls


class Figures:
    """A generation's metrics as a response reads them (openai/responses.Figures)."""

    prompt_tokens, prompt_tokens_reused, output_tokens, thinking_tokens = 12, 4, 9, 3

    def to_dict(self) -> dict[str, Any]:
        return {"tokens_per_second": 20.5}


def extras(model: pydantic.BaseModel, where: str = "") -> dict[str, Any]:
    """Every key an official type (its models keep unknown keys) read without declaring it, by its place."""
    found = {f"{where}{key}": value for key, value in (model.model_extra or {}).items()}
    for name in type(model).model_fields:
        value = getattr(model, name)
        for i, item in enumerate(value if isinstance(value, list) else [value]):
            if isinstance(item, pydantic.BaseModel):
                found |= extras(item, f"{where}{name}[{i}]." if isinstance(value, list) else f"{where}{name}.")
    return found


def weather_calls(prefix: str) -> ChoiceCalls:
    """A sample's tool calls: a valid one, and one naming no tool (ids `<prefix>1`, `<prefix>2`)."""
    calls = ChoiceCalls()
    calls.valid.append(ToolCall(f"{prefix}1", "get_weather", {"city": "Paris", "days": 2}))
    calls.invalid.append(InvalidCall(ToolCall(f"{prefix}2", "nope", {}, "<tool_call>nope</tool_call>"), "no such tool"))
    return calls
