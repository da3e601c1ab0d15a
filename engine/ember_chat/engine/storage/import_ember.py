"""Ember's own JSON export read into planned chats: the lossless form (`tree`, see export.py) with every
branch, or an older export's one branch (`messages`, in OpenAI's shape: an answer's `tool_calls`, then a
`tool` message per call; thinking in its own field); and the project a project's export names first."""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any

from ember_chat.engine.core.params import chat_settings
from ember_chat.engine.core.reasoning import CLOSE, OPEN
from ember_chat.engine.storage.export import FORMAT
from ember_chat.engine.storage.import_plan import (
    ImportFailed,
    PlannedAnswer,
    PlannedChat,
    PlannedComparison,
    PlannedMessage,
    PlannedProject,
    number,
    where,
)
from ember_chat.engine.storage.project_tables import KINDS, MAX_ICON, MAX_INSTRUCTIONS, MAX_NAME
from ember_chat.engine.storage.titles import clean_name

ROLES = ("system", "user", "assistant")


def is_ember(item: object) -> bool:
    return isinstance(item, dict) and (isinstance(item.get("tree"), list) or isinstance(item.get("messages"), list))


def is_ember_project(item: object) -> bool:
    """A project on its own, as a project's export begins (export.project_export_json): no chat in it."""
    return (
        isinstance(item, dict)
        and item.get("format") == FORMAT
        and "project" in item
        and "tree" not in item
        and "messages" not in item
    )


def ember_project(doc: dict[str, Any], file_name: str, index: int) -> PlannedProject:
    """The project a project's export names (checked as a chat's is: _project); one with no name, or
    not an object, refuses the file."""
    project = _project(doc.get("project"))
    if project is None:
        raise ImportFailed(
            f"In {file_name}, item {index + 1} should be a project but has no name, so it cannot be imported."
        )
    return project


def ember_chat(doc: dict[str, Any], file_name: str, index: int) -> PlannedChat:
    label = where(file_name, index + 1, doc.get("title"))
    chat = _lossless(doc, label) if isinstance(doc.get("tree"), list) else _one_branch(doc, label)
    chat.project = _project(doc.get("project"))
    return chat


MAX_IMPORTED_SOURCES = 1000  # knowledge paths (and tool server names) one imported project keeps (the rest: out)
MAX_PATH = 4096  # characters of one knowledge path
MAX_SOURCE = 999  # the highest number of an answer's project source ([n] markers have at most three digits)


def _project(value: object) -> PlannedProject | None:
    """The project the chat was in (export.py writes it), its fields checked one by one: one of the wrong
    kind is left at its default; no name, no project. Its knowledge paths are kept as text only: never
    opened nor looked up (the user confirms each before it is indexed)."""
    data = _dict(value)
    name = _bounded_name(_text((data or {}).get("name")))
    if data is None or not name:
        return None
    icon = _text(data.get("icon")).strip()
    tools = data.get("tools") if isinstance(data.get("tools"), list) else []
    length = data.get("context_length")
    knowledge: dict[str, str] = {}
    for item in data.get("knowledge") if isinstance(data.get("knowledge"), list) else []:
        entry = _dict(item) or {}
        path = _text(entry.get("path"))
        if path and len(path) <= MAX_PATH and "\x00" not in path and len(knowledge) < MAX_IMPORTED_SOURCES:
            kind = entry.get("kind")
            knowledge.setdefault(path, kind if isinstance(kind, str) and kind in KINDS else "folder")
    return PlannedProject(
        name=name,
        icon=icon if len(icon) <= MAX_ICON else "",
        instructions=_text(data.get("instructions"))[:MAX_INSTRUCTIONS],
        model=_name(data.get("model"), MAX_PATH),  # (a model may be named by its file's path)
        preset=_name(data.get("preset"), MAX_NAME),
        tools=tuple(dict.fromkeys(t for t in tools if isinstance(t, str) and t and len(t) <= MAX_NAME))[
            :MAX_IMPORTED_SOURCES
        ],
        context_length=length if type(length) is int and length > 0 else None,
        embedding_model=_name(data.get("embedding_model"), MAX_PATH),
        reranker=_name(data.get("reranker"), MAX_PATH),
        knowledge=tuple(knowledge.items()),
    )


