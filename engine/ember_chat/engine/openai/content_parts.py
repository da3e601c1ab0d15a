"""OpenAI content parts of a message. Written for a remote server: the text, with each image an `image_url`
part (`wire_content`). Read from a request to Ember's API server: `text`; `file` ({"file": {"filename",
"file_data"}}, the data as base64 or a `data:` URL) read like a file attached in the window; `image_url`
with a `data:` URL (an `http(s)` URL is refused: Ember never fetches a URL named in a request). A
request's files are kept in a temporary attachment store for that one request (`temporary_store`, serve/answering.py).

The API server reads each file and image as its part comes (serve/file_reading.py: in a child process,
with its limits and its turn among the readers)."""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ember_chat.engine.core.images import from_data_url, image_mime, to_data_url
from ember_chat.engine.core.messages import ImageInput
from ember_chat.engine.errors import InvalidParameter

if TYPE_CHECKING:  # (the value a reader gives back: the shapes do not read files themselves)
    from ember_chat.engine.attachments import Extracted

_DATA_URL = re.compile(r"data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?P<params>(;[^;,]*)*?);base64,(?P<data>.*)", re.S)  # files
_IMAGE_SUFFIX = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif"}
_NEVER_FETCHES = (
    "Ember never fetches a URL named in a request; send the image's bytes in a data: URL (data:image/png;base64,...)."
)


class ContentError(ValueError):
    """A content part that cannot be used; the message is for the API client (a 400)."""


class PartReader(Protocol):
    """Reads the bytes of a part's file or image as a file attached in the window is read (the API
    server's serve/file_reading.py Reading: in a child process, with its limits); a file it cannot use
    is a ContentError naming `at`."""

    def read(self, name: str, data: bytes, at: str) -> Extracted: ...


@dataclass
class Content:
    """A message's content parts: its text, the files to attach (read and checked), its images."""

    text: str = ""
    files: list[Extracted] = field(default_factory=list)
    images: list[ImageInput] = field(default_factory=list)


def parse_content(content: Any, where: str, reading: PartReader) -> Content:
    """`content` of one message (a string, or a list of parts); `where` names it in errors
    ("messages[2].content"). Each file and image is read by `reading` as its part comes."""
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


def _file_part(spec: Any, at: str, reading: PartReader) -> Extracted:
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
    return reading.read(name or "file", raw, at)


def _image_part(spec: Any, at: str, reading: PartReader) -> ImageInput:
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


def image_input(image: ImageInput, at: str, reading: PartReader) -> ImageInput:
    """The hook where an `image_url` part becomes a message's image (engineer B's vision path, which
    parses the data: URL): checked like an attached image (format, decompression bombs) before the
    model gets it; a model that cannot see images then says so (ImagesNotSupported: a 400)."""
    name = f"image.{_IMAGE_SUFFIX.get(image_mime(image.data), 'img')}"
    extracted = reading.read(name, image.data, at)
    if extracted.image is None:
        raise ContentError(f"{at}: the data: URL does not hold a PNG, JPEG, WebP or GIF image.")
    return ImageInput(extracted.sha256, extracted.image, name)


def _base64(text: str, at: str) -> bytes:
    try:
        return base64.b64decode(re.sub(r"\s+", "", text), validate=True)
    except (binascii.Error, ValueError):
        raise ContentError(f"{at} is not valid base64.") from None


def wire_content(text: str, images: tuple[ImageInput, ...]) -> str | list[dict[str, Any]]:
    """A message's content on the wire: its text, or with images OpenAI's content parts (each image
    an `image_url` part with a data: URL, before the text as in the window)."""
    if not images:
        return text
    parts: list[dict[str, Any]] = [{"type": "image_url", "image_url": {"url": to_data_url(img)}} for img in images]
    parts.append({"type": "text", "text": text})
    return parts
