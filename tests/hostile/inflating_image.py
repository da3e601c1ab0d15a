"""An image that is small on disk and large once decoded: a PNG of one colour, `width` × `height` RGBA
pixels (7,000 × 7,000 is under the 50-megapixel limit), under 1 MB in the file and 196 MB of pixels
once read. Put beside a ChatGPT export (or in a chat file), it must be read with the user's memory
limit (settings.json's attachment_read_memory_mb), not a default: at 256 MB it is stopped, and the
import says which limit stopped it."""

from __future__ import annotations

import struct
import zlib


def png_that_inflates(width: int = 7000, height: int = 7000) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    row = b"\0" + b"\0" * (width * 4)  # (filter byte, then transparent black pixels)
    packer = zlib.compressobj(6)
    stream = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)  # 8 bits, RGBA
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", stream) + chunk(b"IEND", b"")
