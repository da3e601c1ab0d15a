"""The built-in file readers: list and read text files in the folders the user picked, and nothing
else. Read-only (files are opened for reading only, never created, changed or touched). A path is
written as the folder's name then the path inside it ("notes/todo.md", as list_files shows it); with
one folder, a path inside it may leave the name out. Whatever a path says ('..', an absolute path, a
link), the file it reaches must lie inside a picked folder, checked on the resolved path. A long file
is cut with a note saying where to read on (never cut silently); binary files, fifos and devices are
refused. Every refusal is one sentence, raised as FileToolError."""

from __future__ import annotations

import codecs
import os
import stat
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

READ_LIMIT_BYTES = 32 * 1024  # one read_file answer (about 8,000 tokens); `offset` reads on
LIST_LIMIT = 500  # entries in one list_files answer
_COUNT_BEYOND = 10  # entries past the limit are counted up to this many lists' worth, then "many more"
_SNIFF_BYTES = 8192
_BAD_BYTES_SHARE = 0.02  # more undecodable bytes than this: not a text file


class FileToolError(Exception):
    """A path or file the readers refuse: the message is the sentence given back."""


@dataclass(frozen=True)
class _Root:
    label: str  # the name paths start with
    real: str  # the folder, resolved (links followed) when it was picked


