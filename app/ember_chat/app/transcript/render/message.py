"""How one message is written into the transcript's document: a header (avatar, name, model, time and
the action icons), the body (Markdown, with code blocks as highlighted cards and formulas typeset:
math_write.py), the metrics line.

A body is split into segments (Markdown chunks of a few thousand characters, and code blocks), and
each writer step writes one segment, so the transcript can spread a long message over several
event-loop turns. The segments also number the code blocks for their copy buttons.

Ember's own links (the message actions, the thinking fold, the code cards' copy buttons) have the
`ember:` scheme, and the writer signs each with this session's random token, in a property of its
format that no Markdown or HTML can set. The transcript runs an `ember:` link only when it is signed:
a model's (or a user's) Markdown naming one, e.g. [x](ember:regenerate/12), is shown and never runs."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass

from PySide6.QtCore import QCoreApplication, QUrl
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QFontMetricsF,
    QGuiApplication,
    QTextBlock,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
    QTextFrameFormat,
    QTextImageFormat,
    QTextLength,
    QTextTableFormat,
)

from ember_chat.app.style.icons import icon_image
from ember_chat.app.style.theme import Colors
from ember_chat.app.transcript.render.code_highlight import CodeFormats, insert_highlighted, language_label
from ember_chat.app.transcript.render.line_breaks import apply_line_breaks, mark_line_breaks
from ember_chat.app.transcript.render.markdown_segments import Segment, split_segments
from ember_chat.app.transcript.render.math_find import protect
from ember_chat.app.transcript.render.math_write import MathWriter
from ember_chat.engine.core.reasoning import Split, split_thinking
from ember_chat.engine.core.states import StopReason

ICON_SIZE = 16
AVATAR_SIZE = 20
HEADER_GAP = 30  # space above a message's header: the gap between cards plus the card's top padding
ACTION_ICONS = (
    "copy",
    "edit",
    "regenerate",
    "continue",
    "previous",
    "next",
    "check",
    "delete",
    "compare",
    "speaker",
    "stop",
)


_SIGNATURE = QTextFormat.Property.UserProperty.value + 1  # the format property holding the token
METRICS_LINE = QTextFormat.Property.UserProperty.value + 4  # on the block of an answer's metrics line
_SESSION_TOKEN = secrets.token_hex(16)  # new in every run of Ember


def sign(fmt: QTextCharFormat) -> None:
    """Mark a link format as Ember's own."""
    fmt.setProperty(_SIGNATURE, _SESSION_TOKEN)


def is_signed(fmt: QTextCharFormat) -> bool:
    """Whether a link was written by Ember this session (and not by Markdown in a message)."""
    return fmt.property(_SIGNATURE) == _SESSION_TOKEN


def tr(text: str) -> str:
    return QCoreApplication.translate("Transcript", text)


@dataclass(frozen=True)
class Action:
    verb: str
    icon: str
    tooltip: str


# Why an answer ended that leaves it to be continued: the max-tokens limit, the user's Stop, a remote
# stream that broke. (The context being full is not: continuing would not fit either.)
CONTINUABLE = frozenset({StopReason.LENGTH, StopReason.CANCELLED, StopReason.INTERRUPTED})


def can_continue(role: str, complete: bool, stop_reason: str | None) -> bool:
    """Whether an answer gets a Continue action."""
    return role == "assistant" and (not complete or stop_reason in CONTINUABLE)


def read_aloud_action(reading: bool) -> Action:
    """An answer's speaker action; Stop while the answer is read aloud."""
    if reading:
        return Action("speak", "stop", tr("Stop reading aloud"))
    return Action("speak", "speaker", tr("Read this answer aloud"))


def message_actions(role: str, interrupted: bool) -> list[Action]:
    actions = [Action("copy", "copy", tr("Copy message"))]
    if role == "user":
        actions.append(Action("edit", "edit", tr("Edit and resend (creates a branch)")))
    if role == "assistant":
        actions.append(Action("regenerate", "regenerate", tr("Regenerate this answer (creates a branch)")))
        actions.append(read_aloud_action(False))  # read aloud (app/voice/read_aloud.py)
    if role in ("user", "assistant"):  # compare models on the prompt (app/compare/actions.py)
        actions.append(Action("compare", "compare", tr("Compare models on this prompt, or see its comparisons")))
    actions.append(Action("delete", "delete", tr("Delete this message and what follows it (Ctrl+Z undoes)")))
    if interrupted:
        actions.append(Action("continue", "continue", tr("Continue this answer where it stopped")))
    return actions


