"""bench/convert_bert_gguf.py on a small BERT made here in Hugging Face's layout (config.json,
tokenizer.json, model.safetensors written byte by byte): llama.cpp loads the GGUF it writes, and the
vector it computes for a sentence is the one a numpy forward pass over the safetensors' weights gives
(the tensor names, shapes and the WordPiece vocabulary mapped right)."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import numpy as np
import pytest

from bench.convert_bert_gguf import convert, gguf_name, safetensors
from ember_chat.engine.projects.embedder import GGUFEmbedder

DIM, LAYERS, HEADS, FF, POSITIONS = 32, 2, 4, 64, 256
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "##s", "on", "mat"]


def _weights(rng: np.random.Generator) -> dict[str, np.ndarray]:
    def m(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    w = {
        "embeddings.word_embeddings.weight": m(len(VOCAB), DIM),
        "embeddings.position_embeddings.weight": m(POSITIONS, DIM),
        "embeddings.token_type_embeddings.weight": m(2, DIM),
        "embeddings.LayerNorm.weight": 1 + m(DIM),
        "embeddings.LayerNorm.bias": m(DIM),
        "embeddings.position_ids": np.arange(POSITIONS, dtype=np.int64).reshape(1, POSITIONS),
        "pooler.dense.weight": m(DIM, DIM),
    }
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        for name in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            w[p + name + ".weight"], w[p + name + ".bias"] = m(DIM, DIM), m(DIM)
        w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"] = m(FF, DIM), m(FF)
        w[p + "output.dense.weight"], w[p + "output.dense.bias"] = m(DIM, FF), m(DIM)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[p + norm + ".weight"], w[p + norm + ".bias"] = 1 + m(DIM), m(DIM)
    return w


def _write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    blobs, offset = [], 0
    for name, array in tensors.items():
        data = array.astype(array.dtype.newbyteorder("<")).tobytes()
        dtype = {np.float32: "F32", np.int64: "I64"}[array.dtype.type]
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


def _model_folder(folder: Path, weights: dict[str, np.ndarray]) -> Path:
    folder.mkdir()
    config = {"model_type": "bert", "hidden_size": DIM, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
              "intermediate_size": FF, "max_position_embeddings": POSITIONS, "type_vocab_size": 2,
              "layer_norm_eps": 1e-12}  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config))
    specials = [{"id": i, "content": t, "special": True} for i, t in enumerate(VOCAB) if t.startswith("[")]
    tokenizer = {"added_tokens": specials, "model": {"type": "WordPiece", "continuing_subword_prefix": "##",
                 "vocab": {t: i for i, t in enumerate(VOCAB)}}}  # fmt: skip
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    _write_safetensors(folder / "model.safetensors", weights)
    return folder


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * weight + bias


def _forward(w: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """A BERT's mean-pooled, L2-normalised sentence vector, in numpy (float64)."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    e = "embeddings."
    x = w[e + "word_embeddings.weight"][ids] + w[e + "position_embeddings.weight"][: len(ids)]
    x = _layer_norm(x + w[e + "token_type_embeddings.weight"][0], w[e + "LayerNorm.weight"], w[e + "LayerNorm.bias"])
    head = DIM // HEADS
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."

        def lin(name: str, v: np.ndarray, p: str = p) -> np.ndarray:
            return v @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        q, k, v = (lin(f"attention.self.{n}", x).reshape(len(ids), HEADS, head) for n in ("query", "key", "value"))
        scores = np.einsum("qhd,khd->hqk", q, k) / math.sqrt(head)
        att = np.exp(scores - scores.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        ctx = np.einsum("hqk,khd->qhd", att, v).reshape(len(ids), DIM)
        x = _layer_norm(x + lin("attention.output.dense", ctx), w[p + "attention.output.LayerNorm.weight"],
                        w[p + "attention.output.LayerNorm.bias"])  # fmt: skip
        h = lin("intermediate.dense", x)
        h = 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)))
        x = _layer_norm(x + lin("output.dense", h), w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
    pooled = x.mean(0)
    return pooled / np.linalg.norm(pooled)


def test_the_converted_model_computes_what_the_safetensors_weights_compute(tmp_path: Path) -> None:
    weights = _weights(np.random.default_rng(3))
    folder = _model_folder(tmp_path / "tiny-bert", weights)
    assert {n: a.shape for n, a in safetensors(folder / "model.safetensors")} == {
        n: a.shape for n, a in weights.items()
    }
    out = convert(folder, tmp_path / "tiny-bert.gguf", "f32")
    embedder = GGUFEmbedder(out, n_ctx=POSITIONS)
    try:
        got = embedder(["the cats sat on the mat", "mat"])
    finally:
        embedder.close()
    assert got.shape == (2, DIM)
    ids = [VOCAB.index(t) for t in ("[CLS]", "the", "cat", "##s", "sat", "on", "the", "mat", "[SEP]")]
    expected = _forward(weights, ids)  # ("cats" is the piece "cat" then "##s")
    assert float(got[0] @ expected) > 0.9999
    assert float(got[1] @ _forward(weights, [2, VOCAB.index("mat"), 3])) > 0.9999
    assert float(got[0] @ got[1]) < 0.99  # (two sentences, two vectors)


def test_tensor_names_and_what_is_refused(tmp_path: Path) -> None:
    assert gguf_name("encoder.layer.3.attention.self.query.weight") == "blk.3.attn_q.weight"
    assert gguf_name("bert.encoder.layer.0.output.LayerNorm.bias") == "blk.0.layer_output_norm.bias"
    assert gguf_name("embeddings.word_embeddings.weight") == "token_embd.weight"
    assert gguf_name("pooler.dense.weight") is None and gguf_name("embeddings.position_ids") is None
    folder = _model_folder(tmp_path / "not-bert", _weights(np.random.default_rng(1)))
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(ValueError, match="not 'bert'"):
        convert(folder, tmp_path / "x.gguf")
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    with pytest.raises(ValueError, match="not a safetensors header"):
        list(safetensors(bad))
