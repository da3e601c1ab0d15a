"""Tool calls in the transcript (a part of the view, `view.tools`): under an answer that called tools, one
card per call: the tool's name and where it comes from (Built-in, or the MCP server's name), what
happened to it (waiting for consent, running, done in N ms, an error, denied, not run), the arguments
as pretty JSON, and then either the consent buttons (Allow once · Always allow in this chat · Deny) or
the result, folded when long with a link that shows it all. Calls over the cap on calls per answer are
followed by the sentence that says why the answer ended.

Everything a card shows comes from the stored message (its `tool_calls` and `tool_results`), so the
cards come back when the chat is reopened; the buttons are Ember's signed `ember:` links (Tab reaches
them, Enter runs one), handled by the controller's tool loop (tool_turns.py)."""

from __future__ import annotations

import json
from typing import Protocol, runtime_checkable

from PySide6.QtCore import QCoreApplication, QUrl
from PySide6.QtGui import QColor, QFont, QTextCharFormat, QTextCursor, QTextDocument, QTextLength, QTextTableFormat

from ember_chat.app.style.icons import icon_image
from ember_chat.app.transcript.render.code_highlight import insert_highlighted
from ember_chat.app.transcript.render.message import MessageWriter, inline_image, sign
from ember_chat.engine.core.tools import InvalidCall, ToolCall
from ember_chat.engine.storage.conversations import Message, ToolMessage

TOOL_ICON = 14  # px, the gear before a card's tool name
FOLD_LINES = 8  # a longer result is folded to this many lines
FOLD_CHARS = 700  # or this many characters
# The verbs of the card's links (ember:<verb>/<message id>/<call index>).
ALLOW, ALWAYS, DENY, FOLD = "toolallow", "toolalways", "tooldeny", "toolfold"
TOOL_VERBS = frozenset({ALLOW, ALWAYS, DENY, FOLD})


def tr(text: str) -> str:
    return QCoreApplication.translate("Transcript", text)


def plain_call(stored: ToolCall | InvalidCall) -> ToolCall:
    return stored.call if isinstance(stored, InvalidCall) else stored


def folded(text: str) -> tuple[str, bool]:
    """The start of a long result (and True), or the whole of a short one (and False)."""
    lines = text.split("\n")
    if len(lines) <= FOLD_LINES and len(text) <= FOLD_CHARS:
        return text, False
    return "\n".join(lines[:FOLD_LINES])[:FOLD_CHARS].rstrip() + "\n…", True


def _duration(ms: float | None) -> str:
    if ms is None:
        return ""
    if ms < 1:
        return tr("under 1 ms")
    return tr("{n} ms").format(n=round(ms)) if ms < 10_000 else tr("{n:.1f} s").format(n=ms / 1000)


def call_status(stored: ToolCall | InvalidCall, t: ToolMessage | None) -> tuple[str, str]:
    """What happened to a call, in words, and its tone ("ask", "busy", "ok", "error", "off")."""
    if isinstance(stored, InvalidCall):
        if t is not None and t.decision == "cancelled":  # (the answer was stopped while it was written)
            return tr("Not run: stopped while it was written"), "off"
        if t is not None and t.decision == "cut":
            return tr("Not run: the answer was cut by max tokens"), "off"
        return tr("Not run: the call was not valid"), "error"
    if t is None or t.state == "interrupted":
        return tr("Not run"), "off"
    if t.state == "asking":
        return tr("Waiting for your permission"), "ask"
    if t.state == "running":
        return tr("Running…"), "busy"
    took = _duration(t.duration_ms)
    if t.decision == "deny":
        return tr("Denied"), "off"
    if t.decision == "cap":
        return tr("Not run: too many calls in one answer"), "off"
    if t.decision == "cancelled":
        return tr("Stopped"), "off"
    if t.decision == "cut":
        return tr("Not run: the answer was cut by max tokens"), "off"
    if t.decision == "invalid":  # (a tool this chat does not offer: the result says which it does)
        return tr("Not run"), "error"
    if t.is_error:
        return (tr("Error · {took}").format(took=took) if took else tr("Error")), "error"
    decided = {"once": tr("allowed once"), "always": tr("always allowed in this chat"), "auto": tr("not asked")}
    words = [tr("Done")] + [w for w in (took, decided.get(t.decision or "")) if w]
    return " · ".join(words), "ok"


