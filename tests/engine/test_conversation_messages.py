"""engine/conversation/messages.py: a stored thread as the engine is given it, from real SQLite files —
the one function the window's send, a comparison and the attachment chips' prediction share."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from ember_chat.engine.attachments import AttachmentStore
from ember_chat.engine.attachments.extract import read_attachment_bytes
from ember_chat.engine.conversation.messages import held_bytes, thread_messages
from ember_chat.engine.core.tools import ToolCall, ToolResult
from ember_chat.engine.errors import AttachmentError
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.paths import AppPaths


@pytest.fixture
def stores(tmp_path: Path):
    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    store = ConversationStore(paths.database)
    yield store, AttachmentStore(paths, store)
    store.close()


def _png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (4, 4), "red").save(out, "PNG")
    return out.getvalue()


def test_files_tool_calls_system_prompt_and_a_resumed_answer_in_order(stores) -> None:
    store, atts = stores
    conv = store.create_conversation("Trip")
    note = atts.save(read_attachment_bytes("plan.txt", b"Day 1: Lisbon. Day 2: Porto."))
    photo = atts.save(read_attachment_bytes("view.png", _png()))
    question = store.add_message(conv.id, "user", "What is the plan?")
    atts.link(question.id, [note.id, photo.id])
    answer = store.add_message(conv.id, "assistant", "Let me check the time.", parent_id=question.id)
    call = ToolCall("call00001", "get_time", {"zone": "Europe/Lisbon"}, '{"zone": "Europe/Lisbon"}')
    store.set_tool_calls(answer.id, [call])
    store.set_tool_result(answer.id, ToolResult(call.id, "get_time", "09:00"), source="Built-in")
    again = store.add_message(conv.id, "user", "And then?", parent_id=answer.id)
    cut = store.add_message(conv.id, "assistant", " Porto is", parent_id=again.id, metrics={"held_utf8": "e6"})

    thread = store.thread(conv.id, again.id)
    history = thread_messages(thread, atts, "Be brief.", resume=cut)

    assert [m.role for m in history] == ["system", "user", "assistant", "tool", "user", "assistant"]
    assert history[0].content == "Be brief."
    first = history[1]
    assert [a.name for a in first.attachments] == ["plan.txt"] and [i.name for i in first.images] == ["view.png"]
    assert history[2].tool_calls == (call,) and history[3].content == "09:00"
    assert history[3].tool_call_id == "call00001"
    assert history[5].content == " Porto is" and history[5].held_bytes == b"\xe6"


def test_no_attachment_store_no_system_prompt_is_the_plain_thread(stores) -> None:
    store, _atts = stores
    conv = store.create_conversation("Plain")
    q = store.add_message(conv.id, "user", "Hi")
    store.add_message(conv.id, "assistant", "Hello", parent_id=q.id)
    history = thread_messages(store.thread(conv.id), None, "   ")
    assert [(m.role, m.content) for m in history] == [("user", "Hi"), ("assistant", "Hello")]


def test_an_image_whose_file_is_gone_says_so_instead_of_dropping_it(stores) -> None:
    store, atts = stores
    conv = store.create_conversation("Lost")
    photo = atts.save(read_attachment_bytes("view.png", _png()))
    q = store.add_message(conv.id, "user", "Look")
    atts.link(q.id, [photo.id])
    atts.blob_path(photo.sha256).unlink()
    with pytest.raises(AttachmentError):
        thread_messages(store.thread(conv.id), atts)


@pytest.mark.parametrize("value", [None, "", "zz", "41", "e6e6e6e6", 7])
def test_held_bytes_from_a_hostile_metrics_value_is_empty(stores, value) -> None:
    store, _atts = stores
    conv = store.create_conversation("Bytes")
    m = store.add_message(conv.id, "assistant", "x", metrics={"held_utf8": value})
    assert held_bytes(m) == b""
