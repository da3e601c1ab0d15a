"""How the API server reads a request's files and images (the content parts openai/content_parts.py
reads): each file and image is read in a child process with the server's time and memory limits
(attachments/isolated.py), never on the connection's thread: a file that takes too long or inflates
is a 400 saying so, and a client that hangs up (or the server stopping) ends its reader at once. The
API's files share at most all readers but one (the window's attachments, imports and the CLI keep
one), in order of arrival; a file that waited `Reading.turn_wait_s` for its turn is a 503 with
Retry-After (the readers are busy: the request can be sent again as it is).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from ember_chat.engine.attachments import DEFAULT_LIMITS, AttachmentStore, Extracted, Limits, read_bytes_isolated
from ember_chat.engine.attachments.isolated import ReadingStopped
from ember_chat.engine.attachments.reader_turns import ReadersBusy, Requester
from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.errors import AttachmentError
from ember_chat.engine.openai.api_error import ApiError
from ember_chat.engine.openai.content_parts import ContentError

TURN_WAIT_S = 30.0  # how long a request's file may wait for a reader (every one the API may use busy)


@dataclass(frozen=True)
class Reading:
    """How a request's files are read: the limits (the server's, from the settings) and what says the
    request is no longer wanted (its client hung up, the server stops); how long a file may wait for
    its turn among the readers before the request is a 503."""

    limits: Limits = DEFAULT_LIMITS
    cancelled: Callable[[], bool] | None = None
    turn_wait_s: float = TURN_WAIT_S

    def read(self, name: str, data: bytes, at: str) -> Extracted:
        """A part's file or image (`at` names the part), read as an attached file is; a file it cannot
        use is a ContentError, the readers all busy for too long a 503, a request no longer wanted
        ReadingStopped."""
        try:
            return read_bytes_isolated(
                name,
                data,
                self.limits,
                cancelled=self.cancelled,
                requester=Requester.API,  # (the API's share of the readers: never all of them)
                turn_wait_s=self.turn_wait_s,
            )
        except ReadingStopped:
            raise  # (the server drops the connection: nobody is left to answer)
        except ReadersBusy as exc:
            # every read now running ends within the time limit: a reader is free by then
            retry = max(1, math.ceil(self.limits.max_seconds))
            said = f"{at}: {exc} Send the request again later."
            headers = {"Retry-After": str(retry)}
            raise ApiError(503, said, "server_error", param="messages", code="readers_busy", headers=headers) from None
        except AttachmentError as exc:
            raise ContentError(f"{at}: {exc}") from None


def attach(messages: list[ChatMessage], files: dict[int, list[Extracted]], store: AttachmentStore) -> list[ChatMessage]:
    """The messages with their files saved in `store` and referred to (`files`: message index → files)."""
    out = list(messages)
    for index, extracted in files.items():
        refs = tuple(store.ref(store.save(e)) for e in extracted)
        out[index] = replace(out[index], attachments=out[index].attachments + refs)
    return out
