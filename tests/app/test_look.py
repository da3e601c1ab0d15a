"""The window's look: palettes with AA contrast, text that follows the system font, the transcript's
cards, Markdown and highlighted code, incremental and lazy rendering, web links, the metrics chart."""

from __future__ import annotations

import math
from collections.abc import Callable
from types import SimpleNamespace

import pytest
from pygments.token import STANDARD_TYPES
from PySide6.QtCore import QPoint, QRect, QSize, QUrl
from PySide6.QtGui import QFont, QGuiApplication, QTextCursor
from PySide6.QtWidgets import QApplication, QLabel, QProgressBar, QWidget
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.app.side_panel.speed_chart import downsample_itl
from ember_chat.app.style.theme import DARK, LIGHT, Colors, contrast_ratio, style_sheet, with_contrast
from ember_chat.app.transcript.render.code_highlight import CodeFormats, language_label
from ember_chat.app.transcript.render.markdown_segments import code_blocks, split_segments
from tests.helpers.chat_fixtures import RICH_ANSWER, seed_long_chat
from tests.helpers.fake_backend import FakeBackend
from tests.helpers.window import axis_labels, load, send, set_max_tokens

AA = 4.5


@pytest.mark.parametrize("c", [LIGHT, DARK], ids=["light", "dark"])
def test_every_text_colour_meets_wcag_aa_on_its_backgrounds(c: Colors) -> None:
    texts = {
        "text": c.text, "secondary": c.secondary, "accent": c.accent, "user_accent": c.user_accent, "link": c.link,
        "error": c.error, "success": c.success, "warning": c.warning,
    }  # fmt: skip
    backgrounds = {
        "base": c.base, "window": c.window, "alt_base": c.alt_base, "user_card": c.user_card,
        "assistant_card": c.assistant_card, "code_header": c.code_header, "button": c.button,
    }  # fmt: skip
    for tn, fg in texts.items():
        for bn, bg in backgrounds.items():
            assert contrast_ratio(fg, bg) >= AA, f"{c.name}: {tn} {fg} on {bn} {bg}"
    assert contrast_ratio(c.text, c.inline_code_bg) >= AA
    assert contrast_ratio(c.error_text, c.error_bg) >= AA
    assert contrast_ratio(c.text, c.notice_bg) >= AA
    assert contrast_ratio(c.highlighted_text, c.highlight) >= AA
    # every syntax colour of the theme's Pygments style, on the code background
    formats = CodeFormats(c)
    for token in STANDARD_TYPES:
        assert contrast_ratio(formats.colour_of(token), c.code_bg) >= AA, f"{c.name}: {token}"


