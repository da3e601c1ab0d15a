"""Will a model fit this machine? Weights + KV cache at the chosen context vs free memory.

The KV cache is 2 (K and V) x layers x context x KV heads x head size x bytes per element (f16: 2).
When the header is not known (a file not downloaded yet), the shape is estimated from the file size.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

import psutil

from ember_chat.engine.models.gguf_inspect import ModelInfo

OVERHEAD = 1.10  # compute buffers, runtime, fragmentation
TIGHT = 0.80  # above this share of free memory, it fits but leaves little for anything else


@dataclass(frozen=True)
class FitEstimate:
    needed_bytes: int
    free_bytes: int
    label: str  # "fits", "tight", "won't fit"
    where: str  # "RAM" or "VRAM"


def kv_cache_bytes(info: ModelInfo | None, n_ctx: int, file_size: int, meta: dict[str, object] | None = None) -> int:
    """From a full header (`info`) or just its key/values (`meta`, e.g. read from a Hub file's first
    bytes); else an estimate from the file size."""
    meta = info.metadata if info is not None else (meta or {})
    arch = meta.get("general.architecture")

    def num(key: str) -> int | None:
        v = meta.get(f"{arch}.{key}")
        if isinstance(v, list):  # per-layer values
            v = max((x for x in v if isinstance(x, int)), default=None)
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None

    layers, embd, heads = num("block_count"), num("embedding_length"), num("attention.head_count")
    if layers and embd and heads:
        head_dim = num("attention.key_length") or embd // heads
        kv_heads = num("attention.head_count_kv") or heads
        return 2 * layers * n_ctx * kv_heads * head_dim * 2
    # Unknown shape: ~ 0.125 MB per token per GB of weights (typical of 1-8B models with GQA).
    return int(n_ctx * 0.125e6 * max(file_size, 1) / 1e9)


def free_ram_bytes() -> int:
    """Memory available to a new process without swapping, on Linux, macOS and Windows alike
    (psutil: MemAvailable on Linux, free + inactive on macOS, the available physical memory on
    Windows); 0 if the system will not say."""
    try:
        return int(psutil.virtual_memory().available)
    except (OSError, RuntimeError):
        return 0


def free_vram_bytes() -> int | None:
    """Free memory of the first NVIDIA GPU, if nvidia-smi is there."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=memory.free", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.split()
        return int(out[0]) * 1024 * 1024 if out else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def estimate_fit(
    file_size: int,
    n_ctx: int,
    info: ModelInfo | None = None,
    free_ram: int | None = None,
    free_vram: int | None = None,
    meta: dict[str, object] | None = None,
) -> FitEstimate:
    needed = int((file_size + kv_cache_bytes(info, n_ctx, file_size, meta)) * OVERHEAD)
    if free_vram:
        where, free = "VRAM", free_vram
    else:
        where, free = "RAM", free_ram if free_ram is not None else free_ram_bytes()
    if free <= 0:
        label = "unknown"  # the system did not say how much memory is free: no verdict
    elif needed <= free * TIGHT:
        label = "fits"
    elif needed <= free:
        label = "tight"
    else:
        label = "won't fit"
    return FitEstimate(needed, free, label, where)


# Preference order when recommending a quantization: good quality per byte first.
QUANT_PREFERENCE = [
    "Q4_K_M",
    "Q5_K_M",
    "Q4_K_S",
    "Q6_K",
    "Q5_K_S",
    "Q8_0",
    "IQ4_XS",
    "Q4_0",
    "Q3_K_M",
    "IQ3_M",
    "Q3_K_L",
    "Q2_K",
]


def recommend(variants: list[tuple[str, str]]) -> str | None:
    """Given (quantization, fit label) for a repo's variants: the most preferred quantization that
    fits, else the first one that is tight (variants come smallest first), else None."""
    fitting = [q for q, label in variants if label == "fits"]
    for q in QUANT_PREFERENCE:
        if q in fitting:
            return q
    tight = [q for q, label in variants if label == "tight"]
    return tight[0] if tight else None
