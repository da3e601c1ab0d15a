"""Images as the OpenAI wire carries them: `data:` URLs (base64), both ways. Never a fetch: an
`http(s)` URL is refused, not downloaded (no server-side requests)."""

from __future__ import annotations

import base64
import binascii
import re

from ember_chat.engine.core.messages import ImageInput
from ember_chat.engine.errors import InvalidParameter

_DATA_URL = re.compile(r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?P<params>(?:;[\w.+-]+=[^;,]*)*)(?P<b64>;base64)?,", re.I)
MAX_IMAGE_BYTES = 20 << 20  # per image in a request


def image_mime(data: bytes) -> str:
    """The image's type from its first bytes (what servers decode), not from a name."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data.startswith(b"BM"):
        return "image/bmp"
    return "application/octet-stream"


def to_data_url(image: ImageInput) -> str:
    return f"data:{image_mime(image.data)};base64,{base64.b64encode(image.data).decode('ascii')}"


def from_data_url(url: str, name: str = "image") -> ImageInput:
    """An `image_url` part's URL as an image. Raises InvalidParameter for anything but a base64
    `data:` URL of an image (an http(s) URL is never fetched)."""
    url = url.strip()
    if re.match(r"(?i)^https?:", url):
        raise InvalidParameter("image_url must be a data: URL; Ember does not fetch images from the network.")
    m = _DATA_URL.match(url)
    if m is None or not m.group("b64"):
        raise InvalidParameter("image_url must be a base64 data: URL (data:image/png;base64,...).")
    payload = url[m.end() :]
    if len(payload) > MAX_IMAGE_BYTES * 4 // 3 + 4:
        raise InvalidParameter(f"An image is larger than {MAX_IMAGE_BYTES >> 20} MB.")
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidParameter("image_url's data: URL is not valid base64.") from exc
    if image_mime(data) == "application/octet-stream":
        raise InvalidParameter("image_url's data is not a PNG, JPEG, GIF, WebP or BMP image.")
    return ImageInput.from_bytes(data, name)
