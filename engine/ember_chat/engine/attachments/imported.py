"""Attachments brought back by an import (storage/importing.py), stored and linked to the imported
message inside the import's transaction. A chat file comes from anyone, so nothing in it is trusted:

- An Ember export's entries (`AttachmentStore.export_entries`: name, kind, mime, size, and the text or
  the image as base64) are kept from the content the file holds, and only from it. A `path` in an entry
  is never followed: an entry that names one instead of holding its content is left out, and the report
  says so in words that do not depend on whether such a file exists (no way to learn which files do).
- The `sha256` in an entry is never used: it names the blob in the data folder that every message
  attaching the same file shares, so a claimed hash would put the file's text in place of a document
  the user attaches later. It is computed from the content kept.
- An image beside a ChatGPT export (`ExportImage`, found by import_chatgpt.export_assets) is the only
  file read from the disk, and only while it is a regular file inside the export's folder (resolved,
  not through a link); one that went missing or moved out meanwhile is left out and counted.
- Every image, from either, passes the checks an attached one does (read_bytes_isolated: its format
  told from its bytes, its size and pixel count within the limits, a GIF or WebP kept as PNG); a text
  passes the size limit.

Blobs this import wrote are removed again when the import is rolled back."""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import os
import stat
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ember_chat.engine.attachments.isolated import read_bytes_isolated
from ember_chat.engine.attachments.kinds import DEFAULT_LIMITS, AttachmentKind, Extracted, Limits, human_size
from ember_chat.engine.attachments.store import AttachmentStore
from ember_chat.engine.errors import AttachmentError
from ember_chat.engine.storage.import_plan import AttachmentEntry, ExportImage, ImportFailed

_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)  # the last step a link: refused (checked again after the walk found it)
    | getattr(os, "O_NONBLOCK", 0)  # a FIFO put in its place: the open does not wait for a writer
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


class AttachmentImporter:
    """An `AttachmentSink` over an attachment store; `limits` are the user's (attachment_max_mb), as
    for a file attached in the window."""

    def __init__(self, atts: AttachmentStore, limits: Limits = DEFAULT_LIMITS) -> None:
        self.atts = atts
        self.limits = limits
        self._written: list[Path] = []

    def add(self, message_id: int, entries: Sequence[AttachmentEntry]) -> dict[str, int]:
        ids = []
        left_out: Counter[str] = Counter()
        for entry in entries:
            if isinstance(entry, ExportImage):
                extracted = _export_image(entry, self.limits)
                if extracted is None:
                    left_out["unreadable image"] += 1
                    continue
            elif not isinstance(entry, dict):
                continue  # (the readers give dicts; nothing else is an entry)
            elif _names_a_path(entry):
                left_out["by path"] += 1
                continue
            else:
                extracted = _from_entry(entry, self.limits)
                if extracted is None:
                    continue  # it was already missing when the chat was exported
            blob = self.atts.blob_path(extracted.sha256)
            existed = blob.exists()
            ids.append(self.atts.save(extracted).id)
            if not existed:
                self._written.append(blob)
        self.atts.link(message_id, ids)
        return dict(left_out)

    def rolled_back(self) -> None:
        for blob in self._written:
            with contextlib.suppress(OSError):
                blob.unlink()
        self._written.clear()


def _names_a_path(entry: dict[str, Any]) -> bool:
    """An entry naming a file instead of holding its content (no export of Ember's writes one)."""
    return "path" in entry and "text" not in entry and "data_base64" not in entry


def _shown(name: str) -> str:
    """A name as an attached file's is kept: its last part (a name is shown, never used as a path)."""
    return os.path.basename(name.replace("\\", "/")) or "attachment"


def _from_entry(entry: dict[str, Any], limits: Limits) -> Extracted | None:
    """An Ember export's entry, from its content only (None: the export said the file was missing)."""
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise ImportFailed("An attached file in the export has no name, so it cannot be kept.")
    name = _shown(name)
    if "missing" in entry and "text" not in entry and "data_base64" not in entry:
        return None
    try:
        kind = AttachmentKind(entry.get("kind"))
    except ValueError:
        raise ImportFailed(
            f"The attached file “{name}” is of a kind Ember does not know ({entry.get('kind')!r})."
        ) from None
    if kind is AttachmentKind.IMAGE:
        return _image_entry(name, entry, limits)
    text = entry.get("text")
    if not isinstance(text, str):
        raise ImportFailed(f"The attached file “{name}” has no text in the export.")
    content = text.encode("utf-8")
    if len(content) > limits.max_bytes:
        raise ImportFailed(
            f"The attached file “{name}” holds {human_size(len(content))} of text; attachments can be at most "
            f"{human_size(limits.max_bytes)} (attachment_max_mb in Ember's settings.json)."
        )
    size = entry.get("size")  # the size of the file it was read from (a PDF's, not its text's): shown only
    mime = entry.get("mime")
    return Extracted(
        name=name,
        kind=kind,
        mime=mime if isinstance(mime, str) and not mime.startswith("image/") else "text/plain",
        size=size if type(size) is int and size >= 0 else len(content),
        sha256=hashlib.sha256(content).hexdigest(),  # never the file's claim (see the module)
        text=text,
    )


def _image_entry(name: str, entry: dict[str, Any], limits: Limits) -> Extracted:
    try:
        data = base64.b64decode(str(entry.get("data_base64", "")), validate=True)
    except (binascii.Error, ValueError):
        raise ImportFailed(f"The attached image “{name}” is damaged in the export (its data is not base64).") from None
    try:
        read = read_bytes_isolated(name, data, limits)  # the checks an attached image passes, in a child
    except AttachmentError as exc:
        raise ImportFailed(f"The attached image “{name}” in the export cannot be kept: {exc}") from None
    if read.kind is not AttachmentKind.IMAGE:
        raise ImportFailed(
            f"The attached image “{name}” in the export cannot be kept: its data is not a PNG, JPEG, WebP or GIF image."
        )
    return read


def _export_image(image: ExportImage, limits: Limits) -> Extracted | None:
    """An image beside a ChatGPT export, read as if attached; None when it is no longer a regular file
    inside the export's folder (the report counts it, without its name)."""
    try:
        data = _read_inside(image.folder, image.path, limits.max_bytes)
    except OSError:
        return None  # gone, or a link, a FIFO or a folder put in its place (ELOOP, ENXIO, EISDIR)
    try:
        if data is None:
            raise AttachmentError(
                f"{image.path.name} is larger than attachments can be ({human_size(limits.max_bytes)}, "
                "attachment_max_mb in Ember's settings.json)."
            )
        read = read_bytes_isolated(image.path.name, data, limits)
    except AttachmentError as exc:
        raise ImportFailed(f"An image of the export cannot be kept: {exc} Move it away to import without it.") from None
    if read.kind is not AttachmentKind.IMAGE:
        raise ImportFailed(
            f"An image of the export cannot be kept: {image.path.name} is not a PNG, JPEG, WebP or GIF image. "
            "Move it away to import without it."
        )
    return replace(read, name=image.name)


def _read_inside(folder: Path, path: Path, max_bytes: int) -> bytes | None:
    """The bytes of `path`, a regular file inside `folder` (resolved) reached through no link, or None
    when it is over `max_bytes` (not read); an OSError when it is not such a file now."""
    if os.path.realpath(path) != str(path) or not path.is_relative_to(folder):
        raise FileNotFoundError(path)  # (a step of it became a link since the folder was walked)
    fd = os.open(path, _OPEN_FLAGS)
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise FileNotFoundError(path)
        if info.st_size > max_bytes:
            return None
        return f.read(max_bytes + 1)
