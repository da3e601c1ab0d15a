"""The attachments waiting above the message box: files given by the 📎 button, dropped on the window or
pasted (files, or an image from the clipboard). Each is read in a child process with the settings'
time and memory limits (engine attachments/isolated.py), waited for on the bar's own TaskRunner
(`readers`: slow files never hold the window's shared runner, which backups, the Trash and caches
use), with its progress on its chip; its ✕ kills that process. Then its tokens are counted with the
loaded model's tokenizer (off the GUI thread too). A file that cannot be attached says why in the
banner (the `failed` signal) and takes nothing typed with it.

A recording (WAV, MP3, M4A, OGG, FLAC) is transcribed instead (engine speech/attachment.py), on the
bar's `transcribing` runner, one at a time, in this process with the speech model loaded once
(`transcriber`): its chip says "Transcribing… 40 %", its ✕ sets the transcription's cancel event, and
its text ("[00:00:03] words" lines) is then a document attachment like any other.

How each will be read is shown before sending, and it is the engine's own plan: `planner` gives the
engine's planning of the message as it would be sent now (the conversation, the system prompt, max
tokens, the text typed as the question, these files: EngineService.plan_attachments), run off the GUI
thread again after every change (a file read, counted or removed, another model, another chat, the
parameters, the text typed, a moment after typing stops). So the chip says the tokens and the mode —
whole, or the passages used — that the answer's "Read:" line will say. An image is marked when the
loaded model cannot see images, and the window refuses to send it then."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QBuffer, QByteArray, QEvent, QIODevice, QMimeData, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QImage, QResizeEvent
from PySide6.QtWidgets import QFileDialog, QFrame, QScrollArea, QVBoxLayout, QWidget

from ember_chat.app.conversation.attachment_chips import AttachmentChip, ChipState
from ember_chat.app.conversation.drop_overlay import DropOverlay
from ember_chat.app.engine_link.tasks import TaskRunner
from ember_chat.app.qt.flow_layout import FlowLayout
from ember_chat.app.style.theme import Colors
from ember_chat.engine.attachments import (
    DEFAULT_LIMITS,
    AttachmentKind,
    Extracted,
    FileReader,
    Limits,
    StoredAttachment,
)
from ember_chat.engine.attachments.kinds import AUDIO_SUFFIXES
from ember_chat.engine.attachments.planning import whole_block
from ember_chat.engine.inference.events import AttachmentsPlanned
from ember_chat.engine.inference.prompt.attachments import TokenCount

if TYPE_CHECKING:  # (numpy and the speech engine load with the first recording, not with the window)
    from ember_chat.engine.speech.attachment import AudioTranscription, TranscriberSlot

PROGRESS_MS = 100  # how often a chip's reading progress is shown
REPLAN_MS = 300  # after typing stops, the plan is made again for the question typed
PLAN_KEY = "attachments-plan"  # (the latest request wins: TaskRunner)
# What the planner gives for these files and the question typed: a job to run on a worker thread
Planner = Callable[[list[StoredAttachment], str], Callable[[], AttachmentsPlanned | None]]
MAX_ROWS = 2  # rows of chips shown at once; more scroll
FLOW_SPACING = 4  # between chips
WAIT_SHOWN_S = 0.5  # a file whose reader has not started after this is shown waiting for its turn
READERS = 2  # files read at once (each in its own process); more wait their turn
_keys = itertools.count(1)


@dataclass
class Pending:
    """One attachment above the message box."""

    key: int
    chip: AttachmentChip
    state: ChipState
    extracted: Extracted | None = None
    stored: StoredAttachment | None = None
    counting: bool = False
    # the fraction read, written by the worker, read by a timer (-1: no measure of it has come)
    progress: list[float] = field(default_factory=lambda: [-1.0])
    started: float | None = None  # (monotonic) when its reading process was seen running
    added: float = field(default_factory=time.monotonic)
    reader: FileReader | None = None  # its child process while it is read (pid), cancelled by its ✕
    transcription: AudioTranscription | None = None  # a recording's, while it is transcribed (its ✕ cancels it)


def mime_files(mime: QMimeData) -> list[Path]:
    """The local files a drop or a paste names."""
    return [Path(url.toLocalFile()) for url in mime.urls() if url.isLocalFile()] if mime.hasUrls() else []


def gives_attachment(mime: QMimeData) -> bool:
    """Whether a paste or a drop attaches: local files, or an image alone (a screenshot, a copied
    image). Text that comes with a picture of itself (a word processor's copy) is pasted as text."""
    return bool(mime_files(mime)) or (mime.hasImage() and not mime.hasText())


def png_bytes(image: QImage) -> bytes:
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    buffer.close()
    return bytes(data.data())


class AttachmentsBar(QWidget):
    changed = Signal()  # an attachment came, went, or was read or counted
    failed = Signal(str)  # why a file cannot be attached (one sentence, for the banner)
    settled = Signal()  # nothing is being read or counted any more (tests wait on it)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("attachmentsBar")
        self.setAccessibleName(self.tr("Attachments"))
        # The chips wrap onto a second row, then scroll: many files never push the message box down
        # (at 800×600 four chips on four rows left the transcript a sliver).
        self.scroll = QScrollArea()
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setWidgetResizable(True)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        strip = QWidget()
        strip.setObjectName("attachmentStrip")
        self.flow = FlowLayout(strip, spacing=FLOW_SPACING)
        self.scroll.setWidget(strip)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 2)
        outer.addWidget(self.scroll)
        self.tasks: TaskRunner | None = None  # the window's shared runner: token counts
        self.readers = TaskRunner(self, workers=READERS)  # the files' readers (they may take a while)
        # recordings, one at a time (the speech model's cores are busy with one anyway; a document
        # attached meanwhile is read beside it, not after it)
        self.transcribing = TaskRunner(self, workers=1)
        self._transcriber: TranscriberSlot | None = None
        self.count_tokens: Callable[[str], TokenCount] | None = None
        self.planner: Planner | None = None  # the engine's plan of the message as it would be sent
        self.question: Callable[[], str] = lambda: ""  # the text typed (the question the plan retrieves for)
        self.planning = False  # a plan is being made (tests wait for it; a send never does)
        self._replan_timer = QTimer(self)
        self._replan_timer.setSingleShot(True)
        self._replan_timer.setInterval(REPLAN_MS)
        self._replan_timer.timeout.connect(self.replan)
        self.sees_images: Callable[[], bool | None] = lambda: None  # None: no model loaded
        self.save: Callable[[Extracted], StoredAttachment] | None = None  # keeps a file read (worker thread)
        self.colors: Colors | None = None
        self.items: list[Pending] = []
        self.dialog: QFileDialog | None = None  # the 📎 button's file dialog, while open
        self._poll = QTimer(self)
        self._poll.setInterval(PROGRESS_MS)
        self._poll.timeout.connect(self._show_progress)
        self.changed.connect(self._fit_rows)  # (a chip's words changed its width: the rows may change)
        self.hide()

    def configure(
        self,
        tasks: TaskRunner,
        count_tokens: Callable[[str], TokenCount],
        planner: Planner,
        sees_images: Callable[[], bool | None],
        save: Callable[[Extracted], StoredAttachment],
    ) -> None:
        """`count_tokens`, `save` and the planner's jobs run on worker threads; `planner` itself and
        `sees_images` on the GUI thread. `tasks` counts and plans; files are read on the bar's own
        `readers`."""
        self.tasks, self.count_tokens, self.planner, self.sees_images = tasks, count_tokens, planner, sees_images
        self.save = save
        self.limits: Callable[[], Limits] = lambda: DEFAULT_LIMITS  # the size limit (a setting)
        self.text_of: Callable[[StoredAttachment], str] = lambda att: ""  # a kept file's text (worker thread)

    def set_colors(self, colors: Colors) -> None:
        self.colors = colors
        for item in self.items:
            item.chip.set_colors(colors)

    # ----- the strip's height: the rows its chips take at this width, at most MAX_ROWS
    def _fit_rows(self) -> None:
        if not self.items:
            return
        strip = self.scroll.widget()
        width = self.width()
        needed = self.flow.heightForWidth(width)
        row = max(i.chip.sizeHint().height() for i in self.items)
        most = MAX_ROWS * row + (MAX_ROWS - 1) * FLOW_SPACING
        if needed > most:  # scrolling: the chips wrap at the width the scroll bar leaves
            needed = self.flow.heightForWidth(width - self.scroll.verticalScrollBar().sizeHint().width())
        # (the strip is resized by the scroll area only when its own size hints change: a chip's new
        # words, or a width that wraps them otherwise, may not)
        strip.setMinimumHeight(needed if needed > most else 0)
        self.scroll.setFixedHeight(min(needed, most))

    def resizeEvent(self, event: QResizeEvent) -> None:  # Qt override
        super().resizeEvent(event)
        self._fit_rows()

    # ----- what is attached
    def attachments(self) -> list[StoredAttachment]:
        """What is read, kept and ready to send, in the order given."""
        return [i.stored for i in self.items if i.stored is not None]

    @property
    def busy(self) -> bool:
        """Some file is still being read or counted."""
        return any(i.stored is None or i.counting for i in self.items)

    def images_refused(self) -> str:
        """Why the attachments cannot be sent to the loaded model ("" when they can)."""
        if self.sees_images() is False and any(i.state.kind == AttachmentKind.IMAGE for i in self.items):
            return self.tr(
                "The loaded model cannot see images, so this message was not sent. Load a vision model "
                "(a model with its projector file) or remove the image."
            )
        return ""

    def clear(self) -> None:
        for item in list(self.items):
            self.remove(item.key)

    # ----- giving files
    def open_dialog(self) -> QFileDialog:
        """The 📎 button: a file dialog (not blocking the window); its files are attached."""
        dialog = QFileDialog(self.window(), self.tr("Attach files"))
        dialog.setFileMode(QFileDialog.FileMode.ExistingFiles)
        dialog.setNameFilters(
            [
                self.tr("Documents and images (*.txt *.md *.pdf *.docx *.csv *.tsv *.json *.html *.htm "
                        "*.png *.jpg *.jpeg *.webp *.gif *.py *.js *.ts *.c *.cpp *.h *.rs *.go *.java)"),
                self.tr("Recordings, transcribed (*.wav *.mp3 *.m4a *.ogg *.opus *.flac)"),
                self.tr("All files (*)"),
            ]
        )  # fmt: skip
        dialog.filesSelected.connect(lambda files: self.attach_paths([Path(f) for f in files]))
        dialog.finished.connect(lambda _r: setattr(self, "dialog", None))
        self.dialog = dialog
        dialog.open()
        return dialog

    def attach_mime(self, mime: QMimeData) -> bool:
        """Files or an image from a drop or a paste; False when it holds neither."""
        files = mime_files(mime)
        if files:
            self.attach_paths(files)
            return True
        if mime.hasImage() and not mime.hasText():
            image = QImage(mime.imageData())
            if not image.isNull():
                self.attach_data(self.tr("pasted image.png"), png_bytes(image))
                return True
        return False

    def attach_paths(self, paths: Iterable[Path]) -> None:
        """Read these files off the GUI thread, each on its own chip."""
        for path in paths:
            if Path(path).suffix.lower() in AUDIO_SUFFIXES:
                self._transcribe(Path(path))
                continue
            item = self._add(ChipState(Path(path).name, progress=0.0))
            reader = item.reader = FileReader(self.limits())

            def read(path: Path = Path(path), report: list[float] = item.progress, r: FileReader = reader) -> Extracted:
                return r.read_path(path, progress=lambda f: report.__setitem__(0, f))

            self._read(item, read)

    def attach_data(self, name: str, data: bytes) -> None:
        """An attachment given as bytes (an image pasted from the clipboard)."""
        item = self._add(ChipState(name, progress=0.0))
        reader = item.reader = FileReader(self.limits())
        self._read(item, lambda: reader.read_bytes(name, data))

    @property
    def transcriber(self) -> TranscriberSlot:
        """The speech model recordings are transcribed with, loaded on the first one and kept (its
        own, not dictation's: a long file would otherwise hold the microphone's words back)."""
        if self._transcriber is None:
            from ember_chat.engine.speech.attachment import TranscriberSlot

            self._transcriber = TranscriberSlot()
        return self._transcriber

    @transcriber.setter
    def transcriber(self, slot: TranscriberSlot) -> None:
        self._transcriber = slot

    def _transcribe(self, path: Path) -> None:
        """A recording: transcribed off the GUI thread into a document, its progress on its chip."""
        from ember_chat.engine.speech.attachment import AudioTranscription

        item = self._add(ChipState(path.name, progress=0.0, transcribing=True))
        job = item.transcription = AudioTranscription(self.transcriber)
        report = item.progress
        self._read(item, lambda: job.read_path(path, progress=lambda f: report.__setitem__(0, f)), self.transcribing)

    def _add(self, state: ChipState) -> Pending:
        item = Pending(next(_keys), AttachmentChip(state, self.colors), state)
        item.chip.remove.connect(lambda key=item.key: self.remove(key))
        self.items.append(item)
        self.flow.addWidget(item.chip)
        self.show()
        self._fit_rows()
        self._poll.start()
        self.changed.emit()
        return item

    def _read(self, item: Pending, read: Callable[[], Extracted], runner: TaskRunner | None = None) -> None:
        """Read (and keep: the store indexes a text's passages) on a reader thread; the chip's ✕
        cancels the task, which kills the reading process (or cancels the transcription)."""
        assert self.save is not None, "configure() first"
        save = self.save

        def read_and_keep() -> tuple[Extracted, StoredAttachment]:
            extracted = read()
            return extracted, save(extracted)

        stop = item.reader or item.transcription
        (runner or self.readers).run(
            read_and_keep,
            lambda done, key=item.key: self._on_read(key, *done),
            lambda message, key=item.key: self._on_failed(key, message),
            key=f"attachment-{item.key}",
            cancel=stop.cancel if stop is not None else None,
        )

    def shutdown(self) -> None:
        """The window closes: every file still being read is dropped and its process killed (a
        transcription cancelled)."""
        self.readers.shutdown()
        self.transcribing.shutdown()

    def remove(self, key: int) -> None:
        """Take an attachment away (its ✕); one still being read is dropped where it is."""
        item = self._item(key)
        if item is None:
            return
        self.readers.cancel(f"attachment-{key}")  # (its process is killed)
        self.transcribing.cancel(f"attachment-{key}")  # (its cancel event set: it stops at the next segment)
        if self.tasks is not None:
            self.tasks.cancel(f"tokens-{key}")
        self.items.remove(item)
        self.flow.removeWidget(item.chip)
        item.chip.deleteLater()
        self.setVisible(bool(self.items))
        self._fit_rows()
        self._update_modes()
        self.changed.emit()
        self._check_settled()

    # ----- results (GUI thread)
    def _item(self, key: int) -> Pending | None:
        return next((i for i in self.items if i.key == key), None)

    def _on_failed(self, key: int, message: str) -> None:
        self.remove(key)
        self.failed.emit(message)

    def _on_read(self, key: int, extracted: Extracted, stored: StoredAttachment) -> None:
        item = self._item(key)
        if item is None:
            return
        item.extracted, item.stored, item.reader, item.transcription = extracted, stored, None, None
        item.state = ChipState(extracted.name, str(extracted.kind), extracted.size)
        self._set_image_warning(item)
        self._count(item)
        self._update_modes()
        self.changed.emit()
        self._check_settled()

    def attach_stored(self, stored: Iterable[StoredAttachment]) -> None:
        """Attachments already kept (an earlier message's, when it is edited): chips at once, counted
        again with the loaded model."""
        for att in stored:
            item = self._add(ChipState(att.name, att.kind, att.size))
            item.stored = att
            self._set_image_warning(item)
            self._count(item)
        self._update_modes()
        self._check_settled()

    def _count(self, item: Pending) -> None:
        if item.stored is None or item.state.kind == AttachmentKind.IMAGE or self.count_tokens is None:
            return
        assert self.tasks is not None
        count, extracted, stored, text_of = self.count_tokens, item.extracted, item.stored, self.text_of
        item.state = replace(item.state, tokens=None, tokens_note=self.tr("counting tokens…"))
        item.counting = True
        self.tasks.run(  # (as the prompt holds it: in a block that names the file, as the answer's plan counts)
            lambda: count(whole_block(stored, extracted.text if extracted is not None else text_of(stored))),
            lambda n, key=item.key: self._on_counted(key, n),
            lambda _m, key=item.key: self._on_counted(key, None),
            key=f"tokens-{item.key}",
        )

    def _on_counted(self, key: int, count: TokenCount | None) -> None:
        item = self._item(key)
        if item is None:
            return
        if count is None:  # (the count failed: the chip says nothing of tokens)
            item.state = replace(item.state, tokens=None, tokens_note="")
        else:
            item.state = replace(item.state, tokens=count.tokens, tokens_note="", estimated=count.estimated)
        item.counting = False
        self._update_modes()
        self.changed.emit()
        self._check_settled()

    def recount(self) -> None:
        """The loaded model changed: tokens are counted with its tokenizer, images checked again."""
        for item in self.items:
            self._set_image_warning(item)
            self._count(item)
        self._update_modes()

    def replan_soon(self) -> None:
        """The question typed changed (or the parameters, or the chat): the plan is made again once
        typing stops (what the chips say meanwhile is the plan for the text as it was)."""
        if self._planned_items():
            self.planning = True
            self._replan_timer.start()

    def _set_image_warning(self, item: Pending) -> None:
        if item.state.kind != AttachmentKind.IMAGE:
            return
        blind = self.sees_images() is False
        warning = (
            self.tr(
                "The loaded model cannot see images: load a vision model (one with its projector file) to ask about it."
            )
            if blind
            else ""
        )
        item.state = replace(item.state, warning=warning)

    def _update_modes(self) -> None:
        """Show each chip as it is now, and ask the engine how the files will be read."""
        for item in self.items:
            item.chip.show_state(item.state)
        self.replan()

    def _planned_items(self) -> list[Pending]:
        """The text files read and kept (images are not planned: they go to the model whole)."""
        return [i for i in self.items if i.stored is not None and i.state.kind != AttachmentKind.IMAGE]

    def replan(self) -> None:
        """Ask the engine (off the GUI thread) how the text files will be read if the message is sent
        now: the very computation the send makes, so the chips say what the answer's Read line will."""
        self._replan_timer.stop()
        items = self._planned_items()
        if self.planner is None or self.tasks is None:
            self.planning = False
            return
        if not items:  # (the last text file removed, or the files sent: nothing to wait for)
            self.tasks.cancel(PLAN_KEY)
            self.planning = False
            return
        job = self.planner([i.stored for i in items if i.stored is not None], self.question())
        self.planning = True
        self.tasks.run(job, self._on_planned, lambda _m: self._on_planned(None), key=PLAN_KEY)

    def _on_planned(self, planned: AttachmentsPlanned | None) -> None:
        """The engine's plan: each chip's mode, passages and tokens in the prompt (no plan without a
        model: the chip says what the file takes whole, no mode)."""
        self.planning = False
        by_id = {p.attachment_id: p for p in planned.plan.items} if planned is not None else {}
        estimated = planned is not None and planned.estimated
        for item in self._planned_items():
            assert item.stored is not None
            p = by_id.get(item.stored.id)
            if p is None:
                item.state = replace(item.state, mode="", used=0, total=0, planned=None)
            else:
                item.state = replace(
                    item.state, mode=p.mode, used=p.used, total=p.total, planned=p.tokens, estimated=estimated
                )
            item.chip.show_state(item.state)
        self.changed.emit()
        self._check_settled()

    def _show_progress(self) -> None:
        """Each chip being read: its percentage where its reader measures one (a PDF's pages), else how
        long its process has run — and nothing of either while it waits for its turn (its clock, and
        the time limit's, start with its process)."""
        reading = False
        now = time.monotonic()
        limit = self.limits().max_seconds
        for item in self.items:
            if item.state.progress is not None:
                reading = True
                if item.started is None and (
                    (item.reader is not None and item.reader.pid is not None)
                    or (item.transcription is not None and item.transcription.started)
                ):
                    item.started = now
                fraction = item.progress[0]
                waiting = item.started is None and now - item.added > WAIT_SHOWN_S
                item.state = replace(
                    item.state,
                    progress=min(max(fraction, 0.0), 1.0),
                    measured=fraction >= 0.0,
                    reading_s=None if waiting else 0.0 if item.started is None else now - item.started,
                    limit_s=0.0 if item.state.transcribing else limit,  # (a recording has no time limit)
                )
                item.chip.show_state(item.state)
        if not reading:
            self._poll.stop()
        self._fit_rows()

    def _check_settled(self) -> None:
        if not self.busy:  # (read and counted; a plan still being made is said again when it is made)
            self.settled.emit()


