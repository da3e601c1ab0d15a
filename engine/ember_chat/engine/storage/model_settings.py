"""How each local model is loaded (its own context length, GPU layers, threads, batch, flash attention,
KV cache type, mmap/mlock, its draft model), kept in `model_settings.json` beside the settings; a model
without its own uses the global settings. GPU layers may be "auto": as many as fit in free VRAM, decided at load."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ember_chat.engine.core.params import LOAD_SPECS, LoadConfig, LoadOptions, ParamSpec
from ember_chat.engine.errors import EmberError, InvalidParameter
from ember_chat.engine.models.fit import OVERHEAD, free_vram_bytes, kv_cache_bytes, layer_count
from ember_chat.engine.models.gguf_inspect import ModelInfo
from ember_chat.engine.storage.atomic import ProblemLog, read_json_file, write_json_atomically
from ember_chat.engine.storage.settings import Settings

AUTO_GPU_LAYERS = -2  # (-1 is llama.cpp's "all")
# The values every entry of model_settings.json has had since its first version: an entry without one
# is not valid. A load parameter added to the table later takes its default in an older entry.
FIRST_VALUES = ("n_ctx", "threads", "threads_batch", "gpu_layers", "n_batch", "flash_attn", "kv_cache_type")
# The global settings (settings.json) a model without its own load settings uses, by load parameter;
# the others take the table's default, and the prompt threads are the threads.
GLOBAL_SETTING = {"n_ctx": "context_length", "threads": "threads", "gpu_layers": "gpu_layers",
                  "flash_attn": "flash_attention", "kv_cache_type": "kv_cache_type",
                  "parallel": "parallel"}  # fmt: skip


def _check_saved(spec: ParamSpec, value: object, show: Callable[[Any], str] = repr) -> None:
    """A saved value names each parameter (no None), and GPU layers may also be "auto"."""
    if spec.name == "gpu_layers" and type(value) is int and value == AUTO_GPU_LAYERS:
        return
    if value is None and spec.optional:
        raise InvalidParameter(f"{spec.noun} must be a number, got None.")
    spec.check(value, show)


@dataclass(frozen=True)
class ModelLoadSettings(LoadOptions):
    """One model's own load settings (the table's load parameters, each set; GPU layers -1 all, -2 auto),
    and the draft model loaded with it for speculative decoding (a file's path; None: none). A quantized
    KV cache without flash attention is kept here (the dialog says why it cannot be saved); `config`
    refuses it."""

    draft_model: str | None = None

    def __post_init__(self) -> None:
        for spec in LOAD_SPECS:
            _check_saved(spec, getattr(self, spec.name))
        if self.draft_model is not None and (not isinstance(self.draft_model, str) or not self.draft_model):
            raise InvalidParameter(f"the draft model must be a file's path, got {json.dumps(self.draft_model)}.")

    @classmethod
    def from_settings(cls, s: Settings) -> ModelLoadSettings:
        values = {spec.name: spec.default for spec in LOAD_SPECS}
        values |= {name: getattr(s, setting) for name, setting in GLOBAL_SETTING.items()}
        return cls(**{**values, "threads_batch": s.threads})

    def config(self, path: Path, info: ModelInfo | None = None, free_vram: int | None = None) -> LoadConfig:
        """The LoadConfig these settings make ("auto" GPU layers decided now); raises if invalid."""
        layers = self.gpu_layers
        if layers == AUTO_GPU_LAYERS:
            layers = auto_gpu_layers(
                info, self.n_ctx, self.kv_cache_type, free_vram_bytes() if free_vram is None else free_vram
            )
        draft = Path(self.draft_model) if self.draft_model else None
        return LoadConfig(path, draft_model=draft, **{**self.options(), "gpu_layers": layers})


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
    missing = [name for name in FIRST_VALUES if name not in raw]
    if missing:
        raise InvalidParameter(f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing.")
    values = {spec.name: raw[spec.name] for spec in LOAD_SPECS if spec.name in raw}
    for spec in LOAD_SPECS:
        if spec.name in values:
            _check_saved(spec, values[spec.name], json.dumps)
    return ModelLoadSettings(**values, draft_model=raw.get("draft_model"))


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
        entry = asdict(settings)
        if entry["draft_model"] is None:  # (an entry without a draft model is saved as before)
            del entry["draft_model"]
        data = {**(data or {}), name: entry}
        try:
            write_json_atomically(self.path, data)
        except OSError as exc:
            raise EmberError(f"Could not save the model's load settings ({exc.strerror or exc}).") from exc
