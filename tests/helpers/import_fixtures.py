"""ChatGPT data exports (`conversations.json`) built in the shape real exports have (checked against
published exports and open-source converters): a root node without a message ("client-created-root"),
a hidden empty system node, an edited question as a sibling user branch, a regenerated answer as a
sibling assistant branch, an empty assistant node before the answer, a `multimodal_text` question with
an image asset pointer, Code Interpreter (`code` to recipient "python", then a `tool` node with
`execution_output`), browsing (`tether_browsing_display`, `tether_quote`), hidden `thoughts`,
custom instructions (`user_editable_context`, hidden), create_time floats or null."""

from __future__ import annotations

import itertools
from typing import Any

T0 = 1_700_000_000.0
_ids = itertools.count(1)


def _message(
    nid: str,
    role: str,
    content: dict[str, Any],
    created: float | None,
    *,
    name: str | None = None,
    recipient: str = "all",
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "id": nid,
        "author": {"role": role, "name": name, "metadata": {}},
        "create_time": created,
        "update_time": None,
        "content": content,
        "status": "finished_successfully",
        "end_turn": role == "assistant" or None,
        "weight": 1.0,
        "metadata": metadata or {},
        "recipient": recipient,
        "channel": None,
    }


def text(*parts: str) -> dict[str, Any]:
    return {"content_type": "text", "parts": list(parts)}


class Tree:
    """Builds one conversation's `mapping`: nodes added under a parent, children kept in order."""

    def __init__(self) -> None:
        self.mapping: dict[str, dict[str, Any]] = {
            "client-created-root": {"id": "client-created-root", "message": None, "parent": None, "children": []}
        }

    def add(self, parent: str, role: str, content: dict[str, Any], created: float | None, **kw: Any) -> str:
        nid = f"{role}-{next(_ids):04d}-aaaa-bbbb-cccc"
        self.mapping[nid] = {
            "id": nid,
            "message": _message(nid, role, content, created, **kw),
            "parent": parent,
            "children": [],
        }
        self.mapping[parent]["children"].append(nid)
        return nid

    def conversation(self, title: str, current: str, created: float | None, updated: float | None, **kw: Any) -> dict:
        return {
            "title": title,
            "create_time": created,
            "update_time": updated,
            "mapping": self.mapping,
            "moderation_results": [],
            "current_node": current,
            "plugin_ids": None,
            "conversation_id": f"conv-{next(_ids):04d}",
            "conversation_template_id": None,
            "gizmo_id": None,
            "gizmo_type": None,
            "is_archived": kw.get("is_archived", False),
            "is_starred": None,
            "safe_urls": [],
            "blocked_urls": [],
            "default_model_slug": kw.get("model", "gpt-4o"),
            "conversation_origin": None,
            "voice": None,
            "async_status": None,
            "disabled_tool_ids": [],
            "is_do_not_remember": False,
            "memory_scope": "global_enabled",
            "pinned_time": kw.get("pinned_time"),
            "id": f"conv-{next(_ids):04d}",
        }


HIDDEN = {"is_visually_hidden_from_conversation": True}
GPT = {"model_slug": "gpt-4o", "default_model_slug": "gpt-4o", "finish_details": {"type": "stop"}}


