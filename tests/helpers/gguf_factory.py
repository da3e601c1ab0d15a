"""Tiny GGUF models generated at test time with the `gguf` package: random weights, or scripted ones
whose every next token is decided in advance (`Script`).

The vocabulary is a byte-fallback SentencePiece-style one: control tokens, all 256 `<0xXX>` byte
tokens, and a few multi-byte UTF-8 pieces so streaming must cope with characters split over tokens.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import gguf
import numpy as np

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_PIECES = [
    "▁the", "▁a", "▁and", "▁is", "▁to", "▁of", "▁in", "▁it", "▁you", "▁hello", "▁world",
    "er", "in", "on", "an", "ing", "ed", "s", ".", ",", "!", "?", "▁", "\n",
    "é", "ü", "ß", "日本", "語", "▁Ember", "▁😀", "🔥", "▁café", "▁naïve",
]  # fmt: skip


@dataclass(frozen=True)
class Script:
    """A next-token table: what a scripted model says, whatever it is asked.

    Its weights make the logits depend on the current token only (every layer's weights are zero, so
    the hidden state is that token's embedding): the tokens in `after[t]` follow `t`, the tokens in
    `start` follow any token that is not in `after` (the last token of any prompt, in practice, so
    the answer starts with `start`). Tokens are named as the vocabulary spells them ("▁hello",
    "</think>", "</s>", "<0xE6>"). The tokens of one set share one logit, `LOGIT` above every other
    token's: one token is what greedy decoding and sampling alike produce, several are equally likely
    (a flat distribution, for seeds to choose from)."""

    start: tuple[str, ...]
    after: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    LOGIT = 64.0  # e^-64 per other token: at temperature 2 still never sampled

    def __post_init__(self) -> None:
        assert self.start and all(self.after.values()), "every state needs a next token"


def says(*tokens: str) -> Script:
    """A model that answers with `tokens` in this order (greedy or not), and then starts them again
    (an end-of-generation token among them ends the answer there, unless `ignore_eos`). The tokens are
    distinct: each decides the next one."""
    assert tokens and len(set(tokens)) == len(tokens), tokens
    return Script(start=(tokens[0],), after={a: (b,) for a, b in itertools.pairwise(tokens)})


def any_of(*tokens: str) -> Script:
    """A model that says any of `tokens` at every step, all equally likely: different seeds give
    different answers, a seed always the same one."""
    assert len(tokens) > 1 and len(set(tokens)) == len(tokens), tokens
    return Script(start=tokens)


@dataclass(frozen=True)
class TinySpec:
    arch: str = "llama"
    dim: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    ff: int = 128
    context: int = 2048
    seed: int = 0
    chat_template: str | None = CHATML_TEMPLATE
    name: str = "Tiny Test"
    file_type: int | None = None
    think_tokens: bool = False  # <think> and </think> as control tokens at the end of the vocab
    extra_control_tokens: tuple[str, ...] = ()  # more control tokens after those
    user_defined_tokens: tuple[str, ...] = ()  # user-defined tokens after those (read as tokens in any text)
    script: Script | None = None  # scripted weights instead of random ones (`Script`)
    fim_tokens: bool = False  # FIM_TOKENS as control tokens at the very end, named by tokenizer.ggml.fim_*_token_id


THINK_TOKENS = ("<think>", "</think>")
# fill-in-the-middle's prefix, suffix and middle tokens (StarCoder's spelling), in the metadata's order
FIM_TOKENS = ("<fim_prefix>", "<fim_suffix>", "<fim_middle>")
FIM_KEYS = ("tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.fim_mid_token_id")


def vocabulary() -> tuple[list[str], list[float], list[int]]:
    tt = gguf.TokenType
    tokens = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    types = [tt.UNKNOWN, tt.CONTROL, tt.CONTROL, tt.CONTROL, tt.CONTROL]
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        types.append(tt.BYTE)
    for piece in _PIECES:
        tokens.append(piece)
        types.append(tt.NORMAL)
    scores = [0.0] * 261 + [-float(i) for i in range(len(_PIECES))]
    return tokens, scores, [int(t) for t in types]


IM_END_ID = 4
EOS_ID = 2


def _scripted_weights(script: Script, tokens: list[str], dim: int) -> dict[str, np.ndarray]:
    """token_embd and output weights for `script`: token `t` in `after` gets its own one-hot embedding
    (dimension 1, 2, …), every other token dimension 0; the output row of each token that may follow
    gets `LOGIT` on that dimension. (RMS norm scales a one-hot vector of size `dim` by sqrt(dim).)"""
    ids = {t: i for i, t in enumerate(tokens)}
    named = [*script.start, *script.after, *(t for following in script.after.values() for t in following)]
    missing = [t for t in named if t not in ids]
    assert not missing, f"not in the vocabulary: {missing}"
    assert len(script.after) < dim, "one embedding dimension per state"
    embd = np.zeros((len(tokens), dim), dtype=np.float32)
    embd[:, 0] = 1.0
    out = np.zeros((len(tokens), dim), dtype=np.float32)
    out[[ids[t] for t in script.start], 0] = script.LOGIT / np.sqrt(dim)
    for slot, (state, following) in enumerate(script.after.items(), start=1):
        embd[ids[state]] = np.eye(dim, dtype=np.float32)[slot]
        out[[ids[t] for t in following], slot] = script.LOGIT / np.sqrt(dim)
    return {"token_embd.weight": embd, "output.weight": out}


def _add_vocabulary(w: gguf.GGUFWriter, tokens: list[str], scores: list[float], types: list[int]) -> None:
    """The test vocabulary as a llama (SentencePiece) tokenizer: BOS 1 added, EOS_ID ends, UNK 0."""
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(EOS_ID)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)


def write_tiny_model(path: Path, spec: TinySpec = TinySpec()) -> Path:
    """Write a llama-architecture GGUF that llama.cpp loads and runs: random weights, or those of
    `spec.script` (with every layer's weights zero)."""
    rng = np.random.default_rng(spec.seed)
    tokens, scores, types = vocabulary()
    extra = [*(THINK_TOKENS if spec.think_tokens else ()), *spec.extra_control_tokens]
    tokens += [*extra, *spec.user_defined_tokens]
    scores += [0.0] * (len(extra) + len(spec.user_defined_tokens))
    types += [int(gguf.TokenType.CONTROL)] * len(extra)
    types += [int(gguf.TokenType.USER_DEFINED)] * len(spec.user_defined_tokens)
    fim = FIM_TOKENS if spec.fim_tokens else ()
    fim_ids = [len(tokens) + i for i in range(len(fim))]
    tokens += fim
    scores += [0.0] * len(fim)
    types += [int(gguf.TokenType.CONTROL)] * len(fim)
    n_vocab = len(tokens)
    w = gguf.GGUFWriter(str(path), spec.arch)
    w.add_name(spec.name)
    w.add_context_length(spec.context)
    w.add_embedding_length(spec.dim)
    w.add_block_count(spec.layers)
    w.add_feed_forward_length(spec.ff)
    w.add_head_count(spec.heads)
    w.add_head_count_kv(spec.kv_heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(spec.dim // spec.heads)
    if spec.file_type is not None:
        w.add_file_type(spec.file_type)
    _add_vocabulary(w, tokens, scores, types)
    for key, token_id in zip(FIM_KEYS, fim_ids, strict=False):
        w.add_uint32(key, token_id)
    if spec.chat_template:
        w.add_chat_template(spec.chat_template)

    scripted = {} if spec.script is None else _scripted_weights(spec.script, tokens, spec.dim)

    def t(name: str, *shape: int, scale: float = 0.5) -> None:
        if spec.script is None:
            w.add_tensor(name, (rng.standard_normal(shape) * scale).astype(np.float32))
        else:
            w.add_tensor(name, scripted.get(name, np.zeros(shape, dtype=np.float32)))

    head_dim = spec.dim // spec.heads
    t("token_embd.weight", n_vocab, spec.dim)
    w.add_tensor("output_norm.weight", np.ones(spec.dim, dtype=np.float32))
    t("output.weight", n_vocab, spec.dim)
    for i in range(spec.layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(spec.dim, dtype=np.float32))
        t(p + "attn_q.weight", spec.dim, spec.dim, scale=0.1)
        t(p + "attn_k.weight", spec.kv_heads * head_dim, spec.dim, scale=0.1)
        t(p + "attn_v.weight", spec.kv_heads * head_dim, spec.dim, scale=0.1)
        t(p + "attn_output.weight", spec.dim, spec.dim, scale=0.1)
        w.add_tensor(p + "ffn_norm.weight", np.ones(spec.dim, dtype=np.float32))
        t(p + "ffn_gate.weight", spec.ff, spec.dim, scale=0.1)
        t(p + "ffn_up.weight", spec.ff, spec.dim, scale=0.1)
        t(p + "ffn_down.weight", spec.dim, spec.ff, scale=0.1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def write_tiny_mamba(path: Path, seed: int = 0) -> Path:
    """Write a tiny Mamba (a recurrent model: its memory cannot drop a suffix, so llama.cpp refuses a
    partial cut) with random weights, that llama.cpp loads and runs."""
    dim, layers, d_inner, d_state, d_conv, dt_rank = 64, 2, 128, 16, 4, 4
    rng = np.random.default_rng(seed)
    tokens, scores, types = vocabulary()
    n_vocab = len(tokens)
    w = gguf.GGUFWriter(str(path), "mamba")
    w.add_name("Tiny Mamba")
    w.add_context_length(2048)
    w.add_embedding_length(dim)
    w.add_block_count(layers)
    w.add_feed_forward_length(0)
    w.add_head_count(0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_ssm_conv_kernel(d_conv)
    w.add_ssm_inner_size(d_inner)
    w.add_ssm_state_size(d_state)
    w.add_ssm_time_step_rank(dt_rank)
    _add_vocabulary(w, tokens, scores, types)
    w.add_chat_template(CHATML_TEMPLATE)

    def t(name: str, *shape: int, scale: float = 0.1) -> None:
        w.add_tensor(name, (rng.standard_normal(shape) * scale).astype(np.float32))

    t("token_embd.weight", n_vocab, dim, scale=0.5)
    w.add_tensor("output_norm.weight", np.ones(dim, dtype=np.float32))
    t("output.weight", n_vocab, dim, scale=0.5)
    for i in range(layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(dim, dtype=np.float32))
        t(p + "ssm_in.weight", 2 * d_inner, dim)
        t(p + "ssm_conv1d.weight", d_inner, d_conv)
        t(p + "ssm_conv1d.bias", d_inner)
        t(p + "ssm_x.weight", dt_rank + 2 * d_state, d_inner)
        t(p + "ssm_dt.weight", d_inner, dt_rank)
        t(p + "ssm_dt.bias", d_inner)
        w.add_tensor(p + "ssm_a", -np.exp(rng.standard_normal((d_inner, d_state)).astype(np.float32) * 0.1))
        t(p + "ssm_d", d_inner)
        t(p + "ssm_out.weight", dim, d_inner)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


BERT_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_BERT_WORDS = ("the", "cat", "sat", "on", "mat", "hello", "world", "dog", "ran", "embed", "me")


def write_tiny_bert(path: Path, pooling: str = "mean", seed: int = 0, context: int = 512) -> Path:
    """Write a tiny `bert` embedding model (random weights, non-causal attention, `bert.pooling_type`
    mean or cls) with a WordPiece vocabulary — llama.cpp's WPM tokenizer: [CLS] first, [SEP] last, a
    word "▁word", a piece inside one plain — that llama.cpp loads and embeds with. pooling "rank": a
    reranker (a cross-encoder) — llama.cpp's classification head on the [CLS] state, `cls` (a dense
    layer, tanh) then `cls.output` (one score), as llama-model.cpp's bert loads them."""
    dim, layers, heads, ff = 32, 2, 4, 64
    rng = np.random.default_rng(seed)
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    tokens = [*BERT_SPECIALS, *(f"▁{w}" for w in _BERT_WORDS), *(f"▁{c}" for c in letters), *letters]
    tt = gguf.TokenType
    types = [int(tt.CONTROL)] * len(BERT_SPECIALS) + [int(tt.NORMAL)] * (len(tokens) - len(BERT_SPECIALS))
    n_vocab = len(tokens)
    w = gguf.GGUFWriter(str(path), "bert")
    w.add_name("Tiny BERT")
    w.add_context_length(context)
    w.add_embedding_length(dim)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_layer_norm_eps(1e-12)
    w.add_causal_attention(False)
    w.add_pooling_type(
        {"mean": gguf.PoolingType.MEAN, "cls": gguf.PoolingType.CLS, "rank": gguf.PoolingType.RANK}[pooling]
    )
    w.add_tokenizer_model("bert")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_type_count(2)
    w.add_pad_token_id(0)
    w.add_unk_token_id(1)
    w.add_bos_token_id(2)  # [CLS]
    w.add_sep_token_id(3)
    w.add_eos_token_id(3)
    w.add_mask_token_id(4)
    w.add_add_bos_token(True)
    w.add_add_sep_token(True)

    def t(name: str, *shape: int, scale: float = 0.1) -> None:
        w.add_tensor(name, (rng.standard_normal(shape) * scale).astype(np.float32))

    def norm(name: str) -> None:
        w.add_tensor(name + ".weight", np.ones(dim, dtype=np.float32))
        w.add_tensor(name + ".bias", np.zeros(dim, dtype=np.float32))

    t("token_embd.weight", n_vocab, dim, scale=0.5)
    t("token_types.weight", 2, dim)
    t("position_embd.weight", context, dim)
    norm("token_embd_norm")
    _bert_blocks(t, norm, layers, dim, ff)
    if pooling == "rank":
        t("cls.weight", dim, dim, scale=0.5)
        t("cls.bias", dim)
        t("cls.output.weight", 1, dim, scale=0.5)
        t("cls.output.bias", 1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def write_word_bert(path: Path, meanings: Mapping[str, str], dim: int = 128, seed: int = 0) -> Path:
    """Write a tiny `bert` embedding model (mean pooling) whose vector of a text is the mean of its words'
    meanings: `meanings` maps each word of its vocabulary ("▁word", whole words, lower case) to a meaning
    key; words of one key (synonyms) share one random vector, words of key "" (stop words), the special
    tokens and words outside the vocabulary ([UNK]) have none. Its layers pass their input on unchanged
    (attention and feed-forward weights zero, layer norms of zero-mean unit-variance vectors), so
    llama.cpp computes exactly that mean: a made-up model for exercising vector search and fusion,
    not a model of language."""
    context, layers, heads, ff = 512, 1, 4, 16
    rng = np.random.default_rng(seed)
    words = sorted(meanings)
    keys = sorted({k for k in meanings.values() if k})
    key_vectors = rng.standard_normal((len(keys), dim))
    key_vectors -= key_vectors.mean(axis=1, keepdims=True)
    key_vectors /= key_vectors.std(axis=1, keepdims=True)  # (a layer norm leaves such a vector as it is)
    of_key = dict(zip(keys, key_vectors, strict=True))
    tokens = [*BERT_SPECIALS, *(f"▁{w}" for w in words)]
    embd = np.zeros((len(tokens), dim), dtype=np.float32)
    for i, word in enumerate(words, start=len(BERT_SPECIALS)):
        if meanings[word]:
            embd[i] = of_key[meanings[word]]
    tt = gguf.TokenType
    w = gguf.GGUFWriter(str(path), "bert")
    w.add_name("Word-mean BERT (generated)")
    w.add_context_length(context)
    w.add_embedding_length(dim)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_layer_norm_eps(1e-12)
    w.add_causal_attention(False)
    w.add_pooling_type(gguf.PoolingType.MEAN)
    w.add_tokenizer_model("bert")
    w.add_token_list(tokens)
    w.add_token_types([int(tt.CONTROL)] * len(BERT_SPECIALS) + [int(tt.NORMAL)] * len(words))
    w.add_token_type_count(2)
    for add, token_id in ((w.add_pad_token_id, 0), (w.add_unk_token_id, 1), (w.add_bos_token_id, 2),
                          (w.add_sep_token_id, 3), (w.add_eos_token_id, 3), (w.add_mask_token_id, 4)):  # fmt: skip
        add(token_id)
    w.add_add_bos_token(True)
    w.add_add_sep_token(True)

    def zeros(name: str, *shape: int) -> None:
        w.add_tensor(name, np.zeros(shape, dtype=np.float32))

    def norm(name: str) -> None:
        w.add_tensor(name + ".weight", np.ones(dim, dtype=np.float32))
        zeros(name + ".bias", dim)

    w.add_tensor("token_embd.weight", embd)
    zeros("token_types.weight", 2, dim)
    zeros("position_embd.weight", context, dim)
    norm("token_embd_norm")
    _bert_blocks(zeros, norm, layers, dim, ff)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _bert_blocks(put: Callable[..., None], norm: Callable[[str], None], layers: int, dim: int, ff: int) -> None:
    """A BERT's transformer blocks as llama.cpp names their tensors: `put(name, *shape)` writes one,
    `norm(name)` a layer norm's weight and bias."""
    for i in range(layers):
        p = f"blk.{i}."
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            put(p + name + ".weight", dim, dim)
            put(p + name + ".bias", dim)
        norm(p + "attn_output_norm")
        put(p + "ffn_up.weight", ff, dim)
        put(p + "ffn_up.bias", ff)
        put(p + "ffn_down.weight", dim, ff)
        put(p + "ffn_down.bias", dim)
        norm(p + "layer_output_norm")
