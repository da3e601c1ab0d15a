"""What the window calls a model: the engine's one display name (engine/models/names.py), the same the
Model Manager, `ember-chat models list`, the command line's messages and the answers' metrics say: a
bundled starter by what it is and what it is for, any other model by its library name."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication

from ember_chat.engine.models.library import ModelEntry
from ember_chat.engine.models.names import display_name
from ember_chat.engine.storage.connections import Connection, remote_model_name


def model_label(name: str) -> str:
    """The model Ember knows as `name` (a library name, an alias, a remote model's name) as the
    window shows it, translated when called."""
    return QCoreApplication.translate("ModelNames", display_name(name))


def model_choices(entries: list[ModelEntry], connections: list[Connection]) -> list[tuple[str, str]]:
    """(label, name) of every model the picker offers: local ones, then each connection's models
    marked with the connection's name."""
    out = [(model_label(e.name), e.name) for e in entries]
    for c in connections:
        ids = list(dict.fromkeys([*([c.default_model] if c.default_model else []), *c.models]))
        out += [(f"{model_id} — {c.name}", remote_model_name(c.name, model_id)) for model_id in ids]
    return out
