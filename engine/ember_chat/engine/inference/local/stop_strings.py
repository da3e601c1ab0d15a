"""Stop strings over a text stream: text that might be the start of a stop string is held back
until it is known not to be one, so a stop string never reaches the user."""

from __future__ import annotations


class StopStringScanner:
    def __init__(self, stops: tuple[str, ...]) -> None:
        self._stops = stops
        self._held = ""

    def feed(self, text: str) -> tuple[str, bool]:
        """Returns (text safe to show now, whether a stop string was hit)."""
        if not self._stops:
            return text, False
        buf = self._held + text
        hits = [i for i in (buf.find(s) for s in self._stops) if i >= 0]
        if hits:
            self._held = ""
            return buf[: min(hits)], True
        keep = 0
        for s in self._stops:
            for k in range(min(len(s) - 1, len(buf)), 0, -1):
                if buf.endswith(s[:k]):
                    keep = max(keep, k)
                    break
        self._held = buf[len(buf) - keep :] if keep else ""
        return buf[: len(buf) - keep], False

    def flush(self, tail: str = "") -> str:
        """At the end of the stream, whatever is held back is ordinary text."""
        out, hit = self.feed(tail) if tail else ("", False)
        if hit:
            return out
        out += self._held
        self._held = ""
        return out
