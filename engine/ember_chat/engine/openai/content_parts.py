"""OpenAI content parts of a message. Written for a remote server: the text, with each image an `image_url`
part (`wire_content`). Read from a request to Ember's API server: `text`; `file` ({"file": {"filename",
"file_data"}}, the data as base64 or a `data:` URL) read like a file attached in the window; `image_url`
with a `data:` URL (an `http(s)` URL is refused: Ember never fetches a URL named in a request). A
request's files are kept in a temporary attachment store for that one request (`temporary_store`).

Each file and image is read in a child process with the server's time and memory limits
(attachments/isolated.py), never on the connection's thread: a file that takes too long or inflates
is a 400 saying so, and a client that hangs up (or the server stopping) ends its reader at once. The
API's files share at most all readers but one (the window's attachments, imports and the CLI keep
one), in order of arrival; a file that waited `Reading.turn_wait_s` for its turn is a 503 with
Retry-After (the readers are busy: the request can be sent again as it is)."""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ember_chat.engine.attachments import DEFAULT_LIMITS, AttachmentStore, Extracted, Limits, read_bytes_isolated
from ember_chat.engine.attachments.isolated import ReadingStopped
from ember_chat.engine.attachments.reader_turns import ReadersBusy, Requester
from ember_chat.engine.core.images import from_data_url, image_mime, to_data_url
from ember_chat.engine.core.messages import ChatMessage, ImageInput
from ember_chat.engine.errors import AttachmentError, InvalidParameter
from ember_chat.engine.openai.api_error import ApiError

_DATA_URL = re.compile(r"data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?P<params>(;[^;,]*)*?);base64,(?P<data>.*)", re.S)  # files
_IMAGE_SUFFIX = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif"}
TURN_WAIT_S = 30.0  # how long a request's file may wait for a reader (every one the API may use busy)
_NEVER_FETCHES = (
    "Ember never fetches a URL named in a request; send the image's bytes in a data: URL (data:image/png;base64,...)."
)


class ContentError(ValueError):
    """A content part that cannot be used; the message is for the API client (a 400)."""


@dataclass(frozen=True)
class Reading:
    """How a request's files are read: the limits (the server's, from the settings) and what says the
    request is no longer wanted (its client hung up, the server stops); how long a file may wait for
    its turn among the readers before the request is a 503."""

    limits: Limits = DEFAULT_LIMITS
    cancelled: Callable[[], bool] | None = None
    turn_wait_s: float = TURN_WAIT_S


@dataclass
class Content:
    """A message's content parts: its text, the files to attach (read and checked), its images."""

    text: str = ""
    files: list[Extracted] = field(default_factory=list)
    images: list[ImageInput] = field(default_factory=list)


def parse_content(content: Any, where: str, reading: Reading | None = None) -> Content:
    """`content` of one message (a string, or a list of parts); `where` names it in errors
    ("messages[2].content"). ReadingStopped when the request stopped being wanted while a file was read."""
    reading = reading or Reading()
    if isinstance(content, str):
        return Content(content)
    if content is None:
        return Content()
    if not isinstance(content, list):
        raise ContentError(f"{where} must be a string or a list of content parts.")
    out = Content()
    texts: list[str] = []
    for i, part in enumerate(content):
        at = f"{where}[{i}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "file":
            out.files.append(_file_part(part.get("file"), at, reading))
        elif kind == "image_url":
            out.images.append(_image_part(part.get("image_url"), at, reading))
        else:
            raise ContentError(f"{at}: Ember accepts text, file and image_url (data: URL) parts, not {kind!r}.")
    out.text = "".join(texts)
    return out


def _file_part(spec: Any, at: str, reading: Reading) -> Extracted:
    if not isinstance(spec, dict):
        raise ContentError(f"{at}.file must be an object with filename and file_data.")
    if spec.get("file_id") and not spec.get("file_data"):
        raise ContentError(f"{at}.file.file_id: Ember has no file store; send the file's bytes in file_data.")
    data = spec.get("file_data")
    if not isinstance(data, str) or not data:
        raise ContentError(f"{at}.file.file_data must be the file's bytes in base64 (or a base64 data: URL).")
    match = _DATA_URL.fullmatch(data.strip())
    raw = _base64(match.group("data") if match else data, f"{at}.file.file_data")
    name = spec.get("filename") if isinstance(spec.get("filename"), str) else ""
    return _read(name or "file", raw, at, reading)


def _read(name: str, data: bytes, at: str, reading: Reading) -> Extracted:
    try:
        return read_bytes_isolated(
            name,
            data,
            reading.limits,
            cancelled=reading.cancelled,
            requester=Requester.API,  # (the API's share of the readers: never all of them)
            turn_wait_s=reading.turn_wait_s,
        )
    except ReadingStopped:
        raise  # (the server drops the connection: nobody is left to answer)
    except ReadersBusy as exc:
        # every read now running ends within the time limit: a reader is free by then
        retry = max(1, math.ceil(reading.limits.max_seconds))
        said = f"{at}: {exc} Send the request again later."
        headers = {"Retry-After": str(retry)}
        raise ApiError(503, said, "server_error", param="messages", code="readers_busy", headers=headers) from None
    except AttachmentError as exc:
        raise ContentError(f"{at}: {exc}") from None


def _image_part(spec: Any, at: str, reading: Reading) -> ImageInput:
    url = spec.get("url") if isinstance(spec, dict) else spec if isinstance(spec, str) else None
    if not isinstance(url, str) or not url:
        raise ContentError(f"{at}.image_url.url must be a data: URL with the image's bytes in base64.")
    if re.match(r"(?i)\s*https?://", url):
        raise ContentError(f"{at}.image_url: {_NEVER_FETCHES}")
    try:
        image = from_data_url(url)
    except InvalidParameter as exc:
        raise ContentError(f"{at}: {exc}") from None
    return image_input(image, at, reading)


def image_input(image: ImageInput, at: str, reading: Reading) -> ImageInput:
    """The hook where an `image_url` part becomes a message's image (engineer B's vision path, which
    parses the data: URL): checked like an attached image (format, decompression bombs) before the
    model gets it; a model that cannot see images then says so (ImagesNotSupported: a 400)."""
    name = f"image.{_IMAGE_SUFFIX.get(image_mime(image.data), 'img')}"
    extracted = _read(name, image.data, at, reading)
    if extracted.image is None:
        raise ContentError(f"{at}: the data: URL does not hold a PNG, JPEG, WebP or GIF image.")
    return ImageInput(extracted.sha256, extracted.image, name)


def _base64(text: str, at: str) -> bytes:
    try:
        return base64.b64decode(re.sub(r"\s+", "", text), validate=True)
    except (binascii.Error, ValueError):
        raise ContentError(f"{at} is not valid base64.") from None


def attach(messages: list[ChatMessage], files: dict[int, list[Extracted]], store: AttachmentStore) -> list[ChatMessage]:
    """The messages with their files saved in `store` and referred to (`files`: message index → files)."""
    out = list(messages)
    for index, extracted in files.items():
        refs = tuple(store.ref(store.save(e)) for e in extracted)
        out[index] = replace(out[index], attachments=out[index].attachments + refs)
    return out


def wire_content(text: str, images: tuple[ImageInput, ...]) -> str | list[dict[str, Any]]:
    """A message's content on the wire: its text, or with images OpenAI's content parts (each image
    an `image_url` part with a data: URL, before the text as in the window)."""
    if not images:
        return text
    parts: list[dict[str, Any]] = [{"type": "image_url", "image_url": {"url": to_data_url(img)}} for img in images]
    parts.append({"type": "text", "text": text})
    return parts
