"""How each local model is loaded (its own context length, GPU layers, threads, batch, flash attention,
KV cache type, mmap/mlock), kept in `model_settings.json` beside the settings; a model without its
own uses the global settings. GPU layers may be "auto": as many as fit in free VRAM, decided at load."""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Any

from ember_chat.engine.core.params import KV_CACHE_TYPES, SPECS, LoadConfig
from ember_chat.engine.errors import EmberError, InvalidParameter
from ember_chat.engine.models.fit import OVERHEAD, free_vram_bytes, kv_cache_bytes, layer_count
from ember_chat.engine.models.gguf_inspect import ModelInfo
from ember_chat.engine.storage.atomic import ProblemLog, read_json_file, write_json_atomically
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


def load_settings_from(raw: object) -> ModelLoadSettings:
    """A model's load settings as model_settings.json holds them; InvalidParameter says what is wrong."""
    if not isinstance(raw, dict):
        raise InvalidParameter(f"they are {json.dumps(raw)}, not a set of named values.")
    missing = [f.name for f in fields(ModelLoadSettings) if f.default is MISSING and f.name not in raw]
    if missing:
        raise InvalidParameter(f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing.")
    values = {f.name: raw[f.name] for f in fields(ModelLoadSettings) if f.name in raw}
    for name in ("n_ctx", "threads", "n_batch"):
        SPECS[name].check(values[name])
    SPECS["threads"].check(values["threads_batch"])
    if not (type(values["gpu_layers"]) is int and values["gpu_layers"] == AUTO_GPU_LAYERS):
        SPECS["gpu_layers"].check(values["gpu_layers"])
    for name in ("flash_attn", "use_mmap", "use_mlock"):
        if name in values and not isinstance(values[name], bool):
            raise InvalidParameter(f"{name} must be true or false, got {json.dumps(values[name])}.")
    if values["kv_cache_type"] not in KV_CACHE_TYPES:
        raise InvalidParameter(
            f"the KV cache type must be one of {', '.join(KV_CACHE_TYPES)}, got {json.dumps(values['kv_cache_type'])}."
        )
    return ModelLoadSettings(**values)


class ModelSettingsStore(ProblemLog):
    """model_settings.json: {model name: its load settings}. Read afresh each time (the command line may
    have changed it). A damaged file is set aside, never overwritten; an invalid entry costs only its
    model, which uses the global settings, and stays in the file as it is (until that model's settings
    are saved again) for the user to fix. `take_problems` says what was wrong, in words for the user."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = Path(path)

    def _read(self) -> dict[str, Any] | None:
        """Every entry as the file holds it, valid or not; None when there is no usable file."""
        return read_json_file(
            self.path, self, "model load settings file", "model load settings",
            "Every model uses the global load settings until its own are set again.",
        )  # fmt: skip

    def _all(self) -> dict[str, Any]:
        return self._read() or {}

    def _valid(self, name: str, raw: object) -> ModelLoadSettings | None:
        try:
            return load_settings_from(raw)
        except InvalidParameter as exc:
            self.report(
                f"The load settings of {name!r} in {self.path} are not valid: {exc} That model uses the global "
                "load settings; its entry is kept in the file as it is until you save new settings for it."
            )
            return None

    def get(self, name: str) -> ModelLoadSettings | None:
        data = self._all()
        return self._valid(name, data[name]) if name in data else None

    def effective(self, name: str, defaults: Settings) -> ModelLoadSettings:
        """This model's own load settings, else the ones `defaults` make."""
        return self.get(name) or ModelLoadSettings.from_settings(defaults)

    def take_problems(self) -> list[str]:
        """What is wrong with the file (read now, every entry checked), each said once."""
        for name, raw in self._all().items():
            self._valid(name, raw)
        return super().take_problems()

    def save(self, name: str, settings: ModelLoadSettings) -> None:
        """Replaces this model's entry; the others stay as they are, invalid ones too."""
        data = self._read()
        if data is None and self.path.exists():  # damaged, and it could not be moved aside
            raise EmberError(
                f"The model's load settings were not saved: {self.path} is damaged and could not be moved "
                "aside, so it was not overwritten. Move or delete that file, then save again."
            )
        data = {**(data or {}), name: asdict(settings)}
        try:
            write_json_atomically(self.path, data)
        except OSError as exc:
            raise EmberError(f"Could not save the model's load settings ({exc.strerror or exc}).") from exc
