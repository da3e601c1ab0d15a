"""The states and outcomes Ember reports, as string enums: each compares equal to its string (what is
saved in chats, sent over the API and shown), so stored data and the wire stay the same, while code
names them instead of spelling strings."""

from __future__ import annotations

from enum import StrEnum


class StopReason(StrEnum):
    """Why a generation ended (GenerationMetrics.stop_reason, events.Finished.reason)."""

    STOP = "stop"  # the model ended its turn
    LENGTH = "length"  # max tokens
    STOP_STRING = "stop_string"
    CONTEXT_FULL = "context_full"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"  # a remote stream broke after tokens arrived
    ERROR = "error"  # failed before any answer
    TOOL_CALLS = "tool_calls"  # the model ended its turn with tool calls (Finished.tool_calls)


class ModelState(StrEnum):
    """Whether the window (or any client) has a model to chat with."""

    NONE = "none"
    LOADING = "loading"
    READY = "ready"


class JobState(StrEnum):
    """A download job's state in the download queue."""

    QUEUED = "queued"
    DOWNLOADING = "downloading"
    PAUSED = "paused"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class FitLabel(StrEnum):
    """Whether a model fits this machine's memory (the fit estimate)."""

    FITS = "fits"
    TIGHT = "tight"
    WONT_FIT = "won't fit"
    UNKNOWN = "unknown"
