"""A data folder (its chat database and attachment store) as the tests of importing another Ember's data make them."""

from __future__ import annotations

from pathlib import Path

from ember_chat.engine.attachments import AttachmentStore
from ember_chat.engine.attachments.imported import AttachmentImporter
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.export import chats_as_json
from ember_chat.engine.storage.importing import import_chats
from ember_chat.engine.storage.paths import AppPaths


class Place:
    """A data folder with its chat database and attachment store."""

    def __init__(self, root: Path) -> None:
        self.paths = AppPaths(root / "data", root / "config")
        self.store = ConversationStore(self.paths.database)
        self.atts = AttachmentStore(self.paths, self.store)

    def export(self, ids: list[int] | None = None) -> str:
        ids = ids if ids is not None else [c.id for c in self.store.conversations()]
        return chats_as_json(self.store, ids, attachments=self.atts.export_entries)

    def import_file(self, path: Path) -> object:
        return import_chats(self.store, path, attachments=AttachmentImporter(self.atts))


def write_text(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
