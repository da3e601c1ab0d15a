"""Bringing chats in from a file: ChatGPT's data export (`conversations.json`) or Ember's own JSON export
(one chat or a list), told apart by their content.

The whole file is read and checked first (import_chatgpt.py, import_ember.py turn it into planned
chats); a problem anywhere refuses the file with a sentence naming it and where, before the database
is touched. Then the chats are written on the store's connection in short transactions, a batch of
chats each (BATCH_CHATS, or fewer when they hold many messages), so the store's lock is never held for
longer than one batch: the window's own writes go on meanwhile. The chats written stay hidden by a
staging marker (import_staging.py) until one short last transaction shows them all. A batch's attached
files are read before its transaction, outside the lock (an image is read in a child process that may
wait for a reader's turn and run up to the time limit: the window would freeze on the lock meanwhile),
and the cancel reaches those readers. Progress after each chat, the cancel event checked between chats:
a cancel or a failure deletes what was written, so an import is all or nothing. Run it off the GUI
thread (the window does).

A chat that was in a project (its export carries the project) goes into the project of that name; when
there is none, the import makes it (beside a plain folder of that name, which it never takes: a file never
changes what the user has), a project with the file's instructions and defaults, and its knowledge
paths paused and marked as imported: another computer named them, so none is opened until the user
confirms it (project_tables.py); a project's export names its project first, on its own, so the project is
made (or found) even when it has no chats. The folders an import made go again when it does not finish;
the report names each project it put chats into or named (import_projects.py)."""

from __future__ import annotations

import gc
import json
import logging
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember_chat.engine.core.text import terminal_text
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.import_chatgpt import chatgpt_chat, export_assets, is_chatgpt
from ember_chat.engine.storage.import_ember import ember_chat, ember_project, is_ember, is_ember_project
from ember_chat.engine.storage.import_plan import (
    CANCELLED,
    IMPORTED_PASSAGE,
    AttachmentSink,
    ImportCancelled,
    ImportFailed,
    KeepFiles,
    Plan,
    PlannedChat,
)
from ember_chat.engine.storage.import_projects import ImportedProject, imported_projects, place_projects
from ember_chat.engine.storage.import_staging import discard, marker, show
from ember_chat.engine.storage.project_tables import drop_imported_folders, folder_for_import
from ember_chat.engine.storage.titles import clean_title

__all__ = [
    "MAX_BYTES",
    "ImportCancelled",
    "ImportFailed",
    "ImportReport",
    "ImportedChat",
    "ImportedProject",
    "Refused",
    "import_chats",
]

MAX_BYTES = 1024**3  # what Ember reads into memory at once (a ChatGPT export of years is a few hundred MB)
BATCH_CHATS = 20  # chats written per transaction (the store's lock is held for one batch)
BATCH_MESSAGES = 1000  # ... or fewer chats, when they hold this many messages
BATCH_FILES = 16  # ... or attached files (read into memory before the batch is written)
HANDOFF_S = 0.001  # between batches: a thread waiting for the store's lock (the window's) gets it first
Progress = Callable[[int, int], None]  # (chats written, chats in the file); (0, n) once the file is read


@dataclass(frozen=True)
class ImportedChat:
    """One chat an import wrote: where it went (the chat list, or Archived when it was archived in the
    file) and whether it repeats a chat already here (the same title, start and messages: the same
    file imported twice, or a chat exported and imported back)."""

    id: int
    title: str
    archived: bool
    copy_of: int | None = None  # the chat it repeats (not in the Trash), if any
    grants_refused: int = 0  # "always allow" grants of tools the file carried: never imported (each call asks)
    settings_reset: tuple[str, ...] = ()  # its settings of the wrong kind, out of range or unknown: defaults


@dataclass(frozen=True)
class Refused:
    """What an import refused of what the chats carried, for its sentence: the chats whose tool
    permissions were not imported, and the settings left out for their defaults (in how many chats)."""

    grants_chats: int
    settings: int
    settings_chats: int
    setting_names: tuple[str, ...]  # the names reset, each once, in the file's order


