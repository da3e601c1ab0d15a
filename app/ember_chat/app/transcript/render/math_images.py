"""Formulas typeset to images: ziamath lays the LaTeX out (STIX Two Math, pure Python) and writes SVG,
QtSvg draws it at the screen's device pixel ratio (sharp on HiDPI) in the theme's text colour.

Images are cached by what they depend on: (source, display, colour, size, device pixel ratio), so
a chat opened again, or a theme switched back, costs no typesetting. A formula ziamath cannot
read gives None (and is remembered as such): the writer shows its source as code instead.

Each image is padded above or below so that, drawn "middle-aligned" by Qt (the image's centre a
quarter of an x-height above the baseline), the formula's own baseline sits on the line's baseline."""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QByteArray, QRectF, Qt
from PySide6.QtGui import QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

log = logging.getLogger(__name__)

MAX_BYTES = 48 * 1024 * 1024  # the cache's budget (an inline formula is a few kB, a big display one at 200 % ~0.3 MB)

_ziamath: Any = None
_missing = False  # ziamath is not installed


def _zm() -> Any:
    """ziamath, imported on first use (it reads its 1.5 MB font then: ~0.15 s; `load` does it off the
    GUI thread); None if it is not installed (formulas then stay their source)."""
    global _ziamath, _missing
    if _ziamath is None and not _missing:
        try:
            with warnings.catch_warnings():  # (it opens its font with importlib.resources.path)
                warnings.simplefilter("ignore", DeprecationWarning)
                import ziamath
        except ImportError:
            _missing = True
            return None
        except Exception:  # (a bundle missing its font: formulas stay their source, never a hang or a crash)
            log.warning("ziamath could not be imported: formulas are shown as their source", exc_info=True)
            _missing = True
            return None
        ziamath.config.svg2 = False  # plain SVG 1.1 paths: QtSvg draws no <symbol>/<use> of SVG 2
        _ziamath = ziamath
    return _ziamath


def load() -> bool:
    """Import ziamath (on a worker thread: see MathWriter); whether it is there."""
    return _zm() is not None


def give_up() -> None:
    """The import failed in a way `_zm` did not catch: formulas stay their source from now on."""
    global _missing
    _missing = True


def loaded() -> bool:
    """Whether typesetting can start without an import (ziamath imported, or known to be missing)."""
    return _ziamath is not None or _missing


@dataclass(frozen=True)
class MathImage:
    image: QImage  # at the device pixel ratio it was made for
    width: float  # logical pixels (what the document lays out)
    height: float


Key = tuple[str, bool, str, float, float, float]


class MathImages:
    """The typeset formulas of this run of Ember (one cache for every transcript)."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0  # what the cached images weigh
        self._cache: OrderedDict[Key, MathImage | None] = OrderedDict()
        self.typeset = 0  # how many formulas were typeset (not taken from the cache)
        self.typeset_s = 0.0  # and the time that took

    @staticmethod
    def key(latex: str, display: bool, color: str, size: float, ratio: float, x_height: float) -> Key:
        return (latex, display, color, round(size, 2), round(ratio, 3), round(x_height, 2))

    def cached(self, key: Key) -> bool:
        return key in self._cache

    def get(self, key: Key) -> MathImage | None:
        """The formula's image (typeset now if it is not cached), or None if it cannot be typeset."""
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        started = time.perf_counter()
        image = _typeset(*key)
        self.typeset += 1
        self.typeset_s += time.perf_counter() - started
        self._cache[key] = image
        self.bytes += _weight(image)
        while self.bytes > self.max_bytes and len(self._cache) > 1:
            self.bytes -= _weight(self._cache.popitem(last=False)[1])
        return image


def _weight(image: MathImage | None) -> int:
    return 64 if image is None else image.image.sizeInBytes()


def _typeset(latex: str, display: bool, color: str, size: float, ratio: float, x_height: float) -> MathImage | None:
    zm = _zm()
    if zm is None:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            formula = zm.Latex(latex, size=size, color=color, inline=not display, margin=1.0)
            svg = formula.svg()
            descent = -formula.getyofst() + 1.0  # (the margin)
    except Exception:  # ziamath raises many kinds for LaTeX it cannot read
        return None
    renderer = QSvgRenderer(QByteArray(svg.encode()))
    box = renderer.viewBoxF()
    if not renderer.isValid() or box.width() <= 0 or box.height() <= 0:
        return None
    width, height = box.width(), box.height()
    # Padding: Qt puts a middle-aligned image's baseline (height + x_height / 2) / 2 below its top.
    ascent = height - descent
    lift = x_height / 2  # what the ascent must exceed the descent by
    top = max(0.0, lift - (ascent - descent))
    bottom = max(0.0, (ascent - descent) - lift)
    full = height + top + bottom
    image = QImage(math.ceil(width * ratio), math.ceil(full * ratio), QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter, QRectF(0, top * ratio, width * ratio, height * ratio))
    painter.end()
    image.setDevicePixelRatio(ratio)
    return MathImage(image, width, full)


SHARED = MathImages()
