"""What the window calls a model: the engine's one display name (engine/models/names.py), the same the
Model Manager, `ember-chat models list`, the command line's messages and the answers' metrics say: a
bundled starter by what it is and what it is for, any other model by its library name."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication

from ember_chat.engine.models.names import display_name


def model_label(name: str) -> str:
    """The model Ember knows as `name` (a library name, an alias, a remote model's name) as the
    window shows it, translated when called."""
    return QCoreApplication.translate("ModelNames", display_name(name))
