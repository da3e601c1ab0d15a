"""An answer split into its sentences, for the tests that check a real model does not repeat itself."""

from __future__ import annotations

import re


def sentences(text: str) -> list[str]:
    return [s.strip().lower() for s in re.split(r"(?<=[.!?])\s+|\n+", text) if len(s.strip()) > 3]
