"""`ember-chat chats list|export|import|rm|restore|backup`: the chats the window keeps (the same data
folder: EMBER_DATA_DIR or the platform's), from a terminal. `rm` moves chats to the Trash (`restore`
brings them back; the window's Trash shows them); `rm --purge` deletes them for good and sweeps their
text out of the database file, and the saved conversation caches with it. Mistakes (an unknown id, a
file that cannot be written) are one line on stderr, exit status 2, and change nothing."""

from __future__ import annotations

import argparse
import json
import os
import socket
import sqlite3
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ember_chat.engine.core.text import terminal_text
from ember_chat.engine.errors import EmberError
from ember_chat.engine.storage.paths import AppPaths

if TYPE_CHECKING:
    from ember_chat.engine.storage.backup_files import BackupInfo
    from ember_chat.engine.storage.conversations import Conversation, ConversationStore
    from ember_chat.engine.storage.importing import ImportedProject, ImportReport


def add_parser(sub: argparse._SubParsersAction, parser_class: type) -> None:
    chats = sub.add_parser("chats", help="list, export, import, delete and back up the window's chats")
    csub = chats.add_subparsers(dest="chats_command", parser_class=parser_class, required=True)
    ls = csub.add_parser("list", help="the chats, newest activity first (not the archived ones, not the Trash)")
    ls.add_argument("--json", action="store_true")
    which = ls.add_mutually_exclusive_group()
    which.add_argument("--archived", action="store_true", help="the archived chats")
    which.add_argument("--trash", action="store_true", help="the chats in the Trash, newest deletion first")
    ex = csub.add_parser("export", help="chats as Ember JSON (every branch, to import again) or Markdown")
    ex.add_argument("ids", nargs="*", type=int, metavar="ID")
    ex.add_argument("--all", action="store_true", help="every chat but those in the Trash")
    ex.add_argument("--format", choices=("json", "md"), default="json")
    ex.add_argument("-o", "--output", metavar="PATH", help="write to this file (default: the terminal)")
    ex.add_argument(
        "--with-passages",
        action="store_true",
        help="JSON: the passages of project files answers were given, with their text (default: which file "
        "and page only: the files' text stays out)",
    )
    im = csub.add_parser("import", help="chats from a ChatGPT export (conversations.json) or Ember JSON")
    im.add_argument("path")
    rm = csub.add_parser("rm", help="move chats to the Trash")
    rm.add_argument("ids", nargs="+", type=int, metavar="ID")
    rm.add_argument("--purge", action="store_true", help="delete them for good instead (no undo)")
    rs = csub.add_parser("restore", help="bring chats back from the Trash")
    rs.add_argument("ids", nargs="+", type=int, metavar="ID")
    bk = csub.add_parser("backup", help="back up the chat database now (--list: the backups kept)")
    bk.add_argument("--list", action="store_true")
    bk.add_argument("--json", action="store_true")


def run(args: argparse.Namespace, paths: AppPaths) -> int:
    """Errors of the database or the file system (locked by another program, damaged, a folder that is a
    file) become one sentence (EmberError: main prints it, exit status 2)."""
    try:
        return _run(args, paths)
    except sqlite3.Error as exc:
        raise EmberError(
            f"The chat database {paths.database} could not be read ({exc}). If the window or another ember-chat "
            "is busy with it, try again in a moment; if it is damaged, start the window: it sets a damaged "
            "file aside and recovers what it can."
        ) from None
    except OSError as exc:
        raise EmberError(
            f"{exc.filename or paths.data_dir} cannot be used ({exc.strerror or exc}); check that it is there "
            "and can be read and written (EMBER_DATA_DIR chooses the data folder)."
        ) from None


def _run(args: argparse.Namespace, paths: AppPaths) -> int:
    from ember_chat.engine.storage.conversations import ConversationStore

    store = ConversationStore(paths.database)
    try:
        command = {
            "list": _list,
            "export": _export,
            "import": _import,
            "rm": _rm,
            "restore": _restore,
            "backup": _backup,
        }[args.chats_command]
        return command(args, store, paths)
    finally:
        store.close()


