"""Drafts from a small model: a second `Llama` with the target's vocabulary, on its own context and KV
cache, proposes the next tokens by its own greedy choice; speculative.generate_speculative verifies them
on the target in one llama_decode, so the output stays exactly the target's greedy output.

A draft is refused, with the reason, before it is used: a file llama.cpp cannot load (damaged, or too
big for memory), a file larger than the target's (decode reads every weight per token: a draft that
reads more bytes than the target costs more per token than it can save), and another vocabulary (the
same token id must be the same text in both, with the same BOS/EOS/EOT: a draft of other ids is
meaningless to the target). The target loads and runs without a refused draft.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from dataclasses import dataclass, replace
from pathlib import Path

import llama_cpp

from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.errors import EmberError, LoadCancelled, ModelFileError, ModelLoadError
from ember_chat.engine.inference.kv.prefix import common_prefix
from ember_chat.engine.inference.llama.greedy import argmax_token
from ember_chat.engine.inference.llama.loader import NULL_ABORT, open_llama, probe_gguf
from ember_chat.engine.inference.llama.speculative import K_MAX, K_MIN, K_START, NgramDrafter

log = logging.getLogger(__name__)


def drafts_with_model(params: SamplingParams) -> bool:
    """Whether a request drafts with the draft model, when one is loaded: "draft" or "auto" speculation
    without a grammar (on seq 0, or in the batch decoder while its run is alone in the step)."""
    return params.speculative in ("draft", "auto") and params.grammar is None


class DraftRefused(EmberError):
    """The draft model cannot be used with this target (the message says why); the target runs without it."""


class DraftFileUnreadable(DraftRefused):
    """llama.cpp could not read or load the draft model's file."""


class DraftTooLarge(DraftRefused):
    """The draft model's file is larger than the target's."""


class DraftVocabularyMismatch(DraftRefused):
    """The draft model's tokens are not the target's."""


@dataclass(frozen=True)
class VocabularyKey:
    """What must be equal for two models' token ids to mean the same: the vocabulary's size, a hash of
    every token's text in id order, and the special tokens a generation starts and ends with."""

    n_vocab: int
    digest: str
    bos: int
    eos: int
    eot: int


def vocabulary_key(model: llama_cpp.llama_model_p) -> VocabularyKey:
    """The model's VocabularyKey: one pass over its token texts (a few ms for 150k tokens), no copy kept."""
    vocab = llama_cpp.llama_model_get_vocab(model)
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
    digest = hashlib.blake2b(digest_size=16)
    for token in range(n_vocab):
        digest.update(llama_cpp.llama_vocab_get_text(vocab, token) or b"")
        digest.update(b"\0")  # (so "ab","c" and "a","bc" differ)
    return VocabularyKey(
        n_vocab,
        digest.hexdigest(),
        llama_cpp.llama_vocab_bos(vocab),
        llama_cpp.llama_vocab_eos(vocab),
        llama_cpp.llama_vocab_eot(vocab),
    )


def _differences(draft: VocabularyKey, target: VocabularyKey) -> str | None:
    if draft.n_vocab != target.n_vocab:
        return f"it has {draft.n_vocab:,} tokens, the model {target.n_vocab:,}"
    if draft.digest != target.digest:
        return "its tokens are not the model's (another tokenizer)"
    for name in ("bos", "eos", "eot"):
        mine, theirs = getattr(draft, name), getattr(target, name)
        if mine != theirs:
            return f"its {name.upper()} token is {mine}, the model's {theirs}"
    return None


def _sizes(*sizes: int) -> list[str]:
    """The sizes in MB, or in bytes where that would show them equal (or under 0.1 MB)."""
    shown = [f"{n / 1e6:,.1f} MB" for n in sizes]
    if len(set(shown)) < len(set(sizes)) or min(sizes) < 100_000:
        return [f"{n:,} bytes" for n in sizes]
    return shown


class DraftModel:
    """A draft model opened for `target`, checked (open_draft_model); `close()` frees it."""

    def __init__(self, llm: llama_cpp.Llama, path: Path) -> None:
        self.llm = llm
        self.path = path

    @property
    def name(self) -> str:
        return self.path.name

    def close(self) -> None:
        self.llm.close()


