"""A model's default preset on the API: what it sets is the starting point of every request, and
what the request says itself wins (a field it sends; its own system message)."""

from __future__ import annotations

from typing import Any

from ember_chat.engine.attachments import Extracted
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.storage.presets import Preset


def preset_values(preset: Preset | None) -> dict[str, Any]:
    """The SamplingParams values the preset sets (a request's own fields go over them)."""
    if preset is None:
        return {}
    values = dict(preset.params)
    if preset.thinking is not None:
        values["thinking"] = preset.thinking
    return values


def with_preset_system(
    messages: list[ChatMessage], files: dict[int, list[Extracted]], preset: Preset | None
) -> tuple[list[ChatMessage], dict[int, list[Extracted]]]:
    """The preset's system prompt first, unless the request has a system message of its own (the
    files' message indices follow the messages)."""
    if preset is None or not preset.system_prompt or any(m.role == "system" for m in messages):
        return messages, files
    return [ChatMessage("system", preset.system_prompt), *messages], {i + 1: f for i, f in files.items()}
