"""A conversation (the branch on screen) as Markdown or JSON, for File ▸ Export."""

from __future__ import annotations

import json

from ember_chat.engine.storage.conversations import Conversation, Message

_WHO = {"user": "You", "assistant": "Ember", "system": "System"}


def chat_as_markdown(conv: Conversation, thread: list[Message]) -> str:
    parts = [f"# {conv.title}\n"]
    if conv.system_prompt:
        parts.append(f"> System prompt: {conv.system_prompt}\n")
    for m in thread:
        parts.append(f"## {_WHO[m.role]}\n\n{m.content}\n")
    return "\n".join(parts)


def chat_as_json(conv: Conversation, thread: list[Message]) -> str:
    data = {
        "title": conv.title,
        "system_prompt": conv.system_prompt,
        "params": conv.params,
        "messages": [{"role": m.role, "content": m.content, "metrics": m.metrics} for m in thread],
    }
    return json.dumps(data, indent=2, ensure_ascii=False)
