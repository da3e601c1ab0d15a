"""Whether llama.cpp may use its extra CPU weight buffers (AMX and repacked layouts) on this machine.

A CPU can advertise Intel AMX (`amx_int8` in /proc/cpuinfo) and the kernel grant it, yet the first batched
matrix product of a model in llama.cpp's AMX buffers kills the whole process: measured on 2-core cloud VMs
(Xeon, Linux 6.18), where every prompt of more than a token crashed llama.cpp, bare llama-cpp-python
included — with SIGILL on one, with SIGSEGV on another (even with one thread). Loading without the extra
buffer types (`use_extra_bufts = false`, llama.cpp's `--no-extra-bufts`) runs the plain CPU kernels instead.

So on a CPU with AMX, the first load of each model file in a process decodes one small batch of it in a
child process first. A child killed by a signal (SIGILL, SIGSEGV, SIGBUS) is followed by a second child
decoding the same batch without the extra buffers: when that one lives, the extra buffers are what crashes,
and this machine (CPU, kernel, llama-cpp-python version) is marked in the user cache folder; from then on
every load turns them off without asking again. A child that succeeds clears the model for this process.
Machines without AMX never start a child. `EMBER_LLAMA_EXTRA_BUFFERS=0` (or 1) decides without a probe."""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import os
import platform
import signal
import sys
import threading
import time
from pathlib import Path

import llama_cpp
import platformdirs

log = logging.getLogger(__name__)

ENV_OVERRIDE = "EMBER_LLAMA_EXTRA_BUFFERS"
PROBE_TIMEOUT_S = 120.0
_PROBE_TOKENS = 48  # more than one row of AMX tiles (16), so the batched kernels run
_CLEARED: set[tuple[str, int, int]] = set()
_LOCK = threading.Lock()


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def cpu_has_amx() -> bool:
    """True on a Linux CPU that advertises AMX's integer tiles (what llama.cpp's AMX kernels use)."""
    if sys.platform != "linux" or platform.machine().lower() not in {"x86_64", "amd64"}:
        return False
    return any(line.startswith("flags") and " amx_int8" in line for line in _cpuinfo().splitlines())


def broken_mark(cache_dir: Path | None = None) -> Path:
    """The file that says AMX crashed llama.cpp on this machine: named for the CPU, the kernel and the
    llama-cpp-python version, so a new build or kernel is probed again."""
    model = next((line for line in _cpuinfo().splitlines() if line.startswith("model name")), "")
    key = hashlib.sha256(f"{model}|{platform.release()}|{llama_cpp.__version__}".encode()).hexdigest()[:16]
    folder = cache_dir or Path(platformdirs.user_cache_dir("ember-chat", appauthor=False))
    return folder / f"llama-amx-crashes-{key}"


_CRASHES = frozenset({-signal.SIGILL, -signal.SIGSEGV, -signal.SIGBUS})  # a child killed by the kernels


def _decode_a_batch(model_path: str, extra_buffers: bool = True) -> None:  # in the child process
    if not extra_buffers:  # (not exposed by Llama(): set in the default model params it starts from)
        module = llama_cpp.llama.llama_cpp
        original = module.llama_model_default_params

        def without_extra_buffers() -> llama_cpp.llama_model_params:
            params = original()
            params.use_extra_bufts = False
            return params

        module.llama_model_default_params = without_extra_buffers
    llm = llama_cpp.Llama(model_path, n_ctx=128, n_batch=64, n_threads=1, n_threads_batch=1, verbose=False)
    tokens = llm.tokenize(b"The quick brown fox jumps over the lazy dog. " * 8)[:_PROBE_TOKENS]
    llm.eval(tokens)


def _probe(model_path: Path, cancel: threading.Event | None, extra_buffers: bool = True) -> int | None:
    """The child's exit code (None: the load was cancelled, or the child did not end in time; killed)."""
    child = multiprocessing.get_context("spawn").Process(
        target=_decode_a_batch, args=(str(model_path), extra_buffers), name="ember-amx-probe", daemon=True
    )
    try:
        child.start()
    except (OSError, RuntimeError, ValueError) as exc:  # no child could be started (a frozen build gone wrong)
        log.warning("llama.cpp's AMX kernels could not be checked (%s): models load without them.", exc)
        return None
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    while child.is_alive() and time.monotonic() < deadline and not (cancel is not None and cancel.is_set()):
        child.join(0.1)  # (a cancelled load does not wait for the probe)
    if child.is_alive():
        child.kill()
        child.join()
        return None
    return child.exitcode


def extra_buffers_usable(
    model_path: Path, cache_dir: Path | None = None, cancel: threading.Event | None = None
) -> bool:
    """Whether loading `model_path` with llama.cpp's extra buffer types is safe on this machine. A probe
    that could not finish (cancelled, or over PROBE_TIMEOUT_S) decides nothing: this load goes without
    them, and the next one asks again."""
    forced = os.environ.get(ENV_OVERRIDE)
    if forced in {"0", "1"}:
        return forced == "1"
    if not cpu_has_amx():
        return True
    mark = broken_mark(cache_dir)
    with _LOCK:
        if mark.exists():
            return False
        try:
            st = model_path.stat()
        except OSError:
            return True  # the load itself says what is wrong with the path
        key = (str(model_path), st.st_size, st.st_mtime_ns)
        if key in _CLEARED:
            return True
        code = _probe(model_path, cancel)
        if code is None:
            return False
        if code in _CRASHES:
            plain = _probe(model_path, cancel, extra_buffers=False)
            if plain != 0:  # the model crashes (or was cancelled) without them too: nothing learnt of AMX
                return False
            log.warning(
                "llama.cpp's AMX kernels crash on this machine (%s): models load without the extra "
                "CPU buffer types from now on (%s).",
                signal.Signals(-code).name,
                mark,
            )
            try:
                mark.parent.mkdir(parents=True, exist_ok=True)
                mark.write_text("llama.cpp's AMX kernels died with SIGILL here\n", encoding="utf-8")
            except OSError:
                pass  # asked again next time
            return False
        _CLEARED.add(key)  # a child that failed otherwise (a damaged file): the real load says why
        return True
