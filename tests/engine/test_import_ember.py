"""Ember's own JSON export is lossless: every branch, the shown branch, params, system prompt, model,
metrics, tool calls and their results, attachments (their content), the chat's comparisons, pins and
archive. Export → import (a second, real database) → export gives the same bytes (the file holds no
database ids: messages refer to each other by their place in `tree`). An older export (one branch in
`messages`) imports too."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from ember_chat.engine.attachments import read_attachment_bytes
from ember_chat.engine.core.tools import ChatTools, InvalidCall, ToolCall, ToolResult
from ember_chat.engine.storage.export import chat_as_json, chat_export_json
from ember_chat.engine.storage.importing import ImportFailed, import_chats
from tests.helpers.attachment_files import image_bytes
from tests.helpers.chatgpt_export import rows, write
from tests.helpers.ember_export import Place, write_text
from tests.helpers.import_fixtures import photosynthesis

METRICS = {"model": "tiny.gguf", "ttft_s": 0.25, "decode_tokens_per_s": 31.5, "output_tokens": 12,
           "stop_reason": "stop", "seed": 7}  # fmt: skip


def rich_chat(p: Place) -> int:
    """Branches (a regenerated answer, an edited question), the shown branch not the newest, tool calls
    (a result, an invalid call, one that never ran), text and image attachments, a comparison with a
    kept answer, chat tools, pinned."""
    s = p.store
    conv = s.create_conversation("Rich “chat”", model="tiny.gguf", system_prompt="Be kind.",
                                 params={"temperature": 0.2, "max_tokens": 300, "seed": 7})  # fmt: skip
    q1 = s.add_message(conv.id, "user", "What is 2+3? ✓")
    note = p.atts.save(read_attachment_bytes("note.txt", "remember the milk ✓".encode()))
    shot = p.atts.save(read_attachment_bytes("shot.png", image_bytes("PNG")))
    p.atts.link(q1.id, [note.id, shot.id])
    a1 = s.add_message(conv.id, "assistant", "<think>\nadd them\n</think>\n\nLet me call.", q1.id, metrics=METRICS)
    add = ToolCall("call00001", "calculator", {"expression": "2+3"}, '{"expression": "2+3"}')
    bad = InvalidCall(ToolCall("call00002", "calculator", {}, "{oops"), "expression is required")
    never = ToolCall("call00003", "search", {"q": "x"}, '{"q": "x"}')
    s.set_tool_calls(a1.id, [add, bad, never])
    s.set_tool_result(a1.id, ToolResult(add.id, add.name, "5", duration_ms=1.5), "Built-in", "once")
    s.set_tool_result(a1.id, bad.result(), None, None)
    s.set_tool_state(a1.id, never.id, never.name, "running", "Built-in", "always")
    a1b = s.add_message(conv.id, "assistant", "It is 5.", a1.id, metrics=METRICS)
    regen = s.add_message(conv.id, "assistant", "Five.", q1.id, metrics={**METRICS, "model": "other.gguf"})
    q2 = s.add_message(conv.id, "user", "And 3+4?", a1b.id)
    s.add_message(conv.id, "assistant", "Seven", q2.id, complete=False)
    edited = s.add_message(conv.id, "user", "What is 2+3, exactly?")  # an edited first question
    s.add_message(conv.id, "assistant", "Exactly 5.", edited.id, metrics=METRICS)
    comparison = s.comparisons.create(conv.id, q1.id, ["tiny.gguf", "other.gguf"], {"seed": 7, "temperature": 0})
    s.comparisons.set_answer(comparison.answers[0].id, "5", METRICS)
    s.comparisons.set_answer(comparison.answers[1].id, "", None, "The model could not be loaded.")
    s.comparisons.keep(comparison.answers[0].id, regen.id)
    s.set_chat_tools(conv.id, ChatTools(frozenset({"Built-in/calculator"}), frozenset(), True))
    s.update_conversation(conv.id, active_leaf=a1b.id)  # the shown branch is not the newest
    s.organise.set_pinned([conv.id], True)
    return conv.id


def test_export_import_export_is_identical(places: tuple[Place, Place], tmp_path: Path) -> None:
    a, b = places
    cid = rich_chat(a)
    first = a.export()
    report = b.import_file(write_text(tmp_path / "export.json", first))
    assert report.format == "ember" and report.chats == 1 and report.messages == 8 and report.skipped == ()
    second = b.export()
    assert second == first
    # and what came in is what went out, read through the store
    (conv,) = b.store.conversations()
    original = a.store.conversation(cid)
    for field in ("title", "model", "system_prompt", "params", "created_at", "updated_at", "pinned"):
        assert getattr(conv, field) == getattr(original, field), field
    thread = b.store.thread(conv.id)
    assert [m.content for m in thread] == [m.content for m in a.store.thread(cid)]
    assert [m.content for m in b.store.messages(conv.id)] == [m.content for m in a.store.messages(cid)]
    assert (
        thread[1].tool_results[2].state == "interrupted" and thread[1].tool_calls[1].error == "expression is required"
    )
    assert b.store.chat_tools(conv.id) == a.store.chat_tools(cid)
    (comparison,) = b.store.comparisons.of_conversation(conv.id)
    assert comparison.answers[1].error == "The model could not be loaded."
    assert b.store.message(comparison.answers[0].kept_message_id).content == "Five."
    files = b.atts.of_message(thread[0].id)
    assert [f.name for f in files] == ["note.txt", "shot.png"]
    assert b.atts.text(files[0]) == "remember the milk ✓" and b.atts.image(files[1]) == image_bytes("PNG")
    assert b.store.search("milk") == [] and b.atts.search([files[0].id], "milk")  # its passages are indexed


def test_the_file_keeps_the_fields_older_readers_use(places: tuple[Place, Place]) -> None:
    a, _ = places
    cid = rich_chat(a)
    (data,) = json.loads(a.export())
    old = json.loads(chat_as_json(a.store.conversation(cid), a.store.thread(cid), a.atts.export_entries(
        m.id for m in a.store.thread(cid))))  # fmt: skip
    for key in ("title", "models", "created_at", "system_prompt", "params", "messages"):
        assert data[key] == old[key], key
    assert data["messages"][0]["attachments"][1]["data_base64"] == base64.b64encode(image_bytes("PNG")).decode()


def test_importing_twice_gives_two_copies_and_many_chats_in_one_file(
    places: tuple[Place, Place], tmp_path: Path
) -> None:
    a, b = places
    rich_chat(a)
    conv, _ = photosynthesis()
    import_chats(a.store, write(tmp_path / "conversations.json", [conv]))
    path = write_text(tmp_path / "all.json", a.export())
    assert b.import_file(path).chats == 2
    assert b.import_file(path).chats == 2
    assert rows(b.store.path)["conversations"] == 4
    assert rows(b.store.path)["attachments"] == 2  # the same files are stored once


def test_an_older_export_with_one_branch_imports(places: tuple[Place, Place], tmp_path: Path) -> None:
    a, b = places
    cid = rich_chat(a)
    thread = a.store.thread(cid)
    old = chat_as_json(a.store.conversation(cid), thread, a.atts.export_entries(m.id for m in thread))
    report = b.import_file(write_text(tmp_path / "old.json", old))
    assert report.format == "ember" and report.chats == 1
    (conv,) = b.store.conversations()
    got = b.store.thread(conv.id)
    assert [m.content for m in got] == [m.content for m in thread]
    assert got[1].tool_calls[0].name == "calculator" and got[1].tool_results[0].content == "5"
    assert got[1].metrics == METRICS and conv.params == a.store.conversation(cid).params
    assert [f.name for f in b.atts.of_message(got[0].id)] == ["note.txt", "shot.png"]


def test_without_an_attachment_store_the_files_are_named_as_skipped(
    places: tuple[Place, Place], tmp_path: Path
) -> None:
    a, b = places
    rich_chat(a)
    report = import_chats(b.store, write_text(tmp_path / "e.json", a.export()))
    assert report.chats == 1 and any("2 attached files" in s for s in report.skipped)
    assert rows(b.store.path)["attachments"] == 0


def test_a_damaged_attachment_entry_writes_nothing(places: tuple[Place, Place], tmp_path: Path) -> None:
    a, b = places
    rich_chat(a)
    (data,) = json.loads(a.export())
    data["files"][1]["data_base64"] = "***not base64***"
    before = set(b.paths.data_dir.rglob("*"))
    with pytest.raises(ImportFailed) as info:
        b.import_file(write_text(tmp_path / "e.json", json.dumps(data)))
    assert "shot.png" in str(info.value)
    assert rows(b.store.path) == dict.fromkeys(rows(b.store.path), 0)
    assert {p for p in b.paths.data_dir.rglob("*") if p.is_file()} <= {p for p in before if p.is_file()}


def test_one_chat_exports_as_an_object_that_round_trips(places: tuple[Place, Place], tmp_path: Path) -> None:
    a, b = places
    cid = rich_chat(a)
    one = chat_export_json(a.store, cid, a.atts.export_entries)
    assert json.loads(one) == json.loads(a.export())[0]  # the same document, not in a list
    assert b.import_file(write_text(tmp_path / "one.json", one)).chats == 1
    (conv,) = b.store.conversations()
    assert chat_export_json(b.store, conv.id, b.atts.export_entries) == one
