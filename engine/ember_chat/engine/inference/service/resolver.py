"""From a model's name, as the picker and the benchmark lab list it, to what a backend loads: a
connection's model (`remote:<connection>/<model id>`), or a local model with its own saved load
settings, else the defaults the caller gives (the app's settings). Its callers chat (the window, the
comparison, the benchmark lab): an embedding model or a reranker is refused here, before anything is
unloaded, with what it is and where it is served instead."""

from __future__ import annotations

from ember_chat.engine.core.refs import ModelRef
from ember_chat.engine.errors import ModelFileError
from ember_chat.engine.models.gguf_inspect import inspect_gguf
from ember_chat.engine.models.library import ModelLibrary
from ember_chat.engine.storage.connections import ConnectionStore, parse_remote_model_name
from ember_chat.engine.storage.model_settings import AUTO_GPU_LAYERS, ModelSettingsStore
from ember_chat.engine.storage.settings import Settings


def model_ref(
    name: str,
    library: ModelLibrary,
    connections: ConnectionStore,
    model_settings: ModelSettingsStore,
    defaults: Settings,
    own_server_id: str | None = None,
) -> tuple[ModelRef, str]:
    """(reference to load, name to show). Raises EmberError for an unknown model or connection, and
    ModelFileError for a file llama.cpp cannot read (header, then its vocab_only read), RemoteError for
    a server that does not answer, does not serve the model or is the API server of the engine
    `own_server_id` (the one that is to load it): what
    is loaded is not unloaded for a model that would fail."""
    remote = parse_remote_model_name(name)
    if remote is not None:
        from ember_chat.engine.inference.remote.wire import check_remote_model  # the HTTP stack: when needed

        ref = connections.model_ref(*remote)
        check_remote_model(ref, own_server_id)
        return ref, remote[1]
    path = library.resolve(name)
    settings = model_settings.effective(name, defaults)
    from ember_chat.engine.inference.llama.loader import probe_gguf  # llama.cpp: off the GUI thread

    info = inspect_gguf(path)
    if info.kind == "embedding":
        raise ModelFileError(f"{name} is an embedding model: it has no chat. Ember's API server serves its "
                             "vectors at /v1/embeddings.")  # fmt: skip
    if info.kind == "reranker":
        raise ModelFileError(f"{name} is a reranker: it has no chat. Ember's API server serves its scores "
                             "at /v1/rerank.")  # fmt: skip
    probe_gguf(path)
    return settings.config(path, info if settings.gpu_layers == AUTO_GPU_LAYERS else None), name
