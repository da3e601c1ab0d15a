"""Attachments brought back by an import (storage/importing.py), stored and linked to the imported
message inside the import's transaction. A chat file comes from anyone, so nothing in it is trusted:

- An Ember export's entries (`AttachmentStore.export_entries`: name, kind, mime, size, and the text or
  the image as base64) are kept from the content the file holds, and only from it. Its `size` is not
  kept either: what the window shows is the size of the text or image kept. A `path` in an entry
  is never followed: an entry that names one instead of holding its content is left out, and the report
  says so in words that do not depend on whether such a file exists (no way to learn which files do).
- The `sha256` in an entry is never used: it names the blob in the data folder that every message
  attaching the same file shares, so a claimed hash would put the file's text in place of a document
  the user attaches later. It is computed from the content kept.
- An image beside a ChatGPT export (`ExportImage`, found by import_chatgpt.export_assets) is the only
  file read from the disk, and only while it is a regular file inside the export's folder (resolved,
  not through a link); one that went missing or moved out meanwhile is left out and counted.
- Every image, from either, passes the checks an attached one does (read_bytes_isolated: its format
  told from its bytes, its size and pixel count within the limits, a GIF or WebP kept as PNG), with the
  user's time and memory limits (`Limits.from_settings`); a text passes the size limit.

A message's entries are read (`AttachmentImporter.read`) before the import takes the chat store's lock:
an image is read in a child process, which may first wait for a reader's turn (shared with the API's
requests) and then take up to attachment_read_seconds, and the window's thread must never wait on the
store's lock that long. The import's cancel reaches those readers. Under the lock, the function `read`
returns only writes the blobs and the rows. Blobs this import wrote are removed again when the import
is rolled back."""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import hashlib
import os
import stat
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ember_chat.engine.attachments.isolated import ReadingStopped, read_bytes_isolated
from ember_chat.engine.attachments.kinds import (
    DEFAULT_LIMITS,
    AttachmentKind,
    Extracted,
    Limits,
    human_size,
    shown_name,
)
from ember_chat.engine.attachments.store import AttachmentStore
from ember_chat.engine.errors import AttachmentError
from ember_chat.engine.storage.import_plan import (
    CANCELLED,
    AttachmentEntry,
    ExportImage,
    ImportCancelled,
    ImportFailed,
    KeepFiles,
)

_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)  # the file itself a link: refused
    | getattr(os, "O_NONBLOCK", 0)  # a FIFO put in its place: the open does not wait for a writer
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
# Where the system can open a file relative to an open folder without following links at any step
# (Linux, macOS), the path is walked one folder at a time from the export's folder: a folder swapped for
# a link at any moment is refused by the open itself. Elsewhere (Windows) the path is checked, then opened.
_WALKS = all(hasattr(os, flag) for flag in ("O_NOFOLLOW", "O_DIRECTORY")) and os.open in os.supports_dir_fd
_FOLDER_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class AttachmentImporter:
    """An `AttachmentSink` over an attachment store; `limits` are the user's (`Limits.from_settings`:
    the size, time and memory limits of settings.json), as for a file attached in the window."""

    def __init__(self, atts: AttachmentStore, limits: Limits = DEFAULT_LIMITS) -> None:
        self.atts = atts
        self.limits = limits
        self._written: list[Path] = []

    def read(self, entries: Sequence[AttachmentEntry], cancelled: Callable[[], bool] | None = None) -> KeepFiles:
        """A message's entries read and checked, outside the store's lock (images in child processes,
        stopped when `cancelled()` turns true: ImportCancelled); ImportFailed for one that cannot be
        kept. The function returned keeps them with a message, inside the import's transaction."""
        files: list[Extracted] = []
        left_out: Counter[str] = Counter()
        try:
            for entry in entries:
                if cancelled is not None and cancelled():
                    raise ImportCancelled(CANCELLED)
                if isinstance(entry, ExportImage):
                    extracted = _export_image(entry, self.limits, cancelled)
                    if extracted is None:
                        left_out["unreadable image"] += 1
                        continue
                elif not isinstance(entry, dict):
                    continue  # (the readers give dicts; nothing else is an entry)
                elif _names_a_path(entry):
                    left_out["by path"] += 1
                    continue
                else:
                    extracted = _from_entry(entry, self.limits, cancelled)
                    if extracted is None:
                        continue  # it was already missing when the chat was exported
                files.append(extracted)
        except ReadingStopped:  # (the import's cancel stopped a reader, waiting for its turn or reading)
            raise ImportCancelled(CANCELLED) from None
        return functools.partial(self._keep, files=files, left_out=dict(left_out))

    def _keep(self, message_id: int, files: list[Extracted], left_out: dict[str, int]) -> dict[str, int]:
        ids = []
        for extracted in files:
            blob = self.atts.blob_path(extracted.sha256)
            existed = blob.exists()
            ids.append(self.atts.save(extracted).id)
            if not existed:
                self._written.append(blob)
        self.atts.link(message_id, ids)
        return left_out

    def rolled_back(self) -> None:
        for blob in self._written:
            with contextlib.suppress(OSError):
                blob.unlink()
        self._written.clear()


def _names_a_path(entry: dict[str, Any]) -> bool:
    """An entry naming a file instead of holding its content (no export of Ember's writes one)."""
    return "path" in entry and "text" not in entry and "data_base64" not in entry