def photosynthesis() -> tuple[dict[str, Any], dict[str, str]]:
    """The rich conversation, and its node ids by name."""
    t = Tree()
    n: dict[str, str] = {}
    n["sys"] = t.add("client-created-root", "system", text(""), None, metadata=HIDDEN)
    n["u1"] = t.add(n["sys"], "user", text("Explain photosynthesis."), T0 + 10.5)
    n["a1"] = t.add(n["u1"], "assistant", text("Plants turn light into sugar."), T0 + 12.25, metadata=GPT)
    n["a1r"] = t.add(
        n["u1"], "assistant", text("Photosynthesis: light, water and CO2 become sugar."), T0 + 40.0, metadata=GPT
    )
    n["u1e"] = t.add(n["sys"], "user", text("Explain photosynthesis in simple words."), T0 + 60.0)
    n["empty"] = t.add(n["u1e"], "assistant", text(""), T0 + 61.0, metadata=GPT)
    n["thoughts"] = t.add(
        n["empty"],
        "assistant",
        {"content_type": "thoughts", "thoughts": [{"summary": "Simple words", "content": "Keep it short."}]},
        T0 + 61.5,
        metadata=GPT,
    )
    n["a2"] = t.add(n["thoughts"], "assistant", text("Plants eat sunlight and make food."), T0 + 62.0, metadata=GPT)
    image = {
        "content_type": "image_asset_pointer",
        "asset_pointer": "file-service://file-Abc123",
        "size_bytes": 48029,
        "width": 1024,
        "height": 768,
        "fovea": None,
        "metadata": {"dalle": None, "sanitized": True},
    }
    n["u3"] = t.add(
        n["a2"], "user", {"content_type": "multimodal_text", "parts": [image, "What is in this picture?"]}, T0 + 70.0
    )
    n["a3"] = t.add(n["u3"], "assistant", text("A green leaf."), T0 + 71.0, metadata=GPT)
    n["u4"] = t.add(n["a3"], "user", text("Compute 2**10"), T0 + 80.0)
    code = {"content_type": "code", "language": "unknown", "response_format_name": None, "text": "print(2**10)"}
    n["a4"] = t.add(n["u4"], "assistant", code, T0 + 81.0, recipient="python", metadata=GPT)
    n["t4"] = t.add(n["a4"], "tool", {"content_type": "execution_output", "text": "1024"}, T0 + 82.0, name="python")
    n["a5"] = t.add(n["t4"], "assistant", text("2**10 is 1024."), T0 + 83.0, metadata=GPT)
    n["u6"] = t.add(n["a5"], "user", text("Search the web for leaf colours"), T0 + 90.0)
    n["a6"] = t.add(
        n["u6"],
        "assistant",
        {"content_type": "code", "language": "unknown", "text": 'search("leaf colours")'},
        T0 + 91.0,
        recipient="browser",
        metadata=GPT,
    )
    browse = {
        "content_type": "tether_browsing_display",
        "result": "# 【0†Why leaves are green†example.org】\nChlorophyll reflects green light.",
        "summary": None,
        "assets": None,
        "tether_id": None,
    }
    n["t6"] = t.add(n["a6"], "tool", browse, T0 + 92.0, name="browser")
    quote = {
        "content_type": "tether_quote",
        "url": "https://example.org/leaves",
        "domain": "example.org",
        "text": "Chlorophyll absorbs red and blue light.",
        "title": "Why leaves are green",
        "tether_id": None,
    }
    n["t6q"] = t.add(n["t6"], "tool", quote, T0 + 93.0, name="browser")
    n["a7"] = t.add(n["t6q"], "assistant", text("Leaves look green because of chlorophyll."), T0 + 94.0, metadata=GPT)
    return t.conversation("Photosynthesis", n["a7"], T0, T0 + 95.0, pinned_time=T0 + 96.0), n


def briefly() -> dict[str, Any]:
    """An archived chat with custom instructions (hidden) and messages without a create_time."""
    t = Tree()
    ctx = {
        "content_type": "user_editable_context",
        "user_profile": "The user provided the following information about themselves: I garden.",
        "user_instructions": "The user provided the additional info about how they would like you to respond: "
        "Answer briefly.",
    }
    c = t.add("client-created-root", "user", ctx, None, metadata=HIDDEN)
    u = t.add(c, "user", text("Hi"), None)
    a = t.add(u, "assistant", text("Hello!"), None, metadata=GPT)
    return t.conversation("Brief chat", a, T0 + 1000.0, T0 + 1005.0, is_archived=True)


def many(count: int, turns: int = 2, words: int = 0) -> list[dict[str, Any]]:
    """`count` plain chats of `turns` question-answer pairs each (`words` more words of filler in each)."""
    out = []
    filler = " lorem ipsum dolor sit amet" * (words // 5)
    for i in range(count):
        t = Tree()
        parent = t.add("client-created-root", "system", text(""), None, metadata=HIDDEN)
        for j in range(turns):
            parent = t.add(parent, "user", text(f"Question {j} of chat {i}{filler}"), T0 + i * 100 + j * 2)
            parent = t.add(parent, "assistant", text(f"Answer {j} of chat {i}{filler}"), T0 + i * 100 + j * 2 + 1)
        out.append(t.conversation(f"Chat {i}", parent, T0 + i * 100, T0 + i * 100 + 50))
    return out


DALLE_ASSET = "file-Cat123"


def dalle() -> dict[str, Any]:
    """A DALL·E chat: the answer's call to `dalle.text2im` (a JSON prompt), the `tool` node authored
    dalle.text2im holding the generated image as an image asset pointer (its file is in
    `dalle-generations/` beside conversations.json), then the answer after it."""
    t = Tree()
    u = t.add("client-created-root", "user", text("Draw a cat."), T0 + 1.0)
    call = t.add(u, "assistant", text('{"prompt": "a cat", "size": "1024x1024"}'), T0 + 2.0,
                 recipient="dalle.text2im", metadata=GPT)  # fmt: skip
    image = {
        "content_type": "image_asset_pointer",
        "asset_pointer": f"file-service://{DALLE_ASSET}",
        "size_bytes": 100,
        "width": 1,
        "height": 1,
        "fovea": 512,
        "metadata": {"dalle": {"gen_id": "g1", "prompt": "a cat", "seed": 7}, "sanitized": False},
    }
    img = t.add(call, "tool", {"content_type": "multimodal_text", "parts": [image]}, T0 + 3.0, name="dalle.text2im")
    a = t.add(img, "assistant", text("Here is your cat."), T0 + 4.0, metadata=GPT)
    return t.conversation("A cat", a, T0, T0 + 5.0)
