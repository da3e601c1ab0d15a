"""Will a model fit this machine? Weights + KV cache at the chosen context vs free memory, where the
load settings put them: the offloaded layers' share of the weights and of the KV cache in VRAM, the
rest in RAM (no GPU layers: everything in RAM, whatever GPU the machine has).

The KV cache is 2 (K and V) x layers x context x KV heads x head size x bytes per element of the chosen
cache type (f16: 2, q8_0: 34/32, q4_0: 18/32). When the header is not known (a file not downloaded
yet), the shape is estimated from the file size.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

from ember_chat.engine.core.states import FitLabel
from ember_chat.engine.models.gguf_inspect import ModelInfo

OVERHEAD = 1.10  # compute buffers, runtime, fragmentation
TIGHT = 0.80  # above this share of free memory, it fits but leaves little for anything else


# Bytes per element of each KV cache type (block formats: bytes per block / elements per block).
KV_BYTES = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32, "q5_1": 24 / 32, "q5_0": 22 / 32,
            "q4_1": 20 / 32, "q4_0": 18 / 32, "iq4_nl": 18 / 32}  # fmt: skip


@dataclass(frozen=True)
class FitEstimate:
    needed_bytes: int  # of the memory that decides (the tighter of the two when split)
    free_bytes: int
    label: FitLabel
    where: str  # "RAM", "VRAM" or "RAM+VRAM"
    ram_bytes: int = 0  # needed in each
    vram_bytes: int = 0


def _shape(info: ModelInfo | None, meta: dict[str, object] | None) -> tuple[dict[str, object], object]:
    meta = info.metadata if info is not None else (meta or {})
    return meta, meta.get("general.architecture")


def layer_count(info: ModelInfo | None, meta: dict[str, object] | None = None) -> int | None:
    meta, arch = _shape(info, meta)
    v = meta.get(f"{arch}.block_count")
    return v if isinstance(v, int) and v > 0 else None


def kv_cache_bytes(
    info: ModelInfo | None,
    n_ctx: int,
    file_size: int,
    meta: dict[str, object] | None = None,
    kv_type: str = "f16",
) -> int:
    """From a full header (`info`) or just its key/values (`meta`, e.g. read from a Hub file's first
    bytes); else an estimate from the file size."""
    meta, arch = _shape(info, meta)
    per = KV_BYTES.get(kv_type, 2.0)

    def num(key: str) -> int | None:
        v = meta.get(f"{arch}.{key}")
        if isinstance(v, list):  # per-layer values
            v = max((x for x in v if isinstance(x, int)), default=None)
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None

    layers, embd, heads = num("block_count"), num("embedding_length"), num("attention.head_count")
    if layers and embd and heads:
        head_dim = num("attention.key_length") or embd // heads
        kv_heads = num("attention.head_count_kv") or heads
        return int(2 * layers * n_ctx * kv_heads * head_dim * per)
    # Unknown shape: ~ 0.125 MB per f16 token per GB of weights (typical of 1-8B models with GQA).
    return int(n_ctx * 0.125e6 * max(file_size, 1) / 1e9 * per / 2)


def free_ram_bytes() -> int:
    """Memory available to a new process without swapping, on Linux, macOS and Windows alike
    (psutil: MemAvailable on Linux, free + inactive on macOS, the available physical memory on
    Windows); 0 if the system will not say. psutil is imported here, not at start-up."""
    import psutil

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
    gpu_layers: int = 0,
    kv_type: str = "f16",
) -> FitEstimate:
    """`gpu_layers`: layers offloaded (-1: all); they and their share of the KV cache need VRAM, the
    rest RAM. Without a GPU (`free_vram` None) everything is in RAM."""
    total = (file_size + kv_cache_bytes(info, n_ctx, file_size, meta, kv_type)) * OVERHEAD
    layers = layer_count(info, meta) or 32
    offloaded = 0 if free_vram is None else layers if gpu_layers < 0 else min(gpu_layers, layers)
    share = offloaded / layers
    vram_need, ram_need = int(total * share), int(total * (1 - share))
    ram_free = free_ram if free_ram is not None else free_ram_bytes()
    parts = [(ram_need, ram_free, "RAM")] if ram_need else []
    if vram_need:
        parts.append((vram_need, free_vram or 0, "VRAM"))
    labels = [_label(need, free) for need, free, _ in parts]
    order = [FitLabel.WONT_FIT, FitLabel.UNKNOWN, FitLabel.TIGHT, FitLabel.FITS]
    worst = min(range(len(parts)), key=lambda i: order.index(labels[i]))
    need, free, _ = parts[worst]
    where = "RAM+VRAM" if len(parts) == 2 else parts[0][2]
    return FitEstimate(need, free, labels[worst], where, ram_need, vram_need)


def _label(needed: int, free: int) -> FitLabel:
    if free <= 0:
        return FitLabel.UNKNOWN  # the system did not say how much memory is free: no verdict
    if needed <= free * TIGHT:
        return FitLabel.FITS
    if needed <= free:
        return FitLabel.TIGHT
    return FitLabel.WONT_FIT


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
    fitting = [q for q, label in variants if label == FitLabel.FITS]
    for q in QUANT_PREFERENCE:
        if q in fitting:
            return q
    tight = [q for q, label in variants if label == FitLabel.TIGHT]
    return tight[0] if tight else None
