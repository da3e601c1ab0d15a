"""Reading a file for the chat: detect its kind from its bytes (and name), extract its text, refuse what
cannot be read with one plain sentence. The heavy readers (pypdf, python-docx, Pillow,
charset-normalizer) are imported here, lazily, inside the functions that need them: importing this
package costs nothing at start-up.

These run in the calling process with no time or memory limit: a file from outside (attached, sent to
the API, given to `run --attach`) is read through isolated.py, which calls them in a child process
with both limits."""

from __future__ import annotations

import hashlib
import mimetypes
import os
import stat
from pathlib import Path

from ember_chat.engine.attachments.kinds import (
    AUDIO_SUFFIXES,
    DEFAULT_LIMITS,
    MB,
    AttachmentKind,
    Extracted,
    Limits,
    Progress,
    human_size,
    shown_name,
)
from ember_chat.engine.errors import AttachmentError

READ_CHUNK = 4 * MB

_BY_SUFFIX = {
    **dict.fromkeys((".md", ".markdown", ".mdown", ".mkd"), AttachmentKind.MARKDOWN),
    **dict.fromkeys((".csv", ".tsv"), AttachmentKind.CSV),
    **dict.fromkeys((".json", ".jsonl", ".ndjson", ".geojson"), AttachmentKind.JSON),
    **dict.fromkeys((".html", ".htm", ".xhtml"), AttachmentKind.HTML),
    **dict.fromkeys((".txt", ".text", ".log", ""), AttachmentKind.TEXT),
}
_CODE_SUFFIXES_WORDS = (
    ".py .pyi .js .mjs .cjs .ts .tsx .jsx .c .h .cc .cpp .cxx .hpp .hh .java .kt .kts .go .rs .rb .php .swift "
    ".cs .m .mm .scala .sh .bash .zsh .fish .ps1 .bat .sql .r .lua .pl .pm .yaml .yml .toml .ini .cfg .conf "
    ".xml .css .scss .sass .less .vue .svelte .dart .zig .hs .ex .exs .erl .clj .cljs .el .lisp .scm .ml .mli "
    ".fs .fsx .jl .nim .v .sv .vhd .cmake .mk .gradle .proto .graphql .tf .nix .rst .tex .bib .diff .patch "
    ".ipynb .dockerfile .makefile .gitignore .env .properties .asm .s .f90 .pas .d .cr .groovy"
)
_CODE_SUFFIXES = frozenset(_CODE_SUFFIXES_WORDS.split())
_MIME = {
    AttachmentKind.TEXT: "text/plain",
    AttachmentKind.MARKDOWN: "text/markdown",
    AttachmentKind.CODE: "text/plain",
    AttachmentKind.CSV: "text/csv",
    AttachmentKind.JSON: "application/json",
    AttachmentKind.HTML: "text/html",
    AttachmentKind.PDF: "application/pdf",
    AttachmentKind.DOCX: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
}


def read_attachment(path: Path | str, limits: Limits = DEFAULT_LIMITS, progress: Progress | None = None) -> Extracted:
    """Read and extract a file; raises AttachmentError with a sentence for the user."""
    path = Path(path)
    outer = None if progress is None else (lambda fraction: progress(0.2 * fraction))
    data = read_file_bytes(path, limits, outer)
    inner = None if progress is None else (lambda fraction: progress(0.2 + 0.8 * fraction))
    return read_attachment_bytes(path.name, data, limits, inner)


def read_file_bytes(path: Path, limits: Limits = DEFAULT_LIMITS, progress: Progress | None = None) -> bytes:
    """A file's bytes, within the size limit (`progress`: the fraction read); AttachmentError with a
    sentence for a folder, a file that is gone, cannot be opened, is not a plain file, is empty or too big."""
    return read_plain_file(path, limits, progress)[0]


GONE = "no longer exists (was it moved or deleted?); attach it again."


def read_plain_file(
    path: Path, limits: Limits = DEFAULT_LIMITS, progress: Progress | None = None, *, gone: str = GONE
) -> tuple[bytes, os.stat_result]:
    """A file's bytes and its `fstat` as read (it may have changed since it was listed). It is opened
    without blocking (a pipe or device put in a file's place would block a plain open) and checked, on
    the open file, to be a plain file within the size limit before a byte is read; one that grows past
    the limit while read is refused too. AttachmentError with a sentence (`gone`: what is said after the
    file's name when it is not there)."""
    name = path.name
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise AttachmentError(f"{name} {gone}") from None
    except PermissionError:
        if path.is_dir():  # (Windows will not open a folder)
            raise AttachmentError(f"{name} is a folder; attach the files in it instead.") from None
        raise AttachmentError(f"{name} cannot be read: permission denied.") from None
    except OSError as exc:
        raise AttachmentError(f"{name} cannot be read: {exc.strerror or exc}.") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise AttachmentError(f"{name} is a folder; attach the files in it instead.")
        if not stat.S_ISREG(info.st_mode):
            raise AttachmentError(f"{name} is not a plain file (a pipe, socket or device); Ember reads only files.")
        _check_size(name, info.st_size, limits)
    except OSError as exc:
        os.close(fd)
        raise AttachmentError(f"{name} cannot be read: {exc.strerror or exc}.") from None
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as f:
        try:
            chunks: list[bytes] = []
            done = 0
            while block := f.read(READ_CHUNK):
                chunks.append(block)
                done += len(block)
                if done > limits.max_bytes:
                    raise AttachmentError(f"{name} grew past {human_size(limits.max_bytes)} while it was read.")
                if progress is not None and info.st_size:
                    progress(min(1.0, done / info.st_size))
        except OSError as exc:
            raise AttachmentError(f"{name} cannot be read: {exc.strerror or exc}.") from None
    return b"".join(chunks), info


