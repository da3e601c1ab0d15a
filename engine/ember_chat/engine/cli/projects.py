"""`ember-chat projects new|add|list|index|export`: the window's projects (the same data folder: EMBER_DATA_DIR or
the platform's) from a terminal.

`new` and `add` index the knowledge at once (`--no-index`: later, with `projects index` or the window),
so a project made here answers from its files straight away. Indexing reads each file in a child
process, prints one progress line, and lists the files it skipped with their reasons. `export` writes a
project and its chats as one Ember export file (the window's Export project…; `chats import` reads it
back, making the project). Mistakes (no such
project, a path that is not there) are one line on stderr, exit status 2, and change nothing."""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from typing import TYPE_CHECKING, Any, TextIO

from ember_chat.engine.core.text import terminal_text
from ember_chat.engine.errors import EmberError, StoreError
from ember_chat.engine.storage.paths import AppPaths

if TYPE_CHECKING:
    from ember_chat.engine.projects.indexer import IndexProgress, IndexRun
    from ember_chat.engine.projects.records import Project, ProjectStore
    from ember_chat.engine.storage.conversations import ConversationStore

INDEX_HELP = "do not index the knowledge now (later: `ember-chat projects index NAME` or the window)"


def add_parser(sub: argparse._SubParsersAction, parser_class: type) -> None:
    projects = sub.add_parser("projects", help="make projects, add their knowledge, index it, list them")
    psub = projects.add_subparsers(dest="projects_command", parser_class=parser_class, required=True)
    new = psub.add_parser(
        "new",
        help="a new project (its folders indexed at once)",
        description="Make a project: a folder of the chat list with instructions and knowledge. The folders "
        "and files given with --folder are indexed at once (--no-index: later).",
    )
    new.add_argument("name")
    new.add_argument(
        "--folder", metavar="DIR", action="append", default=[], help="knowledge folder or file (repeatable)"
    )
    new.add_argument("--instructions", default="", help="put before every chat's system prompt in the project")
    new.add_argument("--no-index", action="store_true", help=INDEX_HELP)
    add = psub.add_parser("add", help="add a folder or file to a project's knowledge (indexed at once)")
    add.add_argument("name")
    add.add_argument("path")
    add.add_argument("--no-index", action="store_true", help=INDEX_HELP)
    ls = psub.add_parser("list", help="the projects: knowledge, files, passages, index state, skipped files")
    ls.add_argument("--json", action="store_true")
    ix = psub.add_parser("index", help="bring a project's index up to date (new, changed and deleted files)")
    ix.add_argument("name")
    ex = psub.add_parser(
        "export",
        help="a project and all its chats as one Ember export file (import it with `chats import`)",
        description="Write the project (name, icon, instructions, defaults, the paths of its knowledge: "
        "never the files' text) and all its chats, archived ones too, as one Ember JSON export; one with "
        "no chats too. `ember-chat chats import FILE` or the window's File ▸ Import chats… makes it again.",
    )
    ex.add_argument("name")
    ex.add_argument("file", help="the JSON file to write")
    ex.add_argument(
        "--with-passages",
        action="store_true",
        help="the passages of project files its answers were given, with their text (default: which file "
        "and page only: the files' text stays out)",
    )


def run(args: argparse.Namespace, paths: AppPaths) -> int:
    """Errors of the database or the file system become one sentence (EmberError: exit status 2)."""
    from ember_chat.engine.projects.records import ProjectStore
    from ember_chat.engine.storage.conversations import ConversationStore

    try:
        store = ConversationStore(paths.database)
    except sqlite3.Error as exc:
        raise EmberError(f"The chat database {paths.database} could not be read ({exc}).") from None
    try:
        projects = ProjectStore(store)
        if args.projects_command == "export":  # (the chats too: the chat store's)
            return _export(args, projects, store, paths)
        command = {"new": _new, "add": _add, "list": _list, "index": _index}[args.projects_command]
        return command(args, projects, paths)
    except sqlite3.Error as exc:
        raise EmberError(
            f"The chat database {paths.database} could not be read ({exc}). If the window or another ember-chat "
            "is busy with it, try again in a moment."
        ) from None
    finally:
        store.close()


