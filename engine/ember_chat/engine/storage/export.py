"""A conversation (the branch on screen) as Markdown or JSON, for File ▸ Export. A message's attachments
come from the caller (`AttachmentStore.export_entries(ids)`: message id → entries with name, kind,
sha256, and the text or base64 image data): JSON includes them, Markdown names them."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from ember_chat.engine.core.reasoning import split_thinking
from ember_chat.engine.storage.conversations import Conversation, Message

_WHO = {"user": "You", "assistant": "Ember", "system": "System"}


_NOT_IN_FILE_NAMES = re.compile(r'[\x00-\x1f<>:"/\\|?*]+')  # what Windows, macOS or Linux refuse


def export_file_name(title: str, suffix: str, limit: int = 80) -> str:
    """A file name for a chat's export: its title without the characters file systems refuse."""
    stem = " ".join(_NOT_IN_FILE_NAMES.sub(" ", title).split())[:limit].strip(" .")
    return f"{stem or 'Chat'}.{suffix}"


def models_of(conv: Conversation, thread: list[Message]) -> list[str]:
    """The models that answered in this branch, in order of their first answer."""
    named = [m.metrics.get("model") for m in thread if m.role == "assistant" and m.metrics]
    return list(dict.fromkeys(n for n in [*named, conv.model] if n))


def _date(timestamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(timestamp))


Attachments = dict[int, list[dict[str, Any]]]


def _named(entries: list[dict[str, Any]]) -> str:
    return "\n".join(f"- 📎 {e['name']} ({e['kind']}, {e['size']:,} bytes)" for e in entries)


def chat_as_markdown(conv: Conversation, thread: list[Message], attachments: Attachments | None = None) -> str:
    """The chat as Markdown: its title, the model(s) that answered and its date, then each message
    (with the names of its attachments)."""
    models = models_of(conv, thread)
    about = ([f"Model: {', '.join(models)}"] if models else []) + [_date(conv.created_at)]
    parts = [f"# {conv.title}\n", f"*{' · '.join(about)}*\n"]
    if conv.system_prompt:
        parts.append(f"> System prompt: {conv.system_prompt}\n")
    for m in thread:
        split = split_thinking(m.content) if m.role == "assistant" else None
        if split and split.thinking:
            quoted = "\n".join(f"> {line}" if line else ">" for line in split.thinking.splitlines())
            parts.append(f"## {_WHO[m.role]}\n\n> **Thinking**\n>\n{quoted}\n\n{split.answer}\n")
        else:
            parts.append(f"## {_WHO[m.role]}\n\n{m.content}\n")
        if attachments and attachments.get(m.id):
            parts.append(f"*Attached:*\n\n{_named(attachments[m.id])}\n")
    return "\n".join(parts)


def _message_json(m: Message) -> dict[str, Any]:
    """An answer's thinking in its own field (`content` is the answer proper)."""
    split = split_thinking(m.content) if m.role == "assistant" else None
    if split and split.thinking:
        return {"role": m.role, "content": split.answer, "thinking": split.thinking, "metrics": m.metrics}
    return {"role": m.role, "content": m.content, "metrics": m.metrics}


def chat_as_json(conv: Conversation, thread: list[Message], attachments: Attachments | None = None) -> str:
    messages = [_message_json(m) for m in thread]
    for m, out in zip(thread, messages, strict=True):
        if attachments and attachments.get(m.id):
            out["attachments"] = attachments[m.id]
    data = {
        "title": conv.title,
        "models": models_of(conv, thread),
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(conv.created_at)),
        "system_prompt": conv.system_prompt,
        "params": conv.params,
        "messages": messages,
    }
    return json.dumps(data, indent=2, ensure_ascii=False)
