"""The models the window's API server loads when a request names one (issue 30): a `ModelPool` over
the window's model library, each model loaded as the window would load it (its own load settings from
the ⚙ dialog, else the window's load settings), within the budget of the Local API server's settings
(`api_memory_budget_mb`, `api_models_max`, `api_model_ttl_s`). The window's own model is pinned in it
(the control does that as the window's model changes): a request for it uses the window's engine.

Pure Python (no Qt): the control (api_control.py) builds the pool and hands its sentences to the GUI."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ember_chat.engine.core.params import LoadOptions
from ember_chat.engine.core.refs import ModelRef
from ember_chat.engine.inference.pool.catalog import library_catalog
from ember_chat.engine.inference.pool.memory import MemoryBudget
from ember_chat.engine.inference.pool.pool import ModelPool
from ember_chat.engine.inference.service.engine import EngineService, RequestRecord, ServiceListener
from ember_chat.engine.models.gguf_inspect import inspect_gguf
from ember_chat.engine.models.library import ModelEntry, ModelLibrary
from ember_chat.engine.storage.model_settings import AUTO_GPU_LAYERS, ModelSettingsStore
from ember_chat.engine.storage.settings import Settings

MB = 1_000_000  # (the pool's messages say MB as 10^6 bytes: memory.mb)


@dataclass(frozen=True)
class PoolEvent:
    """A line of the server's log: what the pool loaded or unloaded, and why (its sentence)."""

    t: float  # when (time.time())
    text: str


def window_budget(settings: Settings) -> MemoryBudget:
    """The settings' budget with what it leaves open filled in (free RAM and VRAM, asked now: nvidia-smi
    may take seconds, so off the GUI thread)."""
    ram = settings.api_memory_budget_mb * MB if settings.api_memory_budget_mb else None
    return MemoryBudget(ram_bytes=ram, models_max=settings.api_models_max or None).resolved()


def window_catalog(
    library: Callable[[], ModelLibrary],
    model_settings: ModelSettingsStore,
    defaults: Callable[[], Settings],
) -> Callable[[], dict[str, ModelRef]]:
    """Every installed model by the names a request may use, each with the load settings the window's
    model_ref would give it (`library()` and `defaults()` read at each call: the folder and the
    settings the window has now)."""

    def catalog() -> dict[str, ModelRef]:
        now = defaults()
        vram: list[int | None] = []  # (asked once per call, and only for a model whose GPU layers are "auto")

        def options(entry: ModelEntry) -> LoadOptions:
            settings = model_settings.effective(entry.name, now)
            if entry.path is None:  # (a starter not assembled yet: its settings as they are)
                return settings
            if settings.gpu_layers != AUTO_GPU_LAYERS:  # (its draft model with it: ModelLoadSettings.config)
                return settings.config(entry.path)
            if not vram:
                from ember_chat.engine.models.fit import free_vram_bytes

                vram.append(free_vram_bytes())
            info = inspect_gguf(entry.path) if vram[0] else None
            return settings.config(entry.path, info, vram[0] or 0)

        return library_catalog(library(), options)()

    return catalog


class _Answered(ServiceListener):
    """Only the requests an engine answered (its loads are the pool's, never the window's)."""

    def __init__(self, on_done: Callable[[RequestRecord], None]) -> None:
        self.on_done = on_done

    def request_done(self, record: RequestRecord) -> None:
        self.on_done(record)


def window_pool(
    service: EngineService,
    catalog: Callable[[], dict[str, ModelRef]],
    settings: Settings,
    budget: MemoryBudget,
    on_change: Callable[[str], None],
    on_done: Callable[[RequestRecord], None],
) -> ModelPool:
    """The pool of the window's API server: each model in an engine of its own, made as the window's
    (the same backends, the same queue limit); `on_done` is told of each request its engines answered
    (on their threads), for the dialog's log, as the window's engine tells the bridge."""

    def service_factory() -> EngineService:
        made = EngineService(service.backend_factory, queue_limit=settings.api_queue_limit)
        made.add_listener(_Answered(on_done))
        return made

    return ModelPool(catalog, budget, float(settings.api_model_ttl_s), service_factory, on_change=on_change)