def _list(args: argparse.Namespace, store: ConversationStore, paths: AppPaths) -> int:
    if args.trash:
        chats, empty = store.organise.trashed(), "The Trash is empty."
    elif args.archived:
        chats, empty = store.conversations(archived=True), "No chat is archived."
    else:
        chats, empty = store.conversations(), "No chats yet."
    folders = {f.id: f.name for f in store.organise.folders()}
    counts = store.message_counts()
    rows = [_summary(c, folders, counts.get(c.id, 0)) for c in chats]
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    if not rows:
        print(empty)
        return 0
    when = "deleted" if args.trash else "updated"
    width = max(len(str(r["id"])) for r in rows)
    print(f"{'ID':>{width}}  {when.upper():<16}  {'FOLDER':<16}  TITLE")
    for r in rows:
        stamp = _date(r["deleted_at"] if args.trash else r["updated_at"])
        title = " ".join(terminal_text(r["title"]).split()) + ("  (pinned)" if r["pinned"] else "")
        folder = terminal_text(r["folder"] or "")[:16]
        print(f"{r['id']:>{width}}  {stamp:<16}  {folder:<16}  {title}")
    return 0


def _summary(c: Conversation, folders: dict[int, str], messages: int) -> dict[str, Any]:
    return {
        "id": c.id,
        "title": c.title,
        "model": c.model,
        "messages": messages,
        "folder": folders.get(c.folder_id) if c.folder_id is not None else None,
        "folder_id": c.folder_id,
        "pinned": c.pinned,
        "created_at": c.created_at,
        "updated_at": c.updated_at,
        "archived_at": c.archived_at,
        "deleted_at": c.deleted_at,
    }


def _export(args: argparse.Namespace, store: ConversationStore, paths: AppPaths) -> int:
    if args.all:
        ids = [c.id for c in store.conversations() + store.conversations(archived=True)]
        ids.sort(key=lambda i: store.conversation(i).updated_at, reverse=True)
    elif args.ids:
        _check_ids(store, args.ids)
        ids = list(dict.fromkeys(args.ids))
    else:
        raise EmberError("Name the chats to export (their ids, from `ember-chat chats list`), or give --all.")
    if args.format == "json":
        from ember_chat.engine.attachments import AttachmentStore
        from ember_chat.engine.storage.export import chats_as_json  # (lossless: every branch, files, comparisons)

        text = chats_as_json(store, ids, AttachmentStore(paths, store).export_entries, passages=args.with_passages)
    else:
        text = _markdown(store, ids, paths)
    if args.output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return 0
    target = Path(args.output).expanduser()
    from ember_chat.engine.cli.common import write_export

    write_export(target, text)
    print(f"Exported {_count(len(ids))} to {target}.")
    return 0


def _markdown(store: ConversationStore, ids: list[int], paths: AppPaths) -> str:
    from ember_chat.engine.attachments import AttachmentStore
    from ember_chat.engine.storage.export import chat_as_markdown

    files = AttachmentStore(paths, store)
    parts = []
    for cid in ids:
        thread = store.thread(cid)
        entries = files.export_entries(m.id for m in thread)
        parts.append(chat_as_markdown(store.conversation(cid), thread, entries))
    return "\n---\n\n".join(parts)


def _import(args: argparse.Namespace, store: ConversationStore, paths: AppPaths) -> int:
    from ember_chat.engine.attachments import AttachmentStore, Limits
    from ember_chat.engine.attachments.imported import AttachmentImporter
    from ember_chat.engine.storage.importing import import_chats, setting_names
    from ember_chat.engine.storage.settings import SettingsFile

    path = Path(args.path).expanduser()
    if not path.is_file():
        raise EmberError(f"There is no file at {path}; give the path of a conversations.json or an Ember export.")

    def progress(done: int, total: int) -> None:
        if sys.stderr.isatty():
            print(f"\rImporting chat {done} of {total}…", end="", file=sys.stderr, flush=True)

    limits = Limits.from_settings(SettingsFile(paths.settings_file).load())  # (size, time, memory: as attached)
    importer = AttachmentImporter(AttachmentStore(paths, store), limits)
    report = import_chats(store, path, progress=progress, attachments=importer)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    for line in _imported_lines(report, f"{path} ({report.format})"):
        print(line)
    for chat in report.imported:  # where each went, when it is not the plain chat list, and what was refused
        where = ["into Archived (archived in the file; chats list --archived)"] if chat.archived else []
        if chat.copy_of is not None:
            where.append(f"a copy of chat {chat.copy_of}, which you already have")
        if chat.grants_refused:  # (the window's banner says the same)
            where.append("its tool permissions were not imported (allow tools again in the chat if you trust it)")
        if chat.settings_reset:
            n = len(chat.settings_reset)
            names = setting_names(chat.settings_reset)
            where.append(
                f"{n} setting{'' if n == 1 else 's'} Ember does not know or could not use "
                f"{'was' if n == 1 else 'were'} left out: the chat uses "
                f"{'its default' if n == 1 else 'the defaults'} ({names})"
            )
        if where:
            print(f"Chat {chat.id} “{terminal_text(chat.title)}”: {'; '.join(where)}.")
    for skipped in report.skipped:
        print(f"Skipped: {skipped}")
    return 0


