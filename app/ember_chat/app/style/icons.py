"""Ember's own icon set (resources/icons/ui/*.svg, 24×24 strokes in `currentColor`), rendered in the
theme's colours at the screen's pixel ratio so they are crisp at 1× and 2×."""

from __future__ import annotations

from functools import cache

from PySide6.QtCore import QByteArray, QRectF, Qt
from PySide6.QtGui import QColor, QIcon, QImage, QPainter, QPixmap
from PySide6.QtSvg import QSvgRenderer

from ember_chat.app.style.theme import Colors
from ember_chat.engine.resources import ui_icon_svg


@cache
def _svg(name: str) -> str:
    return ui_icon_svg(name)


def icon_image(name: str, colour: str, size: int, ratio: float = 1.0) -> QImage:
    """The icon `name` drawn in `colour`, `size` logical pixels square at device pixel ratio `ratio`."""
    pixels = max(1, round(size * ratio))
    image = QImage(pixels, pixels, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    svg = _svg(name).replace("currentColor", QColor(colour).name())
    renderer = QSvgRenderer(QByteArray(svg.encode()))
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter, QRectF(0, 0, pixels, pixels))
    painter.end()
    image.setDevicePixelRatio(ratio)
    return image


def themed_icon(name: str, colors: Colors, colour: str | None = None) -> QIcon:
    """A QIcon for buttons and actions: 1× and 2× renderings in the text colour (secondary when disabled)."""
    icon = QIcon()
    for size in (16, 20, 24):
        for ratio in (1.0, 2.0):
            normal = QPixmap.fromImage(icon_image(name, colour or colors.text, size, ratio))
            disabled = QPixmap.fromImage(icon_image(name, colors.secondary, size, ratio))
            icon.addPixmap(normal, QIcon.Mode.Normal)
            icon.addPixmap(disabled, QIcon.Mode.Disabled)
    return icon
