"""A small PNG of one colour as the engine's image input."""

from __future__ import annotations

import io

from PIL import Image

from ember_chat.engine.core.messages import ImageInput


def png(color: tuple[int, int, int], size: tuple[int, int] = (40, 30)) -> ImageInput:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, "PNG")
    return ImageInput.from_bytes(buf.getvalue(), f"{color}.png")
