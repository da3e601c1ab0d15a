"""What the local runtime keeps of its context's KV cells beyond the prompt at hand: the snapshot
store's key for this model and these settings, whether seq 0 holds a conversation worth saving, and
the batch decoder's slots (sequences 1..parallel); and the n-grams of the model's recent answers, per
client, which both paths draft from (answer_ngrams.py: in memory only, dropped with the model)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import llama_cpp

from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.inference.kv.prefix import common_prefix, keep_seq0
from ember_chat.engine.inference.kv.seq0_snapshots import restore_seq0, save_seq0, seq0_tokens
from ember_chat.engine.inference.kv.snapshot_keys import SnapshotKey, cache_settings_key, model_identity
from ember_chat.engine.inference.kv.snapshots import SnapshotStore
from ember_chat.engine.inference.llama.answer_ngrams import AnswerNgrams, ClientAnswers
from ember_chat.engine.inference.llama.seq_state import clear_seq

if TYPE_CHECKING:
    from ember_chat.engine.inference.llama.batch_decode import BatchDecoder

log = logging.getLogger(__name__)


class ContextCache:
    def __init__(self) -> None:
        self.snapshots: SnapshotStore | None = None  # set by the service
        self.key: SnapshotKey | None = None
        self.decoder: BatchDecoder | None = None
        self.parallel = 0  # the loaded model's parallel sequences (0: none loaded)
        self.answers: ClientAnswers | None = None  # the loaded model's recent answers' n-grams, per client
        self._llm: llama_cpp.Llama | None = None
        self._seq0_conversation = False  # seq 0 holds a text conversation (not a benchmark's tokens)

    def opened(self, llm: llama_cpp.Llama, config: LoadConfig) -> None:
        """A model was loaded into `llm` with `config`."""
        self._seq0_conversation = False
        try:
            self.key = SnapshotKey(
                model_identity(config.path), cache_settings_key(config, int(llama_cpp.llama_n_seq_max(llm.ctx)))
            )
        except OSError as exc:  # (the file went away since it was loaded: no snapshots for it)
            log.warning("no KV snapshots for %s: %s", config.path, exc)
            self.key = None
        self._llm = llm
        self.parallel = int(getattr(config, "parallel", 1) or 1)
        self.answers = ClientAnswers()

    def batch_decoder(self) -> BatchDecoder:
        """The decoder of sequences 1..parallel + 1 (made at the first batched run), once seq 0 gave up its
        cells: the context's cells are shared by all sequences, and a batched run must not find most of
        them held by the single path's last conversation (saved to the snapshot store first, so the
        decoder restores it into a slot when it comes back)."""
        llm = self._llm
        assert llm is not None
        if int(llama_cpp.llama_memory_seq_pos_max(llama_cpp.llama_get_memory(llm.ctx), 0)) >= 0:
            if self.snapshots is not None and self.key is not None and self._seq0_conversation:
                save_seq0(llm, self.snapshots, self.key)
            clear_seq(llm.ctx, 0)
            llm.n_tokens = 0
            self._seq0_conversation = False
        if self.decoder is None:
            from ember_chat.engine.inference.llama.batch_decode import BatchDecoder

            self.decoder = BatchDecoder(llm, self.parallel + 1, self.snapshots, self.key)
        return self.decoder

    def answers_of(self, client: str) -> AnswerNgrams | None:
        """The recent answers' n-grams a request of `client` drafts from and adds its answer to (none
        while no model is loaded): its own client's only (answer_ngrams.py says why)."""
        return self.answers.of(client) if self.answers is not None else None

    def cells_used(self) -> int:
        """The context's KV cells its sequences hold now, by this bookkeeping (no call into llama.cpp):
        seq 0's tokens as llama-cpp-python records them, and each batch slot's cached tokens."""
        llm = self._llm
        if llm is None:
            return 0
        slots = self.decoder.slots if self.decoder is not None else ()
        return int(llm.n_tokens) + sum(len(slot.cached) for slot in slots)

    def set_snapshots(self, store: SnapshotStore | None) -> None:
        self.snapshots = store
        if self.decoder is not None:
            self.decoder.snapshots = store

    def seq0_start(self, llm: llama_cpp.Llama, tokens: list[int], conversation: bool) -> tuple[int, int]:
        """Before llama-cpp-python's own path evaluates `tokens` on seq 0 (`conversation`: a chat's or a
        text's prompt, not a benchmark's or one with images): (reused, restored) prompt tokens."""
        if self.decoder is not None:  # (its evaluation drops cells of every sequence beyond n_tokens)
            self.decoder.evict_all()
        store, key = self.snapshots, self.key
        held_saveable = self._seq0_conversation
        self._seq0_conversation = conversation
        if store is not None and key is not None and conversation:
            reused, restored = restore_seq0(llm, store, key, tokens, save_held=held_saveable)
        else:
            held = seq0_tokens(llm)
            reused, restored = common_prefix(held, tokens), 0
            if store is not None and key is not None and held_saveable and reused < len(held):
                save_seq0(llm, store, key)  # seq 0's conversation is about to be cut back: keep it first
            reused = min(reused, len(tokens) - 1)
        kept = keep_seq0(llm, reused)  # (0 when a recurrent model's memory cannot be cut back)
        return kept, restored if kept == reused else 0

    def forget_seq0(self) -> None:
        self._seq0_conversation = False

    def forget_all(self) -> None:
        """Every sequence's conversation dropped and none saved (chats were deleted for good): the batch
        slots and seq 0 emptied, llama-cpp-python's record of seq 0's tokens zeroed, and the context's
        cells cleared with their data (so no later save or restore can bring those tokens back)."""
        llm = self._llm
        if llm is None:
            return
        if self.decoder is not None:
            self.decoder.forget_all()
        if self.answers is not None:  # (their n-grams are those chats' text)
            self.answers.clear()
        self._seq0_conversation = False
        llm.reset()
        llm.input_ids.fill(0)
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(llm.ctx), True)

    def closing(self, llm: llama_cpp.Llama) -> None:
        """Before the model is freed: every sequence's conversation put in the store (in RAM: the store's
        owner writes them to disk when it closes it — at quit, not at every model switch)."""
        decoder, self.decoder = self.decoder, None
        store, key = self.snapshots, self.key
        try:
            if decoder is not None:
                decoder.save_all()
            if store is not None and key is not None and self._seq0_conversation:
                save_seq0(llm, store, key)
        except Exception:  # (an unload must free the model whatever happens to its caches)
            log.exception("saving KV snapshots before unloading failed")
        finally:
            if decoder is not None:
                decoder.close()
        self.key = None
        self._llm = None
        self.parallel = 0
        self.answers = None
        self._seq0_conversation = False
