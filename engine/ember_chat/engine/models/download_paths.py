"""Where a downloaded file goes: its place under the models folder, its `.part` file and sidecar.

File names from the Hub cannot escape the models folder: a repository id or a path that could is
refused with `UnsafeFilename` before anything is written.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ember_chat.engine.errors import UnsafeFilename

_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def safe_target(models_dir: Path, repo_id: str, filename: str) -> Path:
    """models_dir/owner/name/<filename>, refusing anything that could land outside models_dir."""
    if not _REPO_ID.match(repo_id) or ".." in repo_id:
        raise UnsafeFilename(f"'{repo_id}' is not a valid repository id (owner/name).")
    if not filename or "\\" in filename or "\0" in filename or filename.startswith("/") or ":" in filename:
        raise UnsafeFilename(f"refusing the file name '{filename}': it could escape the models folder.")
    parts = filename.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise UnsafeFilename(f"refusing the file name '{filename}': it could escape the models folder.")
    root = Path(models_dir).resolve()
    owner, name = repo_id.split("/")
    target = (root / owner / name).joinpath(*parts).resolve()
    if not target.is_relative_to(root):
        raise UnsafeFilename(f"refusing the file name '{filename}': it could escape the models folder.")
    return target


def part_paths(target: Path) -> tuple[Path, Path]:
    """The `<file>.part` the bytes go to until verified, and its `<file>.part.json` sidecar record."""
    part = target.with_name(target.name + ".part")
    return part, part.with_name(part.name + ".json")


def sidecar_record(sidecar: Path) -> dict | None:
    """The record a sidecar keeps (repo, file, size at least), or None when it is unreadable."""
    try:
        data = json.loads(sidecar.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and {"repo_id", "filename", "size"} <= data.keys() else None
