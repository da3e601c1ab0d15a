"""ChatGPT's data export (`conversations.json`: a list of conversations, each a `mapping` tree of nodes
with `parent`/`children` and a `current_node`) read into planned Ember chats.

- The tree's structure comes from the nodes' `parent` links; siblings keep the order of their parent's
  `children` (an edited question and a regenerated answer become Ember branches, oldest first).
- Left out, their children hung on the nearest message kept above: the root node without a message,
  system messages, nodes marked `is_visually_hidden_from_conversation`, thinking (`thoughts`,
  `reasoning_recap`), memory context, and empty placeholder answers. Custom instructions
  (`user_editable_context`, or a system message with `is_user_system_message`) become the chat's system
  prompt.
- An assistant node addressed to a tool (`recipient` "python", "browser", "dalle.text2im", …; content
  `code` or text) becomes an answer with one tool call; the `tool` nodes under it (`execution_output`,
  `tether_browsing_display`, `tether_quote`, …) its result; the answer after them hangs below it, as
  Ember keeps a continuation after tools.
- Images (`multimodal_text` parts with an `image_asset_pointer`) are not in conversations.json. An
  unzipped export keeps them beside it (`file-<id>-<name>`, `file_<hex>-…`, in sub-folders such as
  `dalle-generations/`): one found by the pointer's id is attached to its message (`assets`, when the
  import keeps attachments; an image on a tool's node, as DALL·E's, to the answer that called the
  tool); otherwise a line in the message says one was there, and the report counts
  them. Only regular files inside the export's folder are found: a symbolic link (to a file or a
  folder) is passed over, so an export cannot bring in a file from elsewhere on the computer.
- Times: each message's `create_time` (a float, or null: then the time before it, else the chat's).
  `is_archived` chats arrive archived, `pinned_time` ones pinned.
- `current_node` is the shown branch (a left-out node: the nearest message above it; missing: the last
  branch). A node whose parent is not in the file, or parents that form a loop, refuse the file."""

from __future__ import annotations

import json
import os
import re
import stat
import time
from collections import Counter
from pathlib import Path
from typing import Any

from ember_chat.engine.storage.import_plan import (
    AttachmentEntry,
    ExportImage,
    ImportFailed,
    Plan,
    PlannedChat,
    PlannedMessage,
    number,
    where,
)

IMAGE_LINE = "[An image was here in ChatGPT; its file is not part of conversations.json.]"
_LEFT_OUT_KINDS = {"thoughts", "reasoning_recap", "model_editable_context", "user_editable_context"}
_SOURCE = "ChatGPT"


def is_chatgpt(item: object) -> bool:
    return isinstance(item, dict) and "mapping" in item


_ASSET = re.compile(r"(file[-_][0-9A-Za-z]+)")
_IMAGES = (".png", ".jpg", ".jpeg", ".webp", ".gif")


def export_assets(folder: Path, depth: int = 2) -> dict[str, ExportImage]:
    """The images of an unzipped ChatGPT export, by the id their asset pointers name: regular files in
    the folder or its sub-folders (`depth` levels), never through a symbolic link (os.walk does not
    enter linked folders; a linked file is passed over), so nothing outside the export is named."""
    try:
        folder = folder.resolve(strict=True)
    except OSError:
        return {}
    out: dict[str, ExportImage] = {}
    for root, dirs, files in os.walk(folder):
        if len(Path(root).relative_to(folder).parts) >= depth:
            dirs.clear()
        for name in files:
            found = _ASSET.match(name)
            if not found or not name.lower().endswith(_IMAGES) or found.group(1) in out:
                continue
            path = Path(root) / name
            try:
                if not stat.S_ISREG(path.lstat().st_mode):  # a link, a FIFO (its open would wait), a device
                    continue
            except OSError:
                continue
            out[found.group(1)] = ExportImage(folder, path, _shown_name(name))
    return out


