"""Attachments in the transcript (a part of the view, `view.attachments`): on a sent message its chips
(name, kind, size) and its images as thumbnails, a click shows one at full size, and a click on a chip
(or Enter on it) opens its preview (attachment_preview.py: the text the model was given and how it was
read, or the image); under an answer
made with attachments, how each was read (whole, or the passages used) and its **Sources** (file,
page, passage), a click shows that passage; under an answer made with a project's knowledge, its
sources and the [n] markers of its text as links to them (project_sources.py).

What a message has is asked of `lookup` (the window's attachment store) once per message and kept:
a message's attachments never change once sent, and an answer's plan is written when its request is
planned (`forget` makes the view ask again)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from PySide6.QtCore import QCoreApplication, QSize, Qt, QUrl
from PySide6.QtGui import (
    QColor,
    QDesktopServices,
    QImage,
    QScreen,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextImageFormat,
)
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from ember_chat.app.engine_link.attachment_words import kind_label, mode_words
from ember_chat.app.engine_link.tasks import TaskRunner
from ember_chat.app.qt.plain_text import plain_tooltip
from ember_chat.app.style.icons import icon_image
from ember_chat.app.transcript.attachment_preview import (
    MAX_TEXT_BYTES,
    Reading,
    add_image_preview,
    add_text_preview,
    plain_label,
)
from ember_chat.app.transcript.project_sources import (
    CITE,
    add_passage_view,
    link_markers,
    open_target,
    opens_as_document,
    write_sources,
)
from ember_chat.app.transcript.render.message import MessageWriter, inline_image, sign
from ember_chat.engine.attachments import PlannedAttachment, Source, StoredAttachment
from ember_chat.engine.attachments.kinds import human_size
from ember_chat.engine.errors import EmberError
from ember_chat.engine.projects.citations import ProjectSource, answer_uses
from ember_chat.engine.storage.import_plan import IMPORTED_PASSAGE

THUMB_HEIGHT = 96  # px, logical: a thumbnail's height in the transcript (narrower images keep their width)
THUMB_WIDTH = 240
CHIP_ICON = 12


def tr(text: str) -> str:
    return QCoreApplication.translate("Transcript", text)


@dataclass(frozen=True)
class MessageAttachments:
    """What the transcript shows of a message's attachments: its files, and for an answer the plan it
    was made with (`items`: how each file was read; `sources`: the passages used) and the project's
    passages it was given (`knowledge`, numbered as it cites them; `left_out`: found, did not fit)."""

    attachments: tuple[StoredAttachment, ...] = ()
    items: tuple[PlannedAttachment, ...] = ()
    sources: tuple[Source, ...] = ()
    knowledge: tuple[ProjectSource, ...] = ()
    left_out: int = 0
    images: dict[str, bytes] = field(default_factory=dict, compare=False)  # sha256 → the image's bytes


Lookup = Callable[[list[int]], dict[int, MessageAttachments]]
TextHead = Callable[[StoredAttachment, int], tuple[str, int]]  # AttachmentStore.text_head


def source_label(source: Source) -> str:
    where = tr("p. {page}").format(page=source.page) if source.page else ""
    passage = tr("passage {n}").format(n=source.chunk + 1)
    return " · ".join(p for p in (source.name, where, passage) if p)


@runtime_checkable
class AttachmentsHost(Protocol):
    """What a message's files use of the transcript they are shown in (TranscriptView meets it)."""

    @property
    def writer(self) -> MessageWriter: ...
    def document(self) -> QTextDocument: ...
    def devicePixelRatioF(self) -> float: ...  # thumbnails are made at it
    def screen(self) -> QScreen: ...  # a preview fits it
    def window(self) -> QWidget: ...  # a preview stays over it
    def thread_ids(self) -> list[int]: ...  # the thread shown, oldest first


