"""Walking a knowledge source (a folder, or one file) safely, with `stat` only: no file is opened here.

- the files Ember reads (attachments' kinds by name: text, code, Markdown, CSV, JSON, HTML, PDF, DOCX;
  not images nor recordings, which have no text to index); hidden files and folders (.git, .venv) and
  the folders tools fill (node_modules, __pycache__) are left out;
- a link (to a folder or a file) is followed only when where it leads (its real path) is inside the
  source's folder (resolved): one leading outside (`docs -> ~`, `notes.json -> ~/.ssh/key.json`) is
  listed, with its reason, and not followed (a source that is itself a file, or a link the user added,
  is the user's choice: it is read). A linked folder is followed once: each folder is walked at most
  once (by its device and inode), so a link back up the tree (a loop) is reported, not followed;
- at most `MAX_FILES` files per project: past it one problem says the rest are left out;
- a file over the attachment size limit, or that is not a plain file (a pipe, a device: opening one
  could block), is found with the reason it will not be read;
- a source that is not there (a disconnected drive, a folder moved away), a folder that cannot be listed,
  a file gone between listing and stat: a `ScanProblem` naming it. One path never stops the walk."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ember_chat.engine.attachments.extract import kind_by_name
from ember_chat.engine.attachments.kinds import DEFAULT_LIMITS, AttachmentKind, Limits, human_size

MAX_FILES = 100_000  # per project
SKIPPED_FOLDERS = frozenset({"node_modules", "__pycache__", "venv", "site-packages", "$RECYCLE.BIN"})
_NOT_INDEXED_KINDS = frozenset({AttachmentKind.IMAGE, AttachmentKind.AUDIO})


@dataclass(frozen=True)
class FoundFile:
    path: Path
    size: int
    mtime_ns: int
    skip: str | None = None  # why it will not be read (too big, not a plain file): a sentence for the user


@dataclass(frozen=True)
class ScanProblem:
    path: Path
    reason: str  # a sentence for the user
    unlisted: bool = True  # the path's files are unknown now (keep what the index has of them)
    capped: bool = False  # the project's file cap was reached here (said once per project: indexer.py)
    missing: bool = False  # the path is not there at all (a drive unplugged, moved or deleted)
    cause: str = ""  # of an unlisted path: the system's few words ("permission denied", "input/output error")


def indexable(name: str) -> bool:
    """Whether a file of this name is one a project's knowledge reads (by its name only)."""
    if name.startswith("."):
        return False
    kind = kind_by_name(name)
    return kind is not None and kind not in _NOT_INDEXED_KINDS


def under(path: str, folders: Sequence[str]) -> bool:
    """Whether `path` is one of `folders` or inside one of them."""
    return any(path == folder or path.startswith(folder.rstrip(os.sep) + os.sep) for folder in folders)


def scan(
    root: Path | str,
    limits: Limits = DEFAULT_LIMITS,
    max_files: int | None = None,
    stopped: Callable[[], bool] | None = None,
) -> Iterator[FoundFile | ScanProblem]:
    """The files of one knowledge source (`root`: a folder, or a file), at most `max_files` of them
    (default `MAX_FILES`), then a problem if there were more. `stopped()`, when given, is checked at
    each folder: the walk ends there (its caller knows it stopped)."""
    cap = MAX_FILES if max_files is None else max_files
    root = Path(os.path.abspath(root))
    try:
        info = os.stat(root)
    except FileNotFoundError:
        yield ScanProblem(root, f"{root} is not there (a disconnected drive, or moved or deleted?); "
                          "what was indexed from it is kept until it is back or removed from the project.",
                          missing=True, cause="not there")  # fmt: skip
        return
    except OSError as exc:
        cause = _cause(exc)
        yield ScanProblem(root, f"{root} cannot be read ({cause}); what was indexed from it is kept.", cause=cause)
        return
    if not stat.S_ISDIR(info.st_mode):
        if not indexable(root.name):
            yield ScanProblem(root, f"{root.name} is not a kind of file a project's knowledge reads (text, code, "
                              "Markdown, CSV, JSON, HTML, PDF, DOCX).", unlisted=False)  # fmt: skip
        elif cap > 0:
            yield _found(root, info, limits)
        return
    yield from _walk(root, info, limits, cap, stopped)


