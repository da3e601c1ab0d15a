"""Creating llama-cpp-python's `Llama` for a LoadConfig: load progress and cancel through llama.cpp's
progress callback, the KV cache type, chat templates that Jinja cannot compile tolerated, and the
errors a user can cause (a damaged file, a context too big for memory) turned into clear messages.
Also what this llama.cpp build is (its features, its GPU backend)."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import jinja2
import llama_cpp
import llama_cpp.llama
import llama_cpp.llama_chat_format

from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.errors import LoadCancelled, ModelFileError, ModelLoadError
from ember_chat.engine.inference.llama.amx_probe import extra_buffers_usable
from ember_chat.engine.inference.llama.log import logger as llama_logger
from ember_chat.engine.inference.llama.log import route_llama_log

_KV_TYPES = {
    "f16": llama_cpp.GGML_TYPE_F16,
    "q8_0": llama_cpp.GGML_TYPE_Q8_0,
    "q4_0": llama_cpp.GGML_TYPE_Q4_0,
}
_LOAD_LOCK = threading.Lock()
NULL_ABORT = llama_cpp.ggml_abort_callback(0)  # "no abort callback"
_PROBED: set[tuple[str, int, int]] = set()  # files llama.cpp read: (path, size, mtime), no need to ask again
_LOAD_ERROR = "error loading model: "


def system_info() -> str:
    return llama_cpp.llama_print_system_info().decode(errors="replace").strip()


def gpu_offload_supported() -> bool:
    """Whether this llama.cpp build can put layers on a GPU at all (a CPU-only build ignores them)."""
    return bool(llama_cpp.llama_supports_gpu_offload())


def gpu_backend_name() -> str | None:
    """The GPU backend this llama.cpp build was compiled with, if any."""
    if not llama_cpp.llama_supports_gpu_offload():
        return None
    info = system_info().upper()
    for name, label in (("CUDA", "CUDA"), ("METAL", "Metal"), ("VULKAN", "Vulkan"), ("HIP", "ROCm")):
        if name in info:
            return label
    return "GPU"


@contextmanager
def _llama_load_patches(callback: object, n_seq_max: int = 1, extra_buffers: bool = True) -> Iterator[None]:
    """While `Llama()` loads: llama.cpp's load progress callback, which `Llama()` does not expose, goes
    in through the default model params it starts from (with `extra_buffers`, also not exposed: off where
    llama.cpp's AMX kernels crash, amx_probe.py); the context gets `n_seq_max` sequences sharing
    all its cells (`kv_unified`: also not exposed, set in the default context params); and chat templates
    that Jinja cannot compile do not fail the load. The lock keeps concurrent loads from seeing each
    other's patches."""
    module = llama_cpp.llama.llama_cpp
    original = module.llama_model_default_params
    original_context = module.llama_context_default_params

    def with_progress() -> llama_cpp.llama_model_params:
        params = original()
        params.progress_callback = callback
        params.use_extra_bufts = extra_buffers
        return params

    def with_sequences() -> llama_cpp.llama_context_params:
        params = original_context()
        params.n_seq_max = n_seq_max
        params.kv_unified = True
        return params

    formatters = llama_cpp.llama_chat_format
    strict = formatters.Jinja2ChatFormatter

    class TolerantFormatter(strict):  # type: ignore[misc, valid-type]
        """`Llama()` compiles every chat template in the file for chat handlers Ember never uses (its
        own prompting renders templates): a template Jinja cannot compile must not stop the load."""

        def __init__(self, *args: object, **kwargs: object) -> None:
            try:
                super().__init__(*args, **kwargs)
            except jinja2.TemplateError:
                self._environment = None

    with _LOAD_LOCK:
        module.llama_model_default_params = with_progress
        module.llama_context_default_params = with_sequences
        formatters.Jinja2ChatFormatter = TolerantFormatter
        try:
            yield
        finally:
            module.llama_model_default_params = original
            module.llama_context_default_params = original_context
            formatters.Jinja2ChatFormatter = strict


def plain_llama(path: Path, **kwargs: object) -> llama_cpp.Llama:
    """A `Llama` as llama-cpp-python makes it with `kwargs` (benchmarks and tests compare Ember with it),
    except that llama.cpp's extra CPU buffers are off where they crash (amx_probe.py), as Ember's own
    loads do."""
    module = llama_cpp.llama.llama_cpp
    original = module.llama_model_default_params
    extra_buffers = extra_buffers_usable(path)

    def with_buffers() -> llama_cpp.llama_model_params:
        params = original()
        params.use_extra_bufts = extra_buffers
        return params

    with _LOAD_LOCK:
        module.llama_model_default_params = with_buffers
        try:
            return llama_cpp.Llama(str(path), **kwargs)  # type: ignore[arg-type]
        finally:
            module.llama_model_default_params = original


def open_llama(
    config: LoadConfig, progress: Callable[[float], None] | None = None, cancel: threading.Event | None = None
) -> llama_cpp.Llama:
    """Load the model and create its context: seq 0 for llama-cpp-python's own single-sequence path and
    `config.parallel` + 1 more for batched decoding (inference/llama/batch_decode.py: `parallel` for API and
    other clients, one kept for the window's chat), all sharing the n_ctx cells.
    Raises LoadCancelled or ModelLoadError."""

    def on_progress(fraction: float, _data: ctypes.c_void_p) -> bool:
        if progress is not None:
            with contextlib.suppress(Exception):  # a broken progress sink must not abort the load
                progress(float(fraction))
        return not (cancel is not None and cancel.is_set())

    c_progress = llama_cpp.llama_progress_callback(on_progress)
    kv_type = _KV_TYPES[config.kv_cache_type]
    extra_buffers = extra_buffers_usable(config.path, cancel=cancel)
    try:
        with _llama_load_patches(c_progress, config.parallel + 2, extra_buffers):
            llm = llama_cpp.Llama(
                model_path=str(config.path),
                n_ctx=config.n_ctx,
                n_batch=config.n_batch,
                n_threads=config.threads,
                n_threads_batch=config.threads_batch or config.threads,
                n_gpu_layers=config.gpu_layers,
                flash_attn=config.flash_attn,
                type_k=kv_type,
                type_v=kv_type,
                use_mmap=config.use_mmap,
                use_mlock=config.use_mlock,
                verbose=False,
            )
    except ValueError as exc:
        if cancel is not None and cancel.is_set():
            raise LoadCancelled(f"Loading {config.path.name} was cancelled.") from exc
        what = str(exc)
        if "context" in what:
            raise ModelLoadError(
                f"{config.path.name} loaded, but a {config.n_ctx}-token context could not be "
                "created (not enough memory?). Lower the context length and try again."
            ) from exc
        raise ModelLoadError(
            f"llama.cpp could not load {config.path.name}: {what}. The file may be damaged, or "
            "this llama.cpp build may not support it; see the log for details."
        ) from exc
    return llm


class _Errors(logging.Handler):
    """llama.cpp's error lines while one probe runs (its exceptions carry no reason; its log does)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def probe_gguf(path: Path) -> None:
    """Ask llama.cpp to read the file's metadata and vocabulary (`vocab_only`: no weights, no context,
    a fraction of a second), so a file it cannot load is refused before a working model is unloaded.
    Raises ModelFileError with llama.cpp's own reason from its log."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise ModelFileError(f"{path.name} cannot be read: {exc.strerror or exc}.") from exc
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key in _PROBED:
        return
    route_llama_log()
    errors = _Errors()
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    with _LOAD_LOCK:
        llama_cpp.llama_backend_init()
        llama_logger.addHandler(errors)
        try:
            model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
        finally:
            llama_logger.removeHandler(errors)
    if model:
        llama_cpp.llama_model_free(model)
        _PROBED.add(key)
        return
    reasons = [line.split(_LOAD_ERROR, 1)[1].strip() for line in errors.lines if _LOAD_ERROR in line]
    reason = reasons[0] if reasons else next((line.strip() for line in errors.lines), "")
    raise ModelFileError(
        f"llama.cpp cannot load {path.name}"
        + (f": {reason}. " if reason else ". ")
        + "The file may be damaged, or need a newer llama.cpp than this Ember has."
    )
