"""The pool's catalog from the model library: every installed model by the names a request may use for
it — its library name (what `ember-chat models list` and the window show), its file name and its file
stem — each loaded with the given load settings. Read at each request, so a model downloaded or
deleted while the server runs is known (or gone) at once. A starter not assembled yet (Gemma, before its
first load) is listed with the file it will be; `prepare_starter` assembles it before it is loaded."""

from __future__ import annotations

import threading
from collections.abc import Callable

from ember_chat.engine.core.params import LoadConfig, LoadOptions
from ember_chat.engine.core.refs import ModelRef
from ember_chat.engine.models.library import ModelEntry, ModelLibrary
from ember_chat.engine.models.starter import installed_starters, starter_file, starter_model_path

_ASSEMBLING = threading.Lock()  # (two requests for a starter not assembled yet: one assembles it)


def library_catalog(
    library: ModelLibrary, options: Callable[[ModelEntry], LoadOptions]
) -> Callable[[], dict[str, ModelRef]]:
    def catalog() -> dict[str, ModelRef]:
        names: dict[str, ModelRef] = {}
        for entry in library.entries():
            path = entry.path
            if path is None and entry.starter is not None:  # (not assembled yet: the file it will be)
                path = starter_file(entry.starter, library.models_dir)
            if path is None:
                continue
            how = options(entry)
            draft = how.draft_model if isinstance(how, LoadConfig) else None  # (speculative decoding's)
            ref = LoadConfig(path, mmproj=entry.mmproj, draft_model=draft, **how.options())
            for name in (entry.name, path.name, path.stem):
                names.setdefault(name, ref)
        return names

    return catalog


def prepare_starter(ref: ModelRef) -> None:
    """Before a model is loaded for a request: a starter the catalog lists before it is assembled is
    assembled now, as the window's first load of it does (StarterModelUnavailable when it cannot be)."""
    if not isinstance(ref, LoadConfig) or ref.path.exists():
        return
    for starter in installed_starters():
        if starter.assembled and starter_file(starter, ref.path.parent) == ref.path:
            with _ASSEMBLING:
                starter_model_path(ref.path.parent, starter.alias)
            return
