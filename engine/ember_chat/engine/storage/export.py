"""A conversation (the branch on screen) as Markdown or JSON, for File ▸ Export. A message's attachments
come from the caller (`AttachmentStore.export_entries(ids)`: message id → entries with name, kind,
sha256, and the text or base64 image data): JSON includes them, Markdown names them. An answer's tool
calls and their results are in both: JSON in OpenAI's shape (the assistant's `tool_calls`, then a
`tool` message per call with its `meta`), Markdown as a short section per call."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from ember_chat.engine.core.reasoning import split_thinking
from ember_chat.engine.core.tools import InvalidCall
from ember_chat.engine.storage.conversations import Conversation, Message
from ember_chat.engine.storage.tool_records import ToolMessage

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
        parts.extend(_calls_markdown(m))
    return "\n".join(parts)


_DECIDED = {"once": "allowed once", "always": "always allowed in this chat", "deny": "denied", "auto": "not asked"}


def _fenced(text: str, language: str = "") -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}{language}\n{text}\n{fence}"


def _calls_markdown(m: Message) -> list[str]:
    """One section per call: name, source, decision, duration, the arguments, then the result."""
    results = {t.call_id: t for t in m.tool_results}
    out = []
    for stored in m.tool_calls:
        call = stored.call if isinstance(stored, InvalidCall) else stored
        t = results.get(call.id)
        about = [s for s in (t.source if t else None, _DECIDED.get(t.decision or "") if t else None) if s]
        if t is not None and t.duration_ms is not None:
            about.append(f"{t.duration_ms:.0f} ms")
        head = f"**Tool call:** `{call.name}`" + (f" ({', '.join(about)})" if about else "")
        args = json.dumps(call.arguments, indent=2, ensure_ascii=False)
        section = f"{head}\n\n{_fenced(args, 'json')}\n"
        if isinstance(stored, InvalidCall):
            section += f"\n*Not run:* {stored.error}\n"
        elif t is None or t.state != "done":
            section += "\n*Not run.*\n"
        else:
            label = "Error" if t.is_error else "Result"
            section += f"\n*{label}:*\n\n{_fenced(t.content)}\n"
        out.append(section)
    return out


def _tool_messages_json(m: Message) -> list[dict[str, Any]]:
    results = {t.call_id: t for t in m.tool_results}
    out = []
    for stored in m.tool_calls:
        call = stored.call if isinstance(stored, InvalidCall) else stored
        t = results.get(call.id) or ToolMessage(call.id, call.name, "", state="interrupted")
        result = t.result() if t.state == "done" or not isinstance(stored, InvalidCall) else stored.result()
        meta = {
            "name": call.name,
            "source": t.source,
            "decision": t.decision,
            "duration_ms": t.duration_ms,
            "is_error": result.is_error,
        }
        out.append({"role": "tool", "tool_call_id": call.id, "content": result.content, "meta": meta})
    return out


def _calls_json(m: Message) -> list[dict[str, Any]]:
    out = []
    for stored in m.tool_calls:
        call = stored.call if isinstance(stored, InvalidCall) else stored
        entry = call.to_openai()
        if isinstance(stored, InvalidCall):
            entry["error"] = stored.error
        out.append(entry)
    return out


def _message_json(m: Message) -> dict[str, Any]:
    """An answer's thinking in its own field (`content` is the answer proper)."""
    split = split_thinking(m.content) if m.role == "assistant" else None
    if split and split.thinking:
        return {"role": m.role, "content": split.answer, "thinking": split.thinking, "metrics": m.metrics}
    return {"role": m.role, "content": m.content, "metrics": m.metrics}


def chat_as_json(conv: Conversation, thread: list[Message], attachments: Attachments | None = None) -> str:
    messages = []
    for m in thread:
        out = _message_json(m)
        if attachments and attachments.get(m.id):
            out["attachments"] = attachments[m.id]
        messages.append(out)
        if m.tool_calls:
            out["tool_calls"] = _calls_json(m)
            messages.extend(_tool_messages_json(m))
    data = {
        "title": conv.title,
        "models": models_of(conv, thread),
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(conv.created_at)),
        "system_prompt": conv.system_prompt,
        "params": conv.params,
        "messages": messages,
    }
    return json.dumps(data, indent=2, ensure_ascii=False)