def _imported_lines(report: ImportReport, source: str) -> list[str]:
    """What the import made, as the window's banner says it: the chats, and the project they went into
    (made, its knowledge waiting to be confirmed, or one here already that they joined)."""
    said = f"Imported {_count(report.chats)} ({report.messages} messages) from {source}"
    into = report.into
    if len(into) == 1 and into[0].chats == report.chats:  # (a project's export: all in one project)
        p = into[0]
        kind = _kind(p)
        if p.made and not report.chats:
            return [f"Imported the project “{terminal_text(p.name)}” (no chats yet) from {source}{_waiting(p)}."]
        if not report.chats:
            return [f"The project “{terminal_text(p.name)}” in {source} is here already: nothing was imported."]
        if p.made:
            return [f"{said} into the new project “{terminal_text(p.name)}”{_waiting(p)}."]
        return [f"{said}; they joined your {kind} “{terminal_text(p.name)}”, which was left as it was."]
    lines = [f"{said}."]
    for p in into:
        if p.made and not p.chats:  # (the file's project block, its chats in none: a crafted file)
            lines.append(f"It also made the new project “{terminal_text(p.name)}”, with no chats in it{_waiting(p)}.")
        elif not p.chats:
            lines.append(
                f"The {_kind(p)} “{terminal_text(p.name)}” the file names is here already and was left as it was."
            )
        elif p.made:
            lines.append(f"{_count(p.chats)} went into the new project “{terminal_text(p.name)}”{_waiting(p)}.")
        else:
            joined = f"{_count(p.chats)} joined your {_kind(p)} “{terminal_text(p.name)}”"
            lines.append(f"{joined}, which was left as it was.")
    return lines


def _kind(p: ImportedProject) -> str:
    """What it is now: a project, or a folder (made plain again in the window while the import ran)."""
    return "project" if p.project else "folder"


def _waiting(p: ImportedProject) -> str:
    """ "; its 2 folders wait to be confirmed…" for a project the import made with knowledge paths ("its folder
    waits", "its folder and 2 files wait": one said without its count)."""
    what = [kind if n == 1 else f"{n:,} {kind}s" for n, kind in ((p.folders, "folder"), (p.files, "file")) if n]
    if not p.made or not what:
        return ""
    verb = "waits" if p.folders + p.files == 1 else "wait"
    return f"; its {' and '.join(what)} {verb} to be confirmed in the window's Project settings ▸ Knowledge"


def _window_running(data_dir: Path) -> bool:
    """Whether Ember's window holds this data folder: its lock file (Qt's QLockFile, app/qt/single_instance.py:
    the process id on the first line, the host name on the third) names a live process on this host."""
    try:
        lines = (data_dir / "ember.lock").read_text(encoding="utf-8", errors="replace").splitlines()
        pid = int(lines[0])
    except (OSError, ValueError, IndexError):
        return False
    if len(lines) > 2 and lines[2] and lines[2] != socket.gethostname():
        return False
    import psutil

    return pid != os.getpid() and psutil.pid_exists(pid)


