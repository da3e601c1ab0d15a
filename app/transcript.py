"""The transcript: one QTextBrowser holding the visible branch of a conversation.

While an answer streams, text batches are inserted at the end of the document (never a re-render);
when it completes, that one message is replaced by its Markdown rendering. Per-message actions are
links (`ember:copy/<id>` ...), so the view stays a single cheap document however long the chat grows.
"""

from __future__ import annotations

import html
import re
import time
from dataclasses import dataclass

from PySide6.QtCore import QTimer, QUrl, Signal
from PySide6.QtGui import (
    QColor,
    QTextBlock,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextDocumentFragment,
)
from PySide6.QtWidgets import QTextBrowser, QWidget

from ember_chat.engine.inference.metrics import GenerationMetrics
from ember_chat.engine.storage.conversations import Message

USER_BACKGROUND = QColor(59, 130, 246, 36)  # a tint that reads on light and dark themes
STREAM_BLOCK_CHARS = 1500
RENDER_SLICE_S = 0.012
RENDER_SLICE_CHARS = 3000
_FENCE = re.compile(r"^```.*?^```[ \t]*$", re.M | re.S)


def with_copy_links(markdown: str, message_id: int) -> str:
    """Put a 'Copy code' link above each fenced code block."""
    out, last = [], 0
    for n, m in enumerate(_FENCE.finditer(markdown)):
        out.append(markdown[last : m.start()])
        out.append(f"[⧉ Copy code](ember:copycode/{message_id}/{n})\n\n")
        out.append(m.group(0))
        last = m.end()
    out.append(markdown[last:])
    return "".join(out)


def code_blocks(markdown: str) -> list[str]:
    blocks = []
    for m in _FENCE.finditer(markdown):
        lines = m.group(0).split("\n")
        blocks.append("\n".join(lines[1:-1]))
    return blocks


@dataclass
class _RenderJob:
    markdown: str
    insert_at: int
    summary: str | None
    doc: QTextDocument | None = None
    block: QTextBlock | None = None

    def parse(self) -> None:
        self.doc = QTextDocument()
        self.doc.setMarkdown(self.markdown)
        self.block = self.doc.firstBlock()


