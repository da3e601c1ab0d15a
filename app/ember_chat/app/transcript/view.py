"""The transcript: one QTextBrowser holding the visible branch of a conversation, each message drawn
on a card (painted behind the text, so cards cost no layout: cards.py, the `cards` part).

It stays instant however long the chat is:
- incremental: showing a thread again re-writes only the messages that changed at its end (a send
  appends the question; a regenerate replaces the last answer);
- lazy: opening a chat writes the last screenfuls at once, then the older messages above them a
  few milliseconds at a time, keeping what is on screen still;
- streaming (stream.py, the `streaming` part): text batches are appended at the end
  (never a re-render); when the answer completes, its Markdown rendering replaces the plain text,
  again a few milliseconds at a time.

Keyboard focus (where a Tab walk starts, the focus ring) is the `focus` part (focus.py);
the background work (lazy opening, the final rendering) is the `slices` part (slices.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from PySide6.QtCore import QEvent, QMimeData, QUrl, Signal
from PySide6.QtGui import (
    QAccessible,
    QAccessibleAnnouncementEvent,
    QFocusEvent,
    QPaintEvent,
    QResizeEvent,
    QTextBlockFormat,
    QTextCursor,
)
from PySide6.QtWidgets import QApplication, QFrame, QTextBrowser, QWidget

from ember_chat.app.engine_link.wording import window_wording
from ember_chat.app.style.theme import Colors
from ember_chat.app.transcript.attachments import TranscriptAttachments
from ember_chat.app.transcript.cards import TranscriptCards
from ember_chat.app.transcript.focus import TranscriptFocus
from ember_chat.app.transcript.links import activate_link, document_links, restyle_icon_link
from ember_chat.app.transcript.render.math_write import keep_for_clipboard, selection_text
from ember_chat.app.transcript.render.message import (
    HEADER_GAP,
    Action,
    MessageWriter,
    can_continue,
    message_actions,
    meta_line,
    read_aloud_action,
)
from ember_chat.app.transcript.shown import Shown
from ember_chat.app.transcript.slices import TranscriptSlices, eager_start, edit_block, top_of
from ember_chat.app.transcript.stream import StreamRecord, TranscriptStreaming
from ember_chat.app.transcript.tool_cards import TranscriptTools
from ember_chat.engine.inference.metrics import GenerationMetrics
from ember_chat.engine.storage.conversations import Message

__all__ = ["TranscriptView"]

MAX_TEXT_WIDTH = 860  # comfortable line length; wider windows centre the column
MIN_MARGIN = 22


def body_end(c: QTextCursor) -> QTextCursor:
    """A mark at `c` (the end of an answer's text) that stays before what is written at it next."""
    mark = QTextCursor(c)
    mark.setKeepPositionOnInsert(True)
    return mark


def _summary(m: Message) -> str | None:
    stored = GenerationMetrics.from_stored(m.metrics)
    return stored.summary_line(window_wording()) if stored else None


def _interrupted(m: Message) -> bool:
    """An answer that stopped before its end (it gets a Continue action)."""
    return can_continue(m.role, m.complete, (m.metrics or {}).get("stop_reason"))


def _key(m: Message, branch: tuple[int, int] | None, expanded: bool = False) -> tuple:
    """What a message looks like: the same key means nothing to re-write."""
    branch = branch if branch and branch[1] > 1 else None
    return (m.id, m.role, m.content, _interrupted(m), _summary(m), branch, expanded)


class TranscriptView(QTextBrowser):
    action = Signal(str, int, int)  # verb, message id, argument
    rendered = Signal()  # a finished answer's Markdown rendering is complete
    open_link = Signal(QUrl)  # the user clicked a web link in a message
    link_hovered = Signal(str)  # the link under the mouse or keyboard focus ("" when none)

    def __init__(self, colors: Colors, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.focus = TranscriptFocus(self)  # where a Tab walk starts, the focus ring
        self.streaming = TranscriptStreaming(self)  # the answer being streamed
        self.cards = TranscriptCards(self)  # the cards painted behind the messages
        self.attachments = TranscriptAttachments(self)  # a message's files, an answer's Sources
        self.tools = TranscriptTools(self)  # an answer's tool calls: consent, running, results (tool_cards.py)
        self.append_stream = self.streaming.append  # (per batch: no call in between)
        self.setObjectName("transcript")
        self.setFrameShape(QFrame.Shape.NoFrame)  # (not a style sheet: a styled view repaints more)
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.setAccessibleName(self.tr("Conversation transcript"))
        self.setAccessibleDescription(
            self.tr("The messages of this chat. Tab moves between the actions of each message; Enter runs one.")
        )
        self.anchorClicked.connect(  # (links.py)
            lambda url: activate_link(self, url, self.open_link.emit, self.action.emit, self.tools.toggle)
        )
        self.highlighted.connect(lambda url: self.link_hovered.emit(url.toString() if url.isValid() else ""))
        self.document().setDocumentMargin(MIN_MARGIN)
        self.document().setUndoRedoEnabled(False)  # read-only: an undo history would only grow
        self.writer = MessageWriter(self.document(), colors, self.devicePixelRatioF())
        self._shown: list[Shown] = []
        self._older: list[tuple[Message, tuple[int, int] | None]] = []  # not written yet, oldest first
        self.slices = TranscriptSlices(self, lambda: self._shown[0] if self._shown else None)  # background work
        self.last_announcement = ""
        self._expanded: set[int] = set()  # answers whose thinking is open
        self._font_points = 0  # the messages' text size (0: the application's; set_font_size)
        self._reading: int | None = None  # the answer read aloud (its speaker action is a Stop)

    # ----- look
    def set_colors(self, colors: Colors) -> None:
        """New colours: the transcript is emptied, and the caller shows the thread again."""
        self.writer.set_colors(colors, self.devicePixelRatioF())
        self.set_font_size(self._font_points)  # (a new theme's style sheet gave the view the application's font)

    def set_font_size(self, points: int) -> None:
        """The messages' text size in points (0: the application's); the transcript is emptied, and the
        caller shows the thread again (its formulas are typeset at the new size)."""
        self._font_points = points
        font = QApplication.font()
        if points > 0:
            font.setPointSize(points)
        self.setFont(font)
        self._reset()

    def createMimeDataFromSelection(self) -> QMimeData:  # Qt override
        """A copy gives each formula's LaTeX source (math_write.py), not a stand-in character."""
        mime = super().createMimeDataFromSelection()
        text, had_math = selection_text(self.textCursor())
        if had_math:  # (the rich formats would name images other programs cannot load)
            mime = keep_for_clipboard(QMimeData())
        mime.setText(text)
        return mime

    def resizeEvent(self, event: QResizeEvent) -> None:  # Qt override
        bar = self.verticalScrollBar()
        at_end = bar.value() >= bar.maximum() - 4
        self._set_side_margin(event.size().width())
        super().resizeEvent(event)
        self.streaming.rejoin_if_width_changed()  # (a streaming answer's lines were split where the old width wrapped)
        if at_end:  # the newest message stays in view when the window (or the banner above) changes size
            bar.setValue(bar.maximum())

    def _set_side_margin(self, width: int) -> None:
        """Centre the text column in a wide view with the left and right margins only: the top and
        bottom keep MIN_MARGIN, so the conversation starts near the top at any width."""
        side = max(MIN_MARGIN, (width - MAX_TEXT_WIDTH) // 2)
        root = self.document().rootFrame()
        fmt = root.frameFormat()
        if fmt.leftMargin() != side or fmt.rightMargin() != side:
            fmt.setLeftMargin(side)
            fmt.setRightMargin(side)
            root.setFrameFormat(fmt)

    def side_margin(self) -> float:
        """The margin left (and right) of the text column."""
        return self.document().rootFrame().frameFormat().leftMargin()

    def paintEvent(self, event: QPaintEvent) -> None:  # Qt override
        """Cards behind the messages on screen (cards.py), then the text over them."""
        if self.devicePixelRatioF() != self.writer.ratio:  # moved to a screen of another density
            self.writer.set_colors(self.writer.colors, self.devicePixelRatioF())
        if self._shown:
            self.cards.paint(event, self._shown)
        super().paintEvent(event)

    def _extent(self, i: int) -> tuple[float, float]:
        """Top and bottom (document coordinates) of message i's text."""
        return self.cards.extent(self._shown, i)

    def _index_at(self, y: float) -> int:
        return self.cards.index_at(self._shown, y)

    # ----- showing a thread
    def show_thread(self, messages: list[Message], branch_info: dict[int, tuple[int, int]]) -> None:
        """Show this thread, re-writing only what differs from what is shown."""
        self.finish_rendering(final_only=True)
        self.streaming.drop()
        self.attachments.prefetch(m.id for m in messages)
        pairs = [(m, branch_info.get(m.id)) for m in messages]
        first_key = self._shown[0].key if self._shown else None  # (None while an answer streams in)
        shown_first = self._older[0][0].id if self._older else first_key[0] if first_key else None
        if not pairs or pairs[0][0].id != shown_first:  # another conversation: nothing to compare (each key
            self._reset()  # formats a message's figures: 500 messages' twice cost a long chat's switch ~4 ms)
            self._open(pairs)
            return
        keys = [self._key(m, b) for m, b in pairs]
        old_keys = [self._key(m, b) for m, b in self._older] + [s.key for s in self._shown]
        same = 0
        while same < min(len(keys), len(old_keys)) and keys[same] == old_keys[same]:
            same += 1
        keep = same - len(self._older)  # shown messages that stay
        if same == 0 or keep < 0 or (keep == 0 and self._older):
            self._reset()  # another conversation, or a change at or above what is written yet
            self._open(pairs)
            return
        with edit_block(self.document()):
            self._truncate(keep)
            for m, b in pairs[same:]:
                self._write_now(m, b)
        self.scroll_to_end()

    def _reset(self) -> None:
        self.slices.drop()
        self._older = []
        self._shown = []
        self.streaming.drop()
        self.clear()
        self._set_side_margin(self.width())  # (a cleared document has a new root frame format)

    def _open(self, pairs: list[tuple[Message, tuple[int, int] | None]]) -> None:
        """The newest few screenfuls now, the rest above them in the background."""
        split = eager_start([m for m, _ in pairs])
        self._older = pairs[:split]
        with edit_block(self.document()):
            for m, b in pairs[split:]:
                self._write_now(m, b)
        self.scroll_to_end()
        if self._older:
            self.slices.fill(self._backfill_steps())

    def _truncate(self, keep: int) -> None:
        if keep >= len(self._shown):
            return
        c = QTextCursor(self.document())
        c.setPosition(self._shown[keep].start.position())
        if keep > 0:  # also the paragraph break before it
            c.movePosition(QTextCursor.MoveOperation.PreviousCharacter)
        c.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        c.removeSelectedText()
        del self._shown[keep:]

    def _end_cursor(self) -> QTextCursor:
        c = QTextCursor(self.document())
        c.movePosition(QTextCursor.MoveOperation.End)
        return c

    def _start_message(self, c: QTextCursor, m_id: int, role: str, index: int) -> Shown:
        start = QTextCursor(c)
        shown = Shown(m_id, role, start, None)
        self._shown.insert(index, shown)
        return shown

    def _message_steps(
        self, c: QTextCursor, m: Message, branch: tuple[int, int] | None, index: int, first: bool
    ) -> Iterator[None]:
        """Write message m at cursor c (one step per body segment)."""
        interrupted = _interrupted(m)
        model = (m.metrics or {}).get("model") if m.role == "assistant" else None
        self.writer.header(
            c, m.role, m.id, meta_line(model, m.created_at), self._actions(m.role, interrupted, m.id), branch, first
        )
        shown = self._start_message(QTextCursor(c.block()), m.id, m.role, index)
        shown.start.setKeepPositionOnInsert(False)
        if m.role == "assistant":
            body_at = c.position()
            yield from self.writer.body_steps(c, m.content, m.id, m.id in self._expanded)
            shown.body_end = body_end(c)
            body = (body_at, c.position())  # (its [n] markers linked to its project sources)
            self.tools.write(c, m)
            self.attachments.write_plan(c, m.id, body, m.content)
            line = self.tools.with_tool_time(_summary(m), m)  # (says "interrupted" when the stream was cut)
            if not m.complete:
                line = f"{line} · {self.tr('interrupted')}" if line else self.tr("interrupted")
            if line:
                self.writer.metrics_line(c, line)
        else:
            self.writer.plain(c, m.content)
            self.attachments.write_chips(c, m.id)
        shown.key = self._key(m, branch)

    def _actions(self, role: str, interrupted: bool, message_id: int) -> list[Action]:
        """A message's actions; the answer read aloud has Stop in place of its speaker."""
        actions = message_actions(role, interrupted)
        reading = read_aloud_action(True)
        return [reading if a.verb == reading.verb and message_id == self._reading else a for a in actions]

    def show_reading(self, message_id: int | None) -> None:
        """The answer read aloud now (None: none): its speaker action becomes Stop, the one before's
        a speaker again."""
        before, self._reading = self._reading, message_id
        looks = [(before, False)] if before is not None and before != message_id else []
        for mid, reading in [*looks, *([(message_id, True)] if message_id is not None else [])]:
            action = read_aloud_action(reading)
            restyle_icon_link(self.document(), f"ember:{action.verb}/{mid}", f"icon:{action.icon}", action.tooltip)

    def _key(self, m: Message, branch: tuple[int, int] | None) -> tuple:
        return (*_key(m, branch, m.id in self._expanded), self.attachments.key(m.id), self.tools.key(m))

    def toggle_thinking(self, message_id: int) -> None:
        """Open or fold an answer's thinking (the caller shows the thread again)."""
        self._expanded ^= {message_id}

    def is_expanded(self, message_id: int) -> bool:
        """Whether this answer's thinking is open."""
        return message_id in self._expanded

    # ----- streaming (the text itself: see stream.py)
    def begin_stream(self, message_id: int, model: str | None = None, began_at: float | None = None) -> None:
        """A new answer streams below the last message: its header now (`began_at`: the time it shows,
        now by default), its text as it comes."""
        self.finish_rendering(final_only=True)
        began_at = time.time() if began_at is None else began_at
        c = self._end_cursor()
        actions = self._actions("assistant", False, message_id)
        self.writer.header(c, "assistant", message_id, meta_line(model, began_at), actions, None, first=not self._shown)
        self._start_message(QTextCursor(c.block()), message_id, "assistant", len(self._shown))
        self.writer.fresh_block(c)
        self.streaming.start(c, StreamRecord(message_id, resumed=False, model=model, began_at=began_at))
        self.scroll_to_end()

    def resume_stream(self, message_id: int) -> None:
        """Stream a continuation right after the text of the message already shown, in its last
        paragraph (a word cut in two is whole again): what was below the text (the Read line and Sources
        of its files, its metrics line) goes, and the whole answer gets them again when the thread is
        re-written at the end."""
        self.finish_rendering(final_only=True)
        shown = self.last_shown(message_id)
        c = self._end_cursor()
        if shown is not None:
            shown.key = None
            if shown.body_end is not None:
                c.setPosition(shown.body_end.position(), QTextCursor.MoveMode.KeepAnchor)
                c.removeSelectedText()
        else:
            self.writer.fresh_block(c)
        self.streaming.start(c, StreamRecord(message_id, resumed=True))  # (the continued text shows as it comes)

    def rejoin_stream(self, message_id: int) -> None:
        """The answer still streaming, drawn again below the thread just shown (its look changed: a theme,
        a text size): the thread was shown without it (a continued answer with the text it had before),
        so it gets its header again, or streams in place again, and what it had streamed is replayed
        in the new look; its next batches go on from there. Nothing happens if it is not the one that
        was streaming."""
        record = self.streaming.kept(message_id)
        if record is None:
            return
        if record.resumed:
            self.resume_stream(message_id)
        else:
            self.begin_stream(message_id, record.model, record.began_at)
        self.streaming.replay(record)

    def end_stream(self, markdown: str, summary: str | None, stop_reason: str | None = None) -> None:
        """Replace the streamed plain text by its Markdown rendering, a slice at a time; the plain text
        stays visible until the rendering is complete. An answer that stopped before its end
        (`stop_reason`: the max-tokens limit, Stop) gets its Continue action then."""
        steps = self.streaming.end(markdown, summary, stop_reason)
        if steps is not None:
            self.slices.render(steps)

    def last_shown(self, message_id: int) -> Shown | None:
        """The last message shown, if it is this one."""
        return self._shown[-1] if self._shown and self._shown[-1].message_id == message_id else None

    def _write_now(self, m: Message, branch: tuple[int, int] | None) -> None:
        c = self._end_cursor()
        with edit_block(self.document()), self.writer.math.deferring(self):  # (formulas not cached: typeset afterwards)
            for _ in self._message_steps(c, m, branch, len(self._shown), first=not self._shown):
                pass

    def _backfill_steps(self) -> Iterator[None]:
        """Older messages written above the shown ones, newest first, keeping the view still."""
        while self._older:
            m, b = self._older.pop()
            c = QTextCursor(self.document())
            c.insertBlock()  # a paragraph break above the current first message
            c.setPosition(0)
            yield from self._message_steps(c, m, b, 0, first=True)
            gap = QTextBlockFormat()  # the old first message is no longer the first: it gets its gap
            gap.setTopMargin(HEADER_GAP)
            QTextCursor(self._shown[1].start.block()).mergeBlockFormat(gap)
            yield

    def finish_rendering(self, final_only: bool = False) -> None:
        """Complete pending background work now (tests, export, a jump to an old message)."""
        self.slices.finish(final_only)

    @property
    def rendering(self) -> bool:
        return self.slices.final is not None

    @property
    def backfilling(self) -> bool:
        return self.slices.backfill is not None

    def scroll_to_end(self) -> None:
        self.verticalScrollBar().setValue(self.verticalScrollBar().maximum())

    def announce(self, text: str) -> None:
        """Tell screen readers (a polite announcement: it does not interrupt what they are reading)."""
        self.last_announcement = text
        event = QAccessibleAnnouncementEvent(self, text)
        event.setPoliteness(QAccessible.AnnouncementPoliteness.Polite)
        QAccessible.updateAccessibility(event)

    # ----- keyboard focus (see focus.py)
    def focusInEvent(self, event: QFocusEvent) -> None:  # Qt override
        self.focus.focus_in(event)
        super().focusInEvent(event)

    def focusOutEvent(self, event: QFocusEvent) -> None:  # Qt override
        self.focus.focus_out()
        super().focusOutEvent(event)

    def focusNextPrevChild(self, next: bool) -> bool:  # Qt override
        return self.focus.next_prev_child(next)

    def event(self, event: QEvent) -> bool:  # Qt override
        handled = super().event(event)
        if event.type() == QEvent.Type.Paint:
            self.focus.paint_frame()
        elif (
            event.type() == QEvent.Type.FontChange
            and self._font_points > 0
            and self.font().pointSize() != self._font_points
        ):
            # The application's style sheet polishes the view when the window first shows (and after a
            # theme switch) and gives it the application's font back, over the size set before: the
            # size chosen (View ▸ Bigger text, saved) is put back; the text drawn already keeps its own.
            font = self.font()
            font.setPointSize(self._font_points)
            self.setFont(font)
        return handled

    # ----- navigation and actions
    def jump_to(self, message_id: int) -> None:
        if any(m.id == message_id for m, _ in self._older):
            self.finish_rendering()
        for s in self._shown:
            if s.message_id == message_id:
                self.verticalScrollBar().setValue(round(top_of(self.document(), s)) - 8)
                return

    def links(self) -> list[tuple[str, str]]:
        """Every link in the transcript, in document (and Tab) order: (href, tooltip)."""
        return document_links(self.document())

    def shown_ids(self) -> list[int]:
        return [s.message_id for s in self._shown]

    def thread_ids(self) -> list[int]:
        """The ids of the thread shown, oldest first (those still to be written above included)."""
        return [m.id for m, _ in self._older] + self.shown_ids()

    def plain_text(self) -> str:
        return self.document().toPlainText()

    def loadResource(self, kind: int, url: QUrl) -> object:  # Qt override
        # Only Ember's own icons: a model's answer never makes Ember read a local file or reach the
        # network by naming an image.
        return self.writer.images.get(url.toString())
