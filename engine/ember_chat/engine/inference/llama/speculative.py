"""Speculative decoding on sequence 0: drafts (n-grams of the history, or a draft model's) verified
several tokens at a time, greedy or sampled.

On a CPU, decode is memory-bound: evaluating a few tokens in one `llama_decode` costs about what one
does. When the answer copies its input (code pasted to be edited, a document quoted), the tokens that
followed the last few tokens earlier in the history are a good guess for what comes next. Each step
evaluates [the last chosen token, *the draft] in one `llama_decode` with logits for every position,
takes the greedy token at each (the first largest logit, with the request's logit_bias, exactly as
greedy.generate_greedy does), keeps the longest prefix of the draft that agrees, and removes the rest
from the KV cache. Every token yielded is the token generate_greedy would have chosen from the same
logits: the output is decoding's own, only faster when drafts are accepted — except where the model's two
best tokens are nearly tied, as llama.cpp's CPU kernels round a batch of several rows differently from
one row (batch_decode.py says the same of batched runs).

Ember's own `llama_batch` (not llama-cpp-python's `logits_all`, which keeps an n_ctx × n_vocab score
buffer): only the few verified positions have logits.

Sampled tokens (temperature > 0, penalties, top-k/top-p/min-p: the request's own sampler chain) are
verified the same way: each row's token is drawn by the chain exactly as decoding without speculation
draws it, and the draft is kept while the drawn tokens equal it. A draft is a function of the history
(n-grams, or a draft model's greedy choice), so this is speculative sampling's acceptance with a
point-mass proposal (accept with probability p(x), else draw from p without x): each token has the
distribution it has without speculation. The chain draws one random number per token given, in the
same order, so with a seed the answer is often the one decoding without speculation gives — not always:
a verify step's rows go through other kernels than one row (measured up to 1 logit apart on Gemma 3
270M), and a draw near the edge between two tokens tips there, as the greedy choice at a near tie does.

Each step is timed: the plain steps (one token: the first PLAIN_PROBE of the answer, and wherever no draft
was found) give a token's cost without speculation, the verify steps what the drafts cost; their ratio is
the answer's speedup. In "auto" mode, once AUTO_MIN_STEPS drafts have been verified, drafting stops for
the rest of the answer when the verify steps made tokens slower than plain steps would have.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import llama_cpp

from ember_chat.engine.errors import GenerationError
from ember_chat.engine.inference.kv.prefix import resume_point
from ember_chat.engine.inference.llama.greedy import argmax_token
from ember_chat.engine.inference.llama.logit_bias import LogitBias

if TYPE_CHECKING:
    from ember_chat.engine.inference.llama.answer_ngrams import AnswerNgrams

# Draft length bounds: one token is the least worth a batched step; 16 keeps a rejected draft's
# wasted compute small on a CPU (the batch's cost grows once it stops being memory-bound).
K_MIN = 1
K_MAX = 16
K_START = 4
# The longest n-gram looked up first: 3 tokens say more about what follows than 1 (fewer wrong drafts
# in free prose), and falling back to 2 and 1 still finds a continuation in copied text whose longer
# context was never seen; the adaptive length keeps a wrong short match's cost to one token.
NGRAM_MAX = 3
NGRAM_MIN = 1
# Plain one-token steps at the start of every answer: a token's cost without speculation, measured.
PLAIN_PROBE = 2
# "auto": verified drafts before it judges, and the speedup of the verify steps below which it stops.
AUTO_MIN_STEPS = 4
AUTO_PAYS = 1.0
# ... and, stopped, the drafts it still looks up (for nothing: no step verifies them) and compares with
# the tokens the model chooses: once SHADOW_MIN drafted tokens have been compared, a share matched of
# AUTO_RESUME or more (the answer has started copying) starts drafting again.
SHADOW_MIN = 8
AUTO_RESUME = 0.6

# Why an answer that asked for speculation decodes without it (GenerationMetrics.speculative_off):
OFF_GRAMMAR = "grammar"  # a grammar (JSON schema, response format): its state cannot step back over a rejected draft
OFF_IMAGES = "images"  # an image's embeddings are not tokens to draft from
OFF_LOGPROBS = "logprobs"  # log-probabilities are read from the last evaluated row, not the chosen token's
OFF_RECURRENT = "recurrent"  # the model's memory (Mamba, RWKV…) cannot drop a rejected draft's cells


@dataclass
class SpeculationCounts:
    """One generation's speculation: tokens drafted and, of those, accepted by the target model; its
    steps and their time, plain (one token) and verifying (the last token and a draft)."""

    mode: str = "ngram"
    drafted: int = 0
    accepted: int = 0
    plain_steps: int = 0
    plain_s: float = 0.0
    verify_steps: int = 0
    verify_s: float = 0.0
    stopped: bool = False  # "auto" has stopped drafting (now): it cost more than it saved
    stops: int = 0  # how many times it stopped
    # the verify steps since drafting last started, the tokens they made and their time (auto judges them
    # alone); the shadow draft's tokens still to compare; the shadow drafts' tokens compared and matched
    _window_steps: int = field(default=0, repr=False)
    _window_tokens: int = field(default=0, repr=False)
    _window_s: float = field(default=0.0, repr=False)
    _shadow: list[int] = field(default_factory=list, repr=False)
    _shadow_compared: int = field(default=0, repr=False)
    _shadow_matched: int = field(default=0, repr=False)

    def _step_s(self) -> float | None:
        return self.plain_s / self.plain_steps if self.plain_steps and self.plain_s > 0 else None

    def speedup(self) -> float | None:
        """The answer's decode time without speculation (each of its tokens at a plain step's mean time)
        over its time with it; None until both kinds of step have been timed."""
        step = self._step_s()
        if step is None or not self.verify_steps:
            return None
        tokens = self.plain_steps + self.verify_steps + self.accepted
        return tokens * step / (self.plain_s + self.verify_s)

    @property
    def drafting(self) -> bool:
        """Whether the next step may draft: the first PLAIN_PROBE steps are plain, and "auto" may have stopped."""
        return self.plain_steps >= PLAIN_PROBE and not self.stopped

    def plain_step(self, seconds: float) -> None:
        self.plain_s += seconds
        self.plain_steps += 1

    def verify_step(self, seconds: float, drafted: int, accepted: int, auto: bool) -> None:
        """A verify step's time and outcome; with `auto`, once AUTO_MIN_STEPS have been verified since
        drafting started, it stops if those steps made tokens slower than plain steps would have."""
        self.verify_s += seconds
        self.verify_steps += 1
        self.drafted += drafted
        self.accepted += accepted
        self._window_steps += 1
        self._window_tokens += 1 + accepted
        self._window_s += seconds
        step = self._step_s()
        if not auto or self._window_steps < AUTO_MIN_STEPS or step is None:
            return
        if self._window_tokens * step / self._window_s < AUTO_PAYS:
            self.stopped = True
            self.stops += 1
            self._shadow_compared = self._shadow_matched = 0

    def shadow(self, draft: list[int]) -> None:
        """Stopped: the draft it would have verified, to compare with the tokens chosen next."""
        if self.stopped and not self._shadow:
            self._shadow = list(draft)

    def chosen(self, token: int) -> None:
        """A token the model chose: compared with the shadow draft's next; resumes drafting where the
        shadow drafts would have paid."""
        if not self._shadow:
            return
        self._shadow_compared += 1
        if self._shadow.pop(0) == token:
            self._shadow_matched += 1
        else:
            self._shadow.clear()
        compared, matched = self._shadow_compared, self._shadow_matched
        if compared >= SHADOW_MIN and matched >= AUTO_RESUME * compared:
            self.stopped = False
            self._shadow.clear()
            self._window_steps = self._window_tokens = 0
            self._window_s = 0.0
        elif compared >= 4 * SHADOW_MIN:  # (the older comparisons count half: recent ones decide)
            self._shadow_compared, self._shadow_matched = compared // 2, matched // 2

    def verify_speedup(self) -> float | None:
        """The same, of the verify steps alone: what drafting gained (> 1) or cost (< 1)."""
        step = self._step_s()
        if step is None or not self.verify_steps or self.verify_s <= 0:
            return None
        return (self.verify_steps + self.accepted) * step / self.verify_s


class Drafter(Protocol):
    """Proposes the tokens likely to follow the history; told each token the answer takes."""

    def append(self, token: int) -> None: ...

    def propose(self, limit: int | None = None) -> list[int]: ...

    def feedback(self, drafted: int, accepted: int) -> None: ...


class NgramDrafter:
    """Drafts from the token history (the prompt, then what was generated): the tokens that followed the
    most recent earlier occurrence of its last n tokens (n from NGRAM_MAX down to NGRAM_MIN), up to `k`
    of them; `k` adapts to acceptance (doubled after a fully accepted draft, halved after a rejection).

    An index from each n-gram to where its most recent occurrence was followed is kept up to date as
    the history grows, so a proposal costs a few dictionary look-ups, not a scan of the history.

    `answers`: the model's recent answers' n-grams (answer_ngrams.py), looked up for an n where the
    history has no continuation (the history first: it is what the answer copies), before a shorter n."""

    cheap = True  # a proposal costs a few look-ups: "auto", stopped, still looks them up (shadow drafts)

    def __init__(
        self,
        history: list[int],
        k: int = K_START,
        k_min: int = K_MIN,
        k_max: int = K_MAX,
        answers: AnswerNgrams | None = None,
    ) -> None:
        self.history = list(history)
        self.answers = answers
        self.k_min, self.k_max = k_min, k_max
        self.k = max(k_min, min(k_max, k))
        self._index: dict[tuple[int, ...], int] = {}
        self._indexed = 0  # n-grams ending before this position are in the index

    def append(self, token: int) -> None:
        self.history.append(token)

    def propose(self, limit: int | None = None) -> list[int]:
        """Up to min(k, limit) tokens likely to follow the history; [] when none is found."""
        size = self.k if limit is None else min(self.k, limit)
        h = self.history
        n_hist = len(h)
        if size <= 0 or n_hist < 2:
            return []
        # Index the n-grams that end before the last token (each followed by a token already known), so a
        # look-up of the history's own suffix finds an earlier occurrence, never itself.
        index = self._index
        for end in range(self._indexed, n_hist - 1):
            for n in range(NGRAM_MIN, NGRAM_MAX + 1):
                if end + 1 >= n:
                    index[tuple(h[end + 1 - n : end + 1])] = end + 1
        self._indexed = max(self._indexed, n_hist - 1)
        answers = self.answers
        for n in range(min(NGRAM_MAX, n_hist - 1), NGRAM_MIN - 1, -1):
            key = tuple(h[n_hist - n :])
            follow = index.get(key)
            if follow is not None:
                return h[follow : follow + size]
            # (a longer match in another answer says more than a shorter one in the history)
            draft = answers.follow(key, size) if answers is not None else None
            if draft:
                return draft
        return []

    def feedback(self, drafted: int, accepted: int) -> None:
        """Adapt the draft length to how the last draft went."""
        if drafted == 0:
            return
        if accepted == drafted:
            self.k = min(self.k_max, self.k * 2)
        else:
            self.k = max(self.k_min, self.k // 2)


def can_roll_back(llm: llama_cpp.Llama) -> bool:
    """Whether rejected draft cells can be removed from this model's memory (not a recurrent or hybrid
    model's: Mamba, RWKV, Granite 4… keep a state, not cells)."""
    model = llm.model
    return not (llama_cpp.llama_model_is_recurrent(model) or llama_cpp.llama_model_is_hybrid(model))