def setting_names(names: Sequence[str], limit: int = 8) -> str:
    """The names a chat file gave its refused settings, as a short list to show: control characters left
    out (the names are the file's: a terminal must not act on them), each cut at 40 characters, the first
    `limit`, then "…"."""
    shown = [terminal_text(name)[:40] or "?" for name in names[:limit]]
    return ", ".join(shown) + (", …" if len(names) > limit else "")


@dataclass(frozen=True)
class ImportReport:
    format: str  # "chatgpt" or "ember"
    chats: int
    messages: int
    skipped: tuple[str, ...]  # what did not come along, as sentences ("3 images (…)")
    imported: tuple[ImportedChat, ...] = ()  # each chat written, in the file's order
    projects: tuple[str, ...] = ()  # the projects it made (their knowledge paused until the user confirms it)
    into: tuple[ImportedProject, ...] = ()  # the projects (made or here already) it put chats into or named

    @property
    def archived(self) -> int:
        return sum(1 for c in self.imported if c.archived)

    @property
    def copies(self) -> int:
        return sum(1 for c in self.imported if c.copy_of is not None)

    @property
    def refused(self) -> Refused:
        reset = [c.settings_reset for c in self.imported if c.settings_reset]
        return Refused(
            grants_chats=sum(1 for c in self.imported if c.grants_refused),
            settings=sum(len(r) for r in reset),
            settings_chats=len(reset),
            setting_names=tuple(dict.fromkeys(name for r in reset for name in r)),
        )


