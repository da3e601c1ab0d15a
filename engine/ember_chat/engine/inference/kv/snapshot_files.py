"""The file format of a saved conversation cache (engine/inference/kv/snapshots.py), `<sha1>.kvsnap`:

    b"EMBERKV1"                      magic, 8 bytes
    header length                    uint32, little-endian
    header                           JSON: {"format": 1, "model", "settings", "tokens": N, "state": S}
    tokens                           N × int32, little-endian
    state                            S bytes (llama.cpp's sequence state)
    sha256                           32 bytes, over everything before it

The file's name is the sha1 of the model, the settings and the tokens (`snapshot_ident`), so a file whose
header or tokens were damaged no longer matches its name."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from array import array
from pathlib import Path
from typing import BinaryIO, NamedTuple

from ember_chat.engine.storage.paths import KV_SNAPSHOT_SUFFIX, KV_SNAPSHOT_TMP_SUFFIX

log = logging.getLogger(__name__)

MAGIC = b"EMBERKV1"
DIGEST_BYTES = 32
_FORMAT = 1
_MAX_HEADER = 1 << 16
_MIB = 2**20
_SETTINGS_HINT = "or lower the space for saved conversation caches in Settings."
_STALE_TMP_S = 3600  # a temporary file older than this is a crashed write (a newer one: maybe another Ember's)


UNREADABLE = "it cannot be read as a conversation cache"  # why, for a file whose reading raised something else


class Damaged(Exception):
    """A snapshot file that must not be used; the message says why, for a sentence."""


def token_bytes(tokens: tuple[int, ...]) -> bytes:
    values = array("i", tokens)
    if sys.byteorder == "big":
        values.byteswap()
    return values.tobytes()


def snapshot_ident(model: str, settings: str, tokens: tuple[int, ...]) -> str:
    digest = hashlib.sha1(usedforsecurity=False)
    for part in (model.encode(), b"\0", settings.encode(), b"\0", token_bytes(tokens)):
        digest.update(part)
    return digest.hexdigest()


def file_head(model: str, settings: str, tokens: tuple[int, ...], state_len: int) -> bytes:
    """Everything before the state: magic, header length, header, tokens."""
    header = {"format": _FORMAT, "model": model, "settings": settings, "tokens": len(tokens), "state": state_len}
    raw = json.dumps(header).encode()
    return MAGIC + len(raw).to_bytes(4, "little") + raw + token_bytes(tokens)


def read_head(fh: BinaryIO, size: int) -> tuple[str, str, tuple[int, ...], bytes, int]:
    """(model, settings, tokens, the head's bytes, the state's length) of an open file of `size` bytes,
    left positioned at the state. Raises Damaged."""
    start = fh.read(len(MAGIC) + 4)
    if len(start) < len(MAGIC) + 4 or not start.startswith(MAGIC):
        raise Damaged("it is not a conversation cache" if len(start) == len(MAGIC) + 4 else "it is truncated")
    length = int.from_bytes(start[len(MAGIC) :], "little")
    if length > _MAX_HEADER:
        raise Damaged("its header cannot be read")
    raw = fh.read(length)
    try:
        header = json.loads(raw)
        model, settings, count, state_len = header["model"], header["settings"], header["tokens"], header["state"]
    except Exception as exc:  # (not only ValueError: a header too deeply nested raises RecursionError)
        raise Damaged("its header cannot be read") from exc
    if not (
        header.get("format") == _FORMAT
        and isinstance(model, str)
        and isinstance(settings, str)
        and isinstance(count, int)
        and isinstance(state_len, int)
        and count >= 0
        and state_len >= 0
    ):
        raise Damaged("its header cannot be read")
    expected = len(start) + length + 4 * count + state_len + DIGEST_BYTES
    if size != expected:
        raise Damaged("it is truncated" if size < expected else "it is longer than its header says")
    packed = fh.read(4 * count)
    if len(packed) != 4 * count:
        raise Damaged("it is truncated")
    values = array("i")
    values.frombytes(packed)
    if sys.byteorder == "big":
        values.byteswap()
    return model, settings, tuple(values), start + raw + packed, state_len


def read_state(fh: BinaryIO, model: str, settings: str, tokens: tuple[int, ...]) -> bytes:
    """The state in an open snapshot file, checked against its checksum, its key and its tokens."""
    file_model, file_settings, file_tokens, head, state_len = read_head(fh, os.fstat(fh.fileno()).st_size)
    if (file_model, file_settings, file_tokens) != (model, settings, tokens):
        raise Damaged("it holds another conversation than its name says")
    state = fh.read(state_len)
    digest = fh.read(DIGEST_BYTES)
    if len(state) != state_len or len(digest) != DIGEST_BYTES:
        raise Damaged("it is truncated")
    check = hashlib.sha256(head)
    check.update(state)
    if check.digest() != digest:
        raise Damaged("its checksum does not match")
    return state


def write_temporary(
    directory: Path, head: bytes, state: bytes, cap: int, free_margin: int
) -> tuple[Path | None, str | None]:
    """The whole file written and fsynced under a temporary name in `directory` (for os.replace), or
    None and why not, for the user: larger than the cap, a disk almost full, an OSError."""
    size = len(head) + len(state) + DIGEST_BYTES
    if size > cap:
        return None, (
            f"A conversation cache of {size / _MIB:,.0f} MB was not saved: it is larger than the space "
            f"allowed for saved conversation caches ({cap / _MIB:,.0f} MB). Raise that limit in Settings "
            "to keep the caches of long chats."
        )
    blocked = folder_problem(directory, free_margin + size)
    if blocked is not None:
        return None, blocked
    try:
        digest = hashlib.sha256(head)
        digest.update(state)
        fd, name = tempfile.mkstemp(prefix=".", suffix=KV_SNAPSHOT_TMP_SUFFIX, dir=directory)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(head)
                fh.write(state)
                fh.write(digest.digest())
                fh.flush()
                os.fsync(fh.fileno())
        except BaseException:
            unlink(Path(name))
            raise
    except OSError as exc:
        return None, unsaved_sentence(directory, exc)
    return Path(name), None


def folder_problem(directory: Path, free_margin: int) -> str | None:
    """Why snapshots cannot be saved in `directory` now (it cannot be made a folder, or its disk would keep
    less than `free_margin` bytes free), for the user; None when they can. Asked before each write (the
    margin plus the file's size) and when the store opens, so the user hears it before quitting (where the
    caches are written, and nothing can be shown any more)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(directory).free
    except OSError as exc:
        return (
            f"Conversation caches cannot be saved in {directory} ({exc.strerror or exc}): long chats are read "
            "again after a restart. Check that it is a folder Ember can write to (a file of that name in the "
            "way can be moved elsewhere)."
        )
    if free < free_margin:
        return (
            f"Conversation caches are not saved: the disk holding {directory} is almost full "
            f"({free / _MIB:,.0f} MB free). Free some disk space, {_SETTINGS_HINT}"
        )
    return None


