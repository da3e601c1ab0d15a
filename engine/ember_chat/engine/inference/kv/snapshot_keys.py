"""What a saved conversation cache (engine/inference/kv/snapshots.py) belongs to and how a prompt matches
one: the model file's identity, the load settings that change the cache (together a `SnapshotKey`), and
the number of leading tokens a snapshot shares with a prompt (a `SnapshotMatch`, what `best()` finds)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ember_chat.engine.core.params import LoadConfig

_MIB = 2**20


def model_identity(path: Path) -> str:
    """The model file as snapshots know it: its size, mtime and a sha256 of its first and last MiB."""
    st = path.stat()
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        digest.update(fh.read(_MIB))
        if st.st_size > _MIB:
            fh.seek(max(_MIB, st.st_size - _MIB))
            digest.update(fh.read(_MIB))
    return f"{st.st_size}:{st.st_mtime_ns}:{digest.hexdigest()}"


def cache_settings_key(config: LoadConfig, n_seq_max: int) -> str:
    """The load settings a snapshot depends on, as text (GPU layers only where this build can offload)."""
    import llama_cpp  # here, not at import time: the app's cold start does not load llama.cpp for this

    gpu_layers = config.gpu_layers if llama_cpp.llama_supports_gpu_offload() else 0
    settings = {
        "n_ctx": config.n_ctx,
        "kv_cache_type": config.kv_cache_type,
        "flash_attn": config.flash_attn,
        "gpu_layers": gpu_layers,
        "n_seq_max": n_seq_max,
        "llama_cpp": str(llama_cpp.__version__),
    }
    return json.dumps(settings, sort_keys=True)


@dataclass(frozen=True)
class SnapshotKey:
    model: str  # model_identity(...)
    settings: str  # cache_settings_key(...)


@dataclass(frozen=True)
class SnapshotMatch:
    tokens: tuple[int, ...]  # the snapshot's full token list
    shared: int  # how many leading tokens it shares with the asked-for tokens
    source: str  # "ram" | "disk"
    ident: str  # opaque id for load()
