"""What the chat store gives back (conversations, messages, search hits, what a restore kept) and how a
row becomes one. A damaged JSON value costs only itself, never the reading of its chat."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any, NamedTuple

from ember_chat.engine.core.tools import InvalidCall, ToolCall
from ember_chat.engine.storage.titles import clean_title
from ember_chat.engine.storage.tool_records import ToolMessage, calls_from_json


@dataclass(frozen=True)
class Conversation:
    id: int
    title: str
    model: str | None
    system_prompt: str
    params: dict[str, Any]
    created_at: float
    updated_at: float
    active_leaf: int | None
    folder_id: int | None = None  # organise.py: the folder it is kept in (None: no folder)
    pinned: bool = False
    archived_at: float | None = None  # when it was archived (None: not archived)
    deleted_at: float | None = None  # in the Trash since (None: not in the Trash)


class ChatRow(NamedTuple):
    """What the chat list shows of a chat: a light read (no params JSON, no system prompt) that 5,000
    chats take a few milliseconds to make (`ConversationStore.chat_rows`)."""

    id: int
    title: str
    folder_id: int | None
    pinned: bool
    archived_at: float | None
    updated_at: float


@dataclass(frozen=True)
class Message:
    id: int
    conversation_id: int
    parent_id: int | None
    role: str
    content: str
    metrics: dict[str, Any] | None
    complete: bool
    created_at: float
    tool_calls: tuple[ToolCall | InvalidCall, ...] = ()  # an answer's calls, as the model wrote them
    tool_results: tuple[ToolMessage, ...] = ()  # the tool messages answering them, in the calls' order


class Restored(NamedTuple):
    """What `ConversationStore.restore` kept."""

    chats: int
    messages: int
    repaired_values: int  # bad values left empty (or set to now) in rows that were kept
    left_out: int  # rows that did not fit


MATCH_START, MATCH_END = "\x02", "\x03"  # around the matched words in a search hit's snippet


@dataclass(frozen=True)
class SearchHit:
    conversation_id: int
    conversation_title: str
    message_id: int
    snippet: str  # the words matched between MATCH_START and MATCH_END (characters no text has)

    def parts(self) -> list[tuple[str, bool]]:
        """The snippet as (text, matched) pieces, in order."""
        out: list[tuple[str, bool]] = []
        for i, piece in enumerate(self.snippet.split(MATCH_START)):
            if i == 0:
                out.append((piece, False))
                continue
            matched, _, rest = piece.partition(MATCH_END)
            out += [(matched, True), (rest, False)]
        return [(text, matched) for text, matched in out if text]

    @property
    def text(self) -> str:
        """The snippet as plain text."""
        return "".join(text for text, _ in self.parts())


def conversation_of(row: sqlite3.Row) -> Conversation:
    return Conversation(
        id=row["id"],
        title=clean_title(row["title"]),  # (one stored before titles were kept clean)
        model=row["model"],
        system_prompt=row["system_prompt"],
        params=json_object(row["params"]) or {},
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        active_leaf=row["active_leaf"],
        folder_id=row["folder_id"],
        pinned=bool(row["pinned"]),
        archived_at=row["archived_at"],
        deleted_at=row["deleted_at"],
    )


def message_of(row: sqlite3.Row, results: list[ToolMessage] | None = None) -> Message:
    """`results`: the tool messages answering its calls (any order: they are put in the calls' order)."""
    calls = calls_from_json(row["tool_calls"])
    ordered: tuple[ToolMessage, ...] = ()
    if results:
        place = {(c.call if isinstance(c, InvalidCall) else c).id: i for i, c in enumerate(calls)}
        ordered = tuple(sorted(results, key=lambda t: place.get(t.call_id, len(place))))
    return Message(
        id=row["id"],
        conversation_id=row["conversation_id"],
        parent_id=row["parent_id"],
        role=row["role"],
        content=row["content"],
        metrics=json_object(row["metrics"]),
        complete=bool(row["complete"]),
        created_at=row["created_at"],
        tool_calls=calls,
        tool_results=ordered,
    )


def json_object(text: object) -> dict[str, Any] | None:
    """The JSON object stored as `text`; None when there is none or it is not one (a damaged value
    costs only itself, never the reading of its chat)."""
    if not isinstance(text, str) or not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def json_text(value: object) -> str | None:
    """`value` if it is the JSON text of an object, else None."""
    return value if json_object(value) is not None else None


def text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def number_or_none(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:  # (NaN)
        return None
    return float(value)