def unsaved_sentence(directory: Path, exc: OSError) -> str:
    return (
        f"A conversation cache could not be saved in {directory} ({exc.strerror or exc}); it was skipped. "
        f"Check that the folder can be written and the disk has space, {_SETTINGS_HINT}"
    )


def unlink(path: Path) -> str | None:
    """Remove a file; None when done (or already gone), else why not."""
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def damaged_sentence(path: Path, why: str) -> str:
    """Remove a damaged snapshot file; what happened, for the user."""
    not_removed = unlink(path)
    what = "was removed" if not_removed is None else f"is not used (it could not be removed: {not_removed})"
    return (
        f"A saved conversation cache ({path.name} in {path.parent}) was damaged ({why}) and {what}; "
        "that conversation's prompt is evaluated again instead."
    )


def unreadable_sentence(path: Path, exc: OSError) -> str:
    """A snapshot file that could not be read (left as it is: maybe another Ember's, or a passing fault)."""
    return (
        f"A saved conversation cache ({path}) could not be read ({exc.strerror or exc}); it was left as it is, "
        "and that conversation's prompt is evaluated again instead."
    )


class FoundFile(NamedTuple):
    mtime_ns: int
    ident: str
    model: str
    settings: str
    tokens: tuple[int, ...]
    size: int


def scan_folder(directory: Path) -> tuple[list[FoundFile], list[str]]:
    """The snapshot files in `directory` (their heads read, names checked, states not), and sentences
    for the damaged ones (removed) and those that could not be read (left). Crashed writes' temporary
    files are removed."""
    found: list[FoundFile] = []
    problems: list[str] = []
    try:
        items = list(os.scandir(directory))
    except OSError as exc:  # no folder yet (or not one: writing there says so, once)
        log.info("no KV snapshots read from %s: %s", directory, exc)
        return found, problems
    now = time.time()
    for item in items:
        path = Path(item.path)
        if item.name.endswith(KV_SNAPSHOT_TMP_SUFFIX):
            try:
                if now - item.stat().st_mtime > _STALE_TMP_S:
                    unlink(path)
            except OSError:
                pass
            continue
        if not item.name.endswith(KV_SNAPSHOT_SUFFIX):
            continue
        try:
            with path.open("rb") as fh:
                st = os.fstat(fh.fileno())
                model, settings, tokens, _head, _state_len = read_head(fh, st.st_size)
            ident = item.name[: -len(KV_SNAPSHOT_SUFFIX)]
            if snapshot_ident(model, settings, tokens) != ident:
                raise Damaged("its contents do not match its name")
        except Damaged as exc:
            problems.append(damaged_sentence(path, str(exc)))
        except FileNotFoundError:  # removed since it was listed (a clear(), another Ember's cap)
            continue
        except OSError as exc:
            problems.append(unreadable_sentence(path, exc))
        except Exception:  # whatever else one file's contents raise (a header's text that cannot be encoded)
            log.debug("damaged KV snapshot %s", path, exc_info=True)
            problems.append(damaged_sentence(path, UNREADABLE))
        else:
            found.append(FoundFile(st.st_mtime_ns, ident, model, settings, tokens, st.st_size))
    return found, problems