class FileDrops(QObject):
    """Files dropped anywhere on `target` (the main window) are attached (an event filter on it: the drops
    its children do not take themselves reach it). While files are dragged over it, `overlay` covers the
    chat area saying a drop attaches them; it goes when the drag leaves or drops. The message box takes
    drops itself (they attach too): it shows the overlay as well (`watched`)."""

    def __init__(
        self, target: QWidget, bar: AttachmentsBar, overlay: DropOverlay, watched: Iterable[QWidget] = ()
    ) -> None:
        super().__init__(target)
        self.bar = bar
        self.target = target
        self.overlay = overlay
        target.setAcceptDrops(True)
        target.installEventFilter(self)
        for widget in watched:
            widget.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # Qt override
        kind = event.type()
        if kind in (QEvent.Type.DragEnter, QEvent.Type.DragMove):
            assert isinstance(event, QDragEnterEvent | QDropEvent)
            if gives_attachment(event.mimeData()):
                if not self.overlay.isVisible():
                    self.overlay.show_over()
                if watched is self.target:
                    event.acceptProposedAction()
                    return True
        elif kind == QEvent.Type.DragLeave:
            self.overlay.hide()
        elif kind == QEvent.Type.Drop:
            assert isinstance(event, QDropEvent)
            self.overlay.hide()
            if watched is self.target and self.bar.attach_mime(event.mimeData()):
                event.acceptProposedAction()
                return True
        return False
