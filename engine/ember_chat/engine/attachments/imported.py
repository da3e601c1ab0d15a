"""Attachments brought back by an import (storage/importing.py): the entries an Ember export holds per
message (`AttachmentStore.export_entries`: name, kind, mime, size, sha256, and the text or the image as
base64), or an image file beside a ChatGPT export (`path`, read as if attached), stored and linked to
the imported message, inside the import's transaction. Blobs this
import wrote are removed again when the import is rolled back."""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ember_chat.engine.attachments.extract import read_attachment
from ember_chat.engine.attachments.kinds import AttachmentKind, Extracted
from ember_chat.engine.attachments.store import AttachmentStore
from ember_chat.engine.errors import AttachmentError
from ember_chat.engine.storage.import_plan import ImportFailed

_SHA256 = re.compile(r"[0-9a-f]{64}")


class AttachmentImporter:
    """An `AttachmentSink` over an attachment store."""

    def __init__(self, atts: AttachmentStore) -> None:
        self.atts = atts
        self._written: list[Path] = []

    def add(self, message_id: int, entries: Sequence[dict[str, Any]]) -> None:
        ids = []
        for entry in entries:
            extracted = _extracted(entry)
            if extracted is None:
                continue  # it was already missing when the chat was exported
            blob = self.atts.blob_path(extracted.sha256)
            existed = blob.exists()
            ids.append(self.atts.save(extracted).id)
            if not existed:
                self._written.append(blob)
        self.atts.link(message_id, ids)

    def rolled_back(self) -> None:
        for blob in self._written:
            with contextlib.suppress(OSError):
                blob.unlink()
        self._written.clear()


def _extracted(entry: dict[str, Any]) -> Extracted | None:
    name = entry.get("name")
    if isinstance(entry.get("path"), str):  # an image beside a ChatGPT export: read as if attached
        try:
            read = read_attachment(entry["path"])
        except AttachmentError as exc:
            raise ImportFailed(
                f"An image of the export cannot be kept: {exc} Move it away to import without it."
            ) from None
        return replace(read, name=name) if isinstance(name, str) and name else read
    if not isinstance(name, str) or not name:
        raise ImportFailed("An attached file in the export has no name, so it cannot be kept.")
    if "missing" in entry and "text" not in entry and "data_base64" not in entry:
        return None
    try:
        kind = AttachmentKind(entry.get("kind"))
    except ValueError:
        raise ImportFailed(
            f"The attached file “{name}” is of a kind Ember does not know ({entry.get('kind')!r})."
        ) from None
    if kind is AttachmentKind.IMAGE:
        try:
            image = base64.b64decode(str(entry.get("data_base64", "")), validate=True)
        except (binascii.Error, ValueError):
            raise ImportFailed(
                f"The attached image “{name}” is damaged in the export (its data is not base64)."
            ) from None
        text, content = "", image
    else:
        if not isinstance(entry.get("text"), str):
            raise ImportFailed(f"The attached file “{name}” has no text in the export.")
        image, text = None, entry["text"]
        content = text.encode("utf-8")
    sha = entry.get("sha256")
    if not isinstance(sha, str) or not _SHA256.fullmatch(sha):  # it names a file in the data folder: never trusted
        sha = hashlib.sha256(content).hexdigest()
    size = entry.get("size")
    mime = entry.get("mime")
    return Extracted(
        name=name,
        kind=kind,
        mime=mime if isinstance(mime, str) else "application/octet-stream",
        size=size if type(size) is int and size >= 0 else len(content),
        sha256=sha,
        text=text,
        image=image,
    )
