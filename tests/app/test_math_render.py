"""Formulas typeset in the real window's transcript, from a chat in a real SQLite file: finished
messages only (a streaming answer stays plain), theme-coloured and re-typeset on a theme switch,
cached, sharp at the device pixel ratio, a formula that cannot be typeset shown as code, and a copy
of the selection giving the LaTeX source."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

import pytest
from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QColor, QImage, QTextDocument, QTextImageFormat
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.app.style.theme import DARK, LIGHT
from ember_chat.app.transcript.render import math_images
from ember_chat.app.transcript.render.math_images import SHARED, MathImages
from ember_chat.app.transcript.view import TranscriptView
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.transcript import formulas, open_chat, placed, shown_transcript, typeset
from tests.helpers.window import load, send


def image_of(t: TranscriptView, fmt: QTextImageFormat) -> QImage:
    return t.document().resource(QTextDocument.ResourceType.ImageResource, QUrl(fmt.name()))


def ink(image: QImage) -> QColor:
    """The colour of the most opaque pixel (the formula's strokes)."""
    best, colour = -1, QColor()
    for y in range(0, image.height()):
        for x in range(0, image.width(), 2):
            c = image.pixelColor(x, y)
            if c.alpha() > best:
                best, colour = c.alpha(), c
    return colour


def test_a_finished_answer_shows_its_formulas_typeset(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    t = open_chat(qtbot, w)
    shown = formulas(t)
    assert [s for s, _ in shown] == [
        "$ax^2 + bx + c = 0$",
        "$$x = \\frac{-b \\pm \\sqrt{b^2 - 4ac}}{2a}$$",
        "\\(\\alpha_1 \\in \\mathbb{R}\\)",
    ]
    text = t.plain_text()
    assert "It costs $5 and $10." in text and "$not math$" in text  # prices and code stay text
    assert "$x$ here stays as typed" in text  # the user's own message is shown as typed
    display = shown[1][1]
    assert display.height() > shown[0][1].height()  # the fraction stands taller than the inline formula
    alignments = [block.blockFormat().alignment() for _, _, block in placed(t)]
    assert alignments[1] & Qt.AlignmentFlag.AlignHCenter  # the display formula, alone, is centred
    assert not alignments[0] & Qt.AlignmentFlag.AlignHCenter  # (its paragraph of text is not)
    for _source, fmt in shown:
        img = image_of(t, fmt)
        assert not img.isNull() and img.devicePixelRatio() == t.writer.ratio
        assert abs(img.width() / img.devicePixelRatio() - fmt.width()) < 1  # drawn at its laid-out size


def test_a_streaming_answer_stays_plain_until_it_is_done(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    t = shown_transcript(w)
    t.begin_stream(10_000, "model")
    for piece in ("Euler: $e^{i", "\\pi} + 1 = 0$ ", "and $$\\int_0^1 x\\,dx$$"):
        t.append_stream(piece)
        QApplication.processEvents()
    assert formulas(t) == [] and "$e^{i\\pi} + 1 = 0$" in t.plain_text()
    with qtbot.waitSignal(t.rendered, timeout=5000):
        t.end_stream("Euler: $e^{i\\pi} + 1 = 0$ and $$\\int_0^1 x\\,dx$$", None)
    assert [s for s, _ in formulas(t)] == ["$e^{i\\pi} + 1 = 0$", "$$\\int_0^1 x\\,dx$$"]
    assert "$e^{i" not in t.plain_text()  # the streamed plain text is gone


def test_formulas_take_the_themes_colour_and_come_from_the_cache(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    w.set_theme("light")
    t = open_chat(qtbot, w)
    light = ink(image_of(t, formulas(t)[0][1]))
    assert light.name() == QColor(LIGHT.text).name()
    before = SHARED.typeset
    w.set_theme("dark")
    t.finish_rendering()
    typeset(qtbot, t)
    dark = ink(image_of(t, formulas(t)[0][1]))
    assert dark.name() == QColor(DARK.text).name()
    typeset_dark = SHARED.typeset - before
    assert typeset_dark == 3  # each formula typeset anew in the dark theme's colour
    w.set_theme("light")  # back: every image comes from the cache
    t.finish_rendering()
    assert t.writer.math.pending == 0
    assert SHARED.typeset - before == typeset_dark and len(formulas(t)) == 3
    assert ink(image_of(t, formulas(t)[0][1])).name() == QColor(LIGHT.text).name()


def test_images_are_sharp_at_the_device_pixel_ratio() -> None:
    cache = MathImages()
    one = cache.get(MathImages.key("\\sqrt{2}", False, "#000000", 16.0, 1.0, 5.0))
    two = cache.get(MathImages.key("\\sqrt{2}", False, "#000000", 16.0, 2.0, 5.0))
    assert one is not None and two is not None
    assert (two.width, two.height) == (one.width, one.height)  # the same size on screen
    assert abs(two.image.width() - 2 * one.image.width()) <= 1 and two.image.devicePixelRatio() == 2.0
    assert abs(two.image.height() - 2 * one.image.height()) <= 1  # twice the pixels each way
    assert cache.typeset == 2
    cache.get(MathImages.key("\\sqrt{2}", False, "#000000", 16.0, 2.0, 5.0))
    assert cache.typeset == 2  # cached by (source, colour, size, ratio)
    cache.get(MathImages.key("\\sqrt{2}", False, "#ff0000", 16.0, 2.0, 5.0))
    cache.get(MathImages.key("\\sqrt{2}", False, "#ff0000", 20.0, 2.0, 5.0))
    assert cache.typeset == 4


def test_without_ziamath_formulas_stay_their_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(math_images, "_ziamath", None)
    monkeypatch.setitem(sys.modules, "ziamath", None)  # (an import of it raises ImportError)
    assert MathImages().get(MathImages.key("x^2", False, "#000000", 16.0, 1.0, 5.0)) is None


def test_a_formula_that_cannot_be_typeset_is_shown_as_code(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    t = open_chat(qtbot, w, "Broken: $\\frac{a$ and $\\left( x$, fine: $y^2$.")
    assert [s for s, _ in formulas(t)] == ["$y^2$"]
    text = t.plain_text()
    assert "Broken: $\\frac{a$ and $\\left( x$, fine:" in text
    at = t.document().find("\\frac{a")
    fmt = at.charFormat()
    assert fmt.fontFixedPitch() and fmt.background().color().name() == QColor(w.colors.inline_code_bg).name()


def test_copying_a_selection_gives_the_latex_source(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    t = open_chat(qtbot, w)
    t.selectAll()
    t.copy()
    copied = QApplication.clipboard().text()
    assert "The roots of $ax^2 + bx + c = 0$ are" in copied
    assert "$$x = \\frac{-b \\pm \\sqrt{b^2 - 4ac}}{2a}$$" in copied
    assert "and \\(\\alpha_1 \\in \\mathbb{R}\\). It costs $5 and $10." in copied
    assert "\ufffc" not in copied  # no stand-in characters for the images (formulas or icons)


def test_a_chat_opened_shows_new_formulas_as_source_then_typeset_at_its_end(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    """Opening a chat writes its newest messages at once: formulas never typeset before show their
    source in code style, and are typeset a turn of the event loop each, the view kept at its end."""
    w = make_window()
    filler = "\n\n".join(f"Line {i} of a long answer." for i in range(60))
    fresh = [f"$\\frac{{{i}}}{{{i + 1}}}$" for i in range(20)]  # (not typeset by any other test)
    t = shown_transcript(w)
    cid = w.store.create_conversation("Fresh").id
    q = w.store.add_message(cid, "user", "Fractions?")
    w.store.add_message(cid, "assistant", filler + "\n\n" + " and ".join(fresh), parent_id=q.id)
    before = SHARED.typeset
    w.controller.open_conversation(cid)
    assert SHARED.typeset == before and t.writer.math.pending == 20  # nothing typeset while opening
    first = t.document().find("$\\frac{0}{1}$")
    assert not first.isNull() and first.charFormat().fontFixedPitch()  # its source, as code
    bar = t.verticalScrollBar()
    assert bar.value() == bar.maximum() > 0
    typeset(qtbot, t)
    assert SHARED.typeset - before == 20 and [s for s, _ in formulas(t)] == fresh
    for _source, fmt in formulas(t):  # typeset in place of their source, without its code look
        assert fmt.background().style() == Qt.BrushStyle.NoBrush and not fmt.fontFixedPitch()
    assert bar.value() == bar.maximum()  # still at the end


def test_an_answer_from_the_model_streams_plain_then_shows_its_formulas(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    """The whole path: a model streams LaTeX into the window (plain while it streams), the answer is
    stored as written, and the finished answer shows its formulas typeset; Ctrl+C gives the source."""
    script = ["Euler's ", "identity: ", "$e^{i", "\\pi} + 1 = 0$", ", and ", "$$\\sum_{k=0}^{\\infty} ", "x^k$$"]
    w = make_window(lambda _ref: FakeBackend(script=script, rate=40))
    load(qtbot, w, "tiny.gguf")
    plain_while_streaming = []
    w.controller.streamed.connect(lambda _n: plain_while_streaming.append(formulas(w.transcript) == []))
    send(qtbot, w, "Show me some maths")
    t = w.transcript
    assert plain_while_streaming and all(plain_while_streaming)
    answer = w.store.thread(w.controller.conversation_id)[-1]
    assert answer.content == "".join(script)  # stored as the model wrote it
    assert [s for s, _ in formulas(t)] == ["$e^{i\\pi} + 1 = 0$", "$$\\sum_{k=0}^{\\infty} x^k$$"]
    t.setFocus()
    t.selectAll()
    qtbot.keyClick(t, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert "Euler's identity: $e^{i\\pi} + 1 = 0$, and $$\\sum_{k=0}^{\\infty} x^k$$" in QApplication.clipboard().text()


HIDPI_PROBE = """
from PySide6.QtCore import QUrl
from PySide6.QtGui import QTextCursor, QTextDocument
from PySide6.QtWidgets import QApplication
from ember_chat.app.transcript.view import TranscriptView
from ember_chat.app.style.theme import LIGHT
app = QApplication([])
t = TranscriptView(LIGHT)
t.resize(600, 400)
t.show()
app.processEvents()
c = QTextCursor(t.document())
for _ in t.writer.body_steps(c, "Area: $\\\\pi r^2$", 1):
    pass
fmt = t.document().find("\\ufffc", 0).charFormat().toImageFormat()
img = t.document().resource(QTextDocument.ResourceType.ImageResource, QUrl(fmt.name()))
print(t.devicePixelRatioF(), img.devicePixelRatio(), img.width(), fmt.width())
"""


def test_formulas_are_drawn_at_the_screens_device_pixel_ratio() -> None:
    """A window on a screen at 200 %: the image has twice the pixels of its size on screen."""
    env = {**os.environ, "QT_SCALE_FACTOR": "2", "QT_QPA_PLATFORM": "offscreen"}
    out = subprocess.run(
        [sys.executable, "-c", HIDPI_PROBE], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    view_ratio, image_ratio, pixels, width = (float(v) for v in out.stdout.split())
    assert view_ratio == image_ratio == 2.0
    assert abs(pixels - 2 * width) <= 1


FIRST_FORMULA_PROBE = """
import os, sys, tempfile, threading, time
from pathlib import Path
home = Path(tempfile.mkdtemp())
os.environ["EMBER_DATA_DIR"] = str(home / "data")
os.environ["EMBER_CONFIG_DIR"] = str(home / "config")
from PySide6.QtCore import QEventLoop, QTimer
from PySide6.QtWidgets import QApplication
from ember_chat.app.main import build_window
from ember_chat.engine.storage.paths import AppPaths

imported_on = []


class Watch:  # notes the thread that imports the typesetting library (it is imported as usual)
    def find_spec(self, name, path=None, target=None):
        if name == "ziamath":
            imported_on.append(threading.current_thread().name)
        return None


app = QApplication([])
w = build_window(AppPaths.default())
w.resize(1000, 700)
w.show()
w.centre_stack.setCurrentWidget(w.transcript)
app.processEvents()
assert "ziamath" not in sys.modules
sys.meta_path.insert(0, Watch())
t = w.transcript
ticks = []
timer = QTimer()
timer.setInterval(1)
timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
timer.start()
loop = QEventLoop()
t.rendered.connect(loop.quit)
t.begin_stream(1, "model")
t.append_stream("Area: $\\\\pi r^2$")
started = time.perf_counter()
t.end_stream("Area: $\\\\pi r^2$", None)
QTimer.singleShot(20_000, loop.quit)
loop.exec()
gaps = [b - a for a, b in zip([started] + ticks, ticks) if b > started]
image = t.document().find("\\ufffc", t.document().find("Area").position()).charFormat()
print(imported_on[0] if imported_on else "-", int(image.isImageFormat()), round(max(gaps) * 1000))
w.close()
assert w.join_background(30)
w.store.close()
"""


def test_the_first_formula_of_a_session_imports_the_typesetter_off_the_gui_thread() -> None:
    """ziamath takes ~0.15 s to import: the first formula of a run imports it on a worker thread while
    the event loop goes on (a fresh process: the real window, a streamed answer finished)."""
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    out = subprocess.run(
        [sys.executable, "-c", FIRST_FORMULA_PROBE], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    thread, typeset, _longest_gap_ms = out.stdout.split()
    assert thread.startswith("ember-task-") and typeset == "1"


def test_the_cache_holds_a_bounded_number_of_bytes() -> None:
    """Big display formulas at a high pixel ratio weigh hundreds of kB each: the cache keeps the most
    recently used ones within its byte budget, and a formula it let go is typeset again when needed."""
    one = MathImages().get(MathImages.key("\\sum_{i=1}^{n} i^2", True, "#000000", 20.0, 2.0, 5.0))
    assert one is not None
    size = one.image.sizeInBytes()
    cache = MathImages(max_bytes=3 * size)
    keys = [MathImages.key(f"\\sum_{{i={k}}}^{{n}} i^2", True, "#000000", 20.0, 2.0, 5.0) for k in range(1, 6)]
    for key in keys:
        cache.get(key)
    assert cache.bytes <= 3 * size + size // 2
    assert not cache.cached(keys[0]) and cache.cached(keys[-1])  # the least recently used went first
    cache.get(keys[0])
    assert cache.typeset == 6


def test_a_formula_wider_than_the_column_is_scaled_to_fit(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    """A long display formula is drawn narrower (as a whole) rather than push the transcript wider than
    the window (a horizontal scroll bar over every message)."""
    terms = " + ".join(f"a_{{{i}}} x^{{{i}}}" for i in range(40))
    w = make_window()
    w.resize(900, 700)
    t = open_chat(qtbot, w, f"A long one:\n\n$$f(x) = {terms}$$\n\nand a short $y$.")
    QApplication.processEvents()
    assert t.horizontalScrollBar().maximum() == 0  # nothing wider than the view
    assert t.document().size().width() <= t.viewport().width()
    assert [s.startswith("$$f(x)") or s == "$y$" for s, _ in formulas(t)] == [True, True]


class _BrokenZiamath:
    """An import finder as in a frozen bundle whose ziamath data file is missing: importing ziamath
    fails with something other than ImportError."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "ziamath":
            raise FileNotFoundError("ziamath/fonts/STIXTwoMath-Regular.ttf")
        return None


def test_a_typesetter_that_fails_to_import_leaves_formulas_as_source_and_the_answer_finishes(
    qtbot: QtBot, make_window: Callable[..., MainWindow], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(math_images, "_ziamath", None)
    monkeypatch.setattr(math_images, "_missing", False)
    monkeypatch.delitem(sys.modules, "ziamath", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_BrokenZiamath(), *sys.meta_path])
    w = make_window()
    t = shown_transcript(w)
    text = "Area: $\\pi r_{broken}^2$ of the circle."
    with qtbot.waitSignal(t.rendered, timeout=10_000):
        t.begin_stream(1, "model")
        t.append_stream(text)
        t.end_stream(text, None)
    assert not t.rendering and math_images.loaded() and formulas(t) == []
    at = t.document().find("\\pi r_{broken}^2")
    assert not at.isNull() and at.charFormat().fontFixedPitch()  # the source, in code style
