"""Render Ember's icon from its SVG source (resources/ember_chat/resources/icons/ember.svg) into what each OS needs:
PNGs for Linux (hicolor sizes) and the window, a multi-size ICO for Windows, an ICNS for macOS.

    QT_QPA_PLATFORM=offscreen python packaging/make_icons.py

The outputs are committed; run this again after changing the SVG."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

ICONS = Path(__file__).resolve().parent.parent / "resources/ember_chat/resources" / "icons"
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)
ICNS_TYPES = {16: b"icp4", 32: b"icp5", 64: b"icp6", 128: b"ic07", 256: b"ic08", 512: b"ic09"}


def render_png(renderer: QSvgRenderer, size: int) -> bytes:
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
    renderer.render(painter)
    painter.end()
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    return bytes(data.data())


def ico(pngs: dict[int, bytes]) -> bytes:
    """A Windows icon with one PNG-compressed image per size (supported since Windows Vista)."""
    sizes = sorted(pngs)
    header = struct.pack("<HHH", 0, 1, len(sizes))
    offset = len(header) + 16 * len(sizes)
    entries, blobs = b"", b""
    for size in sizes:
        blob = pngs[size]
        dim = 0 if size >= 256 else size  # 0 means 256
        entries += struct.pack("<BBBBHHII", dim, dim, 0, 0, 1, 32, len(blob), offset + len(blobs))
        blobs += blob
    return header + entries + blobs


def icns(pngs: dict[int, bytes]) -> bytes:
    """A macOS icon: PNG images under their ICNS types."""
    body = b"".join(kind + struct.pack(">I", 8 + len(pngs[size])) + pngs[size] for size, kind in ICNS_TYPES.items())
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def main() -> int:
    app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])  # noqa: F841 - Qt needs one
    renderer = QSvgRenderer(str(ICONS / "ember.svg"))
    if not renderer.isValid():
        print("make_icons: the SVG could not be read", file=sys.stderr)
        return 1
    pngs = {size: render_png(renderer, size) for size in PNG_SIZES}
    for size, data in pngs.items():
        (ICONS / f"ember-{size}.png").write_bytes(data)
    (ICONS / "ember.ico").write_bytes(ico({s: pngs[s] for s in ICO_SIZES}))
    (ICONS / "ember.icns").write_bytes(icns(pngs))
    print(f"make_icons: {len(pngs)} PNGs, ember.ico, ember.icns in {ICONS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
