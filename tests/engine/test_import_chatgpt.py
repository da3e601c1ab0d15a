"""Importing ChatGPT's data export (`conversations.json`) into a real chat database: the mapping tree
becomes Ember branches (edited questions and regenerated answers), current_node the shown branch,
hidden/system/empty nodes are left out, Code Interpreter and browsing become tool calls with their
results, timestamps are kept; progress per chat, and a cancel imports nothing."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.import_chatgpt import IMAGE_LINE
from ember_chat.engine.storage.importing import ImportCancelled, ImportFailed, import_chats
from tests.helpers.chatgpt_export import rows, write
from tests.helpers.import_fixtures import T0, briefly, many, photosynthesis


@pytest.fixture
def store(tmp_path: Path) -> ConversationStore:
    s = ConversationStore(tmp_path / "chats.sqlite3")
    yield s
    s.close()


def test_the_tree_becomes_branches_with_the_current_node_shown(store: ConversationStore, tmp_path: Path) -> None:
    conv_data, _ = photosynthesis()
    report = import_chats(store, write(tmp_path / "conversations.json", [conv_data, briefly()]))
    assert report.format == "chatgpt" and report.chats == 2
    assert report.messages == 13 + 2
    (brief,) = store.conversations(archived=True)  # ChatGPT's archived chat stays archived
    (conv,) = store.conversations()
    assert conv.title == "Photosynthesis" and conv.model == "gpt-4o"
    assert conv.created_at == T0 and conv.updated_at == T0 + 95.0 and conv.pinned
    thread, branches = store.thread_with_branches(conv.id)
    assert [m.role for m in thread] == ["user", "assistant", "user", "assistant", "user", "assistant", "assistant",
                                        "user", "assistant", "assistant"]  # fmt: skip
    assert thread[0].content == "Explain photosynthesis in simple words." and thread[0].parent_id is None
    assert branches[thread[0].id] == (2, 2)  # the edited question: the original is its sibling
    assert thread[1].content == "Plants eat sunlight and make food."  # the empty node and thoughts left out
    assert thread[0].created_at == T0 + 60.0 and thread[1].created_at == T0 + 62.0
    original = store.siblings(thread[0].id)[0]
    assert original.content == "Explain photosynthesis." and original.created_at == T0 + 10.5
    answers = store.thread_with_branches(conv.id, store.newest_leaf(original.id))
    regenerated = answers[0][-1]
    assert regenerated.content.startswith("Photosynthesis: light") and answers[1][regenerated.id] == (2, 2)
    # the picture's question keeps its words and says where the image was
    assert "What is in this picture?" in thread[2].content and "image" in thread[2].content.lower()
    assert any("image" in s for s in report.skipped)
    # Code Interpreter: a call to "python" with its result, then the answer below it
    code = thread[5]
    (call,) = code.tool_calls
    assert call.name == "python" and call.arguments == {"code": "print(2**10)"}
    (result,) = code.tool_results
    assert result.content == "1024" and result.state == "done" and result.source == "ChatGPT"
    assert thread[6].content == "2**10 is 1024." and thread[6].parent_id == code.id
    # browsing: the display and the quote are the call's result
    (browse,) = thread[8].tool_results
    assert "Chlorophyll reflects green light." in browse.content and "https://example.org/leaves" in browse.content
    assert thread[9].content == "Leaves look green because of chlorophyll."
    assert conv.active_leaf == thread[9].id
    # custom instructions become the chat's system prompt; null times fall back to the chat's
    assert "Answer briefly." in brief.system_prompt and "I garden." in brief.system_prompt
    assert brief.archived_at is not None
    assert [m.created_at for m in store.thread(brief.id)] == [T0 + 1000.0, T0 + 1000.0]
    assert [m.content for m in store.thread(brief.id)] == ["Hi", "Hello!"]
    assert store.search("chlorophyll")  # searchable at once


def test_a_single_conversation_object_and_a_wrapped_list_are_read(store: ConversationStore, tmp_path: Path) -> None:
    assert import_chats(store, write(tmp_path / "one.json", briefly())).chats == 1
    assert import_chats(store, write(tmp_path / "wrapped.json", {"conversations": many(2)})).chats == 2
    assert rows(store.path)["conversations"] == 3


def test_progress_per_chat(store: ConversationStore, tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []
    report = import_chats(store, write(tmp_path / "c.json", many(25)), progress=lambda d, t: seen.append((d, t)))
    assert report.chats == 25 and report.messages == 100
    assert seen[0] == (0, 25) and seen[-1] == (25, 25)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and len(seen) >= 26


def test_cancel_imports_nothing(store: ConversationStore, tmp_path: Path) -> None:
    cancel = threading.Event()

    def progress(done: int, total: int) -> None:
        if done == 10:  # ten chats already written in the transaction
            cancel.set()

    with pytest.raises(ImportCancelled) as info:
        import_chats(store, write(tmp_path / "c.json", many(40)), progress=progress, cancel=cancel)
    assert isinstance(info.value, ImportFailed) and "nothing was imported" in str(info.value)
    assert rows(store.path) == dict.fromkeys(rows(store.path), 0)
    assert store.conversations() == []
    store.create_conversation("still usable")  # the store works after the rollback
    assert rows(store.path)["conversations"] == 1


def test_a_thousand_chats_import_quickly(store: ConversationStore, tmp_path: Path) -> None:
    report = import_chats(store, write(tmp_path / "big.json", many(1000, turns=3)))
    assert report.chats == 1000 and rows(store.path)["messages"] == 6000


def test_images_beside_conversations_json_are_attached(tmp_path: Path) -> None:
    """An unzipped export keeps uploads beside conversations.json as file-<id>-<name>: found by the
    asset pointer's id, they are attached to their message (read like any attached image)."""
    from ember_chat.engine.attachments import AttachmentStore
    from ember_chat.engine.attachments.imported import AttachmentImporter
    from ember_chat.engine.storage.paths import AppPaths
    from tests.helpers.attachment_files import image_bytes

    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    store = ConversationStore(paths.database)
    atts = AttachmentStore(paths, store)
    export = tmp_path / "export"
    export.mkdir()
    (export / "file-Abc123-leaf.png").write_bytes(image_bytes("PNG"))
    (export / "file-Other9-unrelated.png").write_bytes(image_bytes("PNG", (8, 8)))
    conv, _ = photosynthesis()
    try:
        report = import_chats(store, write(export / "conversations.json", [conv]), attachments=AttachmentImporter(atts))
        assert report.skipped == ()
        thread = store.thread(store.conversations()[0].id)
        assert thread[2].content == "What is in this picture?"
        (leaf,) = atts.of_message(thread[2].id)
        assert leaf.name == "leaf.png" and leaf.is_image and atts.image(leaf) == image_bytes("PNG")
        assert rows(store.path)["attachments"] == 1
    finally:
        store.close()


