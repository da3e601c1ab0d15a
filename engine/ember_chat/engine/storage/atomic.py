"""Ember's own files, kept safe: atomic JSON writes (a crash or a full disk mid-write leaves the old
file, never half a new one), and damaged files set aside, never overwritten, with what happened said
in words for the user."""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def write_json_atomically(path: Path, data: Any, **dump_options: Any) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over the old file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, **dump_options)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class ProblemLog:
    """What was wrong with a file, in sentences for the user (the window's banner, the CLI's stderr).
    Each is said once, however often the file is read, and kept until someone shows it."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self._said: set[str] = set()

    def report(self, problem: str) -> None:
        if problem not in self._said:
            self._said.add(problem)
            self.problems.append(problem)
            log.warning("%s", problem)

    def take_problems(self) -> list[str]:
        problems, self.problems = self.problems, []
        return problems


def aside_path(path: Path) -> Path:
    """Where a damaged file goes: NAME.damaged-<time>SUFFIX next to it, a name no earlier copy (nor
    its -wal/-shm, for a database) has."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.stem}.damaged-{stamp}{path.suffix}")
    n = 1
    while any(Path(f"{aside}{s}").exists() for s in ("", "-wal", "-shm")):
        n += 1
        aside = path.with_name(f"{path.stem}.damaged-{stamp}-{n}{path.suffix}")
    return aside


def set_aside(path: Path) -> str:
    """Move a damaged file out of the way (`aside_path`), so the user keeps it and no save can
    overwrite it. Returns what happened, the end of a sentence: "it was moved to …"."""
    aside = aside_path(path)
    try:
        os.replace(path, aside)
    except OSError as exc:
        return f"it could not be moved aside ({exc.strerror or exc}) and was left as it is"
    return f"it was moved to {aside}"


def read_json_file(
    path: Path,
    problems: ProblemLog,
    label: str,
    holds: str,
    fallback: str,
    fits: Callable[[Any], bool] = lambda data: isinstance(data, dict),
) -> Any:
    """The JSON in `path`; None when there is no file, or when it is damaged: it cannot be read, is
    not JSON, or does not hold `holds` (`fits` says). A damaged file is set aside and reported:
    "The `label` PATH could not be read (why); it was moved to …. `fallback`"."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        why = f"could not be read ({exc})"
    else:
        if fits(data):
            return data
        why = f"does not hold {holds}"
    problems.report(f"The {label} {path} {why}; {set_aside(path)}. {fallback}")
    return None
