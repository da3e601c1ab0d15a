"""The pool's catalog from the model library: every installed model by the names a request may use for
it — its library name (what `ember-chat models list` and the window show), its file name and its file
stem — each loaded with the given load settings. Read at each request, so a model downloaded or
deleted while the server runs is known (or gone) at once."""

from __future__ import annotations

from collections.abc import Callable

from ember_chat.engine.core.params import LoadConfig, LoadOptions
from ember_chat.engine.core.refs import ModelRef
from ember_chat.engine.models.library import ModelEntry, ModelLibrary


def library_catalog(
    library: ModelLibrary, options: Callable[[ModelEntry], LoadOptions]
) -> Callable[[], dict[str, ModelRef]]:
    def catalog() -> dict[str, ModelRef]:
        names: dict[str, ModelRef] = {}
        for entry in library.entries():
            if entry.path is None:  # (the starter before it is assembled: `--model starter` loads it)
                continue
            how = options(entry)
            ref = LoadConfig(entry.path, mmproj=entry.mmproj, **how.options())
            for name in (entry.name, entry.path.name, entry.path.stem):
                names.setdefault(name, ref)
        return names

    return catalog