def _bounded_name(text: str) -> str:
    """A project's name as a typed one is kept (organise.py): cleaned, at most MAX_NAME characters, and
    cleaned again after the cut (it could end on a space or a joiner)."""
    return clean_name(clean_name(text)[:MAX_NAME]).rstrip("\u200c\u200d")


def _name(value: object, limit: int) -> str | None:
    """A default's name (a model's, a preset's), or None (the default) for one that is not text, is empty or
    is longer than `limit` (no name is that long: a cut one would name something else)."""
    name = value.strip() if isinstance(value, str) else ""
    return name if 0 < len(name) <= limit else None


def _text(value: object, default: str = "") -> str:
    return value if isinstance(value, str) else default


def _dict(value: object) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _place(value: object, before: int, label: str, what: str) -> int | None:
    """A reference to an earlier message of the tree (None: none)."""
    if value is None:
        return None
    if type(value) is not int or not 0 <= value < before:
        raise ImportFailed(f"In {label}, {what} points at a message ({value!r}) that is not before it in the file.")
    return value


def _lossless(doc: dict[str, Any], label: str) -> PlannedChat:
    files = doc.get("files") if isinstance(doc.get("files"), list) else []
    messages: list[PlannedMessage] = []
    now = time.time()
    for i, item in enumerate(doc["tree"]):
        if not isinstance(item, dict) or item.get("role") not in ROLES or not isinstance(item.get("content"), str):
            raise ImportFailed(f"In {label}, message {i + 1} has no role or no text, so it cannot be read.")
        calls = [c for c in item.get("tool_calls") or [] if isinstance(c, dict) and isinstance(c.get("id"), str)]
        results = [
            t for t in item.get("tool_messages") or [] if isinstance(t, dict) and isinstance(t.get("call_id"), str)
        ]
        attached = []
        for f in item.get("files") or []:
            if type(f) is not int or not 0 <= f < len(files) or not isinstance(files[f], dict):
                raise ImportFailed(
                    f"In {label}, message {i + 1} names an attached file ({f!r}) the file does not hold."
                )
            attached.append(files[f])
        created = number(item.get("created"))
        messages.append(
            PlannedMessage(
                parent=_place(item.get("parent"), i, label, f"message {i + 1}"),
                role=item["role"],
                content=item["content"],
                created_at=created if created is not None else now,
                metrics=_dict(item.get("metrics")),
                complete=item.get("complete") is not False,
                tool_calls=calls,
                tool_messages=results,
                files=attached,
                sources=_sources(item.get("project_sources")) if item["role"] == "assistant" else [],
            )
        )
    comparisons = []
    for n, c in enumerate(x for x in doc.get("comparisons") or [] if isinstance(x, dict)):
        answers = [
            PlannedAnswer(
                model=_text(a.get("model"), "?"),
                content=_text(a.get("content")),
                metrics=_dict(a.get("metrics")),
                error=a.get("error") if isinstance(a.get("error"), str) else None,
                kept=_place(a.get("kept"), len(messages), label, f"comparison {n + 1}"),
            )
            for a in c.get("answers") or []
            if isinstance(a, dict)
        ]
        created = number(c.get("created"))
        comparisons.append(
            PlannedComparison(
                prompt=_place(c.get("prompt"), len(messages), label, f"comparison {n + 1}"),
                settings=_dict(c.get("settings")) or {},
                created_at=created if created is not None else now,
                answers=answers,
            )
        )
    created = number(doc.get("created"))
    updated = number(doc.get("updated"))
    # only the valid settings are kept: one of the wrong type or out of range (`"stop": 5`, `"context_length":
    # "x"`) is left out and the chat opens with its default; the names left out go to the import's report
    params, reset = chat_settings(doc.get("params"))
    return PlannedChat(
        title=_text(doc.get("title")) or "Imported chat",
        created_at=created if created is not None else now,
        updated_at=updated if updated is not None else now,
        messages=messages,
        active=_place(doc.get("active"), len(messages), label, "the shown branch"),
        model=doc.get("model") if isinstance(doc.get("model"), str) else None,
        system_prompt=_text(doc.get("system_prompt")),
        params=params,
        tools=_tools(doc.get("tools")),
        pinned=doc.get("pinned") is True,
        archived_at=number(doc.get("archived_at")),
        comparisons=comparisons,
        grants_refused=_grants(doc.get("tools")),
        settings_reset=tuple(reset),
    )


