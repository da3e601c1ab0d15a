"""The runtime tool tests' get_weather tool, as the engine's ToolSpec."""

from __future__ import annotations

from ember_chat.engine.core.tools import ToolSpec

WEATHER = ToolSpec(
    "get_weather",
    "The weather in a city.",
    {
        "type": "object",
        "properties": {
            "city": {"enum": ["Paris", "Oslo", "Lima"]},
            "days": {"type": "integer"},
            "unit": {"enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city", "days", "unit"],
        "additionalProperties": False,
    },
)


FORECAST = {  # the runtime tests' get_weather, as an OpenAI tool
    "type": "function",
    "function": {"name": WEATHER.name, "description": WEATHER.description, "parameters": WEATHER.parameters},
}
