"""Formulas in the transcript's document: the writer's `math` part puts each typeset formula where
`math_find.protect` left its placeholder (after Qt has read the Markdown), in the theme's text colour
at the transcript's font size; a display formula alone in its paragraph is centred. A formula that
cannot be typeset stays its source, in code style.

Every formula image carries its source (delimiters included) in a format property, so selecting and
copying gives the LaTeX back (`selection_text`, used by the transcript's copy).

Typesetting costs a few milliseconds a formula, so `prepare` typesets a chunk's formulas one per step
before the chunk is written (the transcript runs steps in time slices): a finished answer with 20
formulas never holds the event loop for all of them at once. What the transcript writes at once (a
chat opened) is written `deferring`: formulas not in the cache show their source, in code style, until
a timer has typeset them, one per event-loop turn."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from PySide6.QtCore import QMimeData, Qt, QTimer, QUrl
from PySide6.QtGui import (
    QFontDatabase,
    QFontInfo,
    QFontMetricsF,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
    QTextImageFormat,
    QTextLength,
)
from PySide6.QtWidgets import QAbstractScrollArea

from ember_chat.app.transcript.render import math_images
from ember_chat.app.transcript.render.math_find import MathSpan, find_math
from ember_chat.app.transcript.render.math_images import SHARED, Key, MathImage, MathImages

if TYPE_CHECKING:
    from ember_chat.app.engine_link.tasks import TaskRunner

MATH_SOURCE = QTextFormat.Property.UserProperty.value + 3  # a formula's source, on its image or code text
MATH_SCALE = 1.25  # STIX Two Math is small for its size next to the UI fonts
OBJECT = "\ufffc"  # the character an image stands on in a document's text
_FIXED_PITCH = QTextFormat.Property.FontFixedPitch
_FAMILIES = QTextFormat.Property.FontFamilies
_BACKGROUND = QTextFormat.Property.BackgroundBrush


class MathWriter:
    """Typesets formulas into one document, in one colour, at its default font's size."""

    def __init__(self, document: QTextDocument, images: MathImages = SHARED) -> None:
        self.document = document
        self.images = images
        self.color = "#000000"
        self.ratio = 1.0
        self._names: dict[Key, str] = {}
        self._view: QAbstractScrollArea | None = None  # set while writing at once (`deferring`)
        self._pending: list[tuple[QTextCursor, Key, str, bool]] = []  # formulas shown as source for now
        self._timer: QTimer | None = None
        self._tasks: TaskRunner | None = None  # ziamath is imported on one of its threads
        self._loading = False

    def use_tasks(self, tasks: TaskRunner) -> None:
        """Import the typesetting library on this runner's thread when the first formula comes (a
        ~0.15 s import the GUI thread would otherwise wait for; without a runner it imports inline)."""
        self._tasks = tasks

    def _ready(self) -> bool:
        """Whether formulas can be typeset now; starts the library's import if it has not started."""
        if math_images.loaded():
            return True
        if self._tasks is None:
            math_images.load()
            return True
        if not self._loading:
            self._loading = True
            self._tasks.run(
                math_images.load, lambda _there: None, lambda _why: math_images.give_up(), key="math-import"
            )
        return False

    def set_look(self, color: str, ratio: float) -> None:
        self.color = color
        self.ratio = ratio
        self._pending.clear()  # (the document is written again)

    @property
    def pending(self) -> int:
        """Formulas shown as their source until they are typeset (see `deferring`)."""
        return len(self._pending)

    def _metrics(self) -> tuple[float, float]:
        """The formula size (px) and x-height for the document's font now (it follows the font size)."""
        font = self.document.defaultFont()
        return QFontInfo(font).pixelSize() * MATH_SCALE, QFontMetricsF(font).xHeight()

    def key(self, span: MathSpan) -> Key:
        size, x_height = self._metrics()
        return MathImages.key(span.latex, span.display, self.color, size, self.ratio, x_height)

    @contextmanager
    def deferring(self, view: QAbstractScrollArea) -> Iterator[None]:
        """Writing at once (a chat opened): formulas not in the cache are shown as their source and
        typeset afterwards, one per event-loop turn, each put in place as it is done (the view kept
        still, or at its end if it was there)."""
        self._view = view
        try:
            yield
        finally:
            self._view = None
        if self._pending:
            if self._timer is None:
                self._timer = QTimer(view)
                self._timer.setInterval(0)
                self._timer.timeout.connect(self._typeset_next)
            self._timer.start()

    def prepare(self, text: str) -> Iterator[None]:
        """Typeset the formulas of a Markdown chunk that are not cached, one per step."""
        if self._view is not None:
            return  # (written at once: those are typeset afterwards)
        spans = find_math(text)
        while spans and not self._ready():
            yield  # (the event loop runs while the library is imported on a worker thread)
        for span in spans:
            key = self.key(span)
            if not self.images.cached(key):
                self.images.get(key)
                yield

    def place(self, start: int, end: QTextCursor, formulas: list[tuple[str, MathSpan]], text: str) -> None:
        """Replace the placeholders between `start` and `end` (a cursor: it moves with the edits) by
        the formulas of `text` (the chunk's original Markdown)."""
        pos = start
        for char, span in formulas:
            found = self.document.find(char, pos)
            if found.isNull() or found.selectionStart() >= end.position():
                continue  # (Markdown dropped it: e.g. inside an HTML comment)
            source = span.source(text)
            key = self.key(span)
            if self._view is not None and not self.images.cached(key):
                at = found.selectionStart()
                self._source_as_code(found, source)
                mark = QTextCursor(self.document)
                mark.setPosition(at)
                self._pending.append((mark, key, source, span.display))
            else:
                image = self.images.get(key)
                if image is None:
                    self._source_as_code(found, source)
                else:
                    self._insert_image(found, key, image, source, span.display)
            pos = found.position()

    @staticmethod
    def _source_as_code(c: QTextCursor, source: str) -> None:
        code = QTextCharFormat(c.charFormat())
        code.setFontFixedPitch(True)
        code.setFontFamilies([QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont).family()])
        code.setProperty(MATH_SOURCE, source)
        code.setToolTip(source)
        c.insertText(source, code)

    def _insert_image(self, c: QTextCursor, key: Key, image: MathImage, source: str, display: bool) -> None:
        """The formula's image in place of the cursor's selection (its format kept: a link, a heading)."""
        name = self._names.setdefault(key, f"math:{len(self._names)}")
        self.document.addResource(QTextDocument.ResourceType.ImageResource, QUrl(name), image.image)
        img = QTextImageFormat()
        img.merge(c.charFormat())
        for code_look in (_FIXED_PITCH, _FAMILIES, _BACKGROUND):  # (a formula typeset later was shown as code)
            img.clearProperty(code_look)
        img.setName(name)
        img.setWidth(image.width)
        img.setHeight(image.height)
        img.setMaximumWidth(QTextLength(QTextLength.Type.PercentageLength, 100))  # a long one shrinks to fit
        img.setVerticalAlignment(QTextCharFormat.VerticalAlignment.AlignMiddle)
        img.setProperty(MATH_SOURCE, source)
        img.setToolTip(source)
        c.insertImage(img)
        if display and c.block().text().strip() == OBJECT:
            centred = QTextBlockFormat()
            centred.setAlignment(Qt.AlignmentFlag.AlignHCenter)
            c.mergeBlockFormat(centred)

    def _typeset_next(self) -> None:
        """One formula shown as its source typeset and put in place (the newest first: in view)."""
        if not self._pending or self._timer is None:
            if self._timer is not None:
                self._timer.stop()
            return
        if not self._ready():
            self._timer.setInterval(10)  # (until the import on the worker thread is done)
            return
        self._timer.setInterval(0)
        mark, key, source, display = self._pending.pop()
        c = QTextCursor(self.document)
        at = mark.position()
        if at + len(source) >= self.document.characterCount():
            return
        c.setPosition(at)
        c.setPosition(at + len(source), QTextCursor.MoveMode.KeepAnchor)
        if c.selectedText() != source or c.charFormat().property(MATH_SOURCE) != source:
            return  # (that text is gone: the chat was written again)
        image = self.images.get(key)
        if image is None:
            return  # it stays as code
        view = self._timer.parent()
        bar = view.verticalScrollBar() if isinstance(view, QAbstractScrollArea) else None
        layout = self.document.documentLayout()
        block = c.block()
        top, before = layout.blockBoundingRect(block).top(), layout.blockBoundingRect(block).height()
        at_end = bar is not None and bar.value() >= bar.maximum() - 4
        self._insert_image(c, key, image, source, display)
        if bar is not None:
            if at_end:
                bar.setValue(bar.maximum())
            elif top < bar.value():  # above what is on screen: what is on screen stays still
                bar.setValue(bar.value() + round(layout.blockBoundingRect(c.block()).height() - before))


