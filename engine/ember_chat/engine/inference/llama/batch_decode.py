"""Continuous batching: several generations decoded together in one llama.cpp context.

The context (llama_loader.open_llama) has `parallel + 1` sequences sharing all its KV cells: seq 0 is
llama-cpp-python's own single-sequence path, seqs 1..parallel are this decoder's slots. A run takes a
slot (the one already holding the longest prefix of its prompt, or a snapshot's state restored into it),
and every `step()` is one `llama_decode` with a token for each generating run and, in the room left
(n_batch), chunks of the prompts still being evaluated, so running streams keep flowing while a
newcomer's long prompt goes in. Each run samples with its own sampler chain, built in the order
llama-cpp-python builds it, so a run alone gives the tokens `Llama.generate` gives.

llama.cpp's CPU kernels are not batch-invariant: a sequence decoded in a batch of 4 or more rows goes
through other matmul kernels than alone, so a greedy choice may flip where its two best tokens are nearly
tied (measured: tests/engine/test_batch_decode.py)."""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import llama_cpp

from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.errors import EmberError, GenerationError
from ember_chat.engine.inference.kv.prefix import common_prefix
from ember_chat.engine.inference.llama.draft_model import DraftModel, ModelDrafter, drafts_with_model
from ember_chat.engine.inference.llama.greedy import argmax_token, is_plain_greedy
from ember_chat.engine.inference.llama.logit_bias import LogitBias
from ember_chat.engine.inference.llama.seq_state import clear_seq, restore_seq, seq_state, trim_seq
from ember_chat.engine.inference.llama.speculative import (
    K_MAX,
    OFF_RECURRENT,
    NgramDrafter,
    SpeculationCounts,
    can_roll_back,
    verify_draft,
)

if TYPE_CHECKING:
    from ember_chat.engine.inference.kv.snapshot_keys import SnapshotKey
    from ember_chat.engine.inference.kv.snapshots import SnapshotStore
    from ember_chat.engine.inference.llama.answer_ngrams import AnswerNgrams

log = logging.getLogger(__name__)

_NO_ROOM = 1  # llama_decode: no KV cells free for the batch
_ABORTED = 2  # llama_decode: stopped by the abort callback (the ubatches done stay in the cache)


class NoFreeSlot(EmberError):
    """Every slot has a run: a new one must wait until one ends."""


@dataclass(eq=False)
class Slot:
    """One sequence of the shared context (seq ids 1..parallel)."""

    seq_id: int
    cached: list[int] = field(default_factory=list)  # the tokens whose KV cells the sequence holds now
    last_used: float = 0.0
    run: SlotRun | None = None  # the run decoding on it now


@dataclass(eq=False)
class SlotRun:
    """One generation on a slot. `token` is what the last step sampled for it (None until its prompt is
    evaluated, and again once `accept` gave it back); `full`: it was ended because the context's cells
    ran out (CONTEXT_FULL); `crowded`: that happened before its prompt was in (no answer: an error)."""

    slot: Slot
    prompt_tokens: int
    reused: int  # prompt tokens not evaluated again (the slot's cells or a restored snapshot)
    restored: int  # of `reused`, the ones that came from a snapshot
    pending_prefill: int  # prompt tokens still to evaluate
    token: int | None = None
    finished: bool = False
    full: bool = False
    crowded: bool = False
    inputs: list[int] = field(default_factory=list, repr=False)  # tokens to evaluate at the next steps
    sampler: llama_cpp.llama_sampler_p | None = field(default=None, repr=False)
    greedy: bool = False  # plain greedy decoding (greedy.py): the logits' argmax, without the sampler's pass
    bias: LogitBias | None = field(default=None, repr=False)  # the request's logit_bias (logit_bias.py)
    order: int = 0  # when it started (the youngest is ended first when the cells run out)
    answers: AnswerNgrams | None = field(default=None, repr=False)  # its client's recent answers' n-grams
    # Speculative decoding (speculative.py) of a run, greedy or sampled, in the steps where it is the only run:
    # its drafter and counts; the tokens chosen after `token` and not yet given back (a verified draft's),
    # and how many of `token` and those have their cells in already (the accepted draft tokens)
    drafter: NgramDrafter | ModelDrafter | None = field(default=None, repr=False)
    drafter_ready: bool = False  # a draft model's drafter has the prompt in the draft model's cache
    speculation: SpeculationCounts | None = None
    auto: bool = False
    queue: list[int] = field(default_factory=list, repr=False)
    evaluated: int = 0
    speculation_off: str | None = None  # why a run asked to speculate does not (speculative.OFF_*)


