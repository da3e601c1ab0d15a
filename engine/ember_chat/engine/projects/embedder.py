"""A project's embedding model and reranker, run in this process through the engine's embeddings code
(the same that serves /v1/embeddings and /rerank: inference/local/embeddings.py over
inference/llama/embeddings.py's embeddings context), for the knowledge index and retrieval.

`GGUFEmbedder(path)` is retrieval's `Embed`: texts -> float32 (n, dim) unit rows, `model_id` the file's
identity (its name and SHA-256: the index's meta `embedding_model`). `GGUFReranker(path)` is its `Rerank`.
A text longer than the model takes is cut to its first tokens (a passage is a few hundred words; a model
of a 512-token context still sees most of it). One thread at a time: a lock serialises the calls."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import llama_cpp
import numpy as np

from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.inference.llama.embeddings import Embedder
from ember_chat.engine.inference.llama.loader import open_llama
from ember_chat.engine.inference.local import embeddings

DEFAULT_CONTEXT = 512
T = TypeVar("T")


_IDENTITIES: dict[tuple[str, int, int, int, int], str] = {}  # (path, dev, inode, size, mtime_ns) -> identity
_IDENTITIES_LOCK = threading.Lock()
KEPT_IDENTITIES = 64


def model_identity(path: Path) -> str:
    """'<file name>:<sha256 of its bytes>': the same model under another name is another id (its name
    shows in the index), a file changed under the same name is another id. The hash of a file is read
    once per (path, device, inode, size, mtime): a large model is not hashed again at each load."""
    st = os.stat(path)
    key = (str(Path(path).absolute()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    with _IDENTITIES_LOCK:
        known = _IDENTITIES.get(key)
    if known is not None:
        return known
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    identity = f"{path.name}:{digest.hexdigest()}"
    with _IDENTITIES_LOCK:
        if len(_IDENTITIES) >= KEPT_IDENTITIES:
            _IDENTITIES.pop(next(iter(_IDENTITIES)))
        _IDENTITIES[key] = identity
    return identity


class _Model:
    """A GGUF loaded for embeddings or ranking, its embeddings context made once."""

    def __init__(self, path: Path, n_ctx: int, threads: int | None) -> None:
        self.path = Path(path)
        self.model_id = model_identity(self.path)
        threads = threads or max(1, (os.cpu_count() or 2) // 2)  # (half the cores: it runs beside a chat)
        self.llm = open_llama(LoadConfig(self.path, n_ctx=n_ctx, n_batch=n_ctx, threads=threads))
        self.limit = min(self.llm.n_ctx(), n_ctx)
        self._embedder: Embedder | None = Embedder(self.llm, self.limit, threads, threads)
        self.dim = self._embedder.n_embd
        self._lock = threading.RLock()

    def tokenize(self, text: str, *, special: bool = False, add_bos: bool = False) -> list[int]:
        return self.llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=special)

    def detokenize(self, tokens: list[int]) -> str:
        return self.llm.detokenize(tokens).decode("utf-8", errors="ignore")

    def fitted(self, tokens: list[int]) -> list[int]:
        """At most `limit` tokens, the model's end token kept where it added one (a BERT's [SEP])."""
        if len(tokens) <= self.limit:
            return tokens
        return [*tokens[: self.limit - 1], tokens[-1]] if self._adds_end() else tokens[: self.limit]

    def _adds_end(self) -> bool:
        vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        return bool(llama_cpp.llama_vocab_get_add_sep(vocab) or llama_cpp.llama_vocab_get_add_eos(vocab))

    def run(self, work: Callable[[Embedder], np.ndarray]) -> np.ndarray:
        with self._lock:
            if self._embedder is None:
                raise InvalidParameter(f"{self.path.name} was closed.")
            return work(self._embedder)

    def call(self, work: Callable[[], T]) -> T:
        """`work` (tokenizing, then `run`) while the model cannot be closed; InvalidParameter once it was
        (a closed model's tokenizer is freed memory)."""
        with self._lock:
            if self._embedder is None:
                raise InvalidParameter(f"{self.path.name} was closed.")
            return work()

    def close(self) -> None:
        with self._lock:
            embedder, self._embedder = self._embedder, None
            if embedder is not None:
                embedder.close()
            self.llm.close()


class GGUFEmbedder:
    """An embedding model (a GGUF llama.cpp loads: a BERT, nomic, bge, …) as retrieval's `Embed`."""

    def __init__(self, path: Path, n_ctx: int = DEFAULT_CONTEXT, threads: int | None = None) -> None:
        self._model = _Model(path, n_ctx, threads)
        self.model_id = self._model.model_id
        self.dim = self._model.dim

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        """Each text's unit-length vector, float32 (len(texts), dim); an empty text embeds as a space."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._model.call(lambda: self._embed(texts))

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        m = self._model
        tokens = [m.fitted(m.tokenize(t or " ", add_bos=True)) for t in texts]
        checked = embeddings.input_tokens([tuple(t) for t in tokens], m.tokenize, m.llm.n_vocab(), m.limit)
        return m.run(lambda e: np.asarray(embeddings.embed(e, checked).vectors, dtype=np.float32))

    def close(self) -> None:
        self._model.close()


class GGUFReranker:
    """A reranker GGUF (rank pooling: a cross-encoder) as retrieval's `Rerank`: pairs joined as
    llama-server's /rerank joins them (local/embeddings.pair_tokens), a document cut to fit."""

    def __init__(self, path: Path, n_ctx: int = DEFAULT_CONTEXT, threads: int | None = None) -> None:
        self._model = _Model(path, n_ctx, threads)
        self.model_id = self._model.model_id
        vocab = llama_cpp.llama_model_get_vocab(self._model.llm.model)
        template = llama_cpp.llama_model_chat_template(self._model.llm.model, b"rerank")
        eos = llama_cpp.llama_vocab_eos(vocab)
        if eos == llama_cpp.LLAMA_TOKEN_NULL:
            eos = llama_cpp.llama_vocab_sep(vocab)
        self._format = embeddings.PairFormat(
            template=template.decode("utf-8") if template else None,
            bos=llama_cpp.llama_vocab_bos(vocab) if llama_cpp.llama_vocab_get_add_bos(vocab) else None,
            eos=eos if llama_cpp.llama_vocab_get_add_eos(vocab) else None,
            sep=llama_cpp.llama_vocab_sep(vocab) if llama_cpp.llama_vocab_get_add_sep(vocab) else None,
        )

    def __call__(self, query: str, texts: Sequence[str]) -> list[float]:
        """Each text's relevance to `query` (higher: more relevant)."""
        if not texts:
            return []
        return self._model.call(lambda: self._rank(query, texts))

    def _rank(self, query: str, texts: Sequence[str]) -> list[float]:
        m = self._model
        budget = max(8, m.limit - len(m.tokenize(query)) - 8)  # (the query and the pair's special tokens)
        shortened = [_cut(t, budget, m.tokenize, m.detokenize) for t in texts]
        pairs = embeddings.pair_tokens(query, shortened, self._format,
                                       lambda t, special: m.tokenize(t, special=special), m.limit)  # fmt: skip
        return [float(s) for s in m.run(lambda e: np.asarray(embeddings.rank(e, pairs).scores))]

    def close(self) -> None:
        self._model.close()


def _cut(text: str, budget: int, tokenize: Callable[[str], list[int]], detokenize: Callable[[list[int]], str]) -> str:
    tokens = tokenize(text)
    return text if len(tokens) <= budget else detokenize(tokens[:budget])


__all__ = ["GGUFEmbedder", "GGUFReranker", "model_identity"]