_FOR_CLIPBOARD: list[QMimeData] = []


def keep_for_clipboard(mime: QMimeData) -> QMimeData:
    """Keep the Python side of a QMimeData handed to the clipboard alive until the next one: PySide
    deletes the object with its wrapper, and the clipboard would hold a dangling pointer (a crash at
    the next paste or at exit)."""
    _FOR_CLIPBOARD[:] = [mime]
    return mime


def selection_text(cursor: QTextCursor) -> tuple[str, bool]:
    """The selection's plain text with each formula as its LaTeX source (and other images, the
    message icons, left out); and whether it held a formula."""
    doc = cursor.document()
    start, end = cursor.selectionStart(), cursor.selectionEnd()
    sources: list[str] = []  # what each object character of the selection stands for, in order
    block = doc.findBlock(start)
    while block.isValid() and block.position() < end:
        it = block.begin()
        while not it.atEnd():
            frag = it.fragment()
            a, b = frag.position(), frag.position() + frag.length()
            if b > start and a < end and frag.charFormat().isImageFormat():
                source = frag.charFormat().property(MATH_SOURCE)
                sources.extend([source if isinstance(source, str) else ""] * (min(b, end) - max(a, start)))
            it += 1
        block = block.next()
    plain = cursor.selection().toPlainText()
    if OBJECT not in plain:
        return plain, False
    parts = plain.split(OBJECT)
    out = [parts[0]]
    for i, part in enumerate(parts[1:]):
        out.append(sources[i] if i < len(sources) else "")
        out.append(part)
    return "".join(out), any(sources)
