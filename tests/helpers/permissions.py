"""Files and folders made unreadable for real, for tests of what Ember says of them: `locked(path)` takes
every permission away (chmod 000) and gives them back, and `permissions_enforced()` makes the calling
thread heed them even when the tests run as root (root reads a chmod 000 folder: its CAP_DAC_OVERRIDE
and CAP_DAC_READ_SEARCH are taken out of this thread's effective capabilities, with capset, and put back
after; Linux keeps capabilities per thread, so run what must be refused on the test's own thread).

A thread started inside the block keeps the dropped capabilities for its whole life (only the calling
thread's are put back): start what lives on before it. The attachment readers' fork server
(attachments/isolated.py), which every later read of the test process forks its child from, is started
by `permissions_enforced` itself before it drops anything, from a thread that has them all (started
first inside the block, it would rely on root getting them back at exec, which a no_new_privs or
SECBIT_NOROOT sandbox does not do)."""

from __future__ import annotations

import ctypes
import multiprocessing.forkserver
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ember_chat.engine.attachments.isolated import _ctx as readers_context

_VERSION_3 = 0x20080522  # _LINUX_CAPABILITY_VERSION_3: two 32-bit words of each set
_DAC = (1 << 1) | (1 << 2)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


@contextmanager
def locked(path: Path) -> Iterator[Path]:
    """`path` with no permissions (chmod 000) until the block ends, then as it was."""
    mode = path.stat().st_mode & 0o7777
    path.chmod(0)
    try:
        yield path
    finally:
        path.chmod(mode)


@contextmanager
def permissions_enforced() -> Iterator[None]:
    """In this block this thread is refused what the permission bits refuse (root included). The readers'
    fork server is started first (see the module's docstring)."""
    if readers_context().get_start_method() == "forkserver":
        multiprocessing.forkserver.ensure_running()
    if os.geteuid() != 0:
        yield
        return
    if not sys.platform.startswith("linux"):
        pytest.skip("running as root: permissions are enforced for root only on Linux (capabilities)")
    libc = ctypes.CDLL(None, use_errno=True)
    header, data = _Header(_VERSION_3, 0), (_Data * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        pytest.skip(f"running as root and capget failed: {os.strerror(ctypes.get_errno())}")
    effective = data[0].effective
    data[0].effective = effective & ~_DAC
    if libc.capset(ctypes.byref(header), data) != 0:
        pytest.skip(f"running as root and capset failed: {os.strerror(ctypes.get_errno())}")
    try:
        yield
    finally:
        data[0].effective = effective
        if libc.capset(ctypes.byref(header), data) != 0:
            raise OSError(ctypes.get_errno(), "the test thread's capabilities could not be put back")