def _from_entry(entry: dict[str, Any], limits: Limits, cancelled: Callable[[], bool] | None) -> Extracted | None:
    """An Ember export's entry, from its content only (None: the export said the file was missing)."""
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise ImportFailed("An attached file in the export has no name, so it cannot be kept.")
    name = shown_name(name)
    if "missing" in entry and "text" not in entry and "data_base64" not in entry:
        return None
    try:
        kind = AttachmentKind(entry.get("kind"))
    except ValueError:
        raise ImportFailed(
            f"The attached file “{name}” is of a kind Ember does not know ({entry.get('kind')!r})."
        ) from None
    if kind is AttachmentKind.IMAGE:
        return _image_entry(name, entry, limits, cancelled)
    text = entry.get("text")
    if not isinstance(text, str):
        raise ImportFailed(f"The attached file “{name}” has no text in the export.")
    content = text.encode("utf-8")
    if len(content) > limits.max_bytes:
        raise ImportFailed(
            f"The attached file “{name}” holds {human_size(len(content))} of text; attachments can be at most "
            f"{human_size(limits.max_bytes)} (attachment_max_mb in Ember's settings.json)."
        )
    # The entry's "size" (the file it was read from, a PDF's) is not kept: it is the file's claim, and
    # the window would show any number it names (issue 28). What is kept is the text, so its size is
    # what is shown.
    mime = entry.get("mime")
    return Extracted(
        name=name,
        kind=kind,
        mime=mime if isinstance(mime, str) and not mime.startswith("image/") else "text/plain",
        size=len(content),
        sha256=hashlib.sha256(content).hexdigest(),  # never the file's claim (see the module)
        text=text,
    )


def _image_entry(name: str, entry: dict[str, Any], limits: Limits, cancelled: Callable[[], bool] | None) -> Extracted:
    try:
        data = base64.b64decode(str(entry.get("data_base64", "")), validate=True)
    except (binascii.Error, ValueError):
        raise ImportFailed(f"The attached image “{name}” is damaged in the export (its data is not base64).") from None
    said = f"The attached image “{name}” in the export cannot be kept:"
    return _checked_image(name, data, limits, cancelled, said, "its data")


def _export_image(image: ExportImage, limits: Limits, cancelled: Callable[[], bool] | None) -> Extracted | None:
    """An image beside a ChatGPT export, read as if attached; None when it is no longer a regular file
    inside the export's folder (the report counts it, without its name)."""
    try:
        data = _read_inside(image.folder, image.path, limits.max_bytes)
    except OSError:
        return None  # gone, or a link, a FIFO or a folder put in its place (ELOOP, ENXIO, EISDIR)
    said = "An image of the export cannot be kept:"
    if data is None:
        raise ImportFailed(
            f"{said} {image.path.name} is larger than attachments can be ({human_size(limits.max_bytes)}, "
            f"attachment_max_mb in Ember's settings.json). {_MOVE_IT}"
        )
    read = _checked_image(image.path.name, data, limits, cancelled, said, image.path.name, f" {_MOVE_IT}")
    return replace(read, name=image.name)


_MOVE_IT = "Move it away to import without it."


def _checked_image(
    name: str,
    data: bytes,
    limits: Limits,
    cancelled: Callable[[], bool] | None,
    said: str,
    subject: str,
    then: str = "",
) -> Extracted:
    """`data` read as an attached image is (in a child process, with the limits), or ImportFailed
    beginning with `said` and ending with `then` (`subject` is what is not an image when it is not one);
    a cancel stops the reader (ReadingStopped)."""
    try:
        read = read_bytes_isolated(name, data, limits, cancelled=cancelled)
    except ReadingStopped:
        raise
    except AttachmentError as exc:
        raise ImportFailed(f"{said} {exc}{then}") from None
    if read.kind is not AttachmentKind.IMAGE:
        raise ImportFailed(f"{said} {subject} is not a PNG, JPEG, WebP or GIF image.{then}")
    return read


def _read_inside(folder: Path, path: Path, max_bytes: int) -> bytes | None:
    """The bytes of `path`, a regular file inside `folder` (resolved) reached through no link, or None
    when it is over `max_bytes` (not read); an OSError when it is not such a file now."""
    if not path.is_relative_to(folder):
        raise FileNotFoundError(path)
    parts = path.relative_to(folder).parts
    if not parts or any(part in (".", "..") for part in parts):
        raise FileNotFoundError(path)
    if _WALKS:
        fd = _walk_to(folder, parts)
    else:  # (checked, then opened: a step could become a link in between, where no walk is possible)
        if os.path.realpath(path) != str(path):
            raise FileNotFoundError(path)  # (a step of it became a link since the folder was walked)
        fd = os.open(path, _OPEN_FLAGS)
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise FileNotFoundError(path)
        if info.st_size > max_bytes:
            return None
        return f.read(max_bytes + 1)


def _walk_to(folder: Path, parts: tuple[str, ...]) -> int:
    """An open descriptor of the file `parts` names under `folder`, each step opened relative to the
    one before and none through a link (O_NOFOLLOW at every step, not only the last)."""
    at = os.open(folder, _FOLDER_FLAGS)
    try:
        for part in parts[:-1]:
            inner = os.open(part, _FOLDER_FLAGS, dir_fd=at)
            os.close(at)
            at = inner
        return os.open(parts[-1], _OPEN_FLAGS, dir_fd=at)
    finally:
        os.close(at)
