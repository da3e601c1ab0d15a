"""Streaming into the transcript: an answer's text is appended at the end as it comes (never a
re-render), a reasoning model's thinking under a "Thinking…" label that folds when the answer starts;
when the answer completes, its Markdown rendering replaces the plain text a slice at a time. A tool
call being written (its text is no answer text) shows as it grows: "Writing a call to NAME…" and its
arguments so far, replaced at each batch, until the call is read whole (its cards come when the answer
ends). While a long prompt is read (prefill: a big attachment, a long chat after a switch), the card
says "Reading your message… 45%" — the progress the side panel shows — until the first token replaces it.

`TranscriptStreaming` is a part of TranscriptView (`view.streaming`; what it uses of the view is
`StreamHost`) and owns the state of the answer being streamed: where its text starts, the thinking
splitter, the cut lines' width and the cursor at its end. The view writes the message's header (it
owns the list of shown messages) and runs the final rendering on its slicer; `view.append_stream` is
this object's `append` itself, so a batch costs no extra call.

Qt lays out and repaints a whole paragraph when text is added to it, so each batch would cost in
proportion to the paragraph it lands in. Instead, once the paragraph being appended to wraps, its
finished lines are split off into a paragraph of their own exactly where Qt wrapped them (nothing
moves on screen): a batch then lays out and repaints only the last, unfinished line. These cuts are
marked (`CUT_STATE`) and joined again if the width changes while the answer streams.

The transcript is written again from the store when its look changes (a theme, a text size) or the thread
is shown again while an answer streams; the store holds only part of that answer, unfinished. So this
part keeps a `StreamRecord` of what it was given (the batches, the call being written, the prompt's
progress, in order), `drop` keeps it, and the view draws the live answer again from it (`replay`)
below the re-written thread: the answer goes on streaming there, in the new look.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from PySide6.QtCore import SignalInstance
from PySide6.QtGui import QFont, QTextBlockFormat, QTextCharFormat, QTextCursor, QTextDocument
from PySide6.QtWidgets import QScrollBar

from ember_chat.app.transcript.attachments import TranscriptAttachments
from ember_chat.app.transcript.render.message import MessageWriter, can_continue, message_actions
from ember_chat.app.transcript.shown import Shown
from ember_chat.engine.core.reasoning import ThinkingStream, answer_only

STREAM_BLOCK_CHARS = 1500  # the longest paragraph appended to, should it never wrap (a long word)
CALL_PREVIEW_CHARS = 1500  # of a call's arguments shown while it is written (its end, where it grows)
CUT_STATE = 1  # QTextBlock.userState of a streamed paragraph that was split off at a line wrap
_PLAIN = QTextCharFormat()


@dataclass
class _Text:
    parts: list[str]  # consecutive batches (joined when replayed: one append)


@dataclass
class _Call:
    index: int
    name: str
    arguments: str
    done: bool


@dataclass
class _Progress:
    done: int
    total: int


@dataclass
class StreamRecord:
    """What the streaming answer has been given so far, to draw it again after the transcript was
    re-written: its header's facts, then its batches, calls being written and the prompt's progress in
    order (a call's or the progress's latest state only: each replaced the one before on screen)."""

    message_id: int
    resumed: bool  # a Continue: it streams below the message's text, which the thread itself shows
    model: str | None = None  # the header of a new answer: the model's name, the time it began
    began_at: float = 0.0
    events: list[_Text | _Call | _Progress] = field(default_factory=list)

    def text(self, text: str) -> None:
        last = self.events[-1] if self.events else None
        if isinstance(last, _Text):
            last.parts.append(text)
        else:
            self.events.append(_Text([text]))

    def call(self, call: _Call) -> None:
        last = self.events[-1] if self.events else None
        if isinstance(last, _Call) and last.index == call.index and not last.done:
            self.events[-1] = call  # (on screen it replaced the call as written so far)
        else:
            self.events.append(call)

    def progress(self, progress: _Progress) -> None:
        if self.events and isinstance(self.events[-1], _Progress):
            self.events[-1] = progress
        else:
            self.events.append(progress)


@runtime_checkable
class StreamHost(Protocol):
    """What the streaming answer uses of the transcript it streams into (TranscriptView meets it)."""

    @property
    def writer(self) -> MessageWriter: ...
    @property
    def attachments(self) -> TranscriptAttachments: ...  # a finished answer's Read line and Sources
    @property
    def rendered(self) -> SignalInstance: ...  # emitted when a finished answer's rendering is complete
    def document(self) -> QTextDocument: ...
    def verticalScrollBar(self) -> QScrollBar: ...
    def side_margin(self) -> float: ...
    def tr(self, text: str, /) -> str: ...  # (the view's translation context)
    def is_expanded(self, message_id: int) -> bool: ...
    def last_shown(self, message_id: int) -> Shown | None: ...
    def scroll_to_end(self) -> None: ...
    def announce(self, text: str) -> None: ...


def _end_cursor(view: StreamHost) -> QTextCursor:
    c = QTextCursor(view.document())
    c.movePosition(QTextCursor.MoveOperation.End)
    return c


class TranscriptStreaming:
    """The answer streaming into a TranscriptView (at most one at a time)."""

    def __init__(self, view: StreamHost) -> None:
        self.view = view
        self._stream: tuple[int, QTextCursor] | None = None  # message id, where its plain text starts
        self._thinking: ThinkingStream | None = None  # splits the streaming answer
        self._thinking_at: QTextCursor | None = None  # where the streaming thinking starts
        self._cut_width: float | None = None  # the text width the streaming answer's lines were split at
        self._tail: QTextCursor | None = None  # at the end of the streaming answer
        self._call: tuple[int, QTextCursor] | None = None  # the call being written: its index, where it shows
        self._prefill: QTextCursor | None = None  # where "Reading your message… N%" starts, while shown
        self.record: StreamRecord | None = None  # what the answer streaming (or dropped while it streams) was given

    @property
    def active(self) -> bool:
        """An answer is streaming."""
        return self._stream is not None

    def start(self, c: QTextCursor, record: StreamRecord) -> None:
        """Stream the record's message from a fresh paragraph at `c` (the end of the document); a new
        answer's thinking (a reasoning model's) is split off and shown under its label, a continued
        one's text shows as it comes. `record` is empty: what comes is recorded in it."""
        self.record = record
        self._stream = (record.message_id, self._anchor(c))
        self._thinking, self._thinking_at = (None if record.resumed else ThinkingStream()), None
        self._cut_width = None
        self._tail = None
        self._call = None
        self._prefill = None

    def drop(self) -> None:
        """Forget where the stream is drawn (the view was re-written or emptied). Its record stays: if the
        answer still streams, the view draws it again (`kept`, `replay`)."""
        self._stream = None
        self._call = None
        self._prefill = None

    def kept(self, message_id: int) -> StreamRecord | None:
        """The record of message_id's stream, dropped while it streamed; None if there is none."""
        record = self.record
        return record if self._stream is None and record is not None and record.message_id == message_id else None

    def replay(self, record: StreamRecord) -> None:
        """Draw what `record` was given again, into the stream just started for its message (which
        records it anew): the text as one batch, then what came after it, as it was last shown."""
        for event in record.events:
            if isinstance(event, _Text):
                self.append("".join(event.parts))
            elif isinstance(event, _Call):
                self.show_call(event.index, event.name, event.arguments, event.done)
            else:
                self.show_prefill(event.done, event.total)

    @staticmethod
    def _anchor(c: QTextCursor) -> QTextCursor:
        """Where a stream's plain text starts: it stays there as the text is appended at it, and moves
        only with insertions above it (older messages filled in)."""
        anchor = QTextCursor(c)
        anchor.setKeepPositionOnInsert(True)
        return anchor

    def append(self, text: str) -> None:
        """One batch of a streaming answer (this runs 20-30 times a second: it stays lean)."""
        if self._stream is None or not text:
            return
        assert self.record is not None
        self.record.text(text)
        bar = self.view.verticalScrollBar()
        follow = bar.value() >= bar.maximum() - 4
        thinking, answer = self._thinking.feed(text) if self._thinking is not None else ("", text)
        if self._cut_width is not None:
            self.rejoin_if_width_changed()
        # One edit block: the paragraph is laid out once, at its end, and no cursor works out its x
        # position on the way (each of those shaped the paragraph's text again). The lines the last
        # batch finished are split off first, in the same block: one layout for both.
        tail = self._tail_cursor()
        tail.beginEditBlock()
        try:
            self._drop_prefill()  # (the first token replaces the prompt's progress)
            if self._call is not None and answer:  # text after a call's start: it was no call after all
                self._remove_from(self._call[1])
                self._call = None
            self._cut_finished_lines()
            if thinking:
                self._append_thinking(thinking)
            if answer:
                if self._thinking_at is not None:
                    self._fold_streamed_thinking()
                self._append_plain(answer, _PLAIN)
        finally:
            tail.endEditBlock()
        if follow:
            bar.setValue(bar.maximum())

    def show_call(self, index: int, name: str, arguments: str, done: bool) -> None:
        """The call `index` of the streaming answer as written so far (`done`: read whole): shown below
        the answer's text, replacing what the last batch showed of it."""
        if self._stream is None:
            return
        assert self.record is not None
        self.record.call(_Call(index, name, arguments, done))
        view, writer = self.view, self.view.writer
        bar = view.verticalScrollBar()
        follow = bar.value() >= bar.maximum() - 4
        tail = self._tail_cursor()
        tail.beginEditBlock()
        try:
            self._drop_prefill()
            if self._thinking_at is not None:  # (a call after the thinking: the answer has started)
                self._fold_streamed_thinking()
            if self._call is not None and self._call[0] == index:
                self._remove_from(self._call[1])
            c = self._tail_cursor()
            writer.fresh_block(c)
            self._call = None if done else (index, self._anchor(c))
            label = QTextCharFormat(writer.small_secondary)
            label.setFontWeight(QFont.Weight.DemiBold)
            if done:
                words = self.view.tr("Call to {name}").format(name=name)
            elif name:
                words = self.view.tr("Writing a call to {name}…").format(name=name)
            else:
                words = self.view.tr("Writing a tool call…")
            c.insertText("⚙ " + words, label)
            shown = arguments if len(arguments) <= CALL_PREVIEW_CHARS else "…" + arguments[-CALL_PREVIEW_CHARS:]
            if shown:
                code = QTextCharFormat(writer.secondary)
                code.setFontFamilies(["monospace"])  # (as the code cards: fixed pitch alone keeps the text font)
                code.setFontFixedPitch(True)
                c.insertBlock(QTextBlockFormat(), QTextCharFormat())
                c.insertText(shown, code)
            c.insertBlock(QTextBlockFormat(), QTextCharFormat())  # (what streams next starts below it)
        finally:
            tail.endEditBlock()
        if follow:
            bar.setValue(bar.maximum())

    def show_prefill(self, done: int, total: int) -> None:
        """The prompt is being read (`done` of `total` tokens, the side panel's prefill progress): the
        streaming answer's card says so, replacing what the last progress said, until its first token
        comes. Where the answer has text already (a Continue) it shows on a line of its own below."""
        if self._stream is None or total <= 0:
            return
        assert self.record is not None
        self.record.progress(_Progress(done, total))
        percent = min(100, max(0, round(100 * done / total)))
        words = self.view.tr("Reading your message… {percent}%").format(percent=percent)
        tail = self._tail_cursor()
        tail.beginEditBlock()
        try:
            self._drop_prefill()
            c = self._tail_cursor()
            self._prefill = self._anchor(c)  # (removing from here restores the text as it was)
            if c.block().length() > 1:
                c.insertBlock(QTextBlockFormat(), QTextCharFormat())
            c.insertText(words, self.view.writer.small_secondary)
        finally:
            tail.endEditBlock()

    def _drop_prefill(self) -> None:
        if self._prefill is not None:
            self._remove_from(self._prefill)
            self._prefill = None

    def _remove_from(self, at: QTextCursor) -> None:
        """Remove everything from `at` to the end of the document."""
        c = QTextCursor(self.view.document())
        c.setPosition(at.position())
        c.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        c.removeSelectedText()

    def _tail_cursor(self) -> QTextCursor:
        """A cursor at the end of the document, kept from batch to batch (text inserted at it leaves
        it at the end; anything else that moved it makes a new one)."""
        tail = self._tail
        if tail is None or not tail.atEnd():
            tail = self._tail = _end_cursor(self.view)
        return tail

    def _append_plain(self, text: str, fmt: QTextCharFormat) -> None:
        c = self._tail_cursor()
        if c.block().length() > STREAM_BLOCK_CHARS:  # (a paragraph that does not wrap: cut anyway)
            c.insertBlock()
        c.insertText(text, fmt)

    def _cut_finished_lines(self) -> None:
        """Split the wrapped lines of the last paragraph off it, at the start of its last line (as
        the last layout wrapped it: nothing may have changed the paragraph since)."""
        block = self.view.document().lastBlock()
        layout = block.layout()
        lines = layout.lineCount()
        if lines < 2:
            return
        c = QTextCursor(block)
        c.setPosition(block.position() + layout.lineAt(lines - 1).textStart())
        c.insertBlock()
        c.block().previous().setUserState(CUT_STATE)
        self._cut_width = self._wrap_width()

    def _wrap_width(self) -> float:
        return self.view.document().textWidth() - 2 * self.view.side_margin()

    def rejoin_if_width_changed(self) -> None:
        """The text width changed (the window, or a scroll bar that came): the streamed paragraphs
        split at the old line wraps become whole again, and are split anew at the next batch."""
        if self._stream is None or self._cut_width is None or self._wrap_width() == self._cut_width:
            return
        self._cut_width = None
        block = self._stream[1].block()
        edit = QTextCursor(self.view.document())
        edit.beginEditBlock()
        try:
            while block.isValid():
                if block.userState() == CUT_STATE:
                    joined_state = block.next().userState()
                    c = QTextCursor(block)
                    c.movePosition(QTextCursor.MoveOperation.EndOfBlock)
                    c.deleteChar()  # the paragraph break: the next paragraph joins this one
                    block.setUserState(joined_state)  # (which may be a cut too: looked at again)
                    continue
                block = block.next()
        finally:
            edit.endEditBlock()

    def _append_thinking(self, text: str) -> None:
        """Thinking streams live under a "Thinking…" label, in the secondary colour."""
        writer = self.view.writer
        if self._thinking_at is None:
            c = _end_cursor(self.view)
            self._thinking_at = self._anchor(c)
            label = QTextCharFormat(writer.small_secondary)
            label.setFontWeight(QFont.Weight.DemiBold)
            c.insertText("▾ " + self.view.tr("Thinking…"), label)
            c.insertBlock(QTextBlockFormat(), QTextCharFormat())
        self._append_plain(text, writer.thinking_format())

    def _fold_streamed_thinking(self) -> None:
        """The answer starts: the thinking folds into one line (the finished answer's fold opens it)."""
        assert self._thinking_at is not None
        c = QTextCursor(self.view.document())
        c.setPosition(self._thinking_at.position())
        c.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        c.removeSelectedText()
        c.insertText("▸ " + self.view.tr("Thinking"), self.view.writer.small_secondary)
        c.insertBlock(QTextBlockFormat(), QTextCharFormat())
        self._thinking_at = None

    def end(self, markdown: str, summary: str | None, stop_reason: str | None = None) -> Iterator[None] | None:
        """The stream ends: the steps that replace its plain text by the Markdown rendering (for the
        view's slicer), or None when no answer streams. An answer that stopped before its end
        (`stop_reason`: the max-tokens limit, Stop) gets its Continue action then."""
        if self._stream is None:
            return None
        message_id, start = self._stream
        self._drop_prefill()  # (stopped while the prompt was read: no answer came to replace it)
        self._stream = None
        self._tail = None
        self.record = None
        more = can_continue("assistant", True, stop_reason)
        return self._final_steps(message_id, start, markdown, summary, more)

    def _final_steps(
        self, message_id: int, start: QTextCursor, markdown: str, summary: str | None, more: bool
    ) -> Iterator[None]:
        view, writer = self.view, self.view.writer
        expanded = view.is_expanded(message_id)
        shown = view.last_shown(message_id)
        if more and shown is not None:
            # A step of its own: the view's steps are edit blocks, and one that changed both the
            # header and the text below it would lay out the whole answer again at its end.
            writer.add_action(shown.start.block(), message_id, message_actions("assistant", True)[-1])
            yield
        at = start.position()  # (read after the header grew)
        c = QTextCursor(view.document())
        c.setPosition(at)
        c.insertBlock()  # the rendering goes above the plain text, which moves down one paragraph
        c.setPosition(at)
        yield from writer.body_steps(c, markdown, message_id, expanded)
        # Rendering complete: drop the plain streamed text, then the metrics line.
        c.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        c.removeSelectedText()
        shown = view.last_shown(message_id)
        if shown is not None:
            shown.body_end = QTextCursor(c)
            shown.body_end.setKeepPositionOnInsert(True)  # (before the lines written next: a Continue streams there)
        view.attachments.write_plan(c, message_id, (at, c.position()), markdown)  # how its files were read, Sources
        if summary:
            writer.metrics_line(c, summary)
        shown = view.last_shown(message_id)
        if shown is not None:
            look = (message_id, "assistant", markdown, more, summary, None, view.is_expanded(message_id))
            # as TranscriptView._key makes it: the look, its attachments, and no tool cards (an answer
            # with tool calls gets its cards from the tool loop, which shows the thread again)
            shown.key = (*look, view.attachments.key(message_id), ())
        view.scroll_to_end()
        view.announce(view.tr("Ember answered: {text}").format(text=answer_only(markdown)[:1000]))
        view.rendered.emit()