def import_chats(
    store: ConversationStore,
    path: Path,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    attachments: AttachmentSink | None = None,
) -> ImportReport:
    """Import every chat in the file at `path`, or none (ImportFailed, ImportCancelled). `attachments`
    keeps the attached files of an Ember export and the images beside a ChatGPT export
    (attachments/imported.py: from the content the file holds, never from a path it names); without it
    they are named in the report's `skipped`.

    Python's cyclic garbage collector is paused meanwhile: the file's millions of small values hold no
    cycles (reference counting frees them), and its full passes over them held the interpreter for
    100-200 ms at a time, stalling the window's thread (measured with a 16 MB export)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        return _import(store, Path(path), progress, cancel, attachments)
    finally:  # (after _import returned: what it read is freed already)
        if paused:
            gc.enable()


def _import(
    store: ConversationStore,
    path: Path,
    progress: Progress | None,
    cancel: threading.Event | None,
    attachments: AttachmentSink | None,
) -> ImportReport:
    data = _read(path)
    plan = read_plan(data, path.name, cancel, path.parent if attachments is not None else None)
    _check(cancel)
    total = len(plan.chats)
    if progress:
        progress(0, total)
    db, lock = store.shared_connection()
    copies = _copies_of(db, lock, plan.chats, cancel)
    mark = marker(time.time())
    imported: list[ImportedChat] = []
    made: dict[str, int] = {}  # the project folders this import made (committed), by name
    into: dict[int, int] = {}  # the project folders the file names, each with the chats put into it
    try:
        for folder_id in place_projects(db, lock, plan.projects, made):  # (made even when it has no chats)
            into.setdefault(folder_id, 0)
        done = 0
        while done < total:
            first, end = done, _batch_end(plan.chats, done)
            files = _read_files(plan.chats[first:end], attachments, cancel)  # (before the lock: see the module)
            with lock:
                db.execute("BEGIN")
                batch_made: dict[str, int] = {}
                try:
                    while done < end:
                        chat = plan.chats[done]
                        folder_id = folder_for_import(db, chat.project, batch_made) if chat.project else None
                        if folder_id is not None:
                            into[folder_id] = into.get(folder_id, 0) + 1
                        cid = _write(db, chat, files[done - first], plan, mark, folder_id)
                        imported.append(
                            ImportedChat(
                                cid,
                                chat.title,
                                chat.archived_at is not None,
                                copies[done],
                                chat.grants_refused,
                                chat.settings_reset,
                            )
                        )
                        done += 1
                        if progress:
                            progress(done, total)
                        _check(cancel)
                    db.execute("COMMIT")
                    made.update(batch_made)
                except BaseException:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    raise
            time.sleep(HANDOFF_S)  # (Python's lock is not fair: taken again at once, a waiting thread starves)
        _check(cancel)
        places = imported_projects(db, lock, into, set(made.values()))
        show(db, lock, mark)
    except BaseException as exc:
        try:
            discard(db, lock, mark)
            drop_imported_folders(db, lock, made.values())
        except sqlite3.Error as gone:  # (hidden still: a store opened later removes them)
            logging.getLogger(__name__).warning("The chats of an import that stopped were not removed: %s", gone)
        if attachments is not None:
            attachments.rolled_back()
        if isinstance(exc, sqlite3.DatabaseError):
            raise ImportFailed(
                f"{path.name} could not be imported: the chat database could not be written ({exc}). "
                "Nothing was imported."
            ) from exc
        raise
    return ImportReport(
        plan.format,
        total,
        sum(len(c.messages) for c in plan.chats),
        _skipped(plan),
        tuple(imported),
        tuple(made),
        places,
    )


COPY_START_S = 1.0  # an Ember export keeps a chat's start to the second


def _copies_of(
    db: sqlite3.Connection, lock: threading.RLock, chats: list[PlannedChat], cancel: threading.Event | None
) -> list[int | None]:
    """For each planned chat, the chat already in the store (neither in the Trash nor being imported)
    that it repeats: the same title, a start within a second, the same messages (role and text, in any
    order: branches are listed in tree order). Read before anything is written, one chat at a time."""
    out: list[int | None] = []
    for chat in chats:
        _check(cancel)
        with lock:
            candidates = [  # (its title as shown: one stored before titles were cleaned is compared clean)
                int(row[0])
                for row in db.execute(
                    "SELECT id, title FROM conversations WHERE deleted_at IS NULL AND abs(created_at - ?) < ?",
                    (chat.created_at, COPY_START_S),
                )
                if clean_title(str(row[1])) == chat.title
            ]
            mine = sorted((m.role, m.content) for m in chat.messages)
            found = None
            for cid in candidates:
                rows = db.execute("SELECT role, content FROM messages WHERE conversation_id = ?", (cid,))
                if sorted((str(r), str(c)) for r, c in rows) == mine:
                    found = cid
                    break
        out.append(found)
    return out


def _check(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise ImportCancelled(CANCELLED)


def _batch_end(chats: list[PlannedChat], start: int) -> int:
    """Where the batch of chats beginning at `start` ends: BATCH_CHATS chats, or fewer when they hold
    BATCH_MESSAGES messages or BATCH_FILES attached files (at least one chat)."""
    end, messages, files = start, 0, 0
    while end < len(chats) and end - start < BATCH_CHATS and messages < BATCH_MESSAGES and files < BATCH_FILES:
        messages += len(chats[end].messages) or 1
        files += sum(len(m.files) for m in chats[end].messages)
        end += 1
    return end


def _read_files(
    chats: list[PlannedChat], attachments: AttachmentSink | None, cancel: threading.Event | None
) -> list[dict[int, KeepFiles]]:
    """For each chat, its messages' attachments read and checked (by the message's place), before the
    store's lock is taken; none without a sink (the report names them as skipped)."""
    if attachments is None:
        return [{} for _ in chats]
    cancelled = cancel.is_set if cancel is not None else None
    return [{i: attachments.read(m.files, cancelled) for i, m in enumerate(c.messages) if m.files} for c in chats]


