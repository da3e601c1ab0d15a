"""How a knowledge source reads in the Knowledge tab (knowledge_panel.py): its row's state (its files,
pages, passages, waiting and skipped; paused; not there; the folders in it that could not be read), and
an unreadable folder's row in Show skipped files…. Words only, from what the panel last read: nothing
here reads the index or the disk. Translated in the panel's context ("KnowledgePanel"). A name from the disk
(a folder's, a cause or reason naming one) is shown through `shown`."""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Sequence

from PySide6.QtCore import QCoreApplication

from ember_chat.app.projects.indexing import SourceState
from ember_chat.engine.projects.index import UnreadFolder
from ember_chat.engine.projects.indexer import IndexProgress, IndexRun
from ember_chat.engine.projects.records import KnowledgeSource
from ember_chat.engine.projects.scan import ScanProblem
from ember_chat.engine.storage.titles import without_format_characters

_ESCAPED = frozenset({"Cc", "Zl", "Zp", "Cs"})  # (control characters, line and paragraph separators)
TIP_FOLDERS = 10  # unreadable folders named in a source's tooltip; the rest counted


def _tr(text: str) -> str:
    return QCoreApplication.translate("KnowledgePanel", text)


def shown(text: str) -> str:
    """A name from the disk as the Knowledge tab shows it, on one line and in its order: without format
    characters (a right-to-left override turned the rest of the line round: "a\u202egpj.exe" read as
    "aexe.jpg"; the joiners that spell a name kept, as in chat titles), a control character or line break
    as its escape ("a\\nb")."""
    kept = without_format_characters(text)
    if kept.isprintable():
        return kept
    return "".join(
        ch.encode("unicode_escape", "backslashreplace").decode("ascii") if unicodedata.category(ch) in _ESCAPED else ch
        for ch in kept
    )


def state_text(
    source: KnowledgeSource,
    s: SourceState,
    *,
    paused: bool,
    problem: ScanProblem | None,
    unread: Sequence[UnreadFolder],
    running: bool,
) -> str:
    """The row's state: `s` its counts, `paused` (the source or the project's indexing), `problem` why its
    last walk could not walk it (None: it could), `unread` the folders in it that could not be listed,
    `running` whether a run of the project goes."""
    if source.from_import:
        return _tr("From an imported chat — check this path before indexing it")
    if paused:
        said = _tr("Paused") if not s.files else _tr("Paused") + " · " + counts_text(s)
        return said if not unread else said + " · " + unread_text(source, unread)  # (as its last walk found them)
    if problem is not None:  # (the last run could not walk it: its passages are kept, as the engine says)
        said = _tr("Not there") if problem.missing else _tr("Cannot be read")
        if not s.files:
            return said
        return _tr("{said} — {counts} kept until it is back or removed").format(said=said, counts=counts_text(s))
    if not s.files and not unread:
        return _tr("Indexing…") if running else _tr("Not indexed yet")
    said = counts_text(s) if s.files else ""
    if unread:
        said = (said + " · " if said else "") + unread_text(source, unread)
    return said


def unread_text(source: KnowledgeSource, unread: Sequence[UnreadFolder]) -> str:
    """ "1 folder could not be read: locked (permission denied), 2 files kept" """
    named = ", ".join(
        _tr("{folder} ({cause})").format(folder=shown(inside(f.path, source.path)), cause=shown(f.cause))
        for f in unread[:3]
    )
    if len(unread) > 3:
        named += _tr(" and {n} more").format(n=f"{len(unread) - 3:,}")
    files = sum(f.files for f in unread)
    if len(unread) == 1:
        said = _tr("1 folder could not be read: {named}").format(named=named)
    else:
        said = _tr("{n} folders could not be read: {named}").format(n=f"{len(unread):,}", named=named)
    if not files:
        return said
    kept = _tr("1 file kept") if files == 1 else _tr("{n} files kept").format(n=f"{files:,}")
    return said + ", " + kept  # (the whole sentence, that they are kept until it can be read: the tooltip)


