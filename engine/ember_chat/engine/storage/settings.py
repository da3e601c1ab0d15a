"""Typed settings with defaults, ranges and descriptions, saved atomically as JSON.

Unknown keys in the file are kept out; a value out of range or of the wrong type falls back to its
default (a hand-edited file never stops Ember from starting). Secrets never live here: they go to the
OS keychain.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ember_chat.engine.core.params import KV_CACHE_TYPES, SPECS, ParamSpec, SamplingParams
from ember_chat.engine.core.speech_catalog import DEFAULT_MODEL, KNOWN_MODELS, WHISPER_LANGUAGES, model_languages
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.storage.atomic import ProblemLog, read_json_file, write_json_atomically


def _from_spec(spec: ParamSpec, description: str | None = None) -> Any:
    """A setting whose type, default, range and description come from the parameter table."""
    return _setting(spec.default, description or spec.description, spec.low, spec.high)


def _setting(default: Any, description: str, low: float | None = None, high: float | None = None) -> Any:
    meta = {"description": description, "min": low, "max": high}
    if isinstance(default, list | dict):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Settings:
    models_dir: str = _setting("", "Folder for downloaded and imported models (empty: the default).")
    last_model: str = _setting("", "The model loaded at the end of the last session.")
    context_length: int = _from_spec(SPECS["n_ctx"], "Context window in tokens for newly loaded models.")
    threads: int = _from_spec(SPECS["threads"])
    gpu_layers: int = _from_spec(SPECS["gpu_layers"])
    parallel: int = _from_spec(SPECS["parallel"])  # (a model's own load settings, the ⚙ panel, win)
    flash_attention: bool = _setting(SPECS["flash_attn"].default, "Use flash attention.")
    kv_cache_type: str = _setting(
        SPECS["kv_cache_type"].default, "KV cache type: f16, q8_0 or q4_0 (quantized needs flash attention)."
    )
    temperature: float = _from_spec(SPECS["temperature"], "Default sampling temperature (0: greedy).")
    top_k: int = _from_spec(SPECS["top_k"], "Default top-k.")
    top_p: float = _from_spec(SPECS["top_p"], "Default top-p.")
    min_p: float = _from_spec(SPECS["min_p"], "Default min-p.")
    repeat_penalty: float = _from_spec(SPECS["repeat_penalty"], "Default repeat penalty (1: off).")
    max_tokens: int = _from_spec(SPECS["max_tokens"], "Default maximum answer length in tokens.")
    system_prompt: str = _setting("", "Default system prompt for new chats.")
    theme: str = _setting("system", "light, dark or system.")
    hf_endpoint: str = _setting("https://huggingface.co", "Hugging Face Hub endpoint (mirrors).")
    api_server: bool = _setting(False, "Serve the loaded model on Ember's local OpenAI-compatible API.")
    api_host: str = _setting("127.0.0.1", "Interface the API server binds to (another than loopback needs an API key).")
    api_port: int = _setting(8642, "Port of the local API server.", 1, 65_535)
    api_queue_limit: int = _setting(8, "Requests that may wait for the model before new ones get 429.", 1, 1000)
    api_allowed_origins: str = _setting("", "Browser origins allowed to call the API (CORS), comma-separated.")
    api_allow_unknown_fields: bool = _setting(
        False, "The API server ignores request fields Ember does not know (default: a 400 naming them)."
    )
    api_memory_budget_mb: int = _setting(
        0, "Memory the models the API server loads for requests may take, in MB (0: 3/4 of the free memory).",
        0, 10_000_000,
    )  # fmt: skip
    api_models_max: int = _setting(0, "Most models loaded at once for the API server (0: no limit).", 0, 1000)
    api_model_ttl_s: int = _setting(
        3600, "Seconds a model loaded for API requests stays loaded once idle (0: unloaded when idle).", 0, 31_536_000
    )
    attachment_max_mb: int = _setting(50, "Largest file that can be attached to a message, in MB.", 1, 4096)
    attachment_read_seconds: int = _setting(60, "Longest time reading one attached file may take, in seconds.", 1, 3600)
    attachment_read_memory_mb: int = _setting(
        2048, "Most memory reading one attached file may use, in MB (a file built to inflate is stopped).", 256, 65_536
    )
    transcript_font_size: int = _setting(0, "Text size of the transcript in points (0: the system's).", 0, 72)
    backups_keep: int = _setting(10, "Backups of the chat database kept (those made before an update apart).", 1, 1000)
    kv_snapshot_cap_mb: int = _setting(
        2048, "Disk space for saved conversation caches (KV snapshots), in MB; 0: off", 0, 1_000_000
    )
    api_key_set: bool = _setting(
        False, "Whether an API key for the local API server is set (the key itself is in the OS keychain)."
    )
    read_aloud_voice: str = _setting("", "Voice answers are read aloud with (empty: one for the system's language).")
    read_aloud_rate: float = _setting(0.0, "Speed of the voice reading aloud, -1 (slowest) to 1 (fastest).", -1.0, 1.0)
    read_aloud_pitch: float = _setting(0.0, "Pitch of the voice reading aloud, -1 (lowest) to 1 (highest).", -1.0, 1.0)
    read_aloud_streaming: bool = _setting(False, "Read answers aloud as they stream, sentence by sentence.")
    dictation_model: str = _setting(
        DEFAULT_MODEL, "Speech model of dictation, the voice conversation and recordings attached (installed ones)."
    )
    dictation_language: str = _setting(
        "", "Language spoken, a Whisper language code (empty: detected; an English-only model: English)."
    )

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            expected = type(f.default)
            if expected is float and isinstance(value, int) and not isinstance(value, bool):
                object.__setattr__(self, f.name, float(value))
                value = float(value)
            if type(value) is not expected:
                raise InvalidParameter(f"setting {f.name} must be {expected.__name__}, got {value!r}.")
            low, high = f.metadata.get("min"), f.metadata.get("max")
            if (low is not None and value < low) or (high is not None and value > high):
                raise InvalidParameter(f"setting {f.name} must be between {low} and {high}, got {value}.")
        if self.kv_cache_type not in KV_CACHE_TYPES:
            raise InvalidParameter(
                f"setting kv_cache_type must be one of {', '.join(KV_CACHE_TYPES)}, got {self.kv_cache_type!r}."
            )
        if self.theme not in ("light", "dark", "system"):
            raise InvalidParameter(f"setting theme must be light, dark or system, got {self.theme!r}.")
        if not model_languages(self.dictation_model):
            names = ", ".join(m.name for m in KNOWN_MODELS)
            got = self.dictation_model[:80]  # (a hostile file's value, bounded in the message)
            raise InvalidParameter(f"setting dictation_model must be one of {names}, got {got!r}.")
        if self.dictation_language and self.dictation_language not in model_languages(self.dictation_model):
            known_code = self.dictation_language in WHISPER_LANGUAGES
            understood = "English (en) only" if known_code else "a Whisper language code"
            raise InvalidParameter(
                f"setting dictation_language must be empty (detected) or {understood} for the speech model "
                f"{self.dictation_model}, got {self.dictation_language[:80]!r}."
            )

    @staticmethod
    def describe() -> dict[str, dict[str, Any]]:
        return {
            f.name: {"default": f.default, **{k: v for k, v in f.metadata.items() if v is not None}}
            for f in fields(Settings)
        }

    def models_folder(self, default: Path) -> Path:
        return Path(self.models_dir) if self.models_dir else default

    def hub_endpoint(self) -> str:
        """EMBER_HF_ENDPOINT wins over the setting, so mirrors and tests can point elsewhere."""
        return os.environ.get("EMBER_HF_ENDPOINT") or self.hf_endpoint

    def sampling_params(self) -> SamplingParams:
        """The default sampling parameters these settings describe."""
        return SamplingParams(
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            min_p=self.min_p,
            repeat_penalty=self.repeat_penalty,
            max_tokens=self.max_tokens,
        )

    def with_changes(self, **changes: Any) -> Settings:
        return replace(self, **changes)


class SettingsFile(ProblemLog):
    """settings.json. A damaged file never stops Ember: an unreadable one is moved aside and the
    defaults are used; an invalid value falls back to its default, that setting alone. `problems`
    says what happened, in words for the user (the window's banner, the CLI's stderr)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = Path(path)

    def load(self) -> Settings:
        raw = read_json_file(self.path, self, "settings file", "settings", "Default settings are used.")
        settings = Settings()
        for f in fields(Settings):
            if raw is not None and f.name in raw:
                try:
                    settings = settings.with_changes(**{f.name: raw[f.name]})
                except InvalidParameter as exc:
                    default = getattr(Settings(), f.name)
                    self.report(f"{exc} Using the default ({default!r}).".replace("setting ", "", 1))
        return settings

    def save(self, settings: Settings) -> None:
        """Atomic: a failed save keeps the old file."""
        data = {f.name: getattr(settings, f.name) for f in fields(settings)}
        write_json_atomically(self.path, data, sort_keys=True)