def generate_speculative(
    llm: llama_cpp.Llama,
    tokens: list[int],
    bias: LogitBias | None = None,
    counts: SpeculationCounts | None = None,
    drafter: Drafter | None = None,
    auto: bool = False,
    clock: Callable[[], float] = time.perf_counter,
    sampler: llama_cpp.llama_sampler_p | None = None,
) -> Iterator[int]:
    """generate_greedy's tokens (from the longest prefix of `tokens` already in the KV cache, endless
    until closed), or with `sampler` (a sampler chain, as logit_bias.generate_sampler builds it) the
    chain's, verified several at a time from the drafter's drafts (by default n-grams of `tokens` and
    the answer); `counts` gets the tokens drafted and accepted and the steps' times. `auto`: drafting
    stops for the rest of the answer where it does not pay (module docstring), the steps timed by `clock`.
    A model whose memory cannot drop cells decodes without drafts (one token a step)."""
    rolls_back = can_roll_back(llm)
    counts = counts if counts is not None else SpeculationCounts()
    n_vocab, n_ctx, ctx = llm.n_vocab(), llm.n_ctx(), llm.ctx
    capacity = max(1, min(K_MAX + 1, llm.n_batch))
    batch = llama_cpp.llama_batch_init(capacity, 0, 1)
    memory = llama_cpp.llama_get_memory(ctx)

    def pick(row: int) -> int:
        if sampler is None:
            return argmax_token(ctx, row, n_vocab)
        return int(llama_cpp.llama_sampler_sample(sampler, ctx, row))  # (it also accepts the token)

    def choose(row: int) -> int:
        if bias is None:
            return pick(row)
        return bias.choose(ctx, row, lambda: pick(row))

    unseen = 0  # accepted draft tokens in the cache that the caller has not been given (yet)
    try:
        llm.eval(resume_point(llm, tokens))
        drafter = drafter if drafter is not None else NgramDrafter(tokens)
        token = choose(-1)
        while True:
            drafter.append(token)
            counts.chosen(token)
            yield token
            # (room: the last token plus the draft must fit the context and the batch)
            room = min(capacity - 1, n_ctx - llm.n_tokens - 1) if rolls_back else 0
            if auto and counts.stopped and room > 0 and isinstance(drafter, NgramDrafter) and drafter.cheap:
                counts.shadow(drafter.propose(room))
            started = clock()  # (a draft's cost is the step's: a draft model's evaluations are not free)
            draft = drafter.propose(room) if room > 0 and counts.drafting else []
            if not draft:
                llm.eval([token])
                token = choose(-1)
                counts.plain_step(clock() - started)
                continue
            chosen = _verify(llm, batch, memory, token, draft, choose)
            accepted = len(chosen) - 1
            counts.verify_step(clock() - started, len(draft), accepted, auto)
            drafter.feedback(len(draft), accepted)
            # (the accepted tokens are in the KV cache already; the last chosen one is evaluated next step)
            for i, t in enumerate(chosen[:-1]):
                drafter.append(t)
                counts.chosen(t)
                unseen = accepted - i - 1  # (those after t: if the caller stops at t, never given)
                yield t
            unseen = 0
            token = chosen[-1]
    finally:
        if unseen:  # the answer ended before them: the cache holds what was given, as without speculation
            llama_cpp.llama_memory_seq_rm(memory, 0, llm.n_tokens - unseen, -1)
            llm.n_tokens -= unseen
        llama_cpp.llama_batch_free(batch)