def _rm(args: argparse.Namespace, store: ConversationStore, paths: AppPaths) -> int:
    ids = list(dict.fromkeys(args.ids))
    _check_ids(store, ids)
    if args.purge:
        gone = store.organise.purge_chats(ids)  # (its sweep deletes the saved conversation caches too)
        print(f"Deleted {_count(gone)} for good; the saved conversation caches were cleared.")
        if _window_running(paths.data_dir):
            print(
                "Ember's window is open on this data folder: its model still holds what it read of "
                f"{'this chat' if len(ids) == 1 else 'these chats'} and saves it again when it quits. "
                "Delete it for good in the window instead, or quit the window and run this again."
            )
        _say_backups_hold(store, "this chat" if len(ids) == 1 else "these chats")
        return 0
    undo = store.organise.trash_chats(ids)
    back = "it" if len(ids) == 1 else "them"
    print(f"{undo.label} `ember-chat chats restore {' '.join(map(str, ids))}` brings {back} back.")
    return 0


def _say_backups_hold(store: ConversationStore, what: str) -> None:
    from ember_chat.engine.storage.backups import BackupManager

    manager = BackupManager(store)
    if manager.backups():
        folder = manager.folder
        print(f"The backups in {folder} made earlier still hold {what}; delete those files too if {what} must be gone.")


def _restore(args: argparse.Namespace, store: ConversationStore, paths: AppPaths) -> int:
    ids = list(dict.fromkeys(args.ids))
    _check_ids(store, ids)
    for cid in ids:
        if store.conversation(cid).deleted_at is None:
            raise EmberError(f"Chat {cid} is not in the Trash; `ember-chat chats list --trash` shows what is.")
    print(f"Restored {_count(store.organise.restore_chats(ids))} from the Trash.")
    return 0


def _backup(args: argparse.Namespace, store: ConversationStore, paths: AppPaths) -> int:
    from ember_chat.engine.storage.backups import BackupManager  # (engineer A2's backups)
    from ember_chat.engine.storage.settings import SettingsFile

    settings = SettingsFile(paths.settings_file)
    manager = BackupManager(store, keep=settings.load().backups_keep)
    for problem in settings.take_problems():
        print(f"ember-chat: {problem}", file=sys.stderr)
    if args.list:
        infos = manager.backups()
        if args.json:
            print(json.dumps([_backup_row(i) for i in infos], indent=2, ensure_ascii=False))
        elif not infos:
            print("No backups yet; `ember-chat chats backup` makes one.")
        else:
            print(f"{'CREATED':<16}  {'SIZE':>9}  {'CHATS':>5}  {'REASON':<16}  FILE")
            for i in infos:
                chats = "?" if i.in_file is None else str(i.in_file)
                print(f"{_date(i.created_at):<16}  {_size(i.size):>9}  {chats:>5}  {i.reason:<16}  {i.path}")
        return 0
    info = manager.backup("manual")
    if args.json:
        print(json.dumps(_backup_row(info), indent=2, ensure_ascii=False))
    else:
        print(f"Backed up {_in_file(info)} to {info.path} ({_size(info.size)}).")
    return 0


def _backup_row(info: BackupInfo) -> dict[str, Any]:
    return {
        "path": str(info.path),
        "created_at": info.created_at,
        "size": info.size,
        "chats": info.chats,  # (not those in the Trash: `trashed`)
        "trashed": info.trashed,
        "schema_version": info.schema_version,
        "reason": info.reason,
    }


def _in_file(info: BackupInfo) -> str:
    """What the backup file holds, counted in it: the chats in the Trash are in it too (a restore
    brings them back there), so they are counted and said apart."""
    said = _count(info.in_file or 0)
    return f"{said}, {info.trashed} of them in the Trash" if info.trashed else said


def _check_ids(store: ConversationStore, ids: list[int]) -> None:
    for cid in ids:
        try:
            store.conversation(cid)
        except KeyError:
            raise EmberError(f"No chat has the id {cid}; `ember-chat chats list` shows the ids.") from None


def _count(n: int) -> str:
    return "1 chat" if n == 1 else f"{n} chats"


def _date(stamp: float | None) -> str:
    return "" if stamp is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp))


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    if n < 1024**2:
        return f"{n / 1024:.1f} KB"
    return f"{n / 1024**2:.1f} MB"