def _labels(folders: Sequence[Path]) -> list[_Root]:
    roots: list[_Root] = []
    used: set[str] = set()
    for folder in folders:
        base = Path(folder).name or "folder"
        label, n = base, 2
        while label in used:
            label, n = f"{base}-{n}", n + 1
        used.add(label)
        roots.append(_Root(label, os.path.realpath(folder)))
    return roots


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    value, unit = n / 1024, "KB"
    for bigger in ("MB", "GB", "TB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{value:.1f} {unit}"


def _inside(real: str, root: _Root) -> bool:
    return real == root.real or real.startswith(root.real.rstrip(os.sep) + os.sep)


class FolderReader:
    def __init__(self, folders: Sequence[Path], read_limit: int = READ_LIMIT_BYTES) -> None:
        self.roots = _labels(folders)
        self.read_limit = read_limit

    def names(self) -> str:
        return ", ".join(r.label for r in self.roots)

    # ----- paths

    def _resolve(self, path: str) -> tuple[_Root, str, str] | None:
        """(folder, resolved path, the path as shown) for `path`; None for the top (no path)."""
        text = path.strip().replace("\\", "/")
        if "\x00" in text:
            raise FileToolError("A path cannot hold a NUL character; write it as list_files shows it.")
        if os.path.isabs(text):
            real = os.path.realpath(text)
            for root in self.roots:
                if _inside(real, root):
                    shown = os.path.relpath(real, root.real).replace(os.sep, "/")
                    return root, real, root.label if shown == "." else f"{root.label}/{shown}"
            raise FileToolError(
                f"'{path}' is outside the folders you may read ({self.names()}). "
                "Write paths as list_files shows them, starting with one of those folder names."
            )
        parts = [p for p in text.split("/") if p not in ("", ".")]
        if not parts:
            return None
        by_label = {r.label: r for r in self.roots}
        if parts[0] in by_label:
            root, rest = by_label[parts[0]], parts[1:]
        elif len(self.roots) == 1:
            root, rest = self.roots[0], parts
        elif parts[0] == "..":
            raise FileToolError(f"'{path}' leads outside the folders you may read ({self.names()}).")
        else:
            raise FileToolError(
                f"'{path}' does not start with one of the folders you may read: {self.names()}. "
                "Write paths as list_files shows them."
            )
        if not os.path.isdir(root.real):
            raise FileToolError(
                f"The folder '{root.label}' cannot be found any more; the user can pick it again in Settings ▸ Tools."
            )
        real = os.path.realpath(os.path.join(root.real, *rest))
        if not _inside(real, root):
            raise FileToolError(
                f"'{path}' leads outside the folder '{root.label}' (through '..' or a link), so it cannot be read."
            )
        shown = os.path.relpath(real, root.real).replace(os.sep, "/")
        return root, real, root.label if shown == "." else f"{root.label}/{shown}"

    # ----- list_files

    def list_files(self, path: str = "", recursive: bool = False, cancel: threading.Event | None = None) -> str:
        where = self._resolve(path)
        if where is None and len(self.roots) != 1:
            lines = [f"{r.label}/ (folder)" for r in self.roots]
            return "The folders you may read:\n" + "\n".join(lines)
        if where is None:
            root = self.roots[0]
            if not os.path.isdir(root.real):
                raise FileToolError(
                    f"The folder '{root.label}' cannot be found any more; "
                    "the user can pick it again in Settings ▸ Tools."
                )
            where = (root, root.real, root.label)
        root, real, shown = where
        if not os.path.exists(real):
            raise FileToolError(f"'{path}' does not exist. list_files shows what is there.")
        if not os.path.isdir(real):
            raise FileToolError(f"'{shown}' is a file, not a folder: read it with read_file.")
        lines: list[str] = []
        more = chars = 0
        for line in self._entries(root, real, shown, recursive, cancel):
            if not more and len(lines) < LIST_LIMIT and chars + len(line) < READ_LIMIT_BYTES:
                lines.append(line)
                chars += len(line) + 1
            elif more < LIST_LIMIT * _COUNT_BEYOND:
                more += 1
            else:  # a home folder's million files are not walked to the end just to count them
                more = -1
                break
        if not lines:
            return f"'{shown}' is empty."
        text = f"In {shown}/:\n" + "\n".join(lines)
        if more:
            text += (
                f"\n[… and {'many' if more < 0 else more} more not shown: a list stops at {LIST_LIMIT} entries "
                f"or {READ_LIMIT_BYTES // 1024} KB. "
                "List a subfolder to see more.]"
            )
        return text

    def _entries(
        self, root: _Root, folder: str, shown: str, recursive: bool, cancel: threading.Event | None
    ) -> Iterator[str]:
        """One line per entry, depth first, walked with a stack of open listings (no recursion: a
        folder may be nested deeper than Python recurses)."""
        stack = [iter(self._scan(folder, shown))]
        while stack:
            if cancel is not None and cancel.is_set():
                return
            item = next(stack[-1], None)
            if item is None:
                stack.pop()
                continue
            entry, name = item
            if isinstance(entry, str):
                yield entry  # a folder Ember may not open
            elif entry.is_symlink() and not _inside(os.path.realpath(entry.path), root):
                yield f"{name} (a link to outside the folder: it cannot be read)"
            elif entry.is_dir():
                yield f"{name}/"
                if recursive and not entry.is_symlink():  # a link inside is listed, not walked (no loops)
                    stack.append(iter(self._scan(entry.path, name)))
            elif entry.is_file():
                try:
                    yield f"{name} ({_size(entry.stat().st_size)})"
                except OSError:
                    yield f"{name} (cannot be read)"
            else:
                yield f"{name} (not a regular file: it cannot be read)"

    @staticmethod
    def _scan(folder: str, shown: str) -> list[tuple[os.DirEntry[str] | str, str]]:
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name.lower())
        except PermissionError:
            return [(f"{shown}/ (Ember is not allowed to open this folder)", shown)]
        except OSError as e:
            return [(f"{shown}/ (cannot be opened: {e.strerror or 'unknown error'})", shown)]
        return [(e, f"{shown}/{e.name}") for e in entries]

    # ----- read_file

    def read_file(self, path: str, offset: int = 0) -> str:
        where = self._resolve(path)
        if where is None:
            raise FileToolError("Give read_file the path of a file, as list_files shows it.")
        _, real, shown = where
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | os.O_CLOEXEC
        try:
            fd = os.open(real, flags)
        except FileNotFoundError:
            raise FileToolError(f"'{path}' does not exist. list_files shows what is there.") from None
        except PermissionError:
            raise FileToolError(f"Ember is not allowed to read '{shown}' (permission denied).") from None
        except OSError as e:
            raise FileToolError(f"'{shown}' cannot be opened ({e.strerror or 'unknown error'}).") from None
        try:
            info = os.fstat(fd)
            if stat.S_ISDIR(info.st_mode):
                raise FileToolError(f"'{shown}' is a folder: list it with list_files.")
            if not stat.S_ISREG(info.st_mode):
                raise FileToolError(f"'{shown}' is not a regular file (a device, pipe or socket), so it is not read.")
            return self._read_text(fd, shown, info.st_size, offset)
        finally:
            os.close(fd)

    def _read_text(self, fd: int, shown: str, size: int, offset: int) -> str:
        if size == 0:
            return f"('{shown}' is empty: 0 bytes.)"
        if offset < 0 or offset >= size:
            raise FileToolError(f"'{shown}' is {size} bytes long; offset {offset} is past its end (0 to {size - 1}).")
        os.lseek(fd, offset, os.SEEK_SET)
        data = os.read(fd, self.read_limit)
        # a file is text or not as a whole: its start decides too when reading on from an offset
        if b"\x00" in data[:_SNIFF_BYTES] or (offset > 0 and b"\x00" in os.pread(fd, _SNIFF_BYTES, 0)):
            raise FileToolError(f"'{shown}' is a binary file (not text), so read_file cannot show it.")
        skipped = 0
        while skipped < 3 and skipped < len(data) and 0x80 <= data[skipped] <= 0xBF:
            skipped += 1  # a read that starts inside a character starts at the next one
        body = data[skipped:]
        end = offset + len(data)
        final = end >= size
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        text = decoder.decode(body, final)
        held = len(decoder.getstate()[0])  # the start of a character cut by the limit: read on from it
        end -= held
        bad = 0
        if "\ufffd" in text:
            bad = len(body) - held - len(text.replace("\ufffd", "").encode("utf-8"))
            if bad > max(3, _BAD_BYTES_SHARE * len(body)):
                raise FileToolError(f"'{shown}' is a binary file (not UTF-8 text), so read_file cannot show it.")
        notes = []
        if bad > 0:
            notes.append(f"{bad} bytes were not UTF-8 text and show as �")
        if end < size:
            notes.append(
                f"Cut: '{shown}' is {_size(size)} ({size} bytes); this shows bytes {offset} to {end}. "
                f"To read on, call read_file with offset {end}"
            )
        return text + ("\n\n[" + ". ".join(notes) + ".]" if notes else "")
