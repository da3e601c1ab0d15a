"""What a reading process answers (isolated.py runs it): plain data, never a pickle — one JSON header,
then after a "done" the text's and the image's raw bytes, each field checked by the parent (`receive`,
`Garbled` when anything is off). A process reading a batch of files answers each in turn, in order: a
"done", an "error" or an "alone" (this file is not one a batch reads: read it in a process of its own).
A reader library exploited in the child could write anything here; it can never make the parent run
code. The file's digest is the parent's, from the bytes it gave (`extracted`)."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass
from multiprocessing.connection import Connection

from ember_chat.engine.attachments.kinds import MB, AttachmentKind, Extracted, Limits, human_size

log = logging.getLogger(__name__)

MAX_HEADER = 16 * MB  # a header is small (a PDF's page offsets are its largest part: 100,000 pages ~ 1 MB)
MIME = re.compile(r"[\w.+-]{1,100}/[\w.+-]{1,150}")


class Garbled(ValueError):
    """The child's answer is not what `send` writes (a reader exploited in it, or a bug)."""


@dataclass(frozen=True)
class ReadProgress:
    fraction: float


@dataclass(frozen=True)
class ReadLogged:
    messages: list[tuple[str, int]]


@dataclass(frozen=True)
class ReadFailed:
    message: str


@dataclass(frozen=True)
class ReadAlone:
    """A batch's file that its process did not read (not plain text, or it ran out of memory): read it alone."""


@dataclass(frozen=True)
class ReadDone:
    kind: AttachmentKind
    mime: str
    text: str
    pages: tuple[int, ...]
    image: bytes | None
    claimed_sha256: str | None  # what the child says the file's digest is: compared, never kept


ChildMessage = ReadProgress | ReadLogged | ReadFailed | ReadAlone | ReadDone


def send(out: Connection, what: str, payload: bytes | None = None, **fields: object) -> None:
    """The child's side of `receive`: one JSON header, and after a "done" one its payload's bytes."""
    out.send_bytes(json.dumps({"what": what, **fields}).encode("utf-8"))
    if payload is not None:
        out.send_bytes(payload)


def send_done(out: Connection, result: Extracted) -> None:
    """A file read: its kind, MIME type, page offsets and claimed digest, then its text's or image's bytes."""
    text = result.text.encode("utf-8", "surrogatepass")  # (a lone surrogate a reader let through)
    send(
        out,
        "done",
        text + (result.image or b""),
        kind=str(result.kind),
        mime=result.mime,
        pages=list(result.pages),
        sha256=result.sha256,
        text_bytes=len(text),
        image_bytes=None if result.image is None else len(result.image),
    )


def receive(receiver: Connection, limits: Limits, most: int | None = None) -> ChildMessage:
    """The child's next message, read as bytes and checked field by field (`Garbled` if anything is
    off). EOFError when the child is gone. A payload can be at most the child's memory limit (it could
    not have held more), and at most `most` bytes when the caller knows a bound (a batch's file decoded:
    a few bytes for each of the file's)."""
    try:
        header = json.loads(receiver.recv_bytes(MAX_HEADER), parse_constant=_no_constant)
    except OSError as exc:  # (a message over the length given: "bad message length")
        raise Garbled(f"a header over {human_size(MAX_HEADER)}") from exc
    except (ValueError, RecursionError) as exc:  # (not JSON, or not UTF-8)
        raise Garbled(f"a header that is not JSON ({type(exc).__name__})") from None
    if not isinstance(header, dict):
        raise Garbled("a header that is not an object")
    what = header.get("what")
    if what == "progress":
        fraction = header.get("fraction")
        if type(fraction) not in (int, float) or not 0.0 <= fraction <= 1.0:
            raise Garbled("a progress that is not a fraction")
        return ReadProgress(float(fraction))
    if what == "log":
        messages = header.get("messages")
        if not isinstance(messages, list) or len(messages) > MAX_LOGGED:
            raise Garbled("a log that is not a short list")
        for pair in messages:
            if not (isinstance(pair, list) and len(pair) == 2 and _is_text(pair[0], 1000) and _is_count(pair[1])):
                raise Garbled("a log entry that is not a message and its count")
        return ReadLogged([(message, count) for message, count in messages])
    if what == "error":
        message = header.get("message")
        if not _is_text(message, 4000):
            raise Garbled("an error that is not a sentence")
        return ReadFailed(message)
    if what == "alone":
        return ReadAlone()
    if what == "done":
        return read_done(header, receiver, limits, most)
    raise Garbled(f"a message of kind {what!r}"[:80])


def read_done(header: dict[str, object], receiver: Connection, limits: Limits, most: int | None = None) -> ReadDone:
    try:
        kind = AttachmentKind(header.get("kind"))
    except ValueError:
        raise Garbled("a kind Ember does not know") from None
    mime, pages, claimed = header.get("mime"), header.get("pages"), header.get("sha256")
    text_bytes, image_bytes = header.get("text_bytes"), header.get("image_bytes")
    if not isinstance(mime, str) or not MIME.fullmatch(mime):
        raise Garbled("a MIME type that is not one")
    if not (_is_count(text_bytes) and (image_bytes is None or _is_count(image_bytes))):
        raise Garbled("payload lengths that are not counts")
    if (image_bytes is not None) != (kind is AttachmentKind.IMAGE) or (image_bytes is not None and text_bytes):
        raise Garbled("an image where there is none, or text with an image")
    total = text_bytes + (image_bytes or 0)
    if total > limits.max_memory_bytes:
        raise Garbled("a payload larger than the reader's memory limit")
    if most is not None and total > most:
        raise Garbled("a payload larger than its file could decode to")
    try:
        payload = receiver.recv_bytes(total)
    except OSError as exc:
        raise Garbled("a payload of another length than its header said") from exc
    if len(payload) != total:
        raise Garbled("a payload of another length than its header said")
    try:
        text = payload[:text_bytes].decode("utf-8", "surrogatepass")  # (as the child encoded it)
    except UnicodeDecodeError:
        raise Garbled("a text that is not UTF-8") from None
    if not (isinstance(pages, list) and all(_is_count(p) and p <= len(text) for p in pages)):
        raise Garbled("page offsets that are not offsets into the text")
    if pages != sorted(pages):
        raise Garbled("page offsets out of order")
    if claimed is not None and not (isinstance(claimed, str) and re.fullmatch(r"[0-9a-f]{64}", claimed)):
        raise Garbled("a SHA-256 that is not one")
    image = payload[text_bytes:] if image_bytes is not None else None
    return ReadDone(kind, mime, text, tuple(pages), image, claimed)


def extracted(name: str, data: bytes, done: ReadDone) -> Extracted:
    """The file read: its name, size and digest from the bytes given to the child, never from it."""
    digest = hashlib.sha256(data).hexdigest()
    if done.claimed_sha256 is not None and done.claimed_sha256 != digest:
        log.warning("%s: its reading process claimed another file's SHA-256; the file's own is kept", name)
    return Extracted(name, done.kind, done.mime, len(data), digest, done.text, done.pages, done.image)


MAX_LOGGED = 100  # distinct warnings of the reader libraries sent for one file (the child keeps the most frequent)


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0  # (never a bool: True is an int)


def _is_text(value: object, longest: int) -> bool:
    return isinstance(value, str) and len(value) <= longest


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")