def test_dalle_images_in_dalle_generations_are_attached_to_the_calling_answer(tmp_path: Path) -> None:
    """A DALL·E image is on the tool node under the call (its file in dalle-generations/): it is attached
    to the answer that called dalle.text2im, and the report does not say it was left out."""
    from ember_chat.engine.attachments import AttachmentStore
    from ember_chat.engine.attachments.imported import AttachmentImporter
    from ember_chat.engine.storage.paths import AppPaths
    from tests.helpers.attachment_files import image_bytes
    from tests.helpers.import_fixtures import DALLE_ASSET, dalle

    paths = AppPaths(tmp_path / "data", tmp_path / "config")
    store = ConversationStore(paths.database)
    atts = AttachmentStore(paths, store)
    export = tmp_path / "export"
    (export / "dalle-generations").mkdir(parents=True)
    (export / "dalle-generations" / f"{DALLE_ASSET}-0f1e2d3c.png").write_bytes(image_bytes("PNG"))
    try:
        source = write(export / "conversations.json", [dalle()])
        report = import_chats(store, source, attachments=AttachmentImporter(atts))
        assert report.skipped == ()
        user, call, answer = store.thread(store.conversations()[0].id)
        assert call.tool_calls[0].name == "dalle.text2im" and answer.content == "Here is your cat."
        (cat,) = atts.of_message(call.id)
        assert cat.is_image and atts.image(cat) == image_bytes("PNG")
        assert atts.of_message(user.id) == [] and atts.of_message(answer.id) == []
    finally:
        store.close()


def test_dalle_images_without_their_files_are_counted_and_named(store: ConversationStore, tmp_path: Path) -> None:
    from tests.helpers.import_fixtures import dalle

    report = import_chats(store, write(tmp_path / "conversations.json", [dalle()]))
    assert report.skipped and "1 image " in report.skipped[0]
    (_, call, _) = store.thread(store.conversations()[0].id)
    (result,) = store.tools.of_messages([call.id])[call.id]
    assert result.content == IMAGE_LINE
