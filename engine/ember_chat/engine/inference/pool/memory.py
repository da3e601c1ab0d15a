"""How much memory a loaded model takes, for the pool's budget: the same estimate the Model Manager's
"fits / tight / won't fit" label uses (engine/models/fit.py: weights + KV cache at the load's context,
with llama.cpp's overhead), split between RAM and VRAM by the load's GPU layers. A remote model takes
none of this machine's memory."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.core.refs import ModelRef
from ember_chat.engine.errors import EmberError
from ember_chat.engine.models.fit import estimate_fit, free_ram_bytes, free_vram_bytes
from ember_chat.engine.models.gguf_inspect import inspect_gguf


@dataclass(frozen=True)
class Footprint:
    ram_bytes: int = 0
    vram_bytes: int = 0

    @property
    def total(self) -> int:
        return self.ram_bytes + self.vram_bytes

    def __add__(self, other: Footprint) -> Footprint:
        return Footprint(self.ram_bytes + other.ram_bytes, self.vram_bytes + other.vram_bytes)


NOTHING = Footprint()


def footprint(ref: ModelRef) -> Footprint:
    """What loading `ref` takes (a damaged or unreadable file: EmberError, said before any load), its
    draft model's too (loaded with it at the same context, GPU layers and KV cache type; one that cannot
    be read, or larger than the model, takes nothing: the model loads without it, draft_model.py)."""
    if not isinstance(ref, LoadConfig):
        return NOTHING
    own = _weights_and_cache(ref)
    if ref.draft_model is None:
        return own
    try:
        if ref.draft_model.stat().st_size > ref.path.stat().st_size:
            return own  # (refused at load: larger than the model, draft_model.py)
        return own + _weights_and_cache(replace(ref, path=ref.draft_model, draft_model=None, mmproj=None))
    except (EmberError, OSError):
        return own


def _weights_and_cache(ref: LoadConfig) -> Footprint:
    info = inspect_gguf(ref.path)  # (ModelFileError, an EmberError, for a damaged header)
    try:
        size = ref.path.stat().st_size
    except OSError as exc:
        raise EmberError(f"The model file {ref.path.name} cannot be read: {exc.strerror or exc}.") from None
    vram = free_vram_bytes() if ref.gpu_layers else None
    fit = estimate_fit(size, ref.n_ctx, info, free_ram=0, free_vram=vram, gpu_layers=ref.gpu_layers,
                       kv_type=ref.kv_cache_type)  # fmt: skip
    return Footprint(fit.ram_bytes, fit.vram_bytes)


@dataclass(frozen=True)
class MemoryBudget:
    """What the pool may hold loaded at once: RAM and VRAM in bytes (None: what is free when the pool
    is made, less a quarter for everything else), and at most `models_max` models (None: no limit)."""

    ram_bytes: int | None = None
    vram_bytes: int | None = None
    models_max: int | None = None

    def resolved(self) -> MemoryBudget:
        """This budget with the machine's free memory in place of what it leaves open."""
        ram = self.ram_bytes if self.ram_bytes is not None else int(free_ram_bytes() * 0.75)
        vram = self.vram_bytes
        if vram is None:
            free = free_vram_bytes()
            vram = int(free * 0.9) if free is not None else 0
        return MemoryBudget(ram, vram, self.models_max)

    def room_for(self, held: Footprint, wanted: Footprint, held_models: int) -> bool:
        if self.models_max is not None and held_models + 1 > self.models_max:
            return False
        ram_ok = self.ram_bytes is None or held.ram_bytes + wanted.ram_bytes <= self.ram_bytes
        vram_ok = (
            not wanted.vram_bytes or self.vram_bytes is None or held.vram_bytes + wanted.vram_bytes <= self.vram_bytes
        )
        return ram_ok and vram_ok


def mb(n: int) -> str:
    """Bytes as people read memory sizes in a message: "412 MB", "3.1 GB"."""
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{max(1, round(n / 1e6))} MB"
