"""A tiny vision model generated at test time: a tiny GGUF LLM (`gguf_factory`) and a tiny multimodal
projector GGUF (`mmproj-*.gguf`) that llama.cpp's mtmd loads, so the whole image path runs through
real llama.cpp code.

The projector is of Gemma 3's type ("gemma3" in llama.cpp's tools/mtmd/clip-impl.h): a SigLIP-style
ViT (patch embedding conv, learned position embeddings, pre-norm blocks with biased q/k/v/out and a
GELU MLP, a post-norm), then an average pool of `merge`x`merge` patches, an RMS norm and a linear
projection into the LLM's embedding width. Tensor names and keys follow clip.cpp's loader
(`load_hparams`, `load_tensors`) in llama-cpp-python 0.3.36's vendored llama.cpp. Weights are random;
what the model "sees" is noise, but the encode, the embedding's shape and its decode are real.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

from tests.helpers.gguf_factory import TinySpec, write_tiny_model


@dataclass(frozen=True)
class TinyVisionSpec:
    image_size: int = 56  # pixels per side (the image is resized to this)
    patch: int = 14
    merge: int = 2  # image tokens = (image_size / patch / merge) ** 2 = 4
    width: int = 32  # the encoder's embedding width
    heads: int = 2
    ff: int = 64
    blocks: int = 1
    seed: int = 1

    @property
    def image_tokens(self) -> int:
        return (self.image_size // self.patch // self.merge) ** 2


def write_tiny_mmproj(path: Path, text_dim: int, spec: TinyVisionSpec = TinyVisionSpec()) -> Path:
    """Write a Gemma-3-type projector whose output width is `text_dim` (the LLM's embedding width)."""
    assert spec.image_size % (spec.patch * spec.merge) == 0
    rng = np.random.default_rng(spec.seed)
    w = gguf.GGUFWriter(str(path), "clip")
    w.add_name("Tiny Test Vision")
    w.add_bool("clip.has_vision_encoder", True)
    w.add_string("clip.projector_type", "gemma3")
    w.add_uint32("clip.vision.embedding_length", spec.width)
    w.add_uint32("clip.vision.feed_forward_length", spec.ff)
    w.add_uint32("clip.vision.block_count", spec.blocks)
    w.add_uint32("clip.vision.projection_dim", text_dim)
    w.add_uint32("clip.vision.attention.head_count", spec.heads)
    w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    w.add_uint32("clip.vision.image_size", spec.image_size)
    w.add_uint32("clip.vision.patch_size", spec.patch)
    w.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    w.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    w.add_uint32("clip.vision.projector.scale_factor", spec.merge)
    w.add_bool("clip.use_gelu", True)

    def t(name: str, *shape: int, scale: float = 0.1) -> None:
        w.add_tensor(name, (rng.standard_normal(shape) * scale).astype(np.float32))

    def ones(name: str, n: int) -> None:
        w.add_tensor(name, np.ones(n, dtype=np.float32))

    n_patches = (spec.image_size // spec.patch) ** 2
    d = spec.width
    # numpy shapes are ggml's reversed: conv kernel [n_embd, 3, patch, patch]
    w.add_tensor(
        "v.patch_embd.weight",
        (rng.standard_normal((d, 3, spec.patch, spec.patch)) * 0.05).astype(np.float16),
    )
    t("v.patch_embd.bias", d)
    t("v.position_embd.weight", n_patches, d)
    for i in range(spec.blocks):
        p = f"v.blk.{i}."
        ones(p + "ln1.weight", d)
        t(p + "ln1.bias", d)
        for proj in ("attn_q", "attn_k", "attn_v", "attn_out"):
            t(p + proj + ".weight", d, d)
            t(p + proj + ".bias", d)
        ones(p + "ln2.weight", d)
        t(p + "ln2.bias", d)
        t(p + "ffn_up.weight", spec.ff, d)
        t(p + "ffn_up.bias", spec.ff)
        t(p + "ffn_down.weight", d, spec.ff)
        t(p + "ffn_down.bias", d)
    ones("v.post_ln.weight", d)
    t("v.post_ln.bias", d)
    ones("mm.soft_emb_norm.weight", d)
    # ggml computes mul_mat(transpose(W), x): W is [text_dim, width] in ggml order
    t("mm.input_projection.weight", d, text_dim, scale=0.5)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


TINY_VISION_LLM = TinySpec(name="Tiny Vision Test")


def write_tiny_vision_model(
    directory: Path,
    llm: TinySpec = TINY_VISION_LLM,
    vision: TinyVisionSpec = TinyVisionSpec(),
    stem: str = "tiny-vision",
) -> tuple[Path, Path]:
    """Write `<stem>.gguf` and `mmproj-<stem>.gguf` into `directory`: the LLM and its projector."""
    directory.mkdir(parents=True, exist_ok=True)
    model = write_tiny_model(directory / f"{stem}.gguf", llm)
    mmproj = write_tiny_mmproj(directory / f"mmproj-{stem}.gguf", llm.dim, vision)
    return model, mmproj
