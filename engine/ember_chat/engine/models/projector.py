"""Multimodal projectors (`mmproj-*.gguf`): the file that lets a model see images. Pairing a model
with the projector beside it, and telling a vision model that lacks one (the most common reason a
vision model "does not support images" in other apps).

A projector is not a chat model: the library does not list it on its own."""

from __future__ import annotations

import re
from pathlib import Path

from ember_chat.engine.models.gguf_inspect import ModelInfo

_QUANT = re.compile(r"[-_.](?:[IQ]?\d+(?:_[A-Z0-9]+)*|F16|F32|BF16)$", re.I)
# general.architecture values of models that take images (with their projector)
VISION_ARCHITECTURES = frozenset(
    {"qwen2vl", "qwen25vl", "qwen3vl", "qwen3vlmoe", "llama4", "mistral3", "gemma3n", "glm4v", "kimivl"}
)
_VISION_NAME = re.compile(r"(?i)(?:\b|[-_])(vl|vlm|vision|llava|pixtral|smolvlm|minicpm-?v|moondream)(?:\b|[-_])")
GEMMA3_VISION_WIDTH = 2560  # Gemma 3 4B and larger see images; 270M and 1B are text only


def is_projector_name(name: str) -> bool:
    """mmproj-model-f16.gguf, model-mmproj-f16.gguf, mmproj-model.gguf …"""
    lower = name.lower()
    return lower.endswith(".gguf") and "mmproj" in lower


def _core(stem: str) -> str:
    """The model's name in a file stem, without "mmproj" and without the quantization."""
    s = re.sub(r"(?i)[-_.]?mmproj[-_.]?", "-", stem).strip("-_.").lower()
    while True:
        t = _QUANT.sub("", s)
        if t == s:
            return s
        s = t


def _shared_prefix(a: str, b: str) -> int:
    """Characters two names share at their start."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def find_projector(model: Path) -> Path | None:
    """The projector beside `model`: the only mmproj file in its folder, or the one whose name
    shares the most with the model's (a folder may hold several models and their projectors)."""
    if is_projector_name(model.name):
        return None
    try:
        candidates = sorted(p for p in model.parent.glob("*.gguf") if is_projector_name(p.name) and p.is_file())
    except OSError:
        return None
    if len(candidates) <= 1:
        return candidates[0] if candidates else None
    core = _core(model.stem)
    best = max(candidates, key=lambda p: (_shared_prefix(_core(p.stem), core), -len(p.name)))
    return best if _shared_prefix(_core(best.stem), core) >= 3 else None


def is_vision_architecture(info: ModelInfo) -> bool:
    """Whether the model is of a family that sees images (then it needs its projector file)."""
    arch = info.architecture.lower()
    if arch in VISION_ARCHITECTURES:
        return True
    if arch == "gemma3":
        return (info.embedding_size or 0) >= GEMMA3_VISION_WIDTH
    return bool(_VISION_NAME.search(info.name or ""))


def pair_files(names: list[str]) -> dict[str, str]:
    """In a repository's file list: each model file -> the projector to download with it (the only
    one, or the best-named one). Projectors themselves are not keys."""
    projectors = [n for n in names if is_projector_name(n)]
    if not projectors:
        return {}
    out: dict[str, str] = {}
    for n in names:
        if is_projector_name(n) or not n.lower().endswith(".gguf"):
            continue
        folder = n.rsplit("/", 1)[0] if "/" in n else ""
        local = [p for p in projectors if (p.rsplit("/", 1)[0] if "/" in p else "") == folder] or projectors
        if len(local) == 1:
            out[n] = local[0]
            continue
        core = _core(Path(n).stem)
        # a repository often has one projector per precision (f16, bf16, q8_0): prefer f16
        out[n] = max(local, key=lambda p: (_shared_prefix(_core(Path(p).stem), core), "f16" in p.lower(), -len(p)))
    return out
