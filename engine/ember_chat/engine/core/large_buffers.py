"""Large buffers given back to the system when they are freed (glibc's malloc).

glibc serves an allocation over its mmap threshold with a mapping of its own, returned when freed —
but it raises the threshold to the size of each such block freed, so from then on blocks of that size
come from its heaps, where the freed ones stay in the process. A server that reads an 8 MB request
body, parses it and refuses it (every step a new multi-megabyte buffer, on the event loop's thread
and a handler's) then grew by about 8 MB a request, without bound (measured: 14 requests, 94 MB).
Fixing the threshold keeps blocks of 1 MB and more in mappings of their own. Elsewhere (macOS,
Windows, musl) the allocator already gives large blocks back: nothing to do."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

log = logging.getLogger(__name__)

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter (malloc.h)
THRESHOLD_BYTES = 1 << 20

_done = False
_libc: ctypes.CDLL | None = None


def _glibc() -> ctypes.CDLL | None:
    global _libc
    if _libc is None and sys.platform.startswith("linux"):
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        except OSError:
            return None
    return _libc


def release_free_memory() -> None:
    """Give the pages glibc holds free in its heaps back to the system (after a large request: what
    it freed may lie between blocks still in use, which the threshold alone does not return)."""
    libc = _glibc()
    trim = getattr(libc, "malloc_trim", None)
    if trim is not None:
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
        trim(0)


def return_large_buffers() -> bool:
    """Fix glibc's mmap threshold at 1 MB, once per process. Whether it was set (False where the C
    library is not glibc)."""
    global _done
    if _done:
        return True
    mallopt = getattr(_glibc(), "mallopt", None)
    if mallopt is None:  # (not Linux, or musl: no mallopt)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    _done = mallopt(M_MMAP_THRESHOLD, THRESHOLD_BYTES) == 1
    if not _done:
        log.debug("mallopt(M_MMAP_THRESHOLD) was refused")
    return _done