def open_draft_model(
    path: Path, target: llama_cpp.Llama, config: LoadConfig, cancel: threading.Event | None = None
) -> DraftModel:
    """The draft model at `path` for the target loaded with `config`: the same threads, GPU layers, KV
    cache type and context length (it holds the same conversation), one sequence. Raises a DraftRefused
    with the reason (LoadCancelled when `cancel` is set)."""
    path = Path(path)
    try:
        draft_size, target_size = path.stat().st_size, config.path.stat().st_size
    except OSError as exc:
        raise DraftFileUnreadable(
            f"The draft model {path.name} cannot be read ({exc.strerror or exc}); the model runs without it."
        ) from exc
    if draft_size > target_size:
        draft_shown, target_shown = _sizes(draft_size, target_size)
        raise DraftTooLarge(
            f"The draft model {path.name} ({draft_shown}) is larger than the model {config.path.name} "
            f"({target_shown}): drafting with it would cost more than it saves. "
            "Pick a smaller model of the same family; the model runs without a draft."
        )
    try:
        probe_gguf(path)
        llm = open_llama(replace(config, path=path, mmproj=None, draft_model=None, parallel=1), cancel=cancel)
    except LoadCancelled:
        raise
    except (ModelFileError, ModelLoadError) as exc:
        raise DraftFileUnreadable(f"The draft model was not loaded: {exc} The model runs without it.") from exc
    try:
        mismatch = _differences(vocabulary_key(llm.model), vocabulary_key(target.model))
    except BaseException:
        llm.close()
        raise
    if mismatch is not None:
        llm.close()
        raise DraftVocabularyMismatch(
            f"The draft model {path.name} does not share {config.path.name}'s vocabulary: {mismatch}. A draft "
            "model must use the same tokenizer (a smaller model of the same family); the model runs without it."
        )
    return DraftModel(llm, path)


class ModelDrafter(NgramDrafter):
    """speculative.Drafter from a draft model's greedy choices: up to `k` tokens after the accepted history,
    `k` adapted as NgramDrafter adapts it (its history, `append` and `feedback` are this one's; only the
    proposal differs). The draft model's KV cache follows the history: before each proposal, what it holds
    beyond the common prefix with the history (the last draft's rejected tokens) is removed and the
    history's missing tokens are evaluated; then each drafted token is evaluated to draft the next."""

    cheap = False  # (a proposal evaluates the draft model: none is made only to be compared)

    def __init__(
        self, draft: DraftModel, history: list[int], k: int = K_START, k_min: int = K_MIN, k_max: int = K_MAX
    ) -> None:
        super().__init__(history, k, k_min, k_max)
        self.llm = draft.llm

    def prepare(self, abort_callback: object = NULL_ABORT) -> None:
        """The history (the prompt) evaluated on the draft model now, before the answer's first token (in
        its time to first token): the first proposal then evaluates only the tokens since, so the first
        verify step's time, which auto judges, is not the prompt's evaluation. llama.cpp's `abort_callback`
        (the answer's own) is on meanwhile: a Stop during a long prompt's evaluation stops it within a
        graph node (llama-cpp-python raises; the cells of what was evaluated stay, beyond what its record
        holds, and the next evaluation removes them first)."""
        if not self.history:
            return
        ctx = self.llm.ctx
        llama_cpp.llama_set_abort_callback(ctx, abort_callback, None)
        try:
            self._follow_history()
        finally:
            llama_cpp.llama_set_abort_callback(ctx, NULL_ABORT, None)

    def propose(self, limit: int | None = None) -> list[int]:
        """Up to min(k, limit) tokens, each the draft model's argmax after the history and those before it."""
        llm, history = self.llm, self.history
        size = self.k if limit is None else min(self.k, limit)
        size = min(size, llm.n_ctx() - len(history))  # (the drafted tokens but the last are evaluated too)
        if size <= 0 or not history:
            return []
        self._follow_history()
        ctx, n_vocab = llm.ctx, llm.n_vocab()
        draft = [argmax_token(ctx, -1, n_vocab)]
        while len(draft) < size:
            llm.eval([draft[-1]])
            draft.append(argmax_token(ctx, -1, n_vocab))
        return draft

    def _follow_history(self) -> None:
        """The draft's cache holds the history, its last token evaluated last (its logits are the next
        token's): the cells beyond the common prefix are removed, the missing tokens evaluated."""
        llm, history = self.llm, self.history
        held = llm.input_ids[: llm.n_tokens].tolist()
        keep = min(common_prefix(held, history), len(history) - 1)  # (at least one token evaluated: its logits)
        llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(llm.ctx), 0, keep, -1)
        llm.n_tokens = keep
        llm.eval(history[keep:])


def draft_for(
    target: llama_cpp.Llama, config: LoadConfig, cancel: threading.Event | None = None
) -> tuple[DraftModel | None, str | None]:
    """The draft model `config` names for the target just loaded, or why it was refused (logged as a
    warning): the target runs without it. (None, None) when it names none."""
    if config.draft_model is None:
        return None, None
    try:
        return open_draft_model(config.draft_model, target, config, cancel), None
    except DraftRefused as exc:
        log.warning("%s", exc)
        return None, str(exc)
