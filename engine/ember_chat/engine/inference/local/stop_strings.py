"""Stop strings over a text stream: text that might be the start of a stop string is held back
until it is known not to be one, so a stop string never reaches the user."""

from __future__ import annotations


def partial_suffix(text: str, strings: tuple[str, ...]) -> int:
    """How many characters at the end of `text` may be the start of one of `strings` still being
    written (the longest such start; 0: none)."""
    keep = 0
    for s in strings:
        for k in range(min(len(s) - 1, len(text)), keep, -1):
            if text.endswith(s[:k]):
                keep = k
                break
    return keep


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
        keep = partial_suffix(buf, self._stops)
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
