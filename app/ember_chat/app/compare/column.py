"""One model's column in the comparison dialog: its name, load progress, the answer as it streams,
its metrics line and "Keep this one"; and the word diff against the first column's answer."""

from __future__ import annotations

import difflib
import html
import re

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QLabel, QProgressBar, QPushButton, QTextBrowser, QVBoxLayout

from ember_chat.app.engine_link.wording import window_wording
from ember_chat.app.style.focus import ring_keyboard_links
from ember_chat.app.style.theme import Colors
from ember_chat.engine.inference.metrics import GenerationMetrics

_WORDS = re.compile(r"\s+|[^\s]+")


def diff_html(base: str, text: str, colors: Colors) -> str:
    """`text` as HTML with what differs from `base` marked: words it adds or changes on a green
    background, words of `base` it drops struck through in red (the theme's own colours)."""
    a, b = _WORDS.findall(base), _WORDS.findall(text)
    out: list[str] = []
    added = f"background-color: {_tint(colors.success, colors.base)};"
    dropped = f"color: {colors.error}; text-decoration: line-through;"
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(html.escape("".join(b[j1:j2])))
            continue
        if op in ("delete", "replace") and "".join(a[i1:i2]).strip():
            out.append(f'<span style="{dropped}">{html.escape("".join(a[i1:i2]))}</span>')
        if op in ("insert", "replace"):
            out.append(f'<span style="{added}">{html.escape("".join(b[j1:j2]))}</span>')
    return '<div style="white-space: pre-wrap;">' + "".join(out) + "</div>"


def _tint(colour: str, base: str, strength: float = 0.3) -> str:
    """`colour` mixed into `base` (a highlight that keeps the text readable on either theme)."""
    c, b = colour.lstrip("#"), base.lstrip("#")
    mix = [round(int(b[i : i + 2], 16) * (1 - strength) + int(c[i : i + 2], 16) * strength) for i in (0, 2, 4)]
    return "#" + "".join(f"{v:02x}" for v in mix)


def metrics_line(metrics: dict[str, object] | None) -> str:
    """TTFT, tok/s, tokens and why it ended, as the transcript writes them under an answer."""
    stored = GenerationMetrics.from_stored(metrics)
    return stored.summary_line(window_wording()) if stored else ""


class CompareColumn(QFrame):
    keep_clicked = Signal(int)  # the column's index

    def __init__(self, index: int, label: str, colors: Colors) -> None:
        super().__init__()
        self.index = index
        self.label = label
        self.colors = colors
        self.text = ""
        self.done = False
        self.kept = False
        self.setObjectName("compareColumn")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.title = QLabel(f"<b>{html.escape(label)}</b>")
        self.title.setWordWrap(True)
        self.status = QLabel(self.tr("Waiting for its turn…"))
        self.status.setWordWrap(True)
        self.progress = QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.setTextVisible(False)
        self.progress.setMaximumHeight(6)
        self.progress.hide()
        self.answer = QTextBrowser()
        self.answer.setOpenLinks(False)
        ring_keyboard_links(self.answer)
        self.answer.setAccessibleName(self.tr("Answer of {model}").format(model=label))
        self.metrics = QLabel()
        self.metrics.setWordWrap(True)
        self.metrics.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.keep = QPushButton(self.tr("Keep this one"))
        self.keep.setEnabled(False)
        self.keep.setToolTip(self.tr("Add this answer to the chat as a new branch and switch to it"))
        self.keep.clicked.connect(lambda: self.keep_clicked.emit(self.index))
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 8, 8, 8)
        for w in (self.title, self.status, self.progress, self.answer, self.metrics, self.keep):
            lay.addWidget(w)
        lay.setStretch(3, 1)
        self.set_colors(colors)

    def set_colors(self, colors: Colors) -> None:
        self.colors = colors
        self.status.setStyleSheet(f"color: {colors.secondary};")
        self.metrics.setStyleSheet(f"color: {colors.secondary};")

    # ----- a run
    def loading(self, fraction: float) -> None:
        self.progress.show()
        self.progress.setValue(int(fraction * 100))
        self.status.setText(self.tr("Loading the model… {percent} %").format(percent=int(fraction * 100)))

    def started(self) -> None:
        self.progress.hide()
        self.status.setText(self.tr("Answering…"))

    def append(self, text: str) -> None:
        self.text += text
        self.answer.setPlainText(self.text)
        self.answer.verticalScrollBar().setValue(self.answer.verticalScrollBar().maximum())

    def finish(self, text: str, reason: str, metrics: dict[str, object] | None, error: str | None) -> None:
        """The answer as it ended (also for a stored comparison shown again)."""
        self.done = True
        self.text = text
        self.progress.hide()
        self.answer.setPlainText(text)
        self.metrics.setText(metrics_line(metrics))
        if error:
            self.status.setText(self.tr("It did not answer: {error}").format(error=error))
            self.status.setStyleSheet(f"color: {self.colors.error};")
        elif reason == "cancelled":
            self.status.setText(self.tr("Stopped."))
        else:
            self.status.setText(self.tr("Done."))
        self.keep.setEnabled(bool(text.strip()) and not self.kept)

    def mark_kept(self) -> None:
        self.kept = True
        self.keep.setEnabled(False)
        self.keep.setText(self.tr("Kept in the chat"))

    def show_diff(self, base: str | None) -> None:
        """Mark what differs from `base` (the first column's answer); None: the plain answer."""
        if base is None or not self.done:
            self.answer.setPlainText(self.text)
        else:
            self.answer.setHtml(diff_html(base, self.text, self.colors))
