"""A conversation (the branch on screen) as Markdown or JSON, for File ▸ Export. A message's attachments
come from the caller (`AttachmentStore.export_entries(ids)`: message id → entries with name, kind,
sha256, and the text or base64 image data): JSON includes them, Markdown names them. An answer's tool
calls and their results are in both: JSON in OpenAI's shape (the assistant's `tool_calls`, then a
`tool` message per call with its `meta`), Markdown as a short section per call.

`chats_as_json` is the lossless export (storage/importing.py reads it back): per chat the fields above
(the shown branch in `messages`, for readers of the older export) and the whole chat — `tree`: every
message of every branch, oldest first, each pointing at its parent by its place in `tree` (no database
ids are in the file), with its metrics, completeness, time, tool calls as stored and their tool
messages, and its attachments (places in `files`, each file once); `active`: the shown branch's last
message; `model`, `created`/`updated` (seconds), `pinned`, `archived_at`, the chat's tool choices (the
tools on and `require_call`; never its "always allow" grants nor its servers' "All" switches (every
tool a server lists later on too), which an import would not take anyway: a file turns on only the tools it names)
and its comparisons; a chat in a project carries the project (`project`: its name, icon, instructions,
defaults and the paths of its knowledge, never the files' text: project_tables.exported), and an answer
made with its knowledge which passages it was given (`project_sources`: number, file, page, position; the
passage's text — the user's file's — only when asked: `passages=True`; imported back as text to read,
never as a path to open: import_plan.IMPORTED_PASSAGE). A project's export (`project_export_json`) is
the same list with the project first, on its own, so that one with no chats travels too. Export → import
→ export gives the same bytes, but for a file's `sha256`: an import computes it from the content the file
holds (a PDF's text, not the PDF it came from)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ember_chat.engine.core.reasoning import split_thinking
from ember_chat.engine.core.tools import InvalidCall
from ember_chat.engine.storage.conversations import Conversation, Message
from ember_chat.engine.storage.project_tables import exported, project_chats, project_folder_of_chat
from ember_chat.engine.storage.rows import batches
from ember_chat.engine.storage.titles import shows, without_format_characters
from ember_chat.engine.storage.tool_records import ToolMessage, call_record

if TYPE_CHECKING:
    from ember_chat.engine.storage.conversations import ConversationStore

_WHO = {"user": "You", "assistant": "Ember", "system": "System"}


# what Windows, macOS or Linux refuse, and C1 controls (U+0080-009F): each run a space
_NOT_IN_FILE_NAMES = re.compile(r'[\x00-\x1f\x7f-\x9f<>:"/\\|?*]+')
# names Windows keeps for devices, with any extension ("con.md", "COM1.json", "CONIN$.md" cannot be made there)
_DEVICES = ("CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$")
_NUMBERED = (*(str(n) for n in range(10)), "¹", "²", "³")  # COM0-COM9 and LPT0-LPT9, COM¹-COM³, LPT¹-LPT³
_RESERVED = frozenset({*_DEVICES, *(f"{d}{n}" for d in ("COM", "LPT") for n in _NUMBERED)})
NAME_BYTES = 200  # the stem's most UTF-8 bytes: file systems take 255 for a name, the suffix and "(2)" fit


def export_file_name(title: str, suffix: str, limit: int = 80) -> str:
    """A file name for a chat's export, the one rule of every format (Markdown, JSON): its title without
    the characters file systems refuse (/ \\ : * ? " < > | and control characters, C1 ones too), without
    the invisible characters that could make the name read otherwise than it is (format characters: bidi
    overrides such as U+202E, which shows "a\u202egpj.exe" as "aexe.jpg", zero-width spaces, U+FEFF…; the
    joiners that spell a word or an emoji, and a flag's tags, kept: titles.without_format_characters) and
    without the "…" a shortened title ends with (titles.py), its spaces run together, at most `limit`
    characters and NAME_BYTES bytes, no dot or space at either end (a trailing one is dropped by Windows, a
    leading dot hides the file), never a name Windows reserves (CON, NUL, COM0…COM9, COM¹…, LPT…, CONIN$,
    CONOUT$, whatever their case and extension); "Chat" when nothing that shows is left."""
    kept = without_format_characters(title)
    stem = " ".join(_NOT_IN_FILE_NAMES.sub(" ", kept).split())[:limit]
    while len(stem.encode("utf-8")) > NAME_BYTES:
        stem = stem[:-1]
    stem = stem.strip(" .…")
    if not any(shows(ch) for ch in stem):
        stem = ""
    if stem.split(".")[0].strip().upper() in _RESERVED:
        stem = f"Chat {stem}"
    return f"{stem or 'Chat'}.{suffix}"


def models_of(conv: Conversation, thread: list[Message]) -> list[str]:
    """The models that answered in this branch, in order of their first answer."""
    named = [m.metrics.get("model") for m in thread if m.role == "assistant" and m.metrics]
    return list(dict.fromkeys(n for n in [*named, conv.model] if n))


def _date(timestamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(timestamp))


Attachments = dict[int, list[dict[str, Any]]]


def _named(entries: list[dict[str, Any]]) -> str:
    return "\n".join(f"- 📎 {e['name']} ({e['kind']}, {e['size']:,} bytes)" for e in entries)


def chat_as_markdown(conv: Conversation, thread: list[Message], attachments: Attachments | None = None) -> str:
    """The chat as Markdown: its title, the model(s) that answered and its date, then each message
    (with the names of its attachments)."""
    models = models_of(conv, thread)
    about = ([f"Model: {', '.join(models)}"] if models else []) + [_date(conv.created_at)]
    parts = [f"# {conv.title}\n", f"*{' · '.join(about)}*\n"]
    if conv.system_prompt:
        parts.append(f"> System prompt: {conv.system_prompt}\n")
    for m in thread:
        split = split_thinking(m.content) if m.role == "assistant" else None
        if split and split.thinking:
            quoted = "\n".join(f"> {line}" if line else ">" for line in split.thinking.splitlines())
            parts.append(f"## {_WHO[m.role]}\n\n> **Thinking**\n>\n{quoted}\n\n{split.answer}\n")
        else:
            parts.append(f"## {_WHO[m.role]}\n\n{m.content}\n")
        if attachments and attachments.get(m.id):
            parts.append(f"*Attached:*\n\n{_named(attachments[m.id])}\n")
        parts.extend(_calls_markdown(m))
    return "\n".join(parts)


_DECIDED = {"once": "allowed once", "always": "always allowed in this chat", "deny": "denied", "auto": "not asked"}


def _fenced(text: str, language: str = "") -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}{language}\n{text}\n{fence}"


def _calls_markdown(m: Message) -> list[str]:
    """One section per call: name, source, decision, duration, the arguments, then the result."""
    results = {t.call_id: t for t in m.tool_results}
    out = []
    for stored in m.tool_calls:
        call = stored.call if isinstance(stored, InvalidCall) else stored
        t = results.get(call.id)
        about = [s for s in (t.source if t else None, _DECIDED.get(t.decision or "") if t else None) if s]
        if t is not None and t.duration_ms is not None:
            about.append(f"{t.duration_ms:.0f} ms")
        head = f"**Tool call:** `{call.name}`" + (f" ({', '.join(about)})" if about else "")
        args = json.dumps(call.arguments, indent=2, ensure_ascii=False)
        section = f"{head}\n\n{_fenced(args, 'json')}\n"
        if isinstance(stored, InvalidCall):
            section += f"\n*Not run:* {stored.error}\n"
        elif t is None or t.state != "done":
            section += "\n*Not run.*\n"
        else:
            label = "Error" if t.is_error else "Result"
            section += f"\n*{label}:*\n\n{_fenced(t.content)}\n"
        out.append(section)
    return out


def _tool_messages_json(m: Message) -> list[dict[str, Any]]:
    results = {t.call_id: t for t in m.tool_results}
    out = []
    for stored in m.tool_calls:
        call = stored.call if isinstance(stored, InvalidCall) else stored
        t = results.get(call.id) or ToolMessage(call.id, call.name, "", state="interrupted")
        result = t.result() if t.state == "done" or not isinstance(stored, InvalidCall) else stored.result()
        meta = {
            "name": call.name,
            "source": t.source,
            "decision": t.decision,
            "duration_ms": t.duration_ms,
            "is_error": result.is_error,
        }
        out.append({"role": "tool", "tool_call_id": call.id, "content": result.content, "meta": meta})
    return out


def _calls_json(m: Message) -> list[dict[str, Any]]:
    out = []
    for stored in m.tool_calls:
        call = stored.call if isinstance(stored, InvalidCall) else stored
        entry = call.to_openai()
        if isinstance(stored, InvalidCall):
            entry["error"] = stored.error
        out.append(entry)
    return out


def _message_json(m: Message) -> dict[str, Any]:
    """An answer's thinking in its own field (`content` is the answer proper)."""
    split = split_thinking(m.content) if m.role == "assistant" else None
    if split and split.thinking:
        return {"role": m.role, "content": split.answer, "thinking": split.thinking, "metrics": m.metrics}
    return {"role": m.role, "content": m.content, "metrics": m.metrics}


def chat_as_json(conv: Conversation, thread: list[Message], attachments: Attachments | None = None) -> str:
    messages = []
    for m in thread:
        out = _message_json(m)
        if attachments and attachments.get(m.id):
            out["attachments"] = attachments[m.id]
        messages.append(out)
        if m.tool_calls:
            out["tool_calls"] = _calls_json(m)
            messages.extend(_tool_messages_json(m))
    data = {
        "title": conv.title,
        "models": models_of(conv, thread),
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(conv.created_at)),
        "system_prompt": conv.system_prompt,
        "params": conv.params,
        "messages": messages,
    }
    return json.dumps(data, indent=2, ensure_ascii=False)


FORMAT = "ember-chat"
VERSION = 1
AttachmentsOf = Callable[[Iterable[int]], Attachments]  # e.g. AttachmentStore.export_entries


def chat_export_json(
    store: ConversationStore, cid: int, attachments: AttachmentsOf | None = None, passages: bool = False
) -> str:
    """One chat, losslessly, as a JSON object (File ▸ Export chat as JSON: the older export's shape, with
    the whole chat added)."""
    return json.dumps(chat_document(store, cid, attachments, passages), indent=2, ensure_ascii=False)


def chats_as_json(
    store: ConversationStore, ids: Iterable[int], attachments: AttachmentsOf | None = None, passages: bool = False
) -> str:
    """Chats as a JSON list, losslessly (see the module); `attachments` gives their files' content;
    `passages`: the project passages answers were given go out with their text too."""
    docs = [chat_document(store, cid, attachments, passages) for cid in ids]
    return json.dumps(docs, indent=2, ensure_ascii=False)


def project_export_json(
    store: ConversationStore, folder_id: int, attachments: AttachmentsOf | None = None, passages: bool = False
) -> str:
    """A project (Export project…, `ember-chat projects export`) as a list like chats_as_json's: first the
    project itself (`{"format", "version", "project"}`: its name, icon, instructions, defaults and the
    paths of its knowledge, never the files' text), then each of its chats (archived ones too, never the
    Trash's), each carrying the project as a chat's export does. A project with no chats is the first item
    alone. KeyError when the folder is not a project."""
    db, lock = store.shared_connection()
    with lock:
        project = exported(db, folder_id)
    if project is None:
        raise KeyError(folder_id)
    docs = [{"format": FORMAT, "version": VERSION, "project": project}]
    docs += [chat_document(store, cid, attachments, passages) for cid in project_chat_ids(store, folder_id)]
    return json.dumps(docs, indent=2, ensure_ascii=False)


def project_chat_ids(store: ConversationStore, folder_id: int) -> list[int]:
    """The chats a project's export holds: in its folder or a folder inside it, archived ones too, never
    the Trash's; newest activity first."""
    db, lock = store.shared_connection()
    with lock:
        return project_chats(db, folder_id)


def _tree_order(messages: list[Message]) -> list[Message]:
    """Parents before their children, siblings oldest first: by id, unless a parent came later (then depth
    first)."""
    by_id = sorted(messages, key=lambda m: m.id)
    seen: set[int] = set()
    for m in by_id:
        if m.parent_id is not None and m.parent_id not in seen:
            break
        seen.add(m.id)
    else:
        return by_id
    ids = {m.id for m in by_id}
    children: dict[int | None, list[Message]] = {}
    for m in by_id:
        children.setdefault(m.parent_id if m.parent_id in ids else None, []).append(m)
    out: list[Message] = []
    stack = list(reversed(children.get(None, [])))
    while stack:
        m = stack.pop()
        out.append(m)
        stack.extend(reversed(children.get(m.id, [])))
    return out


def chat_document(
    store: ConversationStore, cid: int, attachments: AttachmentsOf | None = None, passages: bool = False
) -> dict[str, Any]:
    """One chat as `chats_as_json` writes it."""
    conv = store.conversation(cid)
    messages = _tree_order(store.messages(cid))
    thread = store.thread(cid)
    entries = attachments([m.id for m in messages]) if attachments else {}
    data: dict[str, Any] = json.loads(
        chat_as_json(conv, thread, {m.id: entries[m.id] for m in thread if m.id in entries})
    )
    place = {m.id: i for i, m in enumerate(messages)}
    files: list[dict[str, Any]] = []
    file_place: dict[tuple[str, str], int] = {}
    tree = []
    given = _project_sources(store, [m.id for m in messages], passages)
    for m in messages:
        item: dict[str, Any] = {
            "parent": place.get(m.parent_id) if m.parent_id is not None else None,
            "role": m.role,
            "content": m.content,
            "created": m.created_at,
            "complete": m.complete,
            "metrics": m.metrics,
        }
        if m.tool_calls:
            item["tool_calls"] = [call_record(c) for c in m.tool_calls]
        if m.tool_results:
            item["tool_messages"] = [_tool_message(t) for t in m.tool_results]
        if entries.get(m.id):
            for e in entries[m.id]:
                key = (str(e.get("sha256")), str(e.get("name")))
                if key not in file_place:
                    file_place[key] = len(files)
                    files.append(e)
            item["files"] = [file_place[(str(e.get("sha256")), str(e.get("name")))] for e in entries[m.id]]
        if given.get(m.id):
            item["project_sources"] = given[m.id]
        tree.append(item)
    tools = store.chat_tools(cid)
    data.update(
        {
            "format": FORMAT,
            "version": VERSION,
            "model": conv.model,
            "created": conv.created_at,
            "updated": conv.updated_at,
            "pinned": conv.pinned,
            "archived_at": conv.archived_at,
            # the tools on and whether a call is required; not the "always allow" grants: consent is
            # given on this computer, and an import never takes it from a file (import_ember._tools)
            "tools": {"enabled": sorted(tools.enabled), "require_call": tools.require_call},
            "active": place.get(conv.active_leaf) if conv.active_leaf is not None else None,
            "tree": tree,
            "files": files,
            "comparisons": [
                {
                    "prompt": place.get(c.prompt_id) if c.prompt_id is not None else None,
                    "settings": c.settings,
                    "created": c.created_at,
                    "answers": [
                        {
                            "model": a.model,
                            "content": a.content,
                            "metrics": a.metrics,
                            "error": a.error,
                            "kept": place.get(a.kept_message_id) if a.kept_message_id is not None else None,
                        }
                        for a in c.answers
                    ],
                }
                for c in store.comparisons.of_conversation(cid)
            ],
        }
    )
    db, lock = store.shared_connection()
    with lock:
        folder_id = project_folder_of_chat(db, cid)
        project = exported(db, folder_id) if folder_id is not None else None
    if project is not None:
        data["project"] = project
    return data


def _project_sources(store: ConversationStore, ids: list[int], passages: bool) -> dict[int, list[dict[str, Any]]]:
    """The project passages each answer was given (schema 7's answer_knowledge; engine/projects/answers.py
    writes them): its number, file, page, position and, with `passages`, its text as it was then (the
    user's file's text: only when asked)."""
    out: dict[int, list[dict[str, Any]]] = {}
    db, lock = store.shared_connection()
    for batch in batches(ids):
        with lock:
            rows = db.execute(
                "SELECT answer_id, n, file_path, page, seq, text FROM answer_knowledge"
                f" WHERE answer_id IN ({','.join('?' * len(batch))}) ORDER BY answer_id, n",
                batch,
            ).fetchall()
        for answer_id, n, file_path, page, seq, text in rows:
            entry = {"n": n, "file": file_path, "page": page, "seq": seq}
            out.setdefault(answer_id, []).append({**entry, "passage": text} if passages else entry)
    return out


def _tool_message(t: ToolMessage) -> dict[str, Any]:
    meta = {
        "name": t.name,
        "source": t.source,
        "decision": t.decision,
        "duration_ms": t.duration_ms,
        "is_error": t.is_error,
    }
    state = "interrupted" if t.state in ("asking", "running") else t.state  # it can never finish in the file
    return {"call_id": t.call_id, "state": state, "content": t.content, "meta": meta}