def _walk(
    root: Path, info: os.stat_result, limits: Limits, cap: int, stopped: Callable[[], bool] | None
) -> Iterator[FoundFile | ScanProblem]:
    seen = {(info.st_dev, info.st_ino)}
    inside = [os.path.realpath(root)]
    folders = [root]
    count = 0
    while folders:
        if stopped is not None and stopped():
            return
        folder = folders.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except FileNotFoundError:  # (the source's own folder too, gone since its stat: a drive just unplugged)
            yield ScanProblem(folder, f"{folder} is no longer there (moved or deleted while it was read).",
                              missing=folder == root, cause="not there")  # fmt: skip
            continue
        except OSError as exc:  # (permission denied, an I/O error: what the index has of it is kept)
            cause = _cause(exc)
            said = f"{folder} cannot be listed ({cause}); the files indexed in it are kept until it can be read again."
            yield ScanProblem(folder, said, cause=cause)
            continue
        subfolders: list[Path] = []
        for entry in entries:
            path = Path(entry.path)
            try:
                is_dir = entry.is_dir()  # (follows a link: a linked folder is walked, once)
            except OSError:
                is_dir = False
            outside = _outside(entry, inside)
            if outside is not None:
                if is_dir and not (entry.name.startswith(".") or entry.name in SKIPPED_FOLDERS):
                    yield ScanProblem(path, f"{path} {outside}", unlisted=False)
                elif not is_dir and indexable(entry.name) and count < cap:
                    count += 1
                    yield _link(path, entry, f"{entry.name} {outside}")
                continue
            if is_dir:
                if entry.name.startswith(".") or entry.name in SKIPPED_FOLDERS:
                    continue
                try:
                    target = entry.stat()
                except OSError as exc:
                    cause = _cause(exc)
                    yield ScanProblem(path, f"{path} cannot be opened ({cause}).", cause=cause)
                    continue
                key = (target.st_dev, target.st_ino)
                if key in seen:
                    if entry.is_symlink():
                        said = f"{path} links to a folder already indexed (a link loop?); not followed."
                        yield ScanProblem(path, said, unlisted=False)
                    continue
                seen.add(key)
                subfolders.append(path)
                continue
            if not indexable(entry.name):
                continue
            if count >= cap:
                said = (
                    f"The project's knowledge holds more files than a project indexes ({MAX_FILES:,}): from {root} "
                    "on, the rest are left out (add the subfolders you need instead)."
                )
                yield ScanProblem(root, said, unlisted=False, capped=True)
                return
            try:
                found_info = entry.stat()  # (follows a link to a file)
            except FileNotFoundError:
                yield ScanProblem(path, f"{path} is gone (deleted while the folder was read, or a broken link).",
                                  unlisted=False)  # fmt: skip
                continue
            except OSError as exc:
                yield ScanProblem(path, f"{path} cannot be read ({exc.strerror or exc}).", unlisted=False)
                continue
            count += 1
            yield _found(path, found_info, limits)
        folders.extend(reversed(subfolders))


def _cause(exc: OSError) -> str:
    """The system's words for why a path could not be read, as said inside a sentence ("permission denied")."""
    said = exc.strerror or str(exc) or type(exc).__name__
    return said[:1].lower() + said[1:]


def inside_folder(path: Path | str, folder: Path | str) -> bool:
    """Whether `path`, its links resolved, is `folder` (resolved) or in it."""
    return under(os.path.realpath(path), [os.path.realpath(folder)])


def _outside(entry: os.DirEntry[str], inside: Sequence[str]) -> str | None:
    """For a link leading outside the folders `inside` (resolved): the sentence saying it is not
    followed (after its name); None for anything else."""
    try:
        if not entry.is_symlink():
            return None
    except OSError:
        return None
    target = os.path.realpath(entry.path)
    if under(target, inside):
        return None
    return f"is a link to {target}, outside the folder: not followed."


def _link(path: Path, entry: os.DirEntry[str], reason: str) -> FoundFile:
    """A link to a file outside the folder, listed as skipped (its own size and time: what it leads to
    is not looked at)."""
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:
        return FoundFile(path, 0, 0, reason)
    return FoundFile(path, info.st_size, info.st_mtime_ns, reason)


def _found(path: Path, info: os.stat_result, limits: Limits) -> FoundFile:
    skip = None
    if not stat.S_ISREG(info.st_mode):
        skip = f"{path.name} is not a plain file (a pipe, socket or device); Ember reads only files."
    elif info.st_size > limits.max_bytes:
        skip = (
            f"{path.name} is {human_size(info.st_size)}; files can be at most {human_size(limits.max_bytes)} "
            "(attachment_max_mb in Ember's settings.json)."
        )
    elif info.st_size == 0:
        skip = f"{path.name} is empty (0 bytes): there is nothing in it to index."
    return FoundFile(path, info.st_size, info.st_mtime_ns, skip)
