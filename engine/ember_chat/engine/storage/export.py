"""A conversation (the branch on screen) as Markdown or JSON, for File ▸ Export."""

from __future__ import annotations

import json
from typing import Any

from ember_chat.engine.core.reasoning import split_thinking
from ember_chat.engine.storage.conversations import Conversation, Message

_WHO = {"user": "You", "assistant": "Ember", "system": "System"}


def chat_as_markdown(conv: Conversation, thread: list[Message]) -> str:
    parts = [f"# {conv.title}\n"]
    if conv.system_prompt:
        parts.append(f"> System prompt: {conv.system_prompt}\n")
    for m in thread:
        split = split_thinking(m.content) if m.role == "assistant" else None
        if split and split.thinking:
            quoted = "\n".join(f"> {line}" if line else ">" for line in split.thinking.splitlines())
            parts.append(f"## {_WHO[m.role]}\n\n> **Thinking**\n>\n{quoted}\n\n{split.answer}\n")
        else:
            parts.append(f"## {_WHO[m.role]}\n\n{m.content}\n")
    return "\n".join(parts)


def _message_json(m: Message) -> dict[str, Any]:
    """An answer's thinking in its own field (`content` is the answer proper)."""
    split = split_thinking(m.content) if m.role == "assistant" else None
    if split and split.thinking:
        return {"role": m.role, "content": split.answer, "thinking": split.thinking, "metrics": m.metrics}
    return {"role": m.role, "content": m.content, "metrics": m.metrics}


def chat_as_json(conv: Conversation, thread: list[Message]) -> str:
    data = {
        "title": conv.title,
        "system_prompt": conv.system_prompt,
        "params": conv.params,
        "messages": [_message_json(m) for m in thread],
    }
    return json.dumps(data, indent=2, ensure_ascii=False)