def _new(args: argparse.Namespace, projects: ProjectStore, paths: AppPaths) -> int:
    if any(p.name == args.name for p in projects.projects()):
        raise EmberError(f"A project named “{args.name}” already exists; add knowledge with `projects add`.")
    for folder in args.folder:  # (all checked before anything is made)
        _checked_path(folder)
    try:
        project = projects.create(args.name, instructions=args.instructions)
        for folder in args.folder:
            projects.add_source(project.folder_id, folder)
    except StoreError as exc:
        raise EmberError(str(exc)) from None
    project = projects.project(project.folder_id)
    sources = _counted(len(project.sources), "knowledge source")
    print(f"Made the project “{terminal_text(project.name)}” with {sources}.")
    if not args.no_index and project.sources:
        _index_project(project, paths, sys.stderr)
    return 0


def _add(args: argparse.Namespace, projects: ProjectStore, paths: AppPaths) -> int:
    from ember_chat.engine.projects.turn import project_named

    project = project_named(projects, args.name, list_known=True)
    _checked_path(args.path)
    try:
        covered = projects.covered(project.folder_id, args.path)
        source = projects.add_source(project.folder_id, args.path)
    except StoreError as exc:
        raise EmberError(str(exc)) from None
    print(f"Added {terminal_text(source.path)} to “{terminal_text(project.name)}”.")
    for inner in covered:
        print(f"  {terminal_text(inner.path)} is inside it: taken out of the project, its files read from there now.")
    if not args.no_index:
        _index_project(projects.project(project.folder_id), paths, sys.stderr)
    return 0


def _index(args: argparse.Namespace, projects: ProjectStore, paths: AppPaths) -> int:
    from ember_chat.engine.projects.turn import project_named

    project = project_named(projects, args.name, list_known=True)
    if not any(not s.paused for s in project.sources):
        raise EmberError(f"“{project.name}” has no knowledge to index; add a folder with `projects add`.")
    _index_project(project, paths, sys.stderr)
    return 0


def _export(args: argparse.Namespace, projects: ProjectStore, store: ConversationStore, paths: AppPaths) -> int:
    from pathlib import Path

    from ember_chat.engine.attachments import AttachmentStore
    from ember_chat.engine.cli.common import write_export
    from ember_chat.engine.projects.turn import project_named
    from ember_chat.engine.storage.export import project_chat_ids, project_export_json

    project = project_named(projects, args.name, list_known=True)
    text = project_export_json(
        store, project.folder_id, AttachmentStore(paths, store).export_entries, passages=args.with_passages
    )
    chats = _counted(len(project_chat_ids(store, project.folder_id)), "chat")  # (not the whole file parsed again)
    target = Path(args.file).expanduser()
    write_export(target, text)
    paths_said = _counted(len(project.sources), "knowledge path")
    where = terminal_text(str(target))
    print(f"Exported the project “{terminal_text(project.name)}” with {chats} and {paths_said} to {where}.")
    return 0


def _checked_path(path: str) -> None:
    if not os.path.exists(path):
        raise EmberError(f"{path} is not there: give a folder or a file that exists.")


def _index_project(project: Project, paths: AppPaths, out: TextIO) -> IndexRun:
    """Index the project's sources (not the paused ones; the files of sources no longer in the project
    dropped), their passages embedded with the project's embedding model when it names one, one progress
    line on `out`, then a summary."""
    from ember_chat.engine.cli.common import resolve_model
    from ember_chat.engine.projects.index import KnowledgeIndex, knowledge_path
    from ember_chat.engine.projects.indexer import Indexer, Retry
    from ember_chat.engine.projects.rankers import load_embedder

    sources = [s for s in project.sources if not s.paused]
    paused = len(project.sources) - len(sources)
    embedder, embedding_problem = load_embedder(project.embedding_model, lambda name: resolve_model(name, paths))
    index = KnowledgeIndex(knowledge_path(paths, project.folder_id))
    live = out.isatty()

    def progress(p: IndexProgress) -> None:  # (the files of this run: new or changed, read or skipped)
        files = f"{p.files_done:,}/{p.files_total:,} new or changed {'file' if p.files_total == 1 else 'files'}"
        line = f"[indexing “{project.name}”: {files}, {_counted(p.pages, 'page')}, {_counted(p.passages, 'passage')}]"
        if live:
            out.write("\r" + terminal_text(line)[:200])
            out.flush()
        elif p.current is None:
            out.write(terminal_text(line) + "\n")

    try:
        retry = Retry(reader_failed=True)  # (a new process: files a reader failed on are tried again)
        known = {s.id for s in project.sources}  # (the files of sources removed from the project go)
        result = Indexer(index, sources, embedder=embedder, retry=retry, known=known).run(progress)
        counts = index.counts()
        skipped = [f for f in index.files() if f.state == "skipped"]
    finally:
        index.close()
        if embedder is not None:
            embedder.close()
    if live:
        out.write("\n")
    looked = _counted(result.read + result.skipped, "new or changed file")  # (the progress line's files)
    out.write(
        f"Indexed “{terminal_text(project.name)}” in {result.seconds:.1f} s: {looked} ({result.read:,} read, "
        f"{result.skipped:,} skipped), {result.dropped:,} gone. In all: {_counted(counts.indexed, 'file')} "
        f"indexed ({_counted(counts.pages, 'page')}, {_counted(counts.passages, 'passage')}), "
        f"{_counted(counts.skipped, 'file')} skipped.\n"
    )
    for f in skipped:
        out.write(f"  skipped {terminal_text(f.path)}: {terminal_text(f.reason or '')}\n")
    for problem in result.problems:
        out.write(f"  {terminal_text(str(problem.path))}: {terminal_text(problem.reason)}\n")
    if paused:
        out.write(f"  {_counted(paused, 'paused source')} left out (resume them in the window).\n")
    for problem in (embedding_problem, result.embedding_problem):
        if problem:
            out.write(f"  {terminal_text(problem)}\n")
    out.flush()
    return result