def sampler_chain(params: SamplingParams, seed: int, n_vocab: int, last_n: int) -> llama_cpp.llama_sampler_p:
    """A run's sampler chain, in `Llama._init_sampler`'s order: penalties (the last `last_n` tokens
    sampled), then greedy at temperature 0, else top-k, typical (off), top-p, min-p, temperature, dist."""
    chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
    parts = [
        llama_cpp.llama_sampler_init_penalties(
            n_vocab, last_n, params.repeat_penalty, params.frequency_penalty, params.presence_penalty
        )
    ]
    if params.temperature == 0:
        parts.append(llama_cpp.llama_sampler_init_greedy())
    else:
        parts += [
            llama_cpp.llama_sampler_init_top_k(params.top_k),
            llama_cpp.llama_sampler_init_typical(1.0, 1),
            llama_cpp.llama_sampler_init_top_p(params.top_p, 1),
            llama_cpp.llama_sampler_init_min_p(params.min_p, 1),
            llama_cpp.llama_sampler_init_temp(params.temperature),
            llama_cpp.llama_sampler_init_dist(seed & 0xFFFFFFFF),
        ]
    for part in parts:
        llama_cpp.llama_sampler_chain_add(chain, part)  # (the chain owns and frees them)
    return chain


class BatchDecoder:
    """The slots of one loaded model's context and the runs decoding on them. Used by one thread."""

    def __init__(
        self,
        llm: llama_cpp.Llama,
        parallel: int,
        snapshots: SnapshotStore | None,
        key: SnapshotKey | None,
    ) -> None:
        self.llm = llm
        self.snapshots = snapshots
        self.key = key
        self.slots = [Slot(seq_id) for seq_id in range(1, parallel + 1)]
        self.n_batch = max(1, int(llm.n_batch))
        self.n_vocab = llm.n_vocab()
        self._batch: llama_cpp.llama_batch | None = llama_cpp.llama_batch_init(self.n_batch, 0, 1)
        self._runs: list[SlotRun] = []  # the runs not finished, oldest first
        self._order = itertools.count()
        self._rolls_back = can_roll_back(llm)  # (speculation needs rejected cells removed)
        # The draft model loaded with the model (draft_model.py), set by whoever starts runs: a lone run's
        # drafts for "draft" and "auto"; its one context follows whichever run drafts (common prefix kept).
        self.draft: DraftModel | None = None

    # -- runs -------------------------------------------------------------------------------------

    def start(
        self, tokens: list[int], params: SamplingParams, seed: int, answers: AnswerNgrams | None = None
    ) -> SlotRun:
        """A new run for these prompt tokens on the best idle slot (see the module's doc). Raises
        NoFreeSlot when every slot has a run. `answers`: its client's recent answers' n-grams
        (answer_ngrams.py): its n-gram drafts look there too, and its answer joins them."""
        if not tokens:
            raise GenerationError("There is nothing to evaluate: the prompt is empty.")
        bias = LogitBias(params.logit_bias, self.n_vocab) if params.logit_bias else None  # (its ids checked first)
        idle = [slot for slot in self.slots if slot.run is None]
        if not idle:
            raise NoFreeSlot("Every parallel sequence is in use; the request must wait for one to finish.")
        slot = self._choose(idle, tokens)
        keep = min(common_prefix(slot.cached, tokens), len(tokens) - 1)
        keep, restored = self._restore(slot, tokens, keep)
        keep = self._cut(slot, keep)
        run = SlotRun(slot, len(tokens), keep, restored, len(tokens) - keep, order=next(self._order))
        run.inputs = list(tokens[keep:])
        run.sampler = sampler_chain(params, seed, self.n_vocab, self.llm.last_n_tokens_size)
        run.greedy = is_plain_greedy(params)
        run.bias = bias
        run.answers = answers
        # (a recurrent or hybrid model's memory cannot drop a rejected draft's cells: it decodes without)
        if params.speculative != "off" and not self._rolls_back:
            run.speculation_off = OFF_RECURRENT
        elif params.speculative != "off":
            if self.draft is not None and drafts_with_model(params):
                run.drafter, mode = ModelDrafter(self.draft, tokens), params.speculative
            else:  # ("draft" without a draft model is n-grams, said as the single path says it)
                run.drafter = NgramDrafter(tokens, answers=answers)
                mode = "ngram" if params.speculative == "draft" else params.speculative
            run.speculation = SpeculationCounts(mode=mode)
            run.auto = params.speculative == "auto"
        slot.run = run
        slot.last_used = time.monotonic()
        self._runs.append(run)
        return run

    def accept(self, run: SlotRun, token: int) -> None:
        """`token` joins the run's sequence: the next step evaluates it (and samples the one after), unless
        it is an accepted draft token (its cell is in); a verified draft's next token is then `token`."""
        if run.finished:
            return
        if run.drafter is not None:
            run.drafter.append(token)
        if run.speculation is not None:
            run.speculation.chosen(token)
        if run.evaluated:
            run.evaluated -= 1
        else:
            run.inputs.append(token)
        run.token = run.queue.pop(0) if run.queue else None

    def finish(self, run: SlotRun, answer: Sequence[int] = ()) -> None:
        """The run ends; its slot keeps its cells, for the next prompt that starts the same way (not those
        of accepted draft tokens never given back: the answer ended before them). `answer`: its tokens
        given back, for the recent answers' n-grams."""
        if answer and run.answers is not None:
            run.answers.add(answer)
        run.finished = True
        if run.evaluated and run.slot.run is run:
            slot, keep = run.slot, len(run.slot.cached) - run.evaluated
            if keep > 0 and trim_seq(self.llm.ctx, slot.seq_id, keep):
                del slot.cached[keep:]
            else:
                clear_seq(self.llm.ctx, slot.seq_id)
                slot.cached = []
            run.evaluated = 0
        if run.slot.run is run:
            run.slot.run = None
            run.slot.last_used = time.monotonic()
        if run in self._runs:
            self._runs.remove(run)
        if run.sampler is not None:
            llama_cpp.llama_sampler_free(run.sampler)
            run.sampler = None
        run.queue.clear()

    # -- the step ---------------------------------------------------------------------------------

    def step(self) -> None:
        """One llama_decode: a token for every generating run, then prompt chunks of runs still being
        evaluated (oldest first) in the room left of n_batch; then each run whose last input was
        evaluated samples its next token (run.token). When the cells run out, idle slots are evicted
        (their conversations saved to the snapshot store) and, if that is not enough, the youngest run is
        ended (run.full). A run alone in the step verifies a draft instead, when it has one
        (speculative.py; with other runs in the step, a draft's rows would slow them all down)."""
        alone = self._alone(self._plan())
        if alone is not None and self._speculate(alone):
            return
        started = time.perf_counter()
        while True:
            plan = self._plan()
            if not plan:
                return
            rc = self._decode(plan)
            if rc == 0:
                break
            if rc == _NO_ROOM:
                if not self._evict_idle():
                    self._end_youngest()
                continue
            self._resync(plan)
            if rc == _ABORTED:
                return
            raise GenerationError(
                f"llama.cpp could not evaluate the batch (error {rc}). Try again; if it keeps failing, "
                "reload the model."
            )
        ctx = self.llm.ctx
        row = 0
        for run, chunk, sample in plan:
            run.slot.cached.extend(chunk)
            del run.inputs[: len(chunk)]
            run.pending_prefill = max(0, run.pending_prefill - len(chunk))
            row += len(chunk)
            if sample and run.sampler is not None:
                run.token = self._choose_token(run, ctx, row - 1)
            run.slot.last_used = time.monotonic()
        if alone is not None and alone.speculation is not None and plan == [(alone, plan[0][1], True)]:
            alone.speculation.plain_step(time.perf_counter() - started)  # (a token's cost without a draft)

    def _alone(self, plan: list[tuple[SlotRun, list[int], bool]]) -> SlotRun | None:
        """The run that may speculate at this step: the only one in it, generating, with speculation on."""
        if len(plan) != 1:
            return None
        run, chunk, sample = plan[0]
        if run.speculation is None or run.pending_prefill or not sample or len(chunk) != 1:
            return None
        return run

    def _speculate(self, run: SlotRun) -> bool:
        """A draft for the run verified in this step (True), or none to verify (False: a plain step)."""
        counts, drafter, batch = run.speculation, run.drafter, self._batch
        if counts is None or drafter is None or batch is None:
            return False
        if not counts.drafting:
            # (a draft looked up for nothing, compared with what comes: n-grams only, a draft model's costs)
            if run.auto and counts.stopped and drafter.cheap:
                counts.shadow(drafter.propose(min(K_MAX, self.n_batch - 1)))
            return False
        if isinstance(drafter, ModelDrafter) and not run.drafter_ready:
            drafter.prepare()  # (the prompt into the draft model once, not timed as a verify step: seq 0's way)
            run.drafter_ready = True
        started = time.perf_counter()  # (a draft's cost is the step's: a draft model's evaluations are not free)
        draft = drafter.propose(min(K_MAX, self.n_batch - 1))
        if not draft:
            return False
        ctx, last, n_past = self.llm.ctx, run.inputs[0], len(run.slot.cached)
        choose = lambda i: self._choose_token(run, ctx, i)  # noqa: E731 - (the row's token, as a plain step picks it)
        chosen = verify_draft(ctx, batch, run.slot.seq_id, n_past, last, draft, choose)
        if chosen is None:  # (no cells free for the draft, or aborted: the plain step deals with it)
            return False
        accepted = len(chosen) - 1
        counts.verify_step(time.perf_counter() - started, len(draft), accepted, run.auto)
        drafter.feedback(len(draft), accepted)
        run.slot.cached += [last, *draft[:accepted]]
        del run.inputs[:1]
        run.token, run.queue, run.evaluated = chosen[0], chosen[1:], accepted
        run.slot.last_used = time.monotonic()
        return True

    def _choose_token(self, run: SlotRun, ctx: llama_cpp.llama_context_p, row: int) -> int:
        """The run's next token from this output row of the step's logits, with its logit_bias on them."""
        if run.bias is None:  # (the common case: no closure made per token)
            return self._pick(run, ctx, row)
        return run.bias.choose(ctx, row, lambda: self._pick(run, ctx, row))

    def _pick(self, run: SlotRun, ctx: llama_cpp.llama_context_p, row: int) -> int:
        if run.greedy:
            return argmax_token(ctx, row, self.n_vocab)
        return int(llama_cpp.llama_sampler_sample(run.sampler, ctx, row))

    def _plan(self) -> list[tuple[SlotRun, list[int], bool]]:
        """(run, tokens to evaluate, sample after them) in batch order: generating runs first, then a
        chunk of ONE prompt (two prompts in one llama_decode would have their attention summed in
        other chunks than each alone: their greedy answers could split from the lone ones)."""
        room = self.n_batch
        plan: list[tuple[SlotRun, list[int], bool]] = []
        waiting = [r for r in self._runs if r.inputs and not r.finished]
        prefilling = [r for r in waiting if r.pending_prefill][:1]
        for run in [r for r in waiting if r.pending_prefill == 0] + prefilling:
            if room <= 0:
                break
            chunk = run.inputs[:room]
            room -= len(chunk)
            plan.append((run, chunk, len(chunk) == len(run.inputs)))
        return plan

    def _decode(self, plan: list[tuple[SlotRun, list[int], bool]]) -> int:
        batch = self._batch
        assert batch is not None, "the decoder is closed"
        i = 0
        for run, chunk, sample in plan:
            start = len(run.slot.cached)
            for j, token in enumerate(chunk):
                batch.token[i] = token
                batch.pos[i] = start + j
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = run.slot.seq_id
                batch.logits[i] = sample and j == len(chunk) - 1
                i += 1
        batch.n_tokens = i
        return int(llama_cpp.llama_decode(self.llm.ctx, batch))

    def _resync(self, plan: list[tuple[SlotRun, list[int], bool]]) -> None:
        """After a decode that stopped part-way: each sequence's `cached` is what its cells hold."""
        memory = llama_cpp.llama_get_memory(self.llm.ctx)
        for run, _chunk, _sample in plan:
            held = int(llama_cpp.llama_memory_seq_pos_max(memory, run.slot.seq_id)) + 1
            done = max(0, min(len(run.inputs), held - len(run.slot.cached)))
            run.slot.cached.extend(run.inputs[:done])
            del run.inputs[:done]
            run.pending_prefill = max(0, run.pending_prefill - done)

    def _evict_idle(self) -> bool:
        evicted = False
        for slot in self.slots:
            if slot.run is None and slot.cached:
                self._cut(slot, 0)
                evicted = True
        return evicted

    def _end_youngest(self) -> None:
        run = max((r for r in self._runs if not r.finished), key=lambda r: r.order)
        log.info("the context's cells are all in use: the youngest run (sequence %d) ends", run.slot.seq_id)
        # a run still evaluating its prompt has no answer to end: ending it "full" gave an empty answer
        # (finish_reason length) that looked complete; its source raises NoRoomInContext instead
        run.crowded = run.pending_prefill > 0
        run.full = not run.crowded
        run.token = None
        self.finish(run)
        self._cut(run.slot, 0)

    # -- slots, snapshots -------------------------------------------------------------------------

    def _choose(self, idle: list[Slot], tokens: Sequence[int]) -> Slot:
        """The idle slot holding the longest prefix of `tokens`, unless an empty slot is free and taking
        that one would cut more of its conversation than it saves (every prompt shares its first tokens
        with every other); else an empty slot, else the least recently used."""
        shared = {id(slot): common_prefix(slot.cached, list(tokens)) for slot in idle}
        best = max(idle, key=lambda s: (shared[id(s)], s.last_used))
        empty = next((s for s in idle if not s.cached), None)
        most = shared[id(best)]
        if most > 0 and (empty is None or most >= len(best.cached) - most):
            return best
        return empty or min(idle, key=lambda s: s.last_used)

    def _restore(self, slot: Slot, tokens: list[int], keep: int) -> tuple[int, int]:
        """A snapshot sharing more of `tokens` than the slot holds, restored into it: (kept, restored)."""
        store, key = self.snapshots, self.key
        if store is None or key is None or len(tokens) < self._min_tokens() or keep >= len(tokens) - 1:
            return keep, 0
        match = store.best(key, tokens)
        target = min(match.shared, len(tokens) - 1) if match is not None else 0
        if match is None or target <= keep:
            return keep, 0
        state = store.load(match)
        if not state:
            return keep, 0
        self._cut(slot, 0)
        if restore_seq(self.llm.ctx, slot.seq_id, state, target):
            slot.cached = list(tokens[:target])
            return target, target
        log.warning("a saved conversation cache could not be restored into sequence %d", slot.seq_id)
        slot.cached = []
        return 0, 0

    def _cut(self, slot: Slot, keep: int) -> int:
        """The slot's cells beyond `keep` dropped (its conversation saved first when it is worth a
        snapshot); returns how many it keeps (0 when llama.cpp could not trim: then cleared)."""
        if keep >= len(slot.cached):
            return len(slot.cached)
        self._save(slot)
        if keep <= 0 or not trim_seq(self.llm.ctx, slot.seq_id, keep):
            clear_seq(self.llm.ctx, slot.seq_id)
            slot.cached = []
            return 0
        del slot.cached[keep:]
        return keep

    def _save(self, slot: Slot) -> None:
        store, key = self.snapshots, self.key
        if store is None or key is None or len(slot.cached) < self._min_tokens():
            return
        state = seq_state(self.llm.ctx, slot.seq_id)
        if state:
            store.put(key, list(slot.cached), state)

    def _min_tokens(self) -> int:
        return self.snapshots.MIN_TOKENS if self.snapshots is not None else 256

    # -- the whole context ------------------------------------------------------------------------

    def evict_all(self) -> None:
        """Every slot saved (when worth it) and cleared, before llama-cpp-python's own path uses the
        context (its evaluation drops every sequence's cells beyond its own tokens). A run still going
        is ended."""
        for run in list(self._runs):
            self.finish(run)
        for slot in self.slots:
            self._cut(slot, 0)
            clear_seq(self.llm.ctx, slot.seq_id)

    def forget_all(self) -> None:
        """Every slot emptied and nothing saved (chats were deleted for good: no cache may keep their
        tokens); a run still going is ended."""
        for run in list(self._runs):
            self.finish(run)
        for slot in self.slots:
            clear_seq(self.llm.ctx, slot.seq_id)
            slot.cached = []

    def save_all(self) -> None:
        """Every slot's conversation put into the snapshot store (app quit, model unload)."""
        for slot in self.slots:
            self._save(slot)

    def close(self) -> None:
        """The runs' samplers and the batch freed (before the model is)."""
        for run in list(self._runs):
            self.finish(run)
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
