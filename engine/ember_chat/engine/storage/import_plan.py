"""What an import will write, read from a file before anything is written: chats as plain values (their
messages in tree order, each pointing at its parent by place), so a bad file is found whole before the
database is touched. Shared by the readers (import_chatgpt.py, import_ember.py) and the writer
(importing.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ember_chat.engine.errors import EmberError
from ember_chat.engine.storage.titles import clean_title


class ImportFailed(EmberError):
    """The file cannot be imported: the message names the file, the problem and where it is. Nothing
    was written."""


class ImportCancelled(ImportFailed):
    """The user cancelled the import; nothing was written."""


CANCELLED = "The import was cancelled; nothing was imported."
IMPORTED_PASSAGE = -1  # the passage id of an answer's project source read from a chat file: in no index,
# never opened (its file path is text to read, like the passage)


@dataclass(frozen=True)
class ExportImage:
    """An image file inside a ChatGPT export's folder (import_chatgpt.export_assets found it there): the
    only attachment an import reads from the disk. It is a type, not a dict, so that no chat file can
    make one: an entry read from JSON is always a dict, and a dict's `path` is never followed."""

    folder: Path  # the export's folder, resolved: the file is read only while it resolves inside it
    path: Path
    name: str  # the name shown on its chip


AttachmentEntry = dict[str, Any] | ExportImage  # an Ember export's entry (export_entries' shape) or an image


@dataclass
class PlannedMessage:
    parent: int | None  # place in the chat's `messages` (always before this one), None for a first message
    role: str  # system, user or assistant
    content: str
    created_at: float
    metrics: dict[str, Any] | None = None
    complete: bool = True
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # as stored: id, name, arguments, raw, error
    tool_messages: list[dict[str, Any]] = field(default_factory=list)  # call_id, state, content, meta
    files: list[AttachmentEntry] = field(default_factory=list)
    # an answer's project passages, as export.py writes them (n, file, page, seq, passage), checked
    sources: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class PlannedAnswer:
    model: str
    content: str
    metrics: dict[str, Any] | None
    error: str | None
    kept: int | None  # place of the message it became


@dataclass
class PlannedComparison:
    prompt: int | None
    settings: dict[str, Any]
    created_at: float
    answers: list[PlannedAnswer]


@dataclass(frozen=True)
class PlannedProject:
    """The project a chat was in, as its export carried it (import_ember._project): made again as a folder
    of that name when none exists. Its knowledge is paths another computer named: kept as paths, paused
    until the user confirms each one, never opened by the import."""

    name: str
    icon: str = ""
    instructions: str = ""
    model: str | None = None
    preset: str | None = None
    tools: tuple[str, ...] = ()
    context_length: int | None = None
    embedding_model: str | None = None
    reranker: str | None = None
    knowledge: tuple[tuple[str, str], ...] = ()  # (path, "folder" or "file")


@dataclass
class PlannedChat:
    title: str
    created_at: float
    updated_at: float
    messages: list[PlannedMessage]
    active: int | None  # place of the shown branch's last message
    model: str | None = None
    system_prompt: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    tools: dict[str, Any] | None = None  # ChatTools as stored
    pinned: bool = False
    archived_at: float | None = None
    comparisons: list[PlannedComparison] = field(default_factory=list)
    grants_refused: int = 0  # "always allow" grants the file carried, never imported (import_ember._tools)
    settings_reset: tuple[str, ...] = ()  # settings of the wrong kind, out of range or unknown: left out
    project: PlannedProject | None = None  # the project it was in (its folder is found or made by name)

    def __post_init__(self) -> None:
        self.title = clean_title(self.title)  # (kept as shown: no bidi override disguising it)


@dataclass
class Plan:
    format: str  # "chatgpt" or "ember"
    chats: list[PlannedChat]
    skipped: dict[str, int] = field(default_factory=dict)  # what was left out, by kind: counts
    # the projects a project's export names on their own (import_ember.ember_project): made even with no chat
    projects: list[PlannedProject] = field(default_factory=list)

    def skip(self, kind: str, count: int = 1) -> None:
        self.skipped[kind] = self.skipped.get(kind, 0) + count


KeepFiles = Callable[[int], Mapping[str, int]]
"""A message's attachments, read: keeps them with the message of this id, inside the import's
transaction, and says what it left out (counts by the kinds importing.py's report names: "by path",
"unreadable image")."""


class AttachmentSink(Protocol):
    """Keeps a message's attachment entries (attachments/imported.py: AttachmentImporter). `read` runs
    before the import takes the store's lock (reading an image takes a child process and up to the
    time limit: the window's thread must not wait on the lock meanwhile) and stops once `cancelled()`;
    what it returns is called inside the import's transaction; `rolled_back` when the import did not
    commit (files it wrote are removed)."""

    def read(self, entries: Sequence[AttachmentEntry], cancelled: Callable[[], bool] | None = None) -> KeepFiles: ...

    def rolled_back(self) -> None: ...


def where(path_name: str, number: int, title: object) -> str:
    """'conversations.json, chat 4 (“Title”)' for messages about one chat."""
    name = f" (“{title}”)" if isinstance(title, str) and title else ""
    return f"{path_name}, chat {number}{name}"


def number(value: object) -> float | None:
    """A time as a number of seconds, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return float(value)
