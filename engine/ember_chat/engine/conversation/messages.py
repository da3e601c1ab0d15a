"""A stored thread turned into the messages a model is given: each user message with its files
(text as references the engine expands whole or by retrieval, images as ImageInput), each answer's
tool calls followed by their results, the system prompt first, and an answer being continued last
(with the first bytes of a character it stopped inside). One function, so the window's send, a
comparison, the attachment chips' prediction and the CLI cannot disagree on what a chat says."""

from __future__ import annotations

from collections.abc import Sequence

from ember_chat.engine.attachments import AttachmentStore
from ember_chat.engine.core.messages import ChatMessage, ImageInput, is_unfinished_utf8
from ember_chat.engine.core.tools import InvalidCall, ToolResult
from ember_chat.engine.errors import EmberError
from ember_chat.engine.storage.conversations import Message
from ember_chat.engine.storage.tool_records import NOT_RUN


def held_bytes(answer: Message) -> bytes:
    """The first bytes of the character an answer stopped inside (kept with its metrics: it is not in
    its text), or b"" (none, or a value that is not such bytes)."""
    value = (answer.metrics or {}).get("held_utf8")
    try:
        held = bytes.fromhex(value) if isinstance(value, str) else b""
    except ValueError:
        return b""
    return held if is_unfinished_utf8(held) else b""


def with_attachments(thread: Sequence[Message], attachments: AttachmentStore | None) -> list[ChatMessage]:
    """The thread's messages, one each: a user message with its text files as references and its images
    as ImageInput. An image whose file is gone raises AttachmentError (nothing is dropped silently)."""
    if attachments is None:
        return [ChatMessage(m.role, m.content) for m in thread]
    stored = attachments.of_messages([m.id for m in thread if m.role == "user"])
    out = []
    for m in thread:
        mine = stored.get(m.id, [])
        images = tuple(ImageInput(a.sha256, attachments.image(a), a.name) for a in mine if a.is_image)
        refs = tuple(attachments.ref(a) for a in mine if not a.is_image)
        out.append(ChatMessage(m.role, m.content, images=images, attachments=refs))
    return out


def thread_messages(
    thread: Sequence[Message],
    attachments: AttachmentStore | None,
    system_prompt: str = "",
    resume: Message | None = None,
) -> list[ChatMessage]:
    """What the engine is given for `thread` (the stored messages, oldest first): files, tool calls and
    their results, `system_prompt` first when it has text, and `resume` (an answer being continued)
    last."""
    history = with_tool_messages(thread, with_attachments(thread, attachments))
    if system_prompt.strip():
        history.insert(0, ChatMessage("system", system_prompt))
    if resume is not None:  # continued from a character it cut, if any
        history.append(ChatMessage("assistant", resume.content, held_bytes=held_bytes(resume)))
    return history


def with_tool_messages(thread: Sequence[Message], history: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The thread as the engine gets it, tools included: `history` is the thread's messages as
    ChatMessages (one each, in order: attachments already in them); an assistant message with calls
    carries them (`tool_calls`, an invalid one as the model wrote it) and is followed by one `tool`
    message per call: its result, its error, or that it was not run."""
    if len(thread) != len(history):
        raise EmberError("The chat's messages and the history made from them differ; send the message again.")
    out: list[ChatMessage] = []
    for m, h in zip(thread, history, strict=True):
        if m.role != "assistant" or not m.tool_calls:
            out.append(h)
            continue
        calls = tuple(c.call if isinstance(c, InvalidCall) else c for c in m.tool_calls)
        out.append(ChatMessage("assistant", h.content, tool_calls=calls))
        results = {t.call_id: t for t in m.tool_results}
        for stored, call in zip(m.tool_calls, calls, strict=True):
            kept = results.get(call.id)
            if kept is not None:
                result = kept.result()
            elif isinstance(stored, InvalidCall):
                result = stored.result()
            else:
                result = ToolResult(call.id, call.name, NOT_RUN, is_error=True)
            out.append(ChatMessage.from_tool_result(result))
    return out
