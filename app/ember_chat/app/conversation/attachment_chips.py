"""An attachment's chip, compact: its kind in a few letters, its name (elided), the tokens it takes (and
how the model reads it when not whole), an ✕ that removes it before sending; its size and the whole
sentence are in its tooltip. How it will be read is the engine's own plan of the message as it
would be sent (attachments_bar.py), said in the words the answer's "Read:" line uses (`mode_words`,
engine_link/attachment_words.py): the chip and that line agree."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath

from PySide6.QtCore import QSize, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QProgressBar, QSizePolicy, QToolButton, QWidget

from ember_chat.app.engine_link.attachment_words import kind_label, mode_words, tr
from ember_chat.app.qt.elided_label import ElidedLabel
from ember_chat.app.qt.plain_text import plain_tooltip
from ember_chat.app.style.icons import themed_icon
from ember_chat.app.style.theme import Colors
from ember_chat.engine.attachments.kinds import human_size


@dataclass
class ChipState:
    """What a chip shows. `tokens`: None while not counted (or an image); `progress`: 0..1 while the
    file is read, else None; `warning`: why it cannot be used as it is (an image for a model that
    cannot see images)."""

    name: str
    kind: str = ""
    size: int = 0
    tokens: int | None = None  # what the file takes whole (as the prompt holds it: in its named block)
    tokens_note: str = ""  # while there is no count ("counting tokens…")
    estimated: bool = False  # the count is an estimate (no model loaded, or no tokenizer for it)
    mode: str = ""  # the engine's plan: "whole" or "retrieval" ("": no plan, no model loaded)
    used: int = 0
    total: int = 0
    planned: int | None = None  # the tokens it takes in the prompt by the plan (the Read line's number)
    progress: float | None = None
    warning: str = ""  # (the only warning: an image for a model that cannot see images)
    # while it is read: whether its reader has measured its progress (a PDF's pages; HTML, DOCX and
    # text give none until they are done: a percentage would stay at 0 % until the end or the limit),
    # how long its reader has run (None: waiting for its turn) and the time limit it stops at
    measured: bool = False
    reading_s: float | None = 0.0
    limit_s: float = 0.0
    transcribing: bool = False  # a recording being transcribed (its words say so; no time limit)


def chip_words(s: ChipState) -> str:
    """The chip's full details, said on hover (its tooltip) and to a screen reader: "PDF · 1.2 MB ·
    3,450 tokens · whole" (the tokens it takes in the prompt, as the Read line will say; without a
    plan, what it takes whole)."""
    if s.progress is not None:
        return reading_words(s)
    parts = [kind_label(s.kind), human_size(s.size)]
    tokens = s.planned if s.mode and s.planned is not None else s.tokens
    if tokens is not None and s.estimated:
        parts.append(tr("≈{n} tokens (estimated)").format(n=f"{tokens:,}"))
    elif tokens is not None:
        parts.append(tr("{n} tokens").format(n=f"{tokens:,}"))
    elif s.tokens_note:
        parts.append(s.tokens_note)
    mode = mode_words(s.mode, s.used, s.total)
    if mode:
        parts.append(mode)
    if s.warning:
        parts.append(tr("the loaded model cannot see it"))
    return " · ".join(p for p in parts if p)


def chip_suffix(s: ChipState) -> str:
    """What the compact chip shows after the name: the tokens it takes in the prompt, and how it is read
    only when that is not whole ("3 of 12 passages", "not used"); the rest is in its tooltip. From the
    same state as `chip_words`, so the two never disagree."""
    if s.progress is not None:
        return reading_suffix(s)
    tokens = s.planned if s.mode and s.planned is not None else s.tokens
    if tokens is not None:
        words = (tr("≈{n} tokens") if s.estimated else tr("{n} tokens")).format(n=f"{tokens:,}")
    elif s.tokens_note:
        words = tr("counting…")
    else:  # (an image, or a count that failed)
        words = human_size(s.size) if s.size else ""
    if s.mode == "retrieval" and s.total and s.used:
        words += " · " + tr("{used} of {total} passages").format(used=f"{s.used:,}", total=f"{s.total:,}")
    elif s.mode == "retrieval" and s.total:
        words += " · " + tr("not used")
    return words


def _progress_words(transcribing: bool) -> tuple[str, str, str, str]:
    """Waiting, a measured share, starting, the seconds so far: while a file is read, or while a recording
    is transcribed (its first words come once it is decoded and the speech model loaded: a few seconds)."""
    if transcribing:
        return (tr("waiting to be transcribed…"), tr("Transcribing… {percent} %"), tr("Transcribing…"),
                tr("Transcribing… {seconds} s"))  # fmt: skip
    return tr("waiting for a reader…"), tr("reading… {percent}%"), tr("reading…"), tr("reading… {seconds} s")


def reading_suffix(s: ChipState) -> str:
    """While a file is read (or a recording transcribed): its percentage when its reader measures it,
    else the seconds its reader has run (an honest "still at it", never a 0 % that does not move)."""
    waiting, percent, starting, seconds = _progress_words(s.transcribing)
    if s.reading_s is None:
        return waiting
    if s.measured:
        return percent.format(percent=round(100 * (s.progress or 0.0)))
    if s.reading_s < 1:
        return starting
    return seconds.format(seconds=int(s.reading_s))


def reading_words(s: ChipState) -> str:
    """The tooltip's sentence while a file is read: what the chip shows, and when Ember stops."""
    if s.transcribing:
        said = reading_suffix(s)
        if s.reading_s is None:
            said = tr("waiting to be transcribed (recordings are transcribed one at a time)")
        return said + " · " + tr("speech recognised on this computer; its text is attached, with times")
    if s.reading_s is None:
        said = tr("waiting for a reader (files are read a few at a time, each in a process of its own)")
    elif s.measured:
        said = reading_suffix(s)
    else:
        said = tr("reading… {seconds} s (this kind of file gives no measure of its progress)").format(
            seconds=int(s.reading_s)
        )
    if s.limit_s:
        said += " · " + tr("Ember stops reading it after {limit} s (attachment_read_seconds in settings.json)").format(
            limit=f"{s.limit_s:g}"
        )
    return said


