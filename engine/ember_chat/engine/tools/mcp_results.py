"""MCP's shapes to Ember's: a listed tool to a ToolSpec (readOnlyHint → read_only), a tool's result
content to the text given back to the model."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import mcp_types as types

from ember_chat.engine.core.tools import ToolSpec
from ember_chat.engine.errors import InvalidParameter

RESULT_LIMIT = 200_000  # characters of a result given to the model (a 10 MB answer would drown its context)


def tool_spec(tool: types.Tool) -> ToolSpec:
    """InvalidParameter when Ember cannot offer the tool to a model (a name chat templates refuse)."""
    schema: dict[str, Any] = dict(tool.input_schema or {})
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    annotations = tool.annotations
    description = tool.description or tool.title or (annotations.title if annotations else None) or ""
    return ToolSpec(
        tool.name,
        description,
        schema,
        read_only=bool(annotations and annotations.read_only_hint),
    )


def result_text(content: Sequence[Any], structured: Any = None) -> str:
    """A tool's content blocks as text: text as it is, other blocks as a short note of what they were."""
    parts: list[str] = []
    for block in content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            size = len(block.data) * 3 // 4 - block.data[-2:].count("=")  # base64
            parts.append(f"[{kind} {block.mime_type}, {size} bytes, not shown to the model]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}" + (f": {block.name}" if block.name else "") + "]")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource {resource.uri}, binary, not shown]")
        else:
            parts.append(f"[{kind or 'unknown'} content, not shown]")
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False))
    text = "\n".join(parts)
    if len(text) > RESULT_LIMIT:
        text = (
            text[:RESULT_LIMIT]
            + f"\n[… the tool returned {len(text)} characters; only the first {RESULT_LIMIT} are given here.]"
        )
    return text


def usable_specs(tools: Sequence[types.Tool], skipped: list[str]) -> list[ToolSpec]:
    """The tools Ember can offer; each one it cannot is said in `skipped` (a sentence)."""
    specs: list[ToolSpec] = []
    for tool in tools:
        try:
            specs.append(tool_spec(tool))
        except InvalidParameter as exc:
            skipped.append(f"Tool {tool.name!r} was skipped: {exc}")
    return specs
