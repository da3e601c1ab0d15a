"""What an attachment is once read: its kind, its text (or image bytes) and the limits that guard reading."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ember_chat.engine.storage.settings import Settings

MB = 1024 * 1024
# recordings (the containers engine/speech/audio.py decodes; .oga and .opus are OGG): transcribed into
# their text where a transcriber is at hand (the window: engine/speech/attachment.py), else refused
AUDIO_SUFFIXES = frozenset({".wav", ".mp3", ".m4a", ".ogg", ".oga", ".opus", ".flac"})

Progress = Callable[[float], None]  # fraction done, 0..1 (called on the reading thread)


class AttachmentKind(StrEnum):
    TEXT = "text"
    MARKDOWN = "markdown"
    CODE = "code"
    CSV = "csv"
    JSON = "json"
    HTML = "html"
    PDF = "pdf"
    DOCX = "docx"
    IMAGE = "image"
    AUDIO = "audio"  # a recording, kept as its transcript (engine/speech/attachment.py): a document

    @property
    def is_text(self) -> bool:
        return self is not AttachmentKind.IMAGE


@dataclass(frozen=True)
class Limits:
    """Guards against files that would exhaust memory or time: the file's size (a setting, 50 MB by
    default), what a DOCX unpacks to (zip bombs), an image's pixel count (decompression bombs), and for
    the child process that reads a file (isolated.py) how long it may take and how much memory it may
    use (settings too: a file can be small and still inflate, or be slow to parse)."""

    max_bytes: int = 50 * MB
    max_unpacked_bytes: int = 256 * MB
    max_image_pixels: int = 50_000_000
    max_seconds: float = 60.0
    max_memory_bytes: int = 2048 * MB

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        """The limits the user set (settings.json: attachment_max_mb, attachment_read_seconds,
        attachment_read_memory_mb)."""
        return cls(
            max_bytes=settings.attachment_max_mb * MB,
            max_seconds=float(settings.attachment_read_seconds),
            max_memory_bytes=settings.attachment_read_memory_mb * MB,
        )


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class Extracted:
    """A file read for the chat. `sha256` is the file's own bytes' digest (what dedups it); `text` is ""
    for images; `pages` holds the char offset where each PDF page starts (else ()); `image` holds bytes
    llama.cpp can decode (PNG and JPEG as attached; a GIF's first frame and a WebP as PNG)."""

    name: str
    kind: AttachmentKind
    mime: str
    size: int
    sha256: str
    text: str = ""
    pages: tuple[int, ...] = ()
    image: bytes | None = field(default=None, repr=False)

    def page_of(self, offset: int) -> int | None:
        """The 1-based page holding char `offset`, or None for a file without pages."""
        return page_at(self.pages, offset)


def page_at(pages: tuple[int, ...] | list[int], offset: int) -> int | None:
    if not pages:
        return None
    from bisect import bisect_right

    return max(1, bisect_right(pages, offset))


def shown_name(name: str) -> str:
    """The name a file is shown and kept under: its last part, whichever separator the sender's system
    uses (a name from an API client or a chat file is shown, never used as a path)."""
    return os.path.basename(name.replace("\\", "/")) or "attachment"


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < MB:
        return f"{size / 1024:.0f} KB"
    return f"{size / MB:.1f} MB"
