"""What an MCP server's user sees of it without the MCP SDK loaded: its log (stderr and Ember's notes)
and the words that point to it. Kept apart from the transports so the window can hold servers (and
show their logs) before any of them starts: the SDK is imported only when one does."""

from __future__ import annotations

import threading

LOG_LIMIT = 64 * 1024  # what stderr_text() keeps: the last 64 KB
GRACE_S = 1.0  # a server told to stop (stdin closed) has this long to exit before its group is killed
LOG_HINT = "Its log is in Settings ▸ Tools."


class ServerLog:
    """The server's stderr (and Ember's notes about it), the last LOG_LIMIT bytes; read from any thread."""

    def __init__(self, limit: int = LOG_LIMIT) -> None:
        self._limit = limit
        self._data = bytearray()
        self._lock = threading.Lock()
        self.dropped = 0  # bytes no longer kept

    def append(self, data: bytes) -> None:
        with self._lock:
            self._data += data
            extra = len(self._data) - self._limit
            if extra > 0:
                del self._data[:extra]
                self.dropped += extra

    def note(self, line: str) -> None:
        """A line from Ember itself (a restart, a skipped tool), marked as such."""
        self.append(f"[Ember] {line}\n".encode())

    def text(self) -> str:
        with self._lock:
            data = bytes(self._data)
        text = data.decode("utf-8", errors="replace")
        if self.dropped:
            start = text.find("\n") + 1  # start at a whole line
            text = f"[Ember] … {self.dropped} earlier bytes are not kept.\n" + text[start:]
        return text

    def last_line(self) -> str:
        lines = [line for line in self.text().splitlines() if line.strip() and not line.startswith("[Ember]")]
        return lines[-1].strip()[:300] if lines else ""
