"""What the window calls a model in the picker and the Model Manager: the bundled starters by what
they are and what they are for (so a user can tell the chat starter from the base model), any other
model by its library name."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication

from ember_chat.engine.models.library import ModelEntry
from ember_chat.engine.models.starter import GEMMA_ALIAS, STARTER_ALIAS


def model_label(entry: ModelEntry, short: bool = False) -> str:
    """The entry's name as the window shows it (translated when called); `short` for the model picker,
    whose width leaves the loaded model's status room at the default window size."""
    if entry.starter is None:
        return entry.name
    return starter_label(entry.starter.alias, short) or entry.starter.description


def starter_label(name: str | None, short: bool = True) -> str | None:
    """A bundled starter's name as the window shows it, for its alias; None for any other model (an
    answer's header then names the model as its file does: the starters' files name them cryptically)."""
    if name == STARTER_ALIAS:
        return (
            QCoreApplication.translate("ModelNames", "SmolLM2 135M (chat starter)")
            if short
            else QCoreApplication.translate("ModelNames", "SmolLM2 135M Instruct (starter: chat)")
        )
    if name == GEMMA_ALIAS:
        return (
            QCoreApplication.translate("ModelNames", "Gemma 3 270M (base model)")
            if short
            else QCoreApplication.translate("ModelNames", "Gemma 3 270M (base model: text completion)")
        )
    return None