def read_attachment_bytes(
    name: str, data: bytes, limits: Limits = DEFAULT_LIMITS, progress: Progress | None = None
) -> Extracted:
    """Extract a file given as bytes (a paste, an API request's `file` part)."""
    name = shown_name(name)
    _check_size(name, len(data), limits)
    digest = hashlib.sha256(data).hexdigest()
    kind = sniff_kind(name, data)
    from ember_chat.engine.attachments import formats

    pages: tuple[int, ...] = ()
    image = None
    mime = _MIME.get(kind, "application/octet-stream")
    if kind is AttachmentKind.PDF:
        text, pages = formats.pdf_text(name, data, progress)
    elif kind is AttachmentKind.DOCX:
        text = formats.docx_text(name, data, limits)
    elif kind is AttachmentKind.IMAGE:
        text = ""
        image, mime = formats.image_bytes(name, data, limits)
    else:
        text = formats.decode_text(name, data)
        if kind is AttachmentKind.HTML:
            text = formats.html_text(text, name)
        guessed = mimetypes.guess_type(name)[0]
        if kind is AttachmentKind.CODE and guessed and guessed.startswith("text/"):
            mime = guessed
    if progress is not None:
        progress(1.0)
    return Extracted(name, kind, mime, len(data), digest, text, pages, image)


def _check_size(name: str, size: int, limits: Limits) -> None:
    if size == 0:
        raise AttachmentError(f"{name} is empty (0 bytes): there is nothing in it to attach.")
    if size > limits.max_bytes:
        raise AttachmentError(
            f"{name} is {human_size(size)}; attachments can be at most {human_size(limits.max_bytes)} "
            "(attachment_max_mb in Ember's settings.json)."
        )


_CODE_NAMES = ("makefile", "dockerfile", "cmakelists.txt")
_IMAGE_SUFFIXES = frozenset((".png", ".jpg", ".jpeg", ".gif", ".webp"))


def kind_by_name(name: str) -> AttachmentKind | None:
    """The kind a file's name says it is, before it is opened, or None where the name says nothing Ember
    reads (no suffix, or one it does not know): how a folder's files are picked for a project's
    knowledge (projects/scan.py). Reading still sniffs the bytes (`read_attachment_bytes`)."""
    lowered = Path(name).name.lower()
    suffix = Path(lowered).suffix
    if suffix == ".pdf":
        return AttachmentKind.PDF
    if suffix in (".docx", ".docm"):
        return AttachmentKind.DOCX
    if suffix in _IMAGE_SUFFIXES:
        return AttachmentKind.IMAGE
    if suffix in AUDIO_SUFFIXES:
        return AttachmentKind.AUDIO
    if suffix in _CODE_SUFFIXES or lowered in _CODE_NAMES:
        return AttachmentKind.CODE
    return _BY_SUFFIX.get(suffix) if suffix else None


def sniff_kind(name: str, data: bytes) -> AttachmentKind:
    """The kind a file is, from its first bytes (a PDF, an image, a DOCX whatever its name), else from its
    name; AttachmentError for an archive or a recording. Only looks at the bytes (their first 64 KB at most)."""
    head = data[:16]
    if head.startswith(b"%PDF-"):
        return AttachmentKind.PDF
    if head.startswith((b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a")) or (
        head[:4] == b"RIFF" and head[8:12] == b"WEBP"
    ):
        return AttachmentKind.IMAGE
    if head.startswith(b"PK\x03\x04"):
        if name.lower().endswith((".docx", ".docm")) or b"word/document.xml" in data[:65536]:
            return AttachmentKind.DOCX
        raise AttachmentError(f"{name} is a zip archive; Ember reads text, PDF, DOCX and image files, not archives.")
    suffix = Path(name).suffix.lower()
    if suffix in AUDIO_SUFFIXES:  # (the window transcribes them before they come here)
        raise AttachmentError(
            f"{name} is a recording: Ember transcribes recordings attached in its window; here, transcribe it "
            "first (ember-chat transcribe FILE, or POST /v1/audio/transcriptions) and attach the text."
        )
    if suffix in _CODE_SUFFIXES or Path(name).name.lower() in _CODE_NAMES:
        return AttachmentKind.CODE
    return _BY_SUFFIX.get(suffix, AttachmentKind.TEXT)