KIND_BADGES = {  # the chip's kind, in a few letters (its full name is in the tooltip)
    "text": "TXT",
    "markdown": "MD",
    "code": "CODE",
    "csv": "CSV",
    "json": "JSON",
    "html": "HTML",
    "pdf": "PDF",
    "docx": "DOCX",
    "image": "IMG",
    "audio": "AUDIO",
}


def kind_badge(s: ChipState) -> str:
    """The kind in a few letters; while the file is read (its kind not known yet), its extension."""
    if s.kind:
        return KIND_BADGES.get(str(s.kind), str(s.kind)[:4].upper())
    suffix = PurePath(s.name).suffix.lstrip(".").upper()
    return suffix[:4] if suffix and suffix.isalnum() else tr("FILE")


NAME_WIDTH = 150  # the most a chip's name takes (elided beyond: the whole name is in the tooltip)
CLOSE_SIZE = 18  # the ✕ button, square


class AttachmentChip(QFrame):
    """One chip in the strip above the message box: the kind in a few letters, the name (elided), the
    tokens (and how it is read when not whole), ✕. One line of the system font high; everything else
    (size, the whole sentence the Read line will say, a warning) is in its tooltip."""

    remove = Signal()

    def __init__(self, state: ChipState, colors: Colors | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("attachmentChip")
        self.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Fixed)
        row = QHBoxLayout(self)
        row.setContentsMargins(6, 1, 1, 1)
        row.setSpacing(4)
        self.kind = QLabel()
        self.kind.setObjectName("attachmentKind")
        self.name_label = ElidedLabel()
        self.name_label.setObjectName("attachmentName")
        self.name_label.setMaximumWidth(NAME_WIDTH)
        self.details = QLabel()
        self.details.setObjectName("attachmentDetails")
        self.progress = QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.setTextVisible(False)
        self.progress.setFixedSize(36, 4)
        self.warning = QLabel("⚠")
        self.warning.setObjectName("attachmentWarning")
        self.close_button = QToolButton()
        self.close_button.setAutoRaise(True)
        self.close_button.setFixedSize(CLOSE_SIZE, CLOSE_SIZE)
        self.close_button.setIconSize(QSize(12, 12))
        self.close_button.clicked.connect(self.remove)
        row.addWidget(self.warning)
        row.addWidget(self.kind)
        row.addWidget(self.name_label, 1)
        row.addWidget(self.details)
        row.addWidget(self.progress)
        row.addWidget(self.close_button)
        self.state = state
        self.words = ""  # the full details (tooltip, screen reader): chip_words(state)
        if colors is not None:
            self.set_colors(colors)
        self.show_state(state)

    def set_colors(self, colors: Colors) -> None:
        self.close_button.setIcon(themed_icon("close", colors))

    def show_state(self, state: ChipState) -> None:
        self.state = state
        self.name_label.setText(state.name)
        self.kind.setText(kind_badge(state))
        words = self.words = chip_words(state)
        self.details.setText(chip_suffix(state))
        reading = state.progress is not None
        self.progress.setVisible(reading)
        if reading and state.measured:
            self.progress.setRange(0, 100)
            self.progress.setValue(round(100 * (state.progress or 0.0)))
        elif reading:  # no measure: the style's busy bar (moving), not an empty one
            self.progress.setRange(0, 0)
        self.warning.setVisible(bool(state.warning))
        self.setProperty("warn", bool(state.warning))
        self.style().unpolish(self)
        self.style().polish(self)
        tip = f"{state.name}\n{words}" + (f"\n\n{state.warning}" if state.warning else "")
        if state.mode == "retrieval" and state.tokens is not None:  # (what it would take, for the curious)
            tip += "\n" + tr("Whole, it would take {n} tokens.").format(n=f"{state.tokens:,}")
        # the chip's parts show the chip's tooltip, not the name label's own (the name alone)
        for part in (self, self.kind, self.name_label, self.details):  # (the name is the file's: shown as written)
            part.setToolTip(plain_tooltip(tip))
        self.warning.setToolTip(state.warning)
        self.setAccessibleName(tr("Attachment {name}").format(name=state.name))
        self.setAccessibleDescription(words + (f". {state.warning}" if state.warning else ""))
        self.close_button.setAccessibleName(tr("Remove {name}").format(name=state.name))
        self.close_button.setToolTip(
            plain_tooltip(
                (tr("Stop transcribing {name}") if state.transcribing else tr("Stop reading {name}")).format(
                    name=state.name
                )
                if reading
                else tr("Remove {name} (it is not sent)").format(name=state.name)
            )
        )
