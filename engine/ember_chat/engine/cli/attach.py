"""`ember-chat run --attach FILE`: files read before the model loads (a file that cannot be read is one
line and exit status 2, like a bad model file), kept in a temporary attachment store for this one run,
and reported: per attachment its name, kind, tokens and mode, and for retrieval the sources used."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ember_chat.engine.attachments import AttachmentKind, AttachmentStore, Extracted, Limits, read_attachment_isolated
from ember_chat.engine.core.messages import AttachmentRef, ChatMessage, ImageInput
from ember_chat.engine.inference.events import AttachmentsPlanned
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.settings import SettingsFile


def read_files(files: list[str], paths: AppPaths) -> list[Extracted]:
    """Every file read, or AttachmentError (an EmberError: one line, exit 2) for the first that cannot be.
    Each is read in a child process with the time and memory limits of settings.json (isolated.py)."""
    limits = Limits.from_settings(SettingsFile(paths.settings_file).load())
    return [read_attachment_isolated(Path(f), limits) for f in files]


def user_message(prompt: str, files: list[Extracted], store: AttachmentStore) -> ChatMessage:
    refs: list[AttachmentRef] = []
    images: list[ImageInput] = []
    for extracted in files:
        if extracted.kind is AttachmentKind.IMAGE:
            images.append(ImageInput.from_bytes(extracted.image or b"", extracted.name))
        else:
            refs.append(store.ref(store.save(extracted)))
    return ChatMessage("user", prompt, images=tuple(images), attachments=tuple(refs))


def report(files: list[Extracted], planned: AttachmentsPlanned | None) -> list[dict[str, Any]]:
    """Per attachment, in the order given: name, kind, tokens, mode (whole, retrieval, image) and, for
    retrieval, passages used of total and the sources (file, page, chunk)."""
    planned_items = {entry["name"]: entry for entry in planned.plan.report()} if planned else {}
    return [
        {"name": f.name, "kind": "image", "tokens": None, "mode": "image"}
        if f.kind is AttachmentKind.IMAGE
        else planned_items[f.name]
        for f in files
    ]


def describe(planned: AttachmentsPlanned) -> list[str]:
    """One line per planned attachment, for the terminal."""
    about = " (estimated)" if planned.estimated else ""
    return [f"[{item.name}: {item.kind}, {item.describe()}{about}]" for item in planned.plan.items]