class TranscriptAttachments:
    def __init__(self, view: AttachmentsHost) -> None:
        self.view = view
        self.lookup: Lookup = lambda ids: {}
        self.text_head: TextHead | None = None  # a stored file's text, for its preview (the window's store)
        self.question_of: Callable[[int], str] = lambda answer_id: ""  # an answer's question (its words marked)
        # None when an answer's project source may be opened, else why not (the window's: in the index, on disk)
        # (it opens the index and looks at the disk: run on `tasks`, the window's runner, never the GUI thread)
        self.why_not_open: Callable[[int, str, int], str | None] = lambda answer_id, path, passage_id: tr(
            "Ember cannot open it."
        )
        self.tasks: TaskRunner | None = None
        self._known: dict[int, MessageAttachments] = {}
        self._thumbs: dict[str, QImage] = {}  # sha256 → thumbnail (at the view's pixel ratio)
        self.dialog: QDialog | None = None  # the passage or image shown, while open

    # ----- what a message has
    def prefetch(self, ids: Iterable[int]) -> None:
        """Ask for the messages not known yet in one go (before a thread is compared or written)."""
        missing = [i for i in ids if i not in self._known]
        if missing:
            found = self.lookup(missing)
            for i in missing:
                self._known[i] = found.get(i, MessageAttachments())

    def of(self, message_id: int) -> MessageAttachments:
        if message_id not in self._known:
            self.prefetch([message_id])
        return self._known[message_id]

    def forget(self, message_id: int) -> None:
        self._known.pop(message_id, None)

    def key(self, message_id: int) -> tuple:
        """Part of a message's look: a message whose attachments or plan changed is written again."""
        m = self.of(message_id)
        return (m.attachments, m.items, m.sources, m.knowledge, m.left_out)

    # ----- writing
    def write_chips(self, c: QTextCursor, message_id: int) -> None:
        """A sent message's attachments, below its text: its images as thumbnails on a line of their
        own, then a chip per file (name, kind, size)."""
        m = self.of(message_id)
        if not m.attachments:
            return
        writer = self.view.writer
        fmt = QTextBlockFormat()
        fmt.setTopMargin(6)
        images = [(i, a) for i, a in enumerate(m.attachments) if a.is_image and a.sha256 in m.images]
        if images:
            writer.fresh_block(c, fmt)
            for n, (index, att) in enumerate(images):
                if n:
                    c.insertText("  ", writer.small_secondary)
                self._thumbnail(c, message_id, index, att, m.images[att.sha256])
        writer.fresh_block(c, fmt)
        icon = self._attach_icon()
        chip = QTextCharFormat(writer.small_secondary)
        chip.setBackground(QColor(writer.colors.base))
        for index, att in enumerate(m.attachments):
            if index:
                c.insertText("   ", writer.small_secondary)
            words = " · ".join((att.name, kind_label(att.kind), human_size(att.size)))
            # A chip is a link to its preview: a click, or Enter when Tab reached it.
            chip.setAnchor(True)
            chip.setAnchorHref(f"ember:attachment/{message_id}/{index}")
            what = tr("see the image") if att.is_image else tr("see the text the model was given")
            chip.setToolTip(plain_tooltip(f"{words}: {what}"))
            sign(chip)
            c.insertImage(icon)
            c.insertText("\u00a0" + words.replace(" ", "\u00a0") + "\u00a0", chip)  # a chip is not broken
        c.setCharFormat(QTextCharFormat())

    def _attach_icon(self) -> QTextImageFormat:
        """The 📎 of the icon set, in the theme's secondary colour (made once per colours and density)."""
        writer = self.view.writer
        name = "icon:attach-chip"
        if name not in writer.images:
            image = icon_image("attach", writer.colors.secondary, CHIP_ICON, writer.ratio)
            writer.images[name] = image
        self.view.document().addResource(QTextDocument.ResourceType.ImageResource, QUrl(name), writer.images[name])
        return inline_image(name, CHIP_ICON)

    def _thumbnail(self, c: QTextCursor, message_id: int, index: int, att: StoredAttachment, data: bytes) -> None:
        ratio = self.view.devicePixelRatioF()
        thumb = self._thumbs.get(att.sha256)
        if thumb is None or thumb.devicePixelRatio() != ratio:
            image = QImage.fromData(data)
            if image.isNull():
                return
            box = QSize(round(THUMB_WIDTH * ratio), round(THUMB_HEIGHT * ratio))
            thumb = image.scaled(box, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation)
            thumb.setDevicePixelRatio(ratio)
            self._thumbs[att.sha256] = thumb
        name = f"thumb:{att.sha256}"
        self.view.document().addResource(QTextDocument.ResourceType.ImageResource, QUrl(name), thumb)
        img = QTextImageFormat()
        img.setName(name)
        img.setWidth(thumb.width() / ratio)
        img.setHeight(thumb.height() / ratio)
        img.setAnchor(True)
        img.setAnchorHref(f"ember:image/{message_id}/{index}")
        img.setToolTip(plain_tooltip(tr("{name}: click to see it at full size").format(name=att.name)))
        sign(img)
        c.insertImage(img)

    def write_plan(
        self, c: QTextCursor, message_id: int, body: tuple[int, int] | None = None, answer: str = ""
    ) -> None:
        """Under an answer made with attachments: how each was read, then its Sources; with a project's
        knowledge, its sources (those the `answer` — its Markdown, thinking and all — uses in bold), and
        the [n] markers of its text (`body`: where it is) linked to them."""
        m = self.of(message_id)
        writer = self.view.writer
        used: set[int] = set()
        if m.knowledge and body is not None:
            link_markers(self.view.document(), *body, message_id, m.knowledge, QColor(writer.colors.link))
            # (the stored answer, not what the transcript shows around it; answer_uses leaves its thinking out)
            used = answer_uses(answer, self.question_of(message_id), m.knowledge)
        if m.items:
            fmt = QTextBlockFormat()
            fmt.setTopMargin(8)
            writer.fresh_block(c, fmt)
            read = []
            for item in m.items:
                tokens = tr("{n} tokens").format(n=f"{item.tokens:,}") if item.tokens else ""
                how = mode_words(item.mode, item.used, item.total)
                read.append(f"{item.name} ({', '.join(p for p in (tokens, how) if p)})")
            c.insertText(tr("Read: ") + "; ".join(read), writer.small_secondary)
        if m.sources:
            fmt = QTextBlockFormat()
            fmt.setTopMargin(4)
            writer.fresh_block(c, fmt)
            bold = QTextCharFormat(writer.small_secondary)
            bold.setFontWeight(600)
            c.insertText(tr("Sources") + "  ", bold)
            for index, source in enumerate(m.sources):
                if index:
                    c.insertText("  ·  ", writer.small_secondary)
                link = QTextCharFormat(writer.small_secondary)
                link.setForeground(QColor(writer.colors.link))
                link.setAnchor(True)
                link.setAnchorHref(f"ember:source/{message_id}/{index}")
                link.setToolTip(tr("Show this passage"))
                sign(link)
                c.insertText(source_label(source), link)
        c.setCharFormat(QTextCharFormat())
        write_sources(writer, c, message_id, m.knowledge, m.left_out, used)

    # ----- clicks
    def on_action(self, verb: str, message_id: int, arg: int) -> None:
        """A link in the transcript (the view's `action` signal): a source or an image."""
        m = self._known.get(message_id)
        if m is None:
            return
        if verb == "source" and arg < len(m.sources):
            self.show_source(m.sources[arg])
        elif verb == CITE:
            source = next((s for s in m.knowledge if s.n == arg), None)
            if source is not None:
                self.show_project_source(message_id, source)
        elif verb == "image" and arg < len(m.attachments):
            att = m.attachments[arg]
            if att.sha256 in m.images:
                self.show_image(att, m.images[att.sha256])
        elif verb == "attachment" and arg < len(m.attachments):
            self.show_attachment(message_id, arg)

    def _dialog(self, title: str) -> tuple[QDialog, QVBoxLayout]:
        if self.dialog is not None:
            self.dialog.close()
        dialog = QDialog(self.view.window())
        dialog.setWindowTitle(title)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.destroyed.connect(lambda _o=None, d=dialog: self._closed(d))
        layout = QVBoxLayout(dialog)
        self.dialog = dialog
        return dialog, layout

    def _closed(self, dialog: QDialog) -> None:
        if self.dialog is dialog:
            self.dialog = None

    def _finish(self, dialog: QDialog, layout: QVBoxLayout) -> None:
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(dialog.close)
        layout.addWidget(buttons)
        dialog.show()

    def show_source(self, source: Source) -> QDialog:
        """The passage an answer used, in a small window of its own."""
        dialog, layout = self._dialog(source_label(source))
        text = QPlainTextEdit(source.text)
        text.setReadOnly(True)
        text.setAccessibleName(tr("Passage"))
        text.setObjectName("sourceText")
        layout.addWidget(plain_label(source_label(source), "sourceLabel"))  # (a name from a chat file: plain)
        layout.addWidget(text, 1)
        dialog.resize(560, 360)
        self._finish(dialog, layout)
        return dialog

    def show_project_source(self, answer_id: int, source: ProjectSource) -> QDialog:
        """A passage of an answer's project knowledge: the question's words marked, and a button that
        opens its file (the source's own path, when the window finds it in the project's index and on
        disk; else the window says why not) — or, for a file that is not a document (code, a web page:
        its program may run it), shows the folder holding it. The window shows at once: the check (it
        opens the index, which may wait on the indexer, and looks at the file, which may be on a network
        drive gone quiet) runs off the GUI thread, the button says Checking… until it answers."""
        dialog, layout = self._dialog(source.label())
        mark = QColor(self.view.writer.colors.highlight)
        mark.setAlpha(110)  # (the passage stays readable under it in both themes)
        add_passage_view(layout, source, self.question_of(answer_id), mark, None)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        document = opens_as_document(source.file_path)
        words = tr("Open file") if document else tr("Show in folder")
        open_file = QPushButton(tr("Checking…"))
        open_file.setObjectName("openSourceFile")
        open_file.setEnabled(False)
        folder_words = tr("Shows the folder that holds {path}: Ember opens documents, never a file that could run.")
        tip = source.file_path if document else folder_words.format(path=source.file_path)
        open_file.setToolTip(tr("Checking that {path} is in the project's knowledge…").format(path=source.file_path))
        open_file.clicked.connect(lambda: self._open_file(answer_id, source, dialog, open_file))
        buttons.addButton(open_file, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(dialog.close)
        layout.addWidget(buttons)
        dialog.resize(600, 380)
        dialog.show()

        def checked(why_not: str | None) -> None:
            if self.dialog is not dialog:  # (closed, or another passage shown: its own check)
                return
            open_file.setText(words)
            open_file.setEnabled(why_not is None)
            open_file.setToolTip(why_not or tip)
            if why_not:
                self._say(dialog, why_not)

        self._check(answer_id, source, checked)
        return dialog

    def _check(self, answer_id: int, source: ProjectSource, answered: Callable[[str | None], None]) -> None:
        """Whether the source may be opened (None) or why not, handed to `answered` on the GUI thread; the
        window's check runs on its task runner (a source an imported chat brought needs none)."""
        if source.passage_id == IMPORTED_PASSAGE:  # (a path a chat file named: text to read, never opened)
            answered(tr("This source came with an imported chat: Ember opens only files of its projects' own indexes."))
            return
        check = self.why_not_open
        if self.tasks is None:  # (a transcript not in a window: the default check, which touches nothing)
            answered(check(answer_id, source.file_path, source.passage_id))
            return
        path, passage_id = source.file_path, source.passage_id
        self.tasks.run(lambda: check(answer_id, path, passage_id), answered, answered, key=f"source-check/{id(self)}")

    def _open_file(self, answer_id: int, source: ProjectSource, dialog: QDialog, button: QPushButton) -> None:
        """Asked again off the GUI thread (the file may have gone), then opened."""
        button.setEnabled(False)

        def checked(why_not: str | None) -> None:
            if self.dialog is not dialog:
                return
            target = open_target(source.file_path)  # (the file, or for a code file the folder holding it)
            if why_not is None and QDesktopServices.openUrl(QUrl.fromLocalFile(target)):
                button.setEnabled(True)
                return
            self._say(dialog, why_not or tr("No program opened {path}.").format(path=target))
            button.setEnabled(why_not is None)

        self._check(answer_id, source, checked)

    def _say(self, dialog: QDialog, sentence: str) -> None:
        layout = dialog.layout()
        if isinstance(layout, QVBoxLayout):
            layout.insertWidget(layout.count() - 1, plain_label(sentence, "sourceMissing"))

    def show_image(self, att: StoredAttachment, data: bytes) -> QDialog:
        """An attached image at full size (scrolled when larger than the screen allows)."""
        dialog, layout = self._dialog(att.name)
        pixmap = add_image_preview(layout, att, data)
        screen = self.view.screen().availableGeometry()
        width = max(pixmap.width() + 40, 360)
        dialog.resize(min(width, screen.width() - 80), min(pixmap.height() + 120, screen.height() - 80))
        self._finish(dialog, layout)
        return dialog

    def show_attachment(self, message_id: int, index: int) -> QDialog:
        """A sent file's preview: an image at full size, or the text the model was given with how the
        answer to this message read it. Only what Ember's store keeps is shown; a file gone from it
        says so in the preview."""
        att = self.of(message_id).attachments[index]
        if att.is_image:
            data = self.of(message_id).images.get(att.sha256)
            if data is not None:
                return self.show_image(att, data)
            return self._missing(
                att, tr("{name} is missing from Ember's data folder; attach it again.").format(name=att.name)
            )
        if self.text_head is None:
            return self._missing(att, tr("The text of {name} cannot be shown here.").format(name=att.name))
        try:
            text, total = self.text_head(att, MAX_TEXT_BYTES)
        except EmberError as exc:
            return self._missing(att, str(exc))
        first, latest = self.readings(message_id, att)
        dialog, layout = self._dialog(att.name)
        mark = QColor(self.view.writer.colors.highlight)
        mark.setAlpha(110)  # (the passage stays readable under it in both themes)
        ids = self.view.thread_ids()
        answered = message_id in ids and ids[-1] != message_id  # (messages follow it in the thread)
        add_text_preview(layout, att, text, total, first, latest, mark, answered)
        screen = self.view.screen().availableGeometry()
        dialog.resize(min(720, screen.width() - 80), min(560, screen.height() - 80))
        self._finish(dialog, layout)
        return dialog

    def _missing(self, att: StoredAttachment, sentence: str) -> QDialog:
        dialog, layout = self._dialog(att.name)
        layout.addWidget(plain_label(sentence, "previewMissing"))
        self._finish(dialog, layout)
        return dialog

    def readings(self, message_id: int, att: StoredAttachment) -> tuple[Reading | None, Reading | None]:
        """How the answer to this message read the file (the first answer after it in the thread whose
        plan has it), and how the newest answer that had it read it."""
        ids = self.view.thread_ids()
        after = ids[ids.index(message_id) + 1 :] if message_id in ids else []
        found = []
        for answer_id in after:
            m = self.of(answer_id)
            # (a plan recorded before items kept their file's id has 0 there: matched by name)
            item = next(
                (i for i in m.items if i.attachment_id in (att.id, 0) and (i.attachment_id or i.name == att.name)), None
            )
            if item is not None:
                sources = tuple(s for s in m.sources if s.attachment_id == att.id)
                found.append(Reading(item, sources))
        return (found[0], found[-1]) if found else (None, None)