def _list(args: argparse.Namespace, projects: ProjectStore, paths: AppPaths) -> int:
    rows = [_summary(p, paths) for p in projects.projects()]
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    if not rows:
        print("No projects yet. Make one: ember-chat projects new NAME --folder DIR")
        return 0
    for r in rows:
        files, pages = _counted(r["files"]["indexed"], "file"), _counted(r["pages"], "page")
        print(
            f"{terminal_text(r['name'])}  ({r['state']}: {files}, {pages}, {_counted(r['passages'], 'passage')},"
            f" {r['files']['skipped']:,} skipped, {r['files']['pending']:,} pending)"
        )
        for s in r["sources"]:
            paused = "  (paused)" if s["paused"] else ""
            print(f"  {s['kind']:<6} {terminal_text(s['path'])}{paused}")
        for f in r["skipped"]:
            print(f"  skipped {terminal_text(f['path'])}: {terminal_text(f['reason'] or '')}")
        for u in r["unread"]:
            kept = _counted(u["files_kept"], "file")
            print(f"  could not read {terminal_text(u['path'])} ({terminal_text(u['cause'])}): {kept} kept")
    return 0


def _counted(n: int, thing: str) -> str:
    """“1 file”, “2 files”: a count and its noun, singular for one (as the window's counts_text says them)."""
    return f"{n:,} {thing}" if n == 1 else f"{n:,} {thing}s"


def _summary(project: Project, paths: AppPaths) -> dict[str, Any]:
    """One project for `list`: its settings, sources, and what its index holds (read, never written)."""
    from ember_chat.engine.projects.index import KnowledgeIndex, knowledge_path

    where = knowledge_path(paths, project.folder_id)
    files: list[Any] = []
    unread: list[Any] = []
    if where.exists():
        index = KnowledgeIndex(where)
        try:
            counts, files, unread = index.counts(), index.files(), index.unread_folders()
            ids = {s.id for s in project.sources}  # (a source removed since its last walk is not said)
            by_path = {u.path: u for u in unread if u.source_id in ids}  # (nested sources saw it each: once)
            unread = list(by_path.values())
        finally:
            index.close()
        state = "pending" if counts.pending else "indexed" if counts.files else "empty"
        tally = {"total": counts.files, "indexed": counts.indexed, "skipped": counts.skipped, "pending": counts.pending}
        pages, passages = counts.pages, counts.passages
    else:
        state = "not indexed" if project.sources else "empty"
        tally, pages, passages = {"total": 0, "indexed": 0, "skipped": 0, "pending": 0}, 0, 0
    return {
        "id": project.folder_id,
        "name": project.name,
        "icon": project.icon,
        "instructions": project.instructions,
        "model": project.model,
        "preset": project.preset,
        "state": state,
        "files": tally,
        "pages": pages,
        "passages": passages,
        "sources": [
            {"path": s.path, "kind": s.kind, "paused": s.paused, "from_import": s.from_import} for s in project.sources
        ],
        "skipped": [{"path": f.path, "reason": f.reason} for f in files if f.state == "skipped"],
        "unread": [  # what the last index run could not list (its files kept, not read again, until it can be)
            {
                "path": u.path,
                "cause": u.cause,
                "reason": u.reason,
                "missing": u.missing,
                "files_kept": u.files,
                "passages_kept": u.passages,
            }
            for u in unread
        ],
        "index": str(where),
    }