def _verify(
    llm: llama_cpp.Llama,
    batch: llama_cpp.llama_batch,
    memory: llama_cpp.llama_memory_t,
    last: int,
    draft: list[int],
    choose: Callable[[int], int],
) -> list[int]:
    """verify_draft on seq 0, which llama-cpp-python's record of the cache (`n_tokens`, `input_ids`, which
    prefix.resume_point reads) follows: it ends up holding `last` and the accepted draft tokens, as if each
    had been evaluated alone. The rejected cells are removed before any token is yielded, so closing the
    generator at any point leaves both consistent."""
    n_past = llm.n_tokens
    llama_cpp.llama_memory_seq_rm(memory, 0, n_past, -1)  # (as Llama.eval does: nothing stale beyond)
    chosen = verify_draft(llm.ctx, batch, 0, n_past, last, draft, choose)
    if chosen is None:
        raise GenerationError("llama.cpp could not evaluate the draft.")
    kept = len(chosen)  # last + the accepted draft tokens
    llm.input_ids[n_past : n_past + kept] = [last, *draft][:kept]
    llm.n_tokens = n_past + kept
    return chosen


def verify_draft(
    ctx: llama_cpp.llama_context_p,
    batch: llama_cpp.llama_batch,
    seq_id: int,
    n_past: int,
    last: int,
    draft: list[int],
    choose: Callable[[int], int],
) -> list[int] | None:
    """Evaluate [last, *draft] at positions n_past… of sequence `seq_id` in one llama_decode, with logits
    at every position; the target's tokens: the draft's agreeing prefix and the target's own token after
    it (`choose(row)`). The sequence keeps the cells of `last` and the accepted draft tokens, none beyond.
    None when llama.cpp could not evaluate the batch (no cells free, aborted): nothing beyond n_past kept."""
    memory = llama_cpp.llama_get_memory(ctx)
    step = [last, *draft]
    batch.n_tokens = len(step)
    for i, t in enumerate(step):
        batch.token[i] = t
        batch.pos[i] = n_past + i
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = seq_id
        batch.logits[i] = 1
    if llama_cpp.llama_decode(ctx, batch) != 0:
        llama_cpp.llama_memory_seq_rm(memory, seq_id, n_past, -1)
        return None
    chosen: list[int] = []
    for i in range(len(step)):
        t = choose(i)
        chosen.append(t)
        if i == len(draft) or t != draft[i]:
            break
    llama_cpp.llama_memory_seq_rm(memory, seq_id, n_past + len(chosen), -1)
    return chosen
