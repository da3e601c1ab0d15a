"""A project's model for one use — its embedding model, its reranker — picked from the models installed.

`ModelChoice` offers "None" first, then the models installed; once their GGUF headers are read (off the GUI
thread: `installed_uses`, which reads each model's header), `narrow` keeps only the models that can do
that use (as their metadata says: `ModelInfo.embeds`, a reranker's rank pooling). The model the project
has chosen stays offered even when it is not installed (any more): choosing is the user's, never undone
by a list."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from PySide6.QtWidgets import QComboBox, QWidget

from ember_chat.engine.errors import EmberError
from ember_chat.engine.models.library import ModelLibrary


@dataclass(frozen=True)
class ModelUses:
    """The names of the models installed that give a text's vector, and of those that rerank."""

    embedding: frozenset[str]
    reranker: frozenset[str]


def installed_uses(library: ModelLibrary) -> ModelUses:
    """What each model installed can be used for, from its GGUF header (a file that cannot be read is
    neither). Reads files: call it off the GUI thread."""
    embedding: set[str] = set()
    reranker: set[str] = set()
    for entry in library.entries():
        if entry.path is None:
            continue  # (the starter, not assembled yet: a chat model)
        try:
            info = entry.info()
        except (EmberError, OSError):
            continue
        if info.kind == "reranker":
            reranker.add(entry.name)
        elif info.embeds:
            embedding.add(entry.name)
    return ModelUses(frozenset(embedding), frozenset(reranker))


class ModelChoice(QComboBox):
    def __init__(
        self, none_text: str, models: Sequence[str], chosen: str | None, parent: QWidget | None = None
    ) -> None:
        """`none_text`: what choosing no model means; `models`: the models installed, as the window's picker
        names them; `chosen`: the project's."""
        super().__init__(parent)
        self._none_text = none_text
        self._models = list(models)
        self._fill(self._models, chosen)

    def narrow(self, usable: Collection[str]) -> None:
        """Only the models that can do this use (and the one chosen), the choice shown kept."""
        self._fill([m for m in self._models if m in usable], self.currentData())

    def _fill(self, models: Sequence[str], chosen: str | None) -> None:
        self.clear()
        self.addItem(self._none_text, None)
        for name in dict.fromkeys([*models, *([chosen] if chosen else [])]):
            self.addItem(name, name)
        self.setCurrentIndex(max(0, self.findData(chosen)) if chosen else 0)