class MessageWriter:
    """Writes messages into one document with one theme's colours; `images` are the icons it names
    (the view hands them to the document when it asks for them)."""

    def __init__(self, document: QTextDocument, colors: Colors, ratio: float) -> None:
        self.document = document
        self.math = MathWriter(document)  # formulas typeset (math_write.py)
        self.set_colors(colors, ratio)

    def set_colors(self, colors: Colors, ratio: float) -> None:
        self.colors = colors
        self.code_formats = CodeFormats(colors)
        self.ratio = ratio
        self.math.set_look(colors.text, ratio)
        self.images = {f"icon:{name}": icon_image(name, colors.secondary, ICON_SIZE, ratio) for name in ACTION_ICONS}
        self.images["icon:avatar-user"] = icon_image("user", colors.user_accent, AVATAR_SIZE, ratio)
        self.images["icon:avatar-assistant"] = icon_image("assistant", colors.accent, AVATAR_SIZE, ratio)
        for name, image in self.images.items():  # replaces what the document has cached
            self.document.addResource(QTextDocument.ResourceType.ImageResource, QUrl(name), image)
        self.secondary = QTextCharFormat()
        self.secondary.setForeground(QColor(colors.secondary))
        self.small_secondary = QTextCharFormat(self.secondary)
        self.small_secondary.setProperty(QTextFormat.Property.FontSizeAdjustment, -1)

    # ----- blocks
    @staticmethod
    def fresh_block(c: QTextCursor, fmt: QTextBlockFormat | None = None) -> None:
        """Continue in an empty paragraph with plain formatting (nothing inherited from a link or a
        header): the current one if it is empty, else a new one."""
        fmt = fmt or QTextBlockFormat()
        if c.block().length() <= 1 and c.currentTable() is None and c.currentList() is None:
            c.setBlockFormat(fmt)
            c.setCharFormat(QTextCharFormat())
        else:
            c.insertBlock(fmt, QTextCharFormat())

    def header(
        self,
        c: QTextCursor,
        role: str,
        message_id: int,
        meta: str,
        actions: list[Action],
        branch: tuple[int, int] | None,
        first: bool,
    ) -> None:
        fmt = QTextBlockFormat()
        fmt.setTopMargin(0 if first else HEADER_GAP)
        fmt.setBottomMargin(4)
        self.fresh_block(c, fmt)
        c.insertImage(inline_image(f"icon:avatar-{'user' if role == 'user' else 'assistant'}", AVATAR_SIZE))
        name = QTextCharFormat()
        name.setFontWeight(QFont.Weight.Bold)
        name.setForeground(QColor(self.colors.user_accent if role == "user" else self.colors.accent))
        who = {"user": tr("You"), "assistant": tr("Ember"), "system": tr("System")}[role]
        c.insertText("  " + who, name)
        if meta:
            c.insertText("   " + meta, self.small_secondary)
        c.insertText("     ", self.secondary)
        for action in actions:
            self._icon_link(c, action.icon, f"ember:{action.verb}/{message_id}", action.tooltip)
            c.insertText("   ", self.secondary)
        if branch and branch[1] > 1:
            self._icon_link(c, "previous", f"ember:prev/{message_id}", tr("Previous version"))
            c.insertText(f" {branch[0]}/{branch[1]} ", self.small_secondary)
            self._icon_link(c, "next", f"ember:next/{message_id}", tr("Next version"))
        c.setCharFormat(QTextCharFormat())

    def add_action(self, header: QTextBlock, message_id: int, action: Action) -> None:
        """One more action icon at the end of a header written without it (a streamed answer that
        ended where it can be continued)."""
        c = QTextCursor(header)
        c.movePosition(QTextCursor.MoveOperation.EndOfBlock)
        self._icon_link(c, action.icon, f"ember:{action.verb}/{message_id}", action.tooltip)
        c.insertText("   ", self.secondary)

    def _icon_link(self, c: QTextCursor, icon: str, href: str, tooltip: str) -> None:
        img = inline_image(f"icon:{icon}", ICON_SIZE)
        img.setAnchor(True)
        img.setAnchorHref(href)
        img.setToolTip(tooltip)
        sign(img)
        c.insertImage(img)

    def plain(self, c: QTextCursor, text: str) -> None:
        self.fresh_block(c)
        c.insertText(text, QTextCharFormat())

    def metrics_line(self, c: QTextCursor, line: str) -> None:
        fmt = QTextBlockFormat()
        fmt.setTopMargin(6)
        fmt.setProperty(METRICS_LINE, True)
        self.fresh_block(c, fmt)
        c.insertText(line, self.small_secondary)

    # ----- thinking
    def thinking_format(self) -> QTextCharFormat:
        fmt = QTextCharFormat(self.secondary)
        fmt.setFontItalic(True)
        return fmt

    def thinking_line(self, c: QTextCursor, message_id: int, split: Split, expanded: bool) -> None:
        """The fold of a reasoning model's thinking: ▸ Thinking · N words (a link that opens it)."""
        self.fresh_block(c)
        words = len(split.thinking.split())
        label = tr("Thinking…") if split.open else tr("Thinking")
        link = QTextCharFormat(self.secondary)
        link.setFontWeight(QFont.Weight.DemiBold)
        link.setAnchor(True)
        link.setAnchorHref(f"ember:think/{message_id}")
        link.setToolTip(tr("Hide the model's thinking") if expanded else tr("Show the model's thinking"))
        sign(link)
        c.insertText(("▾ " if expanded else "▸ ") + label, link)
        c.insertText("  · " + tr("{n} words").format(n=words), self.small_secondary)
        c.setCharFormat(QTextCharFormat())
        if expanded:
            self.fresh_block(c)
            c.insertText(split.thinking.replace("\n", "\u2028"), self.thinking_format())

    # ----- Markdown and code
    def body_steps(self, c: QTextCursor, markdown: str, message_id: int, expanded: bool = False) -> Iterator[None]:
        """Write an answer one segment per step: its thinking (folded unless `expanded` or still
        going), then its Markdown."""
        split = split_thinking(markdown)
        if split.thinking or split.open:
            self.thinking_line(c, message_id, split, expanded or split.open)
            markdown = split.answer
            yield
        segments = split_segments(markdown) or [Segment("markdown", " ")]
        for seg in segments:
            if seg.kind == "code":
                self.code_card(c, seg, message_id)
            else:
                yield from self.math.prepare(seg.text)  # (its formulas typeset one per step first)
                self.markdown(c, seg.text)
                if seg is segments[-1] and _is_paragraph(c.block()):  # no blank line after the last
                    fmt = QTextBlockFormat()
                    fmt.setBottomMargin(0)
                    c.mergeBlockFormat(fmt)
            yield

    def markdown(self, c: QTextCursor, text: str) -> None:
        self.fresh_block(c)
        start = c.position()
        marked, formulas = protect(text)  # each formula behind a placeholder Markdown leaves alone
        marked, marker = mark_line_breaks(marked)  # single newlines stay line breaks
        c.insertMarkdown(marked)
        if marker is not None:
            apply_line_breaks(self.document, start, c, marker)
        if formulas:
            self.math.place(start, c, formulas, text)
        self._style_range(start, c.position())

    def _style_range(self, start: int, end: int) -> None:
        """Give Qt's Markdown rendering Ember's look: inline code on a tint, tables with cell padding,
        block quotes in the secondary colour."""
        doc = self.document
        tables = {}
        runs: list[tuple[int, int, QTextCharFormat]] = []
        code_bg = QTextCharFormat()
        code_bg.setBackground(QColor(self.colors.inline_code_bg))
        scale = doc.defaultFont().pointSizeF() / QGuiApplication.font().pointSizeF()
        if scale != 1:  # (View ▸ Bigger text: Qt gives inline code the system's fixed font size)
            fixed = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont).pointSizeF()
            code_bg.setFontPointSize(fixed * scale)
        quote_fg = QTextCharFormat()
        quote_fg.setForeground(QColor(self.colors.secondary))
        paragraphs = []
        block = doc.findBlock(start)
        while block.isValid() and block.position() <= end:
            table = QTextCursor(block).currentTable()
            if table is not None:
                tables[table.firstPosition()] = table
            quote = block.blockFormat().intProperty(QTextFormat.Property.BlockQuoteLevel) > 0
            if table is None and not quote and _is_paragraph(block):
                paragraphs.append(block)
            it = block.begin()
            while not it.atEnd():
                frag = it.fragment()
                fmt = frag.charFormat()
                if fmt.fontFixedPitch() and not fmt.isImageFormat():
                    runs.append((frag.position(), frag.position() + frag.length(), code_bg))
                elif quote and not fmt.isAnchor():
                    runs.append((frag.position(), frag.position() + frag.length(), quote_fg))
                it += 1
            block = block.next()
        for a, b, change in runs:  # after the walk: merging formats re-cuts the fragments
            fc = QTextCursor(doc)
            fc.setPosition(a)
            fc.setPosition(b, QTextCursor.MoveMode.KeepAnchor)
            fc.mergeCharFormat(change)
        for table in tables.values():
            table.setFormat(self._ruled(table.format(), padding=5))
        # Paragraphs are a blank line apart, as the answer's text was while it streamed (so the card
        # keeps its height when the rendering replaces it), not Qt's few pixels.
        gap = QTextBlockFormat()
        gap.setTopMargin(0)
        gap.setBottomMargin(round(QFontMetricsF(doc.defaultFont()).lineSpacing()))  # (whole pixels)
        for block in paragraphs:
            QTextCursor(block).mergeBlockFormat(gap)

    def _ruled(self, tf: QTextTableFormat, padding: int) -> QTextTableFormat:
        """A table with thin collapsed borders in the theme's border colour (Markdown tables, code cards)."""
        tf.setBorder(1)
        tf.setBorderBrush(QColor(self.colors.border))
        tf.setBorderStyle(QTextFrameFormat.BorderStyle.BorderStyle_Solid)
        tf.setBorderCollapse(True)
        tf.setCellSpacing(0)
        tf.setCellPadding(padding)
        return tf

    def code_card(self, c: QTextCursor, seg: Segment, message_id: int) -> None:
        """A code block: a two-row table (language and copy button; the highlighted code)."""
        self.fresh_block(c)
        tf = self._ruled(QTextTableFormat(), padding=7)
        tf.setTopMargin(4)
        tf.setBottomMargin(4)
        tf.setWidth(QTextLength(QTextLength.Type.PercentageLength, 100))
        tf.setBackground(QColor(self.colors.code_bg))
        table = c.insertTable(2, 1, tf)
        head = table.cellAt(0, 0)
        head_fmt = head.format()
        head_fmt.setBackground(QColor(self.colors.code_header))
        head.setFormat(head_fmt)
        hc = head.firstCursorPosition()
        hc.insertText(language_label(seg.language) + "   ", self.small_secondary)
        self._icon_link(hc, "copy", f"ember:copycode/{message_id}/{seg.index}", tr("Copy code"))
        hc.insertText(" " + tr("Copy"), self.small_secondary)
        bc = table.cellAt(1, 0).firstCursorPosition()
        insert_highlighted(bc, seg.text, seg.language, self.code_formats)
        c.setPosition(table.lastPosition() + 1)


def _is_paragraph(block: QTextBlock) -> bool:
    """A plain paragraph of rendered Markdown: not a list item, heading or code block."""
    fmt = block.blockFormat()
    return (
        block.textList() is None
        and fmt.headingLevel() == 0
        and not fmt.nonBreakableLines()
        and not fmt.hasProperty(QTextFormat.Property.BlockCodeFence)
    )


def inline_image(name: str, size: int) -> QTextImageFormat:
    """An image resource of the document (`name`) drawn inline, `size` px square, centred on the line."""
    img = QTextImageFormat()
    img.setName(name)
    img.setWidth(size)
    img.setHeight(size)
    img.setVerticalAlignment(QTextCharFormat.VerticalAlignment.AlignMiddle)
    return img


def meta_line(model: str | None, created_at: float) -> str:
    when = time.strftime("%H:%M", time.localtime(created_at))
    return f"{model} · {when}" if model else when