def _read(path: Path) -> Any:
    name = path.name
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise ImportFailed(
                f"{name} is too large to import ({size / 1e9:.1f} GB; Ember reads files up to "
                f"{MAX_BYTES / 1e9:.1f} GB)."
            )
        if size == 0:
            raise ImportFailed(f"{name} is empty: there are no chats in it.")
        raw = path.read_bytes()
    except OSError as exc:
        raise ImportFailed(f"{name} cannot be read: {exc.strerror or exc}.") from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ImportFailed(f"{name} is not a text file, so it is not a chat export (those are JSON text).") from None
    try:
        return _loads(text)
    except json.JSONDecodeError as exc:
        body = text.strip()
        if body[:1] in ("[", "{") and body[-1:] != {"[": "]", "{": "}"}[body[:1]]:
            raise ImportFailed(
                f"{name} ends early (line {exc.lineno}, column {exc.colno}): it was cut off, perhaps by a download "
                "or copy that did not finish. Export it again."
            ) from None
        raise ImportFailed(
            f"{name} is not JSON ({exc.msg.lower()} at line {exc.lineno}, column {exc.colno}), so it is not a "
            "chat export."
        ) from None


_SPACE = re.compile(r"[ \t\n\r]*")


def _loads(text: str) -> Any:
    """json.loads, but a top-level list is decoded one item at a time: a big export never holds the
    interpreter in one C call for seconds (the window's thread keeps running meanwhile)."""
    decoder = json.JSONDecoder()
    i = _SPACE.match(text, 0).end()  # type: ignore[union-attr]
    if not text.startswith("[", i):
        return json.loads(text)
    items = []
    i = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
    if text.startswith("]", i):
        return json.loads(text)
    while True:
        item, i = decoder.raw_decode(text, i)
        items.append(item)
        i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
        if text.startswith(",", i):
            i = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
        elif text.startswith("]", i):
            break
        else:
            raise json.JSONDecodeError("Expecting ',' delimiter", text, i)
    end = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return items


def read_plan(data: Any, file_name: str, cancel: threading.Event | None = None, folder: Path | None = None) -> Plan:
    """The chats the file holds, checked whole; ImportFailed names the first problem. `folder`: where a
    ChatGPT export's images are looked for (None: they are not kept)."""
    if isinstance(data, dict) and isinstance(data.get("conversations"), list):
        data = data["conversations"]  # some ChatGPT exports wrap the list
    items = data if isinstance(data, list) else [data]
    if items and all(is_chatgpt(i) for i in items):
        plan = Plan("chatgpt", [])
        assets = export_assets(folder) if folder is not None else None
        read = lambda item, i: chatgpt_chat(item, file_name, i, plan, assets)  # noqa: E731
    elif items and all(is_ember(i) or is_ember_project(i) for i in items):
        plan = Plan("ember", [])
        read = lambda item, i: ember_chat(item, file_name, i)  # noqa: E731
        for i, item in enumerate(items):  # (a project's export names its project first, on its own)
            if is_ember_project(item):
                plan.projects.append(ember_project(item, file_name, i))
        items = [item for item in items if not is_ember_project(item)]
    else:
        odd = next(
            (i for i, item in enumerate(items) if not (is_chatgpt(item) or is_ember(item) or is_ember_project(item))),
            None,
        )
        at = f" (chat {odd + 1} is neither)" if odd is not None and len(items) > 1 else ""
        raise ImportFailed(
            f"{file_name} is not a ChatGPT export (conversations.json) or an Ember chat export{at}, so there is "
            "nothing in it to import."
        )
    for i, item in enumerate(items):
        _check(cancel)
        plan.chats.append(read(item, i))
    return plan


