"""How each local model is loaded (its own context length, GPU layers, threads, batch, flash attention,
KV cache type, mmap/mlock), kept in `model_settings.json` beside the settings; a model without its
own uses the global settings. GPU layers may be "auto": as many as fit in free VRAM, decided at load."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from ember_chat.engine.errors import EmberError
from ember_chat.engine.inference.params import KV_CACHE_TYPES, SPECS, LoadConfig
from ember_chat.engine.models.fit import OVERHEAD, free_vram_bytes, kv_cache_bytes, layer_count
from ember_chat.engine.models.gguf_inspect import ModelInfo
from ember_chat.engine.storage.atomic import write_json_atomically
from ember_chat.engine.storage.settings import Settings

AUTO_GPU_LAYERS = -2  # (-1 is llama.cpp's "all")


@dataclass(frozen=True)
class ModelLoadSettings:
    n_ctx: int
    threads: int
    threads_batch: int
    gpu_layers: int  # -1 all, -2 auto
    n_batch: int
    flash_attn: bool
    kv_cache_type: str
    use_mmap: bool = True
    use_mlock: bool = False

    @classmethod
    def from_settings(cls, s: Settings) -> ModelLoadSettings:
        n_batch = SPECS["n_batch"].default
        return cls(s.context_length, s.threads, s.threads, s.gpu_layers, n_batch, s.flash_attention, s.kv_cache_type)

    def config(self, path: Path, info: ModelInfo | None = None, free_vram: int | None = None) -> LoadConfig:
        """The LoadConfig these settings make ("auto" GPU layers decided now); raises if invalid."""
        layers = self.gpu_layers
        if layers == AUTO_GPU_LAYERS:
            layers = auto_gpu_layers(
                info, self.n_ctx, self.kv_cache_type, free_vram_bytes() if free_vram is None else free_vram
            )
        return LoadConfig(
            path, n_ctx=self.n_ctx, threads=self.threads, threads_batch=self.threads_batch, gpu_layers=layers,
            flash_attn=self.flash_attn, kv_cache_type=self.kv_cache_type, use_mmap=self.use_mmap,
            use_mlock=self.use_mlock, n_batch=self.n_batch,
        )  # fmt: skip


def auto_gpu_layers(info: ModelInfo | None, n_ctx: int, kv_type: str, free_vram: int | None) -> int:
    """As many layers as fit in 90 % of the free VRAM, each with its share of the weights and of the KV
    cache (from the GGUF header); 0 without a GPU."""
    if not free_vram or info is None:
        return 0
    layers = layer_count(info) or 32
    per_layer = (info.file_size + kv_cache_bytes(info, n_ctx, info.file_size, kv_type=kv_type)) * OVERHEAD / layers
    return max(0, min(layers, int(free_vram * 0.9 / per_layer)))


class ModelSettingsStore:
    def __init__(self, path: Path) -> None:
        self.path = path

    def _all(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}  # none yet, or a damaged file: every model falls back to the global settings
        return data if isinstance(data, dict) else {}

    def get(self, name: str) -> ModelLoadSettings | None:
        raw = self._all().get(name)
        if not isinstance(raw, dict):
            return None
        known = {f.name for f in fields(ModelLoadSettings)}
        try:
            s = ModelLoadSettings(**{k: v for k, v in raw.items() if k in known})
            if s.kv_cache_type not in KV_CACHE_TYPES:
                return None
            return s
        except TypeError:
            return None

    def effective(self, name: str, defaults: Settings) -> ModelLoadSettings:
        """This model's own load settings, else the ones `defaults` make."""
        return self.get(name) or ModelLoadSettings.from_settings(defaults)

    def save(self, name: str, settings: ModelLoadSettings) -> None:
        data = self._all()
        data[name] = asdict(settings)
        try:
            write_json_atomically(self.path, data)
        except OSError as exc:
            raise EmberError(f"Could not save the model's load settings ({exc.strerror or exc}).") from exc
