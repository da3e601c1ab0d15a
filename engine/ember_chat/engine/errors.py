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


class InvalidParameter(EmberError, ValueError):
    """A sampling or load parameter is out of its allowed range."""


class ContextOverflowError(EmberError):
    """A single message (plus the system prompt) is larger than the model's context window."""


class GenerationError(EmberError):
    """llama.cpp failed while generating (not a user stop)."""


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
