"""A chat's tool choices through File ▸ Export as JSON and its import, written to a real file and read into
a second, real database: the tools on and "call a tool first" come back; an MCP server's "All" switch
(every tool that server lists, later ones too) is not written, as an import would not take it from a file
(tests/app/test_tools_new_chats: a file turns on only the tools it names, each asking first)."""

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


def test_the_tools_on_come_back_and_a_servers_all_switch_stays_on_this_computer(tmp_path: Path) -> None:
    source = ConversationStore(tmp_path / "a.db")
    target = ConversationStore(tmp_path / "b.db")
    try:
        conv = source.create_conversation("Forecast", model="tiny.gguf")
        question = source.add_message(conv.id, "user", "Will it rain tomorrow?")
        source.add_message(conv.id, "assistant", "Let me look.", question.id)
        source.set_chat_tools(conv.id, TOOLS)
        path = tmp_path / "Forecast.json"
        path.write_text(chat_export_json(source, conv.id), encoding="utf-8")  # File ▸ Export chat as JSON
        assert json.loads(path.read_text(encoding="utf-8"))["tools"] == {
            "enabled": ["Built-in/calculator"],
            "require_call": True,
        }
        assert import_chats(target, path).chats == 1
        (imported,) = target.conversations()
        assert target.chat_tools(imported.id) == ChatTools(frozenset({"Built-in/calculator"}), require_call=True)
        assert chats_as_json(target, [imported.id]) == chats_as_json(source, [conv.id])
    finally:
        source.close()
        target.close()
