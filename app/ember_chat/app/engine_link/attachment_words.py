"""An attachment's kind and how the model reads it, in the window's (translated) words: the composer's
chips and the transcript's "Read:" line and previews say the same (the engine's plan, PlannedAttachment,
in words)."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication

KIND_LABELS = {
    "text": "text",
    "markdown": "Markdown",
    "code": "code",
    "csv": "CSV",
    "json": "JSON",
    "html": "HTML",
    "pdf": "PDF",
    "docx": "DOCX",
    "image": "image",
    "audio": "recording, transcribed",
}


def tr(text: str) -> str:
    return QCoreApplication.translate("Attachments", text)


def kind_label(kind: str) -> str:
    return tr(KIND_LABELS.get(str(kind), str(kind)))


def mode_words(mode: str, used: int = 0, total: int = 0) -> str:
    """How the model reads an attachment (engine PlannedAttachment): whole, the passages retrieved for
    the question, or none when the conversation and the other files left no room (a short file is not
    "too long")."""
    if mode == "whole":
        return tr("whole")
    if mode == "retrieval" and total == 1 and not used:
        return tr("no room left in the context: not used")
    if mode == "retrieval" and total and not used:
        return tr("no room left in the context: none of its {total} passages used").format(total=f"{total:,}")
    if mode == "retrieval" and total:
        return tr("too long to read whole: {used} of {total} passages used").format(
            used=f"{used:,}", total=f"{total:,}"
        )
    if mode == "retrieval":
        return tr("too long to read whole: retrieval")
    return ""