def _write(
    db: sqlite3.Connection,
    chat: PlannedChat,
    files: dict[int, KeepFiles],
    plan: Plan,
    mark: float,
    folder_id: int | None = None,
) -> int:
    """One chat (in `folder_id`), hidden under the import's staging `mark` (its deleted_at) until the import
    shows it; its id."""
    cur = db.execute(
        "INSERT INTO conversations (title, model, system_prompt, params, created_at, updated_at, tools, pinned,"
        " archived_at, deleted_at, folder_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            chat.title,
            chat.model,
            chat.system_prompt,
            json.dumps(chat.params, ensure_ascii=False),
            chat.created_at,
            chat.updated_at,
            json.dumps(chat.tools, ensure_ascii=False) if chat.tools is not None else None,
            int(chat.pinned),
            chat.archived_at,
            mark,
            folder_id,
        ),
    )
    cid = int(cur.lastrowid or 0)
    ids: list[int] = []
    for place, m in enumerate(chat.messages):
        cur = db.execute(
            "INSERT INTO messages (conversation_id, parent_id, role, content, metrics, complete, created_at,"
            " tool_calls) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                cid,
                ids[m.parent] if m.parent is not None else None,
                m.role,
                m.content,
                json.dumps(m.metrics, ensure_ascii=False) if m.metrics is not None else None,
                int(m.complete),
                m.created_at,
                json.dumps(m.tool_calls, ensure_ascii=False) if m.tool_calls else None,
            ),
        )
        mid = int(cur.lastrowid or 0)
        ids.append(mid)
        db.executemany(
            "INSERT OR REPLACE INTO tool_messages (message_id, tool_call_id, state, content, meta, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [
                (
                    mid,
                    t["call_id"],
                    _state(t.get("state")),
                    str(t.get("content") or ""),
                    json.dumps(t.get("meta") or {}, ensure_ascii=False),
                    m.created_at,
                )
                for t in m.tool_messages
            ],
        )
        db.executemany(  # (text to read: no index holds IMPORTED_PASSAGE, and its path is never opened)
            "INSERT INTO answer_knowledge (answer_id, n, file_path, page, seq, passage_id, text)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(mid, s["n"], s["file"], s["page"], s["seq"], IMPORTED_PASSAGE, s["passage"]) for s in m.sources],
        )
        keep = files.get(place)
        if keep is not None:  # (read before the lock: only the blobs and rows are written here)
            for kind, count in keep(mid).items():
                plan.skip(kind, count)
        elif m.files:
            plan.skip("file", len(m.files))
    if chat.active is not None:
        db.execute("UPDATE conversations SET active_leaf = ? WHERE id = ?", (ids[chat.active], cid))
    for c in chat.comparisons:
        cur = db.execute(
            "INSERT INTO comparisons (conversation_id, prompt_id, settings, created_at) VALUES (?, ?, ?, ?)",
            (
                cid,
                ids[c.prompt] if c.prompt is not None else None,
                json.dumps(c.settings, ensure_ascii=False),
                c.created_at,
            ),
        )
        comparison_id = int(cur.lastrowid or 0)
        db.executemany(
            "INSERT INTO comparison_answers (comparison_id, position, model, content, metrics, error, kept_message_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    comparison_id,
                    i,
                    a.model,
                    a.content,
                    json.dumps(a.metrics, ensure_ascii=False) if a.metrics is not None else None,
                    a.error,
                    ids[a.kept] if a.kept is not None else None,
                )
                for i, a in enumerate(c.answers)
            ],
        )
    return cid


def _state(value: object) -> str:
    """A call left asking or running never finishes in the imported chat."""
    return value if value in ("done", "interrupted") else "interrupted" if value in ("asking", "running") else "done"


_SKIPPED = {
    "image": "{n} image{s} (ChatGPT keeps image files outside conversations.json; a line in each message says "
    "where one was)",
    "file": "{n} attached file{s} (their content is in the file, but this import did not keep attachments)",
    "tool output": "{n} tool output{s} with no answer before {them} to belong to",
    "unknown": "{n} message part{s} of a kind Ember does not show",
    # an entry that names a file on a computer instead of holding its content (no export of Ember's
    # writes one): never read, whether or not such a file exists here
    "by path": "{n} attached file{s} given only as a path, not as content (Ember never opens a path a chat file names)",
    "unreadable image": "{n} image{s} of the export that could not be read from its folder",
}


def _skipped(plan: Plan) -> tuple[str, ...]:
    return tuple(
        _SKIPPED[kind].format(n=n, s="" if n == 1 else "s", them="it" if n == 1 else "them")
        for kind, n in plan.skipped.items()
    )
