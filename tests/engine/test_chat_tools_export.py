"""A chat's tool choices survive File ▸ Export as JSON and its import: the tools on, "call a tool first"
and an MCP server's "All" switch (every tool of that server on, those it lists later too), written
to a real file and read into a second, real database. The export once dropped the switch, so the
imported chat had none of that server's tools on."""

from __future__ import annotations

import json
from pathlib import Path

from ember_chat.engine.core.tools import ChatTools
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.export import chat_export_json, chats_as_json
from ember_chat.engine.storage.importing import import_chats

TOOLS = ChatTools(
    enabled=frozenset({"Built-in/calculator"}),
    require_call=True,
    servers=frozenset({"Weather", "Built-in"}),
)


def a_chat_with_tools(store: ConversationStore) -> int:
    conv = store.create_conversation("Forecast", model="tiny.gguf")
    question = store.add_message(conv.id, "user", "Will it rain tomorrow?")
    store.add_message(conv.id, "assistant", "Let me look.", question.id)
    store.set_chat_tools(conv.id, TOOLS)
    return conv.id


def test_a_servers_all_switch_is_exported_and_imported_back(tmp_path: Path) -> None:
    source = ConversationStore(tmp_path / "a.db")
    target = ConversationStore(tmp_path / "b.db")
    try:
        cid = a_chat_with_tools(source)
        path = tmp_path / "Forecast.json"
        path.write_text(chat_export_json(source, cid), encoding="utf-8")  # File ▸ Export chat as JSON
        assert json.loads(path.read_text(encoding="utf-8"))["tools"]["servers"] == ["Built-in", "Weather"]

        report = import_chats(target, path)
        assert report.chats == 1
        (conv,) = target.conversations()
        assert target.chat_tools(conv.id) == TOOLS  # consent ("always") stays out: it was never given
        assert chats_as_json(target, [conv.id]) == chats_as_json(source, [cid])
    finally:
        source.close()
        target.close()


def test_a_chat_without_the_switch_exports_as_before(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path / "a.db")
    try:
        cid = a_chat_with_tools(store)
        store.set_chat_tools(cid, ChatTools(frozenset({"Built-in/calculator"})))
        (data,) = json.loads(chats_as_json(store, [cid]))
        assert data["tools"] == {"enabled": ["Built-in/calculator"], "require_call": False}
    finally:
        store.close()
