"""Load and sampling parameters: typed values with ranges, validated with messages a user can act on."""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from engine.errors import InvalidParameter

KV_CACHE_TYPES = ("f16", "q8_0", "q4_0")


def _check_range(name: str, value: float, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise InvalidParameter(f"{name} must be a number, got {value!r}.")
    if not low <= value <= high:
        raise InvalidParameter(f"{name} must be between {low:g} and {high:g}, got {value:g}.")


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidParameter(f"{name} must be a whole number, got {value!r}.")
    _check_range(name, value, low, high)


def default_threads() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


@dataclass(frozen=True)
class SamplingParams:
    """How tokens are chosen. Temperature 0 is exact greedy decoding (argmax of the logits).

    The defaults bend no logits at temperature 0: repeat penalty 1.0 is off, and top-k/top-p/min-p
    only act when sampling at temperature > 0.
    """

    temperature: float = 0.7
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    seed: int | None = None
    max_tokens: int = 1024
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_range("temperature", self.temperature, 0.0, 5.0)
        _check_int("top_k", self.top_k, 0, 1_000_000)
        _check_range("top_p", self.top_p, 0.0, 1.0)
        _check_range("min_p", self.min_p, 0.0, 1.0)
        _check_range("repeat_penalty", self.repeat_penalty, 0.5, 3.0)
        if self.seed is not None:
            _check_int("seed", self.seed, 0, 2**32 - 2)
        _check_int("max_tokens", self.max_tokens, 1, 1_000_000)
        if isinstance(self.stop, str) or not all(isinstance(s, str) for s in self.stop):
            raise InvalidParameter("stop must be a list of strings.")
        if any(not s for s in self.stop):
            raise InvalidParameter("stop strings must not be empty.")
        object.__setattr__(self, "stop", tuple(self.stop))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stop"] = list(self.stop)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SamplingParams:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise InvalidParameter(f"unknown sampling parameter(s): {', '.join(sorted(unknown))}.")
        values = dict(data)
        if "stop" in values and isinstance(values["stop"], list):
            values["stop"] = tuple(values["stop"])
        return cls(**values)


@dataclass(frozen=True)
class LoadConfig:
    """How a model is loaded into llama.cpp."""

    path: Path
    n_ctx: int = 4096
    threads: int = field(default_factory=default_threads)
    gpu_layers: int = 0
    flash_attn: bool = False
    kv_cache_type: str = "f16"
    use_mmap: bool = True
    n_batch: int = 512

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))
        _check_int("context length", self.n_ctx, 64, 1_048_576)
        _check_int("threads", self.threads, 1, 1024)
        _check_int("GPU layers", self.gpu_layers, -1, 100_000)
        _check_int("batch size", self.n_batch, 1, 65_536)
        if self.kv_cache_type not in KV_CACHE_TYPES:
            raise InvalidParameter(
                f"KV cache type must be one of {', '.join(KV_CACHE_TYPES)}, got {self.kv_cache_type!r}."
            )
        if self.kv_cache_type != "f16" and not self.flash_attn:
            raise InvalidParameter(
                f"A quantized KV cache ({self.kv_cache_type}) needs flash attention: "
                "turn flash attention on or use an f16 KV cache."
            )