def _count(n: int, one: str, many: str) -> str:
    """`one` for 1, else `many` with its {n} ("1 files" read wrong)."""
    return one if n == 1 else many.format(n=f"{n:,}")


def counts_text(s: SourceState) -> str:
    parts = [_count(s.indexed, _tr("1 file"), _tr("{n} files"))]
    if s.pages:
        parts.append(_count(s.pages, _tr("1 page"), _tr("{n} pages")))
    parts.append(_count(s.passages, _tr("1 passage"), _tr("{n} passages")))
    if s.pending:
        parts.append(_tr("{n} waiting").format(n=f"{s.pending:,}"))
    if s.skipped:
        parts.append(_tr("{n} skipped").format(n=f"{s.skipped:,}"))
    return ", ".join(parts)


def progress_text(p: IndexProgress) -> str:
    """ "Indexing: 3 of 40 files to read, 1 page, 12 passages — notes.md"; a run with no file (yet) to read
    (its walk under way, or nothing new or changed): "Checking for changes…" ("0 of 0 files to read" read as
    though the source had none)."""
    if not p.files_total:
        return _tr("Checking for changes…")
    files = (_tr("{done} of 1 file to read") if p.files_total == 1 else _tr("{done} of {total} files to read")).format(
        done=f"{p.files_done:,}", total=f"{p.files_total:,}"
    )
    pages = _count(p.pages, _tr("1 page"), _tr("{n} pages"))
    passages = _count(p.passages, _tr("1 passage"), _tr("{n} passages"))
    text = _tr("Indexing: {files}, {pages}, {passages}").format(files=files, pages=pages, passages=passages)
    return text + (" — " + shown(os.path.basename(p.current)) if p.current else "")


def finished_text(result: IndexRun) -> str:
    """ "Up to date: 1 file read, 2 skipped." — only the counts there are; a run that read, skipped and
    dropped nothing (nothing had changed): "Up to date." ("0 files read" read as though the source held none)."""
    parts = []
    if result.read:
        parts.append(_count(result.read, _tr("1 file read"), _tr("{n} files read")))
    if result.skipped:
        parts.append(_tr("{n} skipped").format(n=f"{result.skipped:,}"))
    if result.dropped:
        parts.append(_tr("{n} gone from disk").format(n=f"{result.dropped:,}"))
    if not parts:
        return _tr("Up to date.")
    return _tr("Up to date: {counts}.").format(counts=", ".join(parts))


def unread_reason(folder: UnreadFolder) -> str:
    """A folder's row in Show skipped files… (its cause first: the column is elided in the middle)."""
    if folder.files == 1:
        return _tr(
            "Folder cannot be read ({cause}); the 1 file indexed in it is kept, not read again, until it can be "
            "read or is removed."
        ).format(cause=shown(folder.cause))
    if folder.files:
        return _tr(
            "Folder cannot be read ({cause}); the {n} files indexed in it are kept, not read again, until it "
            "can be read or is removed."
        ).format(cause=shown(folder.cause), n=f"{folder.files:,}")
    return _tr("Folder cannot be read ({cause}).").format(cause=shown(folder.cause))


def state_tip(state: str, unread: Sequence[UnreadFolder]) -> str:
    """A source's tooltip: its row's state, then why each folder in it could not be read (the first
    TIP_FOLDERS of them: a tooltip of a thousand sentences covers the screen)."""
    said = [state, *(shown(f.reason) for f in unread[:TIP_FOLDERS])]
    if len(unread) > TIP_FOLDERS:
        said.append(_tr("And {n} more.").format(n=f"{len(unread) - TIP_FOLDERS:,}"))
    return " ".join(said)


def inside(path: str, root: str) -> str:
    """`path` as said in its source's row: relative to the source's folder (`locked/inner`)."""
    try:
        return os.path.relpath(path, os.path.abspath(root))
    except ValueError:  # (another drive, on Windows)
        return path
