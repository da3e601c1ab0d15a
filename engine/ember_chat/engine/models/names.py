"""A model's one display name, the same in the window's picker, the Model Manager, `ember-chat models
list`, the command line's messages and the `model` of an answer's metrics (the window's, the API's
`ember` object): a bundled starter by what it is and what it is for ("SmolLM2 135M Instruct (chat
starter)", "Gemma 3 270M (base model)"), never by its alias nor by its GGUF's own name (the starters'
files call themselves "Smollm2 135M 8k Lc100K Mix1 Ep2" and "Gemma 3 270m"); any other model by its
name in the library, which `--model` accepts (a file given by its path: the file's name).

The name is a label only: the API's model id (the `model` a client sends, /v1/models) is the library
name or alias as before."""

from __future__ import annotations

from pathlib import PurePath

from ember_chat.engine.models.starter import STARTERS, Starter, find_starter

__all__ = ["display_name"]


def display_name(name: str, starters: tuple[Starter, ...] = STARTERS) -> str:
    """The display name of the model Ember knows as `name`: a library name or alias (`starter`,
    `gemma-3-270m`, `owner/repo/file.gguf`), or the name of the file a model was loaded from (a
    starter's own file is named as the starter; a download of the same name in a folder of its own
    keeps its library name, so the picker never lists two models under one name)."""
    starter = find_starter(name, starters)
    if starter is None and PurePath(name).name == name:
        starter = next((s for s in starters if s.file_name == name), None)
    return starter.description if starter is not None else name
