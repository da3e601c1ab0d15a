"""Route llama.cpp's log into Python `logging` (logger "ember.llama") at the right level.

llama-cpp-python installs a callback that maps ggml's levels wrongly (errors arrive as DEBUG) and
prints to stderr; this replaces it. ggml sends a message in pieces (level CONT continues the previous
one), so pieces are joined and emitted per line.
"""

from __future__ import annotations

import ctypes
import logging
import threading

import llama_cpp

logger = logging.getLogger("ember.llama")

# enum ggml_log_level (ggml.h): NONE=0, DEBUG=1, INFO=2, WARN=3, ERROR=4, CONT=5
GGML_LEVELS = {0: logging.INFO, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}
GGML_CONT = 5
# Warnings of conditions Ember handles itself, logged at DEBUG: llama_decode's "no memory slot" is its
# return code 1, on which the batch decoder frees idle sequences and tries again, or ends a run with
# a sentence of its own (batch_decode.py, NoRoomInContext). At WARNING the window, which has no log
# handler, printed it on stderr (Python's last-resort handler) with nothing else to explain it.
HANDLED = ("failed to find a memory slot for batch",)


class _LogRouter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._level = logging.INFO
        self._pending = ""
        self.callback = llama_cpp.llama_log_callback(self._on_log)

    def _on_log(self, level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
        msg = text.decode("utf-8", errors="replace") if text else ""
        with self._lock:
            if level != GGML_CONT:
                if self._pending:
                    self._emit(self._pending)
                    self._pending = ""
                self._level = GGML_LEVELS.get(level, logging.INFO)
            self._pending += msg
            *lines, self._pending = self._pending.split("\n")
            for line in lines:
                self._emit(line)

    def _emit(self, line: str) -> None:
        if line.strip():
            level = logging.DEBUG if any(text in line for text in HANDLED) else self._level
            logger.log(level, "%s", line.rstrip())


_router: _LogRouter | None = None


def route_llama_log() -> None:
    """Install the router once per process; the callback object lives as long as the process."""
    global _router
    if _router is None:
        _router = _LogRouter()
        llama_cpp.llama_log_set(_router.callback, ctypes.c_void_p(0))


def route_mtmd_log() -> None:
    """The multimodal library (libmtmd) logs through its own callbacks: route them the same way."""
    route_llama_log()
    assert _router is not None
    from llama_cpp import mtmd_cpp  # only where images are used: loads libmtmd

    mtmd_cpp.mtmd_log_set(_router.callback, ctypes.c_void_p(0))
    mtmd_cpp.mtmd_helper_log_set(_router.callback, ctypes.c_void_p(0))
