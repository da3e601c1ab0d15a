"""Multimodal projectors (`mmproj-*.gguf`): the file that lets a model see images. Pairing a model
with the projector beside it, and telling a vision model that lacks one (the most common reason a
vision model "does not support images" in other apps).

A projector is not a chat model: the library does not list it on its own."""

from __future__ import annotations

import re
from pathlib import Path

from ember_chat.engine.models.gguf_inspect import ModelInfo

_QUANT = re.compile(r"(?:^|[-_.])(?:I?Q\d+(?:_[A-Z0-9]+)*|F16|F32|BF16)$", re.I)
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


_PRECISION_ORDER = ("f16", "bf16", "f32", "q8_0")


def _precision_rank(name: str) -> int:
    words = re.split(r"[-_./]", Path(name).stem.lower())
    return next((i for i, p in enumerate(_PRECISION_ORDER) if p in words or p.replace("_", "") in words), 9)


def choose_projector(model_name: str, projectors: list[str]) -> str | None:
    """Which of `projectors` (file names or paths) goes with the model: the only one; else, when they
    are one projector in several precisions (mmproj-F16, mmproj-BF16 …), the f16 one; else the one
    named after the model. None when that is ambiguous (no silent wrong pairing)."""
    if len(projectors) <= 1:
        return projectors[0] if projectors else None
    cores = {p: _core(Path(p).stem) for p in projectors}
    if len(set(cores.values())) == 1:
        return min(projectors, key=lambda p: (_precision_rank(p), p))
    mine = _core(Path(model_name).stem)
    named = [p for p, c in cores.items() if c == mine]
    return min(named, key=lambda p: (_precision_rank(p), p)) if named else None


def find_projector(model: Path) -> Path | None:
    """The projector beside `model` (see `choose_projector`)."""
    if is_projector_name(model.name):
        return None
    try:
        candidates = [p.name for p in model.parent.glob("*.gguf") if is_projector_name(p.name) and p.is_file()]
    except OSError:
        return None
    chosen = choose_projector(model.name, sorted(candidates))
    return model.parent / chosen if chosen else None


def is_vision_architecture(info: ModelInfo) -> bool:
    """Whether the model is of a family that sees images (then it needs its projector file)."""
    arch = info.architecture.lower()
    if arch in VISION_ARCHITECTURES:
        return True
    if arch == "gemma3":
        return (info.embedding_size or 0) >= GEMMA3_VISION_WIDTH
    return bool(_VISION_NAME.search(info.name or ""))


def pair_files(names: list[str]) -> dict[str, str]:
    """In a repository's file list: each model file -> the projector to download with it (from the
    projectors in its folder, else in the whole repository; see `choose_projector`)."""
    projectors = [n for n in names if is_projector_name(n)]
    if not projectors:
        return {}

    def folder(n: str) -> str:
        return n.rsplit("/", 1)[0] if "/" in n else ""

    out: dict[str, str] = {}
    for n in names:
        if is_projector_name(n) or not n.lower().endswith(".gguf"):
            continue
        local = [p for p in projectors if folder(p) == folder(n)] or projectors
        chosen = choose_projector(n.rsplit("/", 1)[-1], local)
        if chosen:
            out[n] = chosen
    return out