def _sources(value: object) -> list[dict[str, Any]]:
    """An answer's project passages as export.py writes them; one that is not well formed, or a number
    given twice, is left out (the answer's text stays whole)."""
    out: dict[int, dict[str, Any]] = {}
    for s in value if isinstance(value, list) else []:
        if not isinstance(s, dict):
            continue
        n, page, seq = s.get("n"), s.get("page"), s.get("seq", 0)
        if type(n) is not int or not 1 <= n <= MAX_SOURCE or n in out or type(seq) is not int:
            continue
        passage = s.get("passage", "")  # (exported without its text unless asked: export.py)
        if not isinstance(s.get("file"), str) or not isinstance(passage, str):
            continue
        if page is not None and type(page) is not int:
            continue
        out[n] = {"n": n, "file": s["file"], "page": page, "seq": seq, "passage": passage}
    return list(out.values())


def _tools(value: object) -> dict[str, Any] | None:
    """The chat's tool choices, without consent: the tools on (each still asks before it runs) and
    whether a call is required. "Always allow" grants (`always`) are the user's own, given in this
    chat on this computer: one a file brought would run its tools with no card, so it is never read
    (_grants counts them, for the import's report)."""
    data = _dict(value)
    if data is None:
        return None
    enabled = data.get("enabled")
    out: dict[str, Any] = {
        "enabled": sorted({k for k in enabled if isinstance(k, str)}) if isinstance(enabled, list) else []
    }
    if data.get("require_call") is True:
        out["require_call"] = True
    return out


def _grants(value: object) -> int:
    """How many "always allow" grants the file's `tools` carried (none of them imported): the tools
    named, or 1 for a value of another shape that is not empty (it meant to grant something)."""
    always = (_dict(value) or {}).get("always")
    if isinstance(always, list):
        return len({repr(k) for k in always})
    return 1 if always else 0


def _one_branch(doc: dict[str, Any], label: str) -> PlannedChat:
    """An older export: the shown branch only, in OpenAI's shape."""
    try:
        created = datetime.strptime(_text(doc.get("created_at")), "%Y-%m-%dT%H:%M:%S%z").timestamp()
    except ValueError:
        created = time.time()
    messages: list[PlannedMessage] = []
    for i, item in enumerate(doc["messages"]):
        role = item.get("role") if isinstance(item, dict) else None
        if role == "tool" and messages and messages[-1].role == "assistant":
            meta = _dict(item.get("meta")) or {}
            content = _text(item.get("content"))
            messages[-1].tool_messages.append(
                {"call_id": _text(item.get("tool_call_id")), "state": "done", "content": content, "meta": meta}
            )
            continue
        if role not in ROLES or not isinstance(item.get("content"), str):
            raise ImportFailed(f"In {label}, message {i + 1} has no role or no text, so it cannot be read.")
        content = item["content"]
        if isinstance(item.get("thinking"), str) and item["thinking"]:
            content = f"{OPEN}\n{item['thinking']}\n{CLOSE}\n\n{content}"
        messages.append(
            PlannedMessage(
                parent=len(messages) - 1 if messages else None,
                role=role,
                content=content,
                created_at=created,
                metrics=_dict(item.get("metrics")),
                tool_calls=[_call(c) for c in item.get("tool_calls") or [] if isinstance(c, dict)],
                files=[f for f in item.get("attachments") or [] if isinstance(f, dict)],
            )
        )
    models = [m for m in doc.get("models") or [] if isinstance(m, str)]
    params, reset = chat_settings(doc.get("params"))
    return PlannedChat(
        title=_text(doc.get("title")) or "Imported chat",
        created_at=created,
        updated_at=created,
        messages=messages,
        active=len(messages) - 1 if messages else None,
        model=models[-1] if models else None,
        system_prompt=_text(doc.get("system_prompt")),
        params=params,
        settings_reset=tuple(reset),
    )


def _call(entry: dict[str, Any]) -> dict[str, Any]:
    """A call in OpenAI's shape as Ember keeps one (an invalid call keeps its error)."""
    function = _dict(entry.get("function")) or {}
    raw = _text(function.get("arguments"))
    try:
        arguments = json.loads(raw)
    except ValueError:
        arguments = None
    out = {
        "id": _text(entry.get("id")),
        "name": _text(function.get("name")),
        "arguments": arguments if isinstance(arguments, dict) else {},
        "raw": raw,
    }
    if isinstance(entry.get("error"), str):
        out["error"] = entry["error"]
    return out
