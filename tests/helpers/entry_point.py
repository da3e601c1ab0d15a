"""The `ember-chat` command exactly as a user runs it: the launcher script pip installed beside this
Python (`.venv/bin/ember-chat`), not an internal module's `main`, so a test also proves that the launcher
sends the arguments where they belong (a terminal command or the window)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def ember_chat() -> str:
    """The installed launcher's path (the README's `.venv/bin/ember-chat`)."""
    found = shutil.which("ember-chat", path=str(Path(sys.executable).parent))
    if found is None:
        raise RuntimeError(f"ember-chat is not installed beside {sys.executable}: run pip install -e .")
    return found
