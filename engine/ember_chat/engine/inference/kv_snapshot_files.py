"""The file format of a saved conversation cache (engine/inference/kv_snapshots.py), `<sha1>.kvsnap`:

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
import sys
from array import array
from typing import BinaryIO

MAGIC = b"EMBERKV1"
SUFFIX = ".kvsnap"
TMP_SUFFIX = ".kvsnap-tmp"
DIGEST_BYTES = 32
_FORMAT = 1
_MAX_HEADER = 1 << 16


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
    except (ValueError, KeyError, TypeError) as exc:
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