def test_contrast_helpers() -> None:
    assert contrast_ratio("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast_ratio("#777777", "#777777") == pytest.approx(1.0)
    fixed = with_contrast("#aaaaaa", "#ffffff")  # too light on white: darkened just enough
    assert contrast_ratio(fixed, "#ffffff") >= AA and contrast_ratio("#aaaaaa", "#ffffff") < AA


def test_no_fixed_font_sizes_text_follows_the_system_font(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    for c in (LIGHT, DARK):
        assert "font-size" not in style_sheet(c)
    app = QApplication.instance()
    old = app.font()
    big = QFont(old)
    big.setPointSizeF(19.0)
    app.setFont(big)
    try:
        w = make_window()
        assert w.transcript.font().pointSizeF() == pytest.approx(19.0)
        assert w.transcript.document().defaultFont().pointSizeF() == pytest.approx(19.0)
        assert w.composer.editor.font().pointSizeF() == pytest.approx(19.0)
    finally:
        app.setFont(old)


def test_theme_switch_changes_palette_and_rerenders(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    store = w.store
    cid = seed_long_chat(store, 4)
    w.chats.open_conversation(cid)
    w.set_theme("dark")
    assert QGuiApplication.palette().base().color().name() == DARK.base
    assert w.transcript.shown_ids() == [m.id for m in store.thread(cid)]
    assert w.transcript.writer.colors is DARK
    w.set_theme("light")
    assert QGuiApplication.palette().base().color().name() == LIGHT.base


def test_segments_number_code_blocks_and_survive_an_unclosed_fence() -> None:
    segs = split_segments("intro\n\n```py\nx = 1\n```\nmiddle\n~~~\nraw\n~~~\n```sh\necho cut")
    assert [s.kind for s in segs] == ["markdown", "code", "markdown", "code", "code"]
    assert [s.text for s in segs if s.kind == "code"] == ["x = 1", "raw", "echo cut"]
    assert code_blocks(RICH_ANSWER) == [
        "def add(a: int, b: int) -> int:\n    return a + b  # a comment",
        "plain text block",
    ]
    long = "\n\n".join(f"paragraph {i} " + "word " * 100 for i in range(40))
    chunks = split_segments(long)
    assert len(chunks) > 1 and all(len(s.text) <= 3500 for s in chunks)
    assert "\n\n".join(s.text for s in chunks) == long
    assert (
        language_label("py") == "Python" and language_label("nonesuch") == "nonesuch" and language_label("") == "text"
    )


def _formats_in(w: MainWindow, needle: str) -> list:
    doc = w.transcript.document()
    c = doc.find(needle)
    assert not c.isNull(), needle
    block = c.block()
    out = []
    it = block.begin()
    while not it.atEnd():
        out.append(it.fragment())
        it += 1
    return out


def test_markdown_answer_renders_code_cards_tables_and_links(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window()
    conv = w.store.create_conversation("rich")
    q = w.store.add_message(conv.id, "user", "show me")
    a = w.store.add_message(conv.id, "assistant", RICH_ANSWER, parent_id=q.id)
    w.chats.open_conversation(conv.id)
    t = w.transcript
    text = t.plain_text()
    assert "def add" in text and "Python" in text and "a quoted line" in text and "**" not in text
    # highlighted: the code line has several colours (keyword, name, comment), all monospace
    frags = _formats_in(w, "def add")
    colours = {f.charFormat().foreground().color().name() for f in frags if f.text().strip()}
    assert len(colours) >= 3 and all(f.charFormat().fontFixedPitch() for f in frags)
    # inline code on its tint
    inline = [f for f in _formats_in(w, "inline code") if f.text() == "inline code"]
    assert inline and inline[0].charFormat().background().color().name() == LIGHT.inline_code_bg
    # tables are tables
    table_cursor = t.document().find("one")
    assert table_cursor.currentTable() is not None
    # one copy button per code block, numbered, and it copies that block
    links = t.links()
    assert (f"ember:copycode/{a.id}/0", "Copy code") in links and (f"ember:copycode/{a.id}/1", "Copy code") in links
    t.action.emit("copycode", a.id, 1)
    assert QGuiApplication.clipboard().text() == "plain text block"
    # a web link opens only when clicked, through the window's handler
    opened: list[QUrl] = []
    w.url_opener = opened.append
    assert ("https://example.org/docs", "") in links and not opened
    t.anchorClicked.emit(QUrl("https://example.org/docs"))
    assert [u.toString() for u in opened] == ["https://example.org/docs"]
    # an answer naming a local file as an image never makes the view read it
    assert t.loadResource(2, QUrl("file:///etc/passwd")) is None
    assert t.loadResource(2, QUrl("icon:copy")) is not None


def test_header_names_model_and_time_and_has_icon_actions(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    load(qtbot, w)
    set_max_tokens(w, 4)
    send(qtbot, w, "hi")
    t = w.transcript
    answer = w.store.thread(w.controller.conversation_id)[-1]
    header = t.document().find("Ember").block().text()
    assert "tiny.gguf" in header  # the model's name, as the picker says it
    hrefs = [h for h, _tip in t.links()]
    assert f"ember:copy/{answer.id}" in hrefs and f"ember:regenerate/{answer.id}" in hrefs
    tips = dict(t.links())
    assert tips[f"ember:regenerate/{answer.id}"].startswith("Regenerate")
    assert t.last_announcement.startswith("Ember answered:")


def test_send_and_regenerate_rewrite_only_the_end(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window(lambda _ref: FakeBackend(n_tokens=30))
    load(qtbot, w, "tiny.gguf")
    cid = seed_long_chat(w.store, 20)
    w.chats.open_conversation(cid)
    t = w.transcript
    t.finish_rendering()
    first_cursor = t._shown[0].start
    first_block = first_cursor.block().blockNumber()
    send(qtbot, w, "one more")
    assert t._shown[0].start is first_cursor and first_cursor.block().blockNumber() == first_block  # untouched
    assert t.shown_ids() == [m.id for m in w.store.thread(cid)]
    with qtbot.waitSignal(w.controller.generating_changed, check_params_cb=lambda on: not on, timeout=20_000):
        w.controller.regenerate()
    qtbot.waitUntil(lambda: not t.rendering, timeout=20_000)
    assert t._shown[0].start is first_cursor
    assert t.shown_ids() == [m.id for m in w.store.thread(cid)]
    # the new answer is the second of two versions, with links to the other one
    answer = w.store.thread(cid)[-1]
    assert t.plain_text().count(" 2/2 ") == 1
    hrefs = [h for h, _tip in t.links()]
    assert f"ember:prev/{answer.id}" in hrefs and f"ember:next/{answer.id}" in hrefs


@pytest.mark.slow
def test_a_long_chat_opens_lazily_and_fills_in_above(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    cid = seed_long_chat(w.store, 500)
    t = w.transcript
    w.chats.open_conversation(cid)
    ids = [m.id for m in w.store.thread(cid)]
    assert 0 < len(t.shown_ids()) < 100 and t.shown_ids() == ids[-len(t.shown_ids()) :]  # the newest first
    assert t.backfilling
    bar = t.verticalScrollBar()
    assert bar.value() == bar.maximum()  # at the newest message
    qtbot.waitUntil(lambda: not t.backfilling, timeout=60_000)
    assert t.shown_ids() == ids
    assert bar.value() >= bar.maximum() - 4  # still at the newest message after everything above arrived
    assert t.plain_text().index("Question 0:") < t.plain_text().index("Question 249:")
    # a search hit far up jumps there (finishing the rendering first if needed)
    w.chats.open_conversation(cid, jump_to=ids[3])
    assert t.shown_ids() == ids
    # the message at the top of the view is the hit (its header; which digits the clock shows there
    # does not matter)
    assert t.shown_ids()[t._index_at(bar.value() + 8)] == ids[3]


def test_switching_while_filling_in_starts_over_cleanly(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    a = seed_long_chat(w.store, 300, "first")
    b = seed_long_chat(w.store, 6, "second")
    w.chats.reload_conversations()
    w.chats.open_conversation(a)
    assert w.conversations.current_id() == a  # the list shows which chat is open
    assert w.transcript.backfilling
    w.chats.open_conversation(b)
    assert not w.transcript.backfilling
    assert w.transcript.shown_ids() == [m.id for m in w.store.thread(b)]
    assert "Question 0" in w.transcript.plain_text() and "Question 100" not in w.transcript.plain_text()


def test_cards_are_painted_behind_each_message(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    cid = seed_long_chat(w.store, 4)
    w.chats.open_conversation(cid)
    t = w.transcript
    t.verticalScrollBar().setValue(0)
    image = t.viewport().grab().toImage()
    y0, _y1 = t._extent(0)  # the first message is the user's: its card has the user tint
    colour = image.pixelColor(int(t.side_margin()) - 6, int(y0) + 4).name()
    assert colour == LIGHT.user_card
    c = QTextCursor(t.document())
    assert c.document() is t.document()


def test_chart_fits_the_answer_and_shows_latency(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window(lambda _ref: FakeBackend(n_tokens=200, rate=300))
    load(qtbot, w, "tiny.gguf")
    set_max_tokens(w, 200)
    send(qtbot, w, "go")
    chart = w.side.metrics.chart
    speed = chart.speed.points()
    itl = chart.itl.points()
    assert len(speed) >= 2 and len(itl) >= 100  # live points (at most 5 a second), then every token's ITL
    last_x = max(p.x() for p in speed + itl)
    assert chart.axis_x.max() == pytest.approx(last_x, rel=0.05)  # fits the answer, not a fixed 0–5 s
    assert chart.axis_speed.max() >= max(p.y() for p in speed)
    assert chart.axis_itl.max() >= max(p.y() for p in itl)


def test_the_chart_axes_are_labelled_at_distinct_round_steps(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    """Issue 28, item 15: a short answer's time axis read `0.0 s · 0.1 s · 0.1 s` (three ticks at fixed
    thirds of 0.15 s, one decimal). Each axis's labels are distinct, at 1, 2 or 5 × 10^n steps, whatever
    the answer's length and speed."""
    w = make_window(lambda _ref: FakeBackend(n_tokens=45, rate=300))  # an answer of about 0.15 s
    load(qtbot, w, "tiny.gguf")
    set_max_tokens(w, 45)
    send(qtbot, w, "go")
    chart = w.side.metrics.chart
    seen = [(axis_labels(chart.axis_x), 4)]
    for e2e in (0.15, 0.15 * 1.25, 0.3, 0.9, 1.21, 2.5, 7.0, 42.0, 310.0):
        chart.begin()
        chart.finish(SimpleNamespace(ttft_s=0.0, e2e_s=e2e, decode_tokens_per_s=e2e * 37), [e2e * 300] * 3)
        seen += [(axis_labels(chart.axis_x), 4), (axis_labels(chart.axis_speed), 5), (axis_labels(chart.axis_itl), 5)]
    for labels, most in seen:  # (the chart is taller than wide: a tick more on the vertical axes)
        assert 2 <= len(labels) <= most and len(set(labels)) == len(labels), labels
        values = [float(label.removesuffix(" s")) for label in labels]
        step = values[1] - values[0]
        mantissa = step / 10 ** math.floor(math.log10(step) + 1e-9)
        assert min(abs(mantissa - m) for m in (1, 2, 5)) < 1e-6, labels  # a round step
    assert all(label.endswith(" s") for label in seen[0][0])


class SmallContext(FakeBackend):
    n_ctx = 100  # (its 10 prompt tokens and an answer of n: 10 + n of 100)


def number_and_fill(field: QWidget) -> tuple[QRect, QRect]:
    """Where the side panel's context row draws its number and its bar's fill, in `field`'s
    coordinates: the number inside a progress bar (centred, as Fusion draws it) or in a label."""
    fill = number = QRect()
    for bar in [field, *field.findChildren(QProgressBar)]:
        if isinstance(bar, QProgressBar):
            at = bar.mapTo(field, QPoint(0, 0))
            ratio = (bar.value() - bar.minimum()) / (bar.maximum() - bar.minimum())
            fill = QRect(at, QSize(round(bar.width() * ratio), bar.height()))
            if bar.isTextVisible():
                text = bar.fontMetrics().boundingRect(bar.text())
                text.moveCenter(bar.rect().center())
                number = text.translated(at)
    for label in field.findChildren(QLabel):
        if "tokens" in label.text():
            width = label.fontMetrics().horizontalAdvance(label.text())
            number = QRect(label.mapTo(field, QPoint(0, 0)), QSize(width, label.height()))
    return number, fill


def test_the_context_number_is_never_under_the_fill(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    """Issue 28, item 15: the context bar's fill ran through its number (the glyphs over the fill in
    another colour, cut where the fill ended). At every fill ratio and in both themes the number is
    clear of the fill, in a colour with AA contrast on what is behind it."""
    w = make_window(lambda _ref: SmallContext(n_tokens=100))
    if not w.side.isVisible():  # (it hides by itself on the offscreen platform's 800 px screen)
        w.toggle_side_panel()
    load(qtbot, w, "tiny.gguf")
    field = w.side.metrics.context
    for answer in (20, 50, 90):
        set_max_tokens(w, answer)
        send(qtbot, w, "fill the context")
        assert field.text() == f"{10 + answer} / 100 tokens"
        for theme, colors in (("light", LIGHT), ("dark", DARK)):
            w.set_theme(theme)
            QApplication.processEvents()
            number, fill = number_and_fill(field)
            assert (field.value(), field.maximum()) == (10 + answer, 100) and fill.width() > 0  # the fill: what is used
            assert not number.isEmpty() and not number.intersects(fill), (answer, theme, number, fill)
            behind = field.grab().toImage().pixelColor(number.topLeft() + QPoint(0, 1)).name()
            label = field.findChild(QLabel)
            shown = label.palette().color(label.foregroundRole()).name()
            assert contrast_ratio(shown, behind) >= AA, (theme, shown, behind)
            assert shown == colors.text


def test_itl_downsampling_keeps_spikes() -> None:
    itl = [10.0] * 1000
    itl[500] = 400.0
    pts = downsample_itl(itl, 0.5, limit=100)
    assert len(pts) <= 100 and max(p.y() for p in pts) == 400.0
    assert pts[-1].x() == pytest.approx(0.5 + sum(itl) / 1000)


def test_the_chart_draws_about_a_point_per_two_pixels(qtbot: QtBot) -> None:
    """An antialiased zig-zag line costs by its points: 400 took 22 ms to paint in the side panel's
    chart, a stall at the end of every long answer. Live and final lines stay near the plot's width."""
    from ember_chat.app.side_panel.speed_chart import SpeedChart

    chart = SpeedChart()
    qtbot.addWidget(chart.view)
    chart.view.resize(230, 300)
    chart.view.show()
    qtbot.waitExposed(chart.view)
    limit = chart.point_limit()
    assert limit < 200
    for i in range(1, 2001):  # a long answer's live snapshots, 2 tokens each; one second-long pause
        chart.add(i * 0.01 + (1.0 if i >= 1500 else 0.0), 50.0, i * 2)
    assert 0 < chart.itl.count() <= 2 * limit
    live = chart.itl.points()
    assert max(p.y() for p in live) == pytest.approx(505.0)  # the pause is still on the line
    assert live[-1].x() == pytest.approx(21.0)
    itl = [20.0] * 20_000
    itl[12_345] = 900.0
    m = SimpleNamespace(ttft_s=0.1, e2e_s=400.0, decode_tokens_per_s=50.0)
    chart.finish(m, itl)
    assert chart.itl.count() <= limit and max(p.y() for p in chart.itl.points()) == 900.0


def test_icons_are_drawn_for_the_screen_density(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    from ember_chat.app.style.icons import icon_image, themed_icon
    from ember_chat.engine.resources import ui_icon_names

    for name in ui_icon_names():
        sharp = icon_image(name, LIGHT.text, 16, 2.0)
        assert (sharp.width(), sharp.devicePixelRatio()) == (32, 2.0)
        assert any(sharp.pixelColor(x, y).alpha() for x in range(32) for y in range(32)), name  # not blank
    icon = themed_icon("copy", DARK)
    assert {s.width() for s in icon.availableSizes()} >= {16, 32, 48}
    w = make_window()
    t = w.transcript
    t.writer.set_colors(DARK, 2.0)  # what a move to a 2× screen does
    image = t.document().resource(2, QUrl("icon:copy"))
    assert image.devicePixelRatio() == 2.0 and image.width() == 32


def test_the_streamed_plain_text_is_replaced_by_its_rendering(
    qtbot: QtBot, make_window: Callable[..., MainWindow]
) -> None:
    w = make_window(lambda _ref: FakeBackend(n_tokens=30, rate=400))  # several batches, not one
    load(qtbot, w, "tiny.gguf")
    set_max_tokens(w, 30)
    send(qtbot, w, "stream")
    text = w.transcript.plain_text()
    assert text.count("naïve café") == 3  # once per cycle of the fake's 10 words: not the plain copy too
    assert "**" not in text and "`" not in text  # the Markdown rendering, not the raw stream
    assert text.count("Ember streams") == 3


def test_chart_points_have_tooltips(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    from PySide6.QtCore import QPointF
    from PySide6.QtWidgets import QToolTip

    w = make_window()
    chart = w.side.metrics.chart
    chart.speed.hovered.emit(QPointF(1.25, 42.0), True)
    assert QToolTip.text() == "42.0 tok/s at 1.25 s"
    chart.itl.hovered.emit(QPointF(2.0, 17.5), True)
    assert QToolTip.text() == "17.5 ms between tokens at 2.00 s"
    chart.itl.hovered.emit(QPointF(2.0, 17.5), False)