@runtime_checkable
class ToolCardsHost(Protocol):
    """What the tool cards use of the transcript they are written in (TranscriptView meets it)."""

    @property
    def writer(self) -> MessageWriter: ...
    def document(self) -> QTextDocument: ...
    def announce(self, text: str) -> None: ...  # a call that asks for consent is said to screen readers


class TranscriptTools:
    def __init__(self, view: ToolCardsHost) -> None:
        self.view = view
        self._unfolded: set[tuple[int, int]] = set()  # (message id, call index) whose whole result shows
        self._announced: set[tuple[int, str]] = set()  # consent cards screen readers were told about

    def key(self, m: Message) -> tuple:
        """Part of a message's look: an answer whose calls, results or folds changed is written again."""
        if not m.tool_calls:
            return ()
        opened = tuple(sorted(i for mid, i in self._unfolded if mid == m.id))
        return (m.tool_calls, m.tool_results, opened)

    def toggle(self, message_id: int, index: int) -> None:
        """Show a folded result whole, or fold it again (the caller shows the thread again)."""
        self._unfolded ^= {(message_id, index)}

    def is_unfolded(self, message_id: int, index: int) -> bool:
        return (message_id, index) in self._unfolded

    def with_tool_time(self, line: str | None, m: Message) -> str | None:
        """An answer's metrics line with the time its calls ran, apart from the generation's figures."""
        times = [t.duration_ms for t in m.tool_results if t.duration_ms is not None]
        if not times:
            return line
        took = tr("tools {took}").format(took=_duration(sum(times)))
        return f"{line} · {took}" if line else took

    # ----- writing
    def _icon(self) -> str:
        """The tool icon (a gear) in the theme's secondary colour, as a resource of the document."""
        writer = self.view.writer
        name = f"icon:tool-{writer.colors.name}-{writer.ratio}"
        doc = self.view.document()
        if doc.resource(QTextDocument.ResourceType.ImageResource, QUrl(name)) is None:
            image = icon_image("settings", writer.colors.secondary, TOOL_ICON, writer.ratio)
            doc.addResource(QTextDocument.ResourceType.ImageResource, QUrl(name), image)
        return name

    def write(self, c: QTextCursor, m: Message) -> None:
        """The cards of an answer's calls, below its text; then why the answer ended, if the cap did."""
        results = {t.call_id: t for t in m.tool_results}
        for index, stored in enumerate(m.tool_calls):
            self._card(c, m.id, index, stored, results.get(plain_call(stored).id))
        capped = next((t for t in m.tool_results if t.decision == "cap"), None)
        if capped is not None:
            writer = self.view.writer
            writer.fresh_block(c)
            fmt = QTextCharFormat()
            fmt.setForeground(QColor(writer.colors.warning if writer.colors.name == "dark" else writer.colors.accent))
            fmt.setFontWeight(QFont.Weight.DemiBold)
            c.insertText(capped.content, fmt)

    def _card(
        self, c: QTextCursor, mid: int, index: int, stored: ToolCall | InvalidCall, t: ToolMessage | None
    ) -> None:
        writer = self.view.writer
        colors = writer.colors
        call = plain_call(stored)
        writer.fresh_block(c)
        tf = QTextTableFormat()
        tf.setBorder(1)
        tf.setBorderBrush(QColor(colors.border))
        tf.setBorderCollapse(True)
        tf.setCellSpacing(0)
        tf.setCellPadding(7)
        tf.setTopMargin(6)
        tf.setBottomMargin(4)
        tf.setWidth(QTextLength(QTextLength.Type.PercentageLength, 100))
        tf.setBackground(QColor(colors.code_bg))
        asking = t is not None and t.state == "asking" and not isinstance(stored, InvalidCall)
        has_result = t is not None and t.state == "done" and bool(t.content) and t.decision != "cap"
        rows = 2 + int(asking or has_result or isinstance(stored, InvalidCall))
        table = c.insertTable(rows, 1, tf)
        head = table.cellAt(0, 0)
        head_fmt = head.format()
        head_fmt.setBackground(QColor(colors.code_header))
        head.setFormat(head_fmt)
        hc = head.firstCursorPosition()
        name = QTextCharFormat()
        name.setFontWeight(QFont.Weight.Bold)
        name.setFontFixedPitch(True)
        hc.insertImage(inline_image(self._icon(), TOOL_ICON))
        hc.insertText(" " + call.name, name)
        source = t.source if t is not None and t.source else None
        if source:
            hc.insertText("  ·  " + tr("from {source}").format(source=source), writer.small_secondary)
        status, tone = call_status(stored, t)
        tone_fmt = QTextCharFormat(writer.small_secondary)
        tone_fmt.setFontWeight(QFont.Weight.DemiBold)
        tone_color = {"error": colors.error, "ask": colors.accent, "ok": colors.success}.get(tone)
        if tone_color:
            tone_fmt.setForeground(QColor(tone_color))
        hc.insertText("    " + status, tone_fmt)
        args = json.dumps(call.arguments, indent=2, ensure_ascii=False) if call.arguments else "{}"
        if isinstance(stored, InvalidCall) and call.raw and not call.arguments:
            args = call.raw
        insert_highlighted(table.cellAt(1, 0).firstCursorPosition(), args, "json", writer.code_formats)
        if rows == 3:
            rc = table.cellAt(2, 0).firstCursorPosition()
            if asking:
                self._buttons(rc, mid, index)
                if (mid, call.id) not in self._announced:
                    self._announced.add((mid, call.id))
                    self.view.announce(
                        tr(
                            "The model asks to run {tool}. Allow once, Always allow in this chat or Deny it "
                            "with the buttons of its card (Tab reaches them)."
                        ).format(tool=call.name)
                    )
            elif isinstance(stored, InvalidCall):
                err = QTextCharFormat()
                err.setForeground(QColor(colors.error))
                rc.insertText(stored.error, err)
            elif t is not None:
                self._result(rc, mid, index, t)
        c.setPosition(table.lastPosition() + 1)

    def _buttons(self, c: QTextCursor, mid: int, index: int) -> None:
        writer = self.view.writer
        colors = writer.colors
        c.insertText(tr("Run this call?") + "   ", writer.secondary)
        buttons = (
            (ALLOW, tr("Allow once"), tr("Run this call now; the next call asks again"), colors.accent, colors.base),
            (
                ALWAYS,
                tr("Always allow in this chat"),
                tr("Run this tool whenever the model calls it in this chat, without asking"),
                colors.inline_code_bg,
                colors.text,
            ),
            (
                DENY,
                tr("Deny"),
                tr("Do not run it: the model is told you denied it"),
                colors.inline_code_bg,
                colors.error,
            ),
        )
        for verb, label, tip, background, foreground in buttons:
            fmt = QTextCharFormat()
            fmt.setBackground(QColor(background))
            fmt.setForeground(QColor(foreground))
            fmt.setFontWeight(QFont.Weight.DemiBold)
            fmt.setAnchor(True)
            fmt.setAnchorHref(f"ember:{verb}/{mid}/{index}")
            fmt.setToolTip(tip)
            sign(fmt)
            c.insertText(f"\u00a0\u00a0{label}\u00a0\u00a0", fmt)
            c.insertText("   ", QTextCharFormat())

    def _result(self, c: QTextCursor, mid: int, index: int, t: ToolMessage) -> None:
        writer = self.view.writer
        label = QTextCharFormat(writer.small_secondary)
        label.setFontWeight(QFont.Weight.DemiBold)
        c.insertText((tr("Error") if t.is_error else tr("Result")) + "\u2028", label)
        opened = self.is_unfolded(mid, index)
        shown, cut = folded(t.content)
        body = QTextCharFormat()
        body.setFontFixedPitch(True)
        if t.is_error:
            body.setForeground(QColor(writer.colors.error))
        c.insertText((t.content if opened else shown).replace("\n", "\u2028"), body)
        if cut:
            link = QTextCharFormat(writer.secondary)
            link.setFontWeight(QFont.Weight.DemiBold)
            link.setAnchor(True)
            link.setAnchorHref(f"ember:{FOLD}/{mid}/{index}")
            lines = t.content.count("\n") + 1
            words = tr("▾ Fold the result") if opened else tr("▸ Show all ({n} lines)").format(n=lines)
            link.setToolTip(words)
            sign(link)
            c.insertText("\u2028", QTextCharFormat())
            c.insertText(words, link)
