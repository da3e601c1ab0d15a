"""Typed errors a user can cause. Each message says what happened and what to do."""

from __future__ import annotations


class EmberError(Exception):
    """Base class for every error Ember shows to a user."""


class ModelFileError(EmberError):
    """The file is not a usable GGUF model (missing, unreadable, damaged, unsupported)."""


class ModelLoadError(EmberError):
    """llama.cpp could not load a model that passed inspection (memory, backend, format)."""


class LoadCancelled(EmberError):
    """The user cancelled a model load."""


class NoModelLoaded(EmberError):
    """A generation was requested before any model was loaded."""


class ImagesNotSupported(EmberError):
    """Images were sent to a model or server that cannot see them (never dropped silently)."""


class InvalidParameter(EmberError, ValueError):
    """A sampling or load parameter is out of its allowed range."""


class ContextOverflowError(EmberError):
    """A single message (plus the system prompt) is larger than the model's context window."""


class HistoryTooLong(ContextOverflowError):
    """The whole conversation does not fit the context, and the request asked for all of it (an API
    client that did not opt into trimming: leaving its oldest messages out may make it fit)."""


class GenerationError(EmberError):
    """llama.cpp failed while generating (not a user stop)."""


class NoRoomInContext(GenerationError):
    """The context's cells, shared by the answers generated at the same time, were all held by the
    others before this one's prompt was in (llama_decode: no memory slot): it could not start. It
    fits alone, so it may be tried again once they have finished."""


class StarterModelUnavailable(EmberError):
    """The bundled starter model package is not installed or its files are damaged."""


class HubError(EmberError):
    """The Hub could not answer (offline, not found, no access)."""


class HubOffline(HubError):
    pass


class HubNotFound(HubError):
    pass


class HubAuthError(HubError):
    """Gated or private repo without a (valid) token."""


# ----- The engine service


class QueueFull(EmberError):
    """Too many requests are waiting for the model."""


class JobCancelled(EmberError):
    """An exclusive job was cancelled before it started."""


# ----- Remote servers


class RemoteError(EmberError):
    """A remote server could not be used: the message says what happened and what to do."""


class RemoteUnreachable(RemoteError):
    pass


class RemoteAuthError(RemoteError):
    pass


class RemoteNotFound(RemoteError):
    pass


class RemoteServerError(RemoteError):
    def __init__(self, message: str, status: int, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class RemoteSelfConnection(RemoteError):
    """The connection leads back to this Ember's own API server: a request would wait for itself."""


class RemoteStreamError(RemoteError):
    """The stream broke or carried something that is not an OpenAI-compatible event."""


# ----- Downloads


class DownloadError(EmberError):
    pass


class DiskFullError(DownloadError):
    pass


class IntegrityError(DownloadError):
    pass


class UnsafeFilename(DownloadError):
    pass


class DownloadStopped(DownloadError):
    """Paused or cancelled by the user; `cancelled` tells which."""

    def __init__(self, message: str, cancelled: bool) -> None:
        super().__init__(message)
        self.cancelled = cancelled


# ----- The keychain


class SecretStoreError(EmberError):
    pass


# ----- The chat database


class StoreError(EmberError):
    """The chat database cannot be opened or is from a newer Ember."""


# ----- Remote connections


class ConnectionNotFound(EmberError):
    pass


# ----- The API server


class ServeError(EmberError):
    """The API server could not start (port in use, unsafe binding)."""


# ----- Attachments


class AttachmentError(EmberError):
    """A file cannot be attached (unreadable, binary, too big, encrypted, a bomb): one plain sentence."""


class ReaderFailed(AttachmentError):
    """A file was not read for a cause that is not its own: no process could start to read it, no reader
    was free, or its reader stopped or crashed unexpectedly. Reading it again later may work (a project's
    knowledge tries such files again: projects/indexer.py)."""


class ToolError(EmberError):
    """A tool source cannot be used (an MCP server that does not start, answers nothing or breaks its
    protocol; a damaged tools settings file); the message says which and why."""