def chatgpt_chat(
    c: dict[str, Any], file_name: str, index: int, plan: Plan, assets: dict[str, ExportImage] | None = None
) -> PlannedChat:
    label = where(file_name, index + 1, c.get("title"))
    mapping = c.get("mapping")
    if not isinstance(mapping, dict):
        raise ImportFailed(f"In {label}, the messages (“mapping”) are not a set of named nodes, so it cannot be read.")
    nodes: dict[str, dict[str, Any]] = {}
    for key, node in mapping.items():
        if not isinstance(node, dict):
            raise ImportFailed(f"In {label}, message “{key}” is not a set of named values.")
        parent = node.get("parent")
        if parent is not None and (not isinstance(parent, str) or parent not in mapping):
            raise ImportFailed(
                f"In {label}, message “{key}” points at a parent (“{parent}”) that is not in the file: the "
                "file is damaged or was edited. Export it from ChatGPT again."
            )
        nodes[key] = node
    children: dict[str | None, list[str]] = {}
    for key, node in nodes.items():
        children.setdefault(node.get("parent"), []).append(key)
    for parent, kids in children.items():  # in the order the parent lists them (creation order)
        listed = nodes[parent].get("children") if parent is not None else None
        order = {k: i for i, k in enumerate(listed)} if isinstance(listed, list) else {}
        kids.sort(key=lambda k: order.get(k, len(order)))

    created = number(c.get("create_time"))
    reader = _Reader(plan, created if created is not None else time.time(), assets)
    stack = [(key, None) for key in reversed(children.get(None, []))]
    seen = 0
    while stack:  # depth first, siblings in order: every parent is planned before its children
        key, above = stack.pop()
        seen += 1
        kept = reader.node(key, nodes[key].get("message"), above)
        stack.extend((k, kept) for k in reversed(children.get(key, [])))
    if seen != len(nodes):
        raise ImportFailed(f"In {label}, the parents of some messages form a loop, so the conversation cannot be read.")

    messages = reader.messages
    current = c.get("current_node")
    active = reader.place_of.get(current) if isinstance(current, str) else None
    if active is None and messages:
        active = len(messages) - 1
    times = [m.created_at for m in messages]
    start = created if created is not None else min(times, default=reader.fallback)
    updated = number(c.get("update_time"))
    models = Counter(reader.models)
    model = c.get("default_model_slug") if isinstance(c.get("default_model_slug"), str) else None
    return PlannedChat(
        title=c["title"] if isinstance(c.get("title"), str) and c["title"].strip() else "ChatGPT chat",
        created_at=start,
        updated_at=updated if updated is not None else max(times, default=start),
        messages=messages,
        active=active,
        model=model or (models.most_common(1)[0][0] if models else None),
        system_prompt="\n\n".join(reader.instructions),
        pinned=number(c.get("pinned_time")) is not None,
        archived_at=(updated if updated is not None else start) if c.get("is_archived") is True else None,
    )


