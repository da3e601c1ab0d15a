"""Real OpenAI-compatible peers started on 127.0.0.1 for tests and benchmarks: llama-cpp-python's own
server (`python -m llama_cpp.server`). Ready when uvicorn says so on stderr (no polling)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def llama_cpp_server(
    model: Path,
    threads: int = 2,
    n_ctx: int = 1024,
    timeout_s: float = 120,
    alias: str | None = None,
    extra: tuple[str, ...] = (),
) -> Iterator[str]:
    """llama-cpp-python's server on `model` (served as `alias`, else as its path; `extra`: more of its
    flags); yields its base URL (…/v1). Stopped and reaped at exit."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1", "--port", str(port),
         "--n_ctx", str(n_ctx), "--n_threads", str(threads), "--n_threads_batch", str(threads),
         "--interrupt_requests", "false", "--verbose", "false", *(["--model_alias", alias] if alias else []), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    ready = threading.Event()
    log: list[str] = []

    def read_log() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            log.append(line)
            if "Uvicorn running on" in line:
                ready.set()
        ready.set()  # the process ended: stop waiting

    reader = threading.Thread(target=read_log, name="llama-cpp-server-log", daemon=True)
    reader.start()
    try:
        if not ready.wait(timeout_s) or proc.poll() is not None:
            raise RuntimeError("llama_cpp.server did not start:\n" + "".join(log[-20:]))
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join()
        proc.stderr.close()