class TranscriptView(QTextBrowser):
    action = Signal(str, int, int)  # verb, message id, argument
    rendered = Signal()  # a finished answer's Markdown rendering is complete

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.setAccessibleName("Conversation transcript")
        self.anchorClicked.connect(self._on_anchor)
        self.document().setDocumentMargin(16)
        self._stream_start: int | None = None
        self._stream_id: int | None = None
        self._job: _RenderJob | None = None

    # ----- building
    def show_thread(self, messages: list[Message], branch_info: dict[int, tuple[int, int]]) -> None:
        self._stream_start = None
        self._stream_id = None
        self._job = None
        self.clear()
        for m in messages:
            self._append_message(m, branch_info.get(m.id))
        self.moveCursor(QTextCursor.MoveOperation.End)

    def _cursor_at_end(self) -> QTextCursor:
        c = QTextCursor(self.document())
        c.movePosition(QTextCursor.MoveOperation.End)
        return c

    def _new_block(self, c: QTextCursor, role: str | None = None) -> None:
        """A fresh paragraph with plain formatting (nothing inherited from a header's links)."""
        fmt = QTextBlockFormat()
        if role == "user":
            fmt.setBackground(USER_BACKGROUND)
            fmt.setLeftMargin(4)
            fmt.setTopMargin(2)
            fmt.setBottomMargin(2)
        if c.position() == 0 and self.document().isEmpty():
            c.setBlockFormat(fmt)
            c.setCharFormat(QTextCharFormat())
        else:
            c.insertBlock(fmt, QTextCharFormat())

    def _header(self, role: str, message_id: int, branch: tuple[int, int] | None, interrupted: bool = False) -> str:
        who = {"user": "You", "assistant": "Ember", "system": "System"}[role]
        colour = "#3b82f6" if role == "user" else "#f97316"
        links = [f'<a href="ember:copy/{message_id}">Copy</a>']
        if role == "user":
            links.append(f'<a href="ember:edit/{message_id}">Edit</a>')
        if role == "assistant":
            links.append(f'<a href="ember:regenerate/{message_id}">Regenerate</a>')
        if interrupted:
            links.append(f'<a href="ember:continue/{message_id}">Continue</a>')
        if branch and branch[1] > 1:
            links.append(
                f'<a href="ember:prev/{message_id}">◀</a> {branch[0]}/{branch[1]} '
                f'<a href="ember:next/{message_id}">▶</a>'
            )
        return (
            f'<p style="margin-top:14px"><a name="msg-{message_id}"></a>'
            f'<b style="color:{colour}">{who}</b>&nbsp;&nbsp;'
            f'<span style="font-size:small">{" · ".join(links)}</span></p>'
        )

    def _append_message(self, m: Message, branch: tuple[int, int] | None) -> None:
        c = self._cursor_at_end()
        self._new_block(c)
        stop_reason = (m.metrics or {}).get("stop_reason")
        interrupted = m.role == "assistant" and (not m.complete or stop_reason == "interrupted")
        c.insertHtml(self._header(m.role, m.id, branch, interrupted))
        self._new_block(c, m.role)
        if m.role == "assistant":
            c.insertMarkdown(with_copy_links(m.content, m.id) or " ")
            note = "" if m.complete else " · interrupted"
            if m.metrics:
                line = GenerationMetrics.from_dict(m.metrics).summary_line() + note
                self._new_block(c)
                c.insertHtml(f'<span style="color:gray;font-size:small">{html.escape(line)}</span>')
            elif note:
                self._new_block(c)
                c.insertHtml('<span style="color:gray;font-size:small">interrupted</span>')
        else:
            c.insertText(m.content, QTextCharFormat())

    # ----- streaming
    def begin_stream(self, message_id: int) -> None:
        c = self._cursor_at_end()
        self._new_block(c)
        c.insertHtml(self._header("assistant", message_id, None))
        self._new_block(c, "assistant")
        self._stream_start = c.position()
        self._stream_id = message_id

    def resume_stream(self, message_id: int) -> None:
        """Stream a continuation below the message already shown (the thread is re-rendered at the end)."""
        c = self._cursor_at_end()
        self._new_block(c, "assistant")
        self._stream_start = c.position()
        self._stream_id = message_id

    def append_stream(self, text: str) -> None:
        if self._stream_start is None or not text:
            return
        bar = self.verticalScrollBar()
        follow = bar.value() >= bar.maximum() - 4
        c = self._cursor_at_end()
        # Qt lays out a whole paragraph at a time: cap the block being appended to, so the cost of
        # an append stays flat even in one endless paragraph (Markdown rendering at the end joins it).
        if c.block().length() > STREAM_BLOCK_CHARS:
            c.insertBlock()
        c.insertText(text, QTextCharFormat())
        if follow:
            bar.setValue(bar.maximum())

    def end_stream(self, markdown: str, summary: str | None) -> None:
        """Replace the streamed plain text by its Markdown rendering. The rendered blocks are inserted
        in time slices (a few ms each) so even a 20,000-token answer never freezes the window; the
        plain text stays visible until the rendering is complete."""
        if self._stream_start is None or self._stream_id is None:
            return
        self._job = _RenderJob(with_copy_links(markdown, self._stream_id) or " ", self._stream_start, summary)
        self._stream_start = None
        self._stream_id = None
        QTimer.singleShot(0, self._continue_render)

    def finish_rendering(self) -> None:
        """Complete a pending rendering now (tests, export, shutdown)."""
        while self._job is not None:
            self._continue_render()

    def _continue_render(self) -> None:
        job = self._job
        if job is None:
            return
        if job.doc is None:  # parsing is the first slice
            job.parse()
            QTimer.singleShot(0, self._continue_render)
            return
        assert job.block is not None
        deadline = time.perf_counter() + RENDER_SLICE_S
        target = QTextCursor(self.document())
        while job.block.isValid() and time.perf_counter() < deadline:
            first = job.block
            end = first
            chars = 0
            while end.isValid() and chars < RENDER_SLICE_CHARS:
                chars += end.length()
                end = end.next()
            src = QTextCursor(job.doc)
            src.setPosition(first.position())
            if end.isValid():
                src.setPosition(end.position(), QTextCursor.MoveMode.KeepAnchor)
            else:
                src.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
            target.setPosition(job.insert_at)
            target.insertFragment(QTextDocumentFragment(src))
            if end.isValid():
                target.insertBlock()
            job.insert_at = target.position()
            job.block = end
        if job.block.isValid():
            QTimer.singleShot(0, self._continue_render)
            return
        # Rendering complete: drop the plain streamed text, then the metrics line.
        target.setPosition(job.insert_at)
        target.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        target.removeSelectedText()
        if job.summary:
            self._new_block(target)
            target.insertHtml(f'<span style="color:gray;font-size:small">{html.escape(job.summary)}</span>')
        self._job = None
        self.verticalScrollBar().setValue(self.verticalScrollBar().maximum())
        self.rendered.emit()

    @property
    def rendering(self) -> bool:
        return self._job is not None

    def jump_to(self, message_id: int) -> None:
        self.scrollToAnchor(f"msg-{message_id}")

    def plain_text(self) -> str:
        return self.document().toPlainText()

    def _on_anchor(self, url: QUrl) -> None:
        if url.scheme() != "ember":
            return
        parts = url.path().split("/")
        verb = url.host() or parts.pop(0)
        parts = [p for p in parts if p]
        try:
            mid = int(parts[0])
            arg = int(parts[1]) if len(parts) > 1 else 0
        except (IndexError, ValueError):
            return
        self.action.emit(verb, mid, arg)