class _Reader:
    """Turns nodes into planned messages, one at a time, parents first."""

    def __init__(self, plan: Plan, fallback: float, assets: dict[str, ExportImage] | None) -> None:
        self.plan = plan
        self.assets = assets  # None: attachments are not kept (every image is a line in its message)
        self.fallback = fallback
        self.messages: list[PlannedMessage] = []
        self.place_of: dict[str, int | None] = {}  # node → its message, or the nearest kept above it
        self.instructions: list[str] = []
        self.models: list[str] = []

    def node(self, key: str, msg: object, above: int | None) -> int | None:
        """The place of the message that children of this node hang under."""
        place = self._node(key, msg, above) if isinstance(msg, dict) else above
        self.place_of[key] = place
        return place

    def _node(self, key: str, msg: dict[str, Any], above: int | None) -> int | None:
        author = msg.get("author") if isinstance(msg.get("author"), dict) else {}
        role = author.get("role")
        content = msg.get("content") if isinstance(msg.get("content"), dict) else {}
        kind = content.get("content_type")
        meta = msg.get("metadata") if isinstance(msg.get("metadata"), dict) else {}
        self._instructions(role, kind, content, meta)
        if meta.get("is_visually_hidden_from_conversation") or role == "system" or kind in _LEFT_OUT_KINDS:
            return above
        when = number(msg.get("create_time"))
        if when is None:
            when = self.messages[above].created_at if above is not None else self.fallback
        if role == "tool":
            self._tool_result(key, author, kind, content, above)
            return above
        if role not in ("user", "assistant"):
            self.plan.skip("unknown")
            return above
        files: list[AttachmentEntry] = []
        text = self._text(kind, content, files)
        recipient = msg.get("recipient")
        if role == "assistant" and isinstance(recipient, str) and recipient not in ("all", ""):
            return self._add(above, role, "", when, calls=[_call(key, recipient, kind, text)])
        if role == "assistant" and kind == "code":
            language = content.get("language") if content.get("language") not in (None, "unknown") else ""
            text = f"```{language}\n{text}\n```"
        if not text.strip() and not files:
            return above  # an empty placeholder (ChatGPT writes one before many answers)
        if role == "assistant" and isinstance(meta.get("model_slug"), str):
            self.models.append(meta["model_slug"])
        place = self._add(above, role, text, when)
        self.messages[place].files = files
        return place

    def _asset(self, pointer: object) -> ExportImage | None:
        if not self.assets or not isinstance(pointer, str):
            return None
        found = _ASSET.match(pointer.rpartition("://")[2])
        return self.assets.get(found.group(1)) if found else None

    def _add(self, above: int | None, role: str, text: str, when: float, calls: list | None = None) -> int:
        self.messages.append(PlannedMessage(above, role, text, when, tool_calls=calls or []))
        return len(self.messages) - 1

    def _instructions(self, role: object, kind: object, content: dict[str, Any], meta: dict[str, Any]) -> None:
        if kind == "user_editable_context":
            parts = [content.get("user_profile"), content.get("user_instructions")]
        elif role == "system" and meta.get("is_user_system_message"):
            data = meta.get("user_context_message_data")
            data = data if isinstance(data, dict) else {}
            parts = [data.get("about_user_message"), data.get("about_model_message")]
        else:
            return
        self.instructions.extend(p.strip() for p in parts if isinstance(p, str) and p.strip())

    def _tool_result(
        self, key: str, author: dict[str, Any], kind: object, content: dict[str, Any], above: int | None
    ) -> None:
        """A tool's output: the result of the call in the answer above it (several nodes: one result)."""
        target = self.messages[above] if above is not None else None
        if target is None or target.role != "assistant":
            self.plan.skip("tool output")
            return
        name = author.get("name") if isinstance(author.get("name"), str) else "tool"
        if not target.tool_calls:  # a tool's output without a call written before it: its call is implied
            target.tool_calls.append({"id": key, "name": name, "arguments": {}, "raw": ""})
        call = target.tool_calls[-1]
        files: list[AttachmentEntry] = []
        text = self._text(kind, content, files)
        target.files.extend(files)  # a generated image (DALL·E) goes with the answer that asked for it
        for kept in target.tool_messages:
            if kept["call_id"] == call["id"]:
                kept["content"] = f"{kept['content']}\n\n{text}" if kept["content"] else text
                return
        meta = {"name": call["name"], "source": _SOURCE, "decision": None, "duration_ms": None,
                "is_error": kind == "system_error"}  # fmt: skip
        target.tool_messages.append({"call_id": call["id"], "state": "done", "content": text, "meta": meta})

    def _text(self, kind: object, content: dict[str, Any], files: list[AttachmentEntry] | None = None) -> str:
        """The text of a node's content; images found beside the export go to `files` (if given)."""
        parts = content.get("parts")
        if isinstance(parts, list):
            pieces = []
            for part in parts:
                if isinstance(part, str):
                    pieces.append(part)
                elif isinstance(part, dict) and part.get("content_type") == "image_asset_pointer":
                    found = self._asset(part.get("asset_pointer")) if files is not None else None
                    if found is not None and files is not None:
                        files.append(found)
                    else:
                        self.plan.skip("image")
                        pieces.append(IMAGE_LINE)
                elif isinstance(part, dict) and isinstance(part.get("text"), str):
                    pieces.append(part["text"])  # e.g. an audio transcription
                elif part is not None:
                    self.plan.skip("unknown")
            return "\n\n".join(p for p in pieces if p) if len(pieces) > 1 else "".join(pieces)
        if kind in ("tether_quote", "sonic_webpage"):
            head = [v for v in (content.get("title"), content.get("url")) if isinstance(v, str) and v]
            body = content.get("text") if isinstance(content.get("text"), str) else ""
            return "\n".join(head) + ("\n\n" if head and body else "") + body
        for field in ("text", "result"):
            if isinstance(content.get(field), str):
                return str(content[field])
        self.plan.skip("unknown")
        return ""


def _shown_name(file_name: str) -> str:
    """`file-Abc123-leaf.png` is shown as leaf.png."""
    found = _ASSET.match(file_name)
    rest = file_name[found.end() :].lstrip("-_") if found else ""
    return rest if "." in rest else file_name


def _call(key: str, recipient: str, kind: object, text: str) -> dict[str, Any]:
    """A call to a ChatGPT tool as Ember keeps one: a JSON object written to it is its arguments, code
    is {"code": …}, other text {"input": …}."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    arguments = value if isinstance(value, dict) else {"code" if kind == "code" else "input": text}
    return {"id": key, "name": recipient, "arguments": arguments, "raw": text}
