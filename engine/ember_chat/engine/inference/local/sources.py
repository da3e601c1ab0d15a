"""Token sources for token_stream.stream_events: llama-cpp-python's own single-sequence path (seq 0)
and a run of the batch decoder."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import llama_cpp

from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.errors import NoRoomInContext
from ember_chat.engine.inference.events import PrefillProgress, StepWanted
from ember_chat.engine.inference.grammar.sampling import generate_with_grammar
from ember_chat.engine.inference.llama.draft_model import DraftModel, ModelDrafter, drafts_with_model
from ember_chat.engine.inference.llama.greedy import generate_greedy, is_plain_greedy
from ember_chat.engine.inference.llama.loader import NULL_ABORT
from ember_chat.engine.inference.llama.logit_bias import LogitBias, generate_biased, generate_sampler
from ember_chat.engine.inference.llama.logprobs import token_logprob
from ember_chat.engine.inference.llama.speculative import (
    OFF_GRAMMAR,
    OFF_IMAGES,
    OFF_LOGPROBS,
    OFF_RECURRENT,
    NgramDrafter,
    SpeculationCounts,
    can_roll_back,
    generate_speculative,
)

if TYPE_CHECKING:
    from ember_chat.engine.core.logprobs import TokenLogprob
    from ember_chat.engine.inference.llama.answer_ngrams import AnswerNgrams
    from ember_chat.engine.inference.llama.batch_decode import BatchDecoder, SlotRun
    from ember_chat.engine.inference.llama.vision import VisionContext, VisionPrompt


class Seq0Source:
    """llama-cpp-python's `generate` (or grammar_sampling's) on sequence 0, from the longest prefix of
    the prompt already in the KV cache (`reused`). llama.cpp's abort callback is on during the prompt's
    evaluation only (it runs between graph nodes: worth its cost there alone)."""

    full = False

    def __init__(
        self,
        llm: llama_cpp.Llama,
        tokens: list[int],
        params: SamplingParams,
        reused: int,
        stopped: Callable[[], bool],
        abort_callback: object,
        piece: Callable[[int], bytes],
        vision: tuple[VisionContext, VisionPrompt] | None = None,
        restored: int = 0,
        draft: DraftModel | None = None,
        answers: AnswerNgrams | None = None,
    ) -> None:
        self._llm = llm
        self._answers = answers  # recent answers' n-grams (answer_ngrams.py): drafts; this answer joins them
        self._draft = draft  # the draft model loaded with the model, for "draft" and "auto" speculation
        self._tokens = tokens
        self._params = params
        self.reused = reused
        self.restored = restored
        self._stopped = stopped
        self._piece = piece
        self._vision = vision
        self._speculation: SpeculationCounts | None = None
        self._speculation_off: str | None = None  # why an answer asked to speculate did not (speculative.OFF_*)
        self._prefill_perf: tuple[float, int] | None = None  # llama.cpp's prompt counters, where speculation ran
        llama_cpp.llama_perf_context_reset(llm.ctx)
        self._abort_callback = abort_callback  # (the draft model's prompt evaluation takes it too)
        llama_cpp.llama_set_abort_callback(llm.ctx, abort_callback, None)

    def prefill(self) -> Iterator[PrefillProgress | StepWanted]:
        if self._vision is not None:
            context, prompt = self._vision
            yield from context.prefill(self._llm, prompt, self.reused, self._stopped)
            return
        yield from self._prefill_in_chunks()

    def _prefill_in_chunks(self) -> Iterator[PrefillProgress]:
        """A prompt longer than one batch is evaluated batch by batch here, with its progress after
        each (all but its last token: `generate` finds them in the KV cache and evaluates only that
        one). A short prompt is left to `generate` as it is, so it costs nothing extra."""
        llm, tokens, reused = self._llm, self._tokens, self.reused
        todo = len(tokens) - 1 - reused
        batch = max(1, llm.n_batch)
        if todo <= batch:
            return
        llm.n_tokens = reused  # (eval clears the KV cache beyond this position)
        done = 0
        while done < todo and not self._stopped():
            chunk = tokens[reused + done : reused + min(todo, done + batch)]
            llm.eval(chunk)
            done += len(chunk)
            yield PrefillProgress(done, todo, time.perf_counter_ns())

    def generate(self, tokens: list[int], grammar: str | None) -> Iterator[int]:
        """The token generator for these sampling parameters (from the longest prefix of `tokens` already
        in the KV cache): llama-cpp-python's, or under a grammar the one that asks the grammar only about
        the token chosen (grammar/sampling.py), or for plain greedy decoding the argmax of the logits
        (greedy.py), or with speculation (speculative.py) the same tokens verified several at a time; each
        with the request's logit_bias (logit_bias.py), which `Llama.generate` cannot take."""
        llm, params = self._llm, self._params
        bias = LogitBias(params.logit_bias, llm.n_vocab()) if params.logit_bias else None
        if self._speculation is None:  # (a tool call's restart under its grammar: the answer did speculate)
            self._speculation_off = self._why_not_speculating(params, grammar)
        chain = None
        if grammar is not None:
            gen = generate_with_grammar(llm, tokens, params, grammar, bias)
        elif params.speculative != "off" and self._why_not_speculating(params, grammar) is None:
            drafter = self._drafter(tokens, params)
            if drafter is not None:
                drafter.prepare(self._abort_callback)
            mode = "ngram" if params.speculative == "draft" and drafter is None else params.speculative
            self._speculation = self._speculation or SpeculationCounts(mode=mode)
            auto = params.speculative == "auto"
            # (sampled: the chain `Llama.generate` would build, drawing each verified row's token)
            chain = None if is_plain_greedy(params) else generate_sampler(llm, params)
            sampler = chain.sampler if chain is not None else None
            drafts = drafter if drafter is not None else NgramDrafter(tokens, answers=self._answers)
            gen = generate_speculative(llm, tokens, bias, self._speculation, drafts, auto=auto, sampler=sampler)
        elif is_plain_greedy(params):
            gen = generate_greedy(llm, tokens, bias)
        elif bias is not None:
            gen = generate_biased(llm, tokens, params, bias)
        else:
            gen = llm.generate(
                tokens,
                temp=params.temperature,
                top_k=params.top_k,
                top_p=params.top_p,
                min_p=params.min_p,
                repeat_penalty=params.repeat_penalty,
                presence_penalty=params.presence_penalty,
                frequency_penalty=params.frequency_penalty,
            )
        try:
            first = next(gen, None)
            if first is None:
                return
            if self._speculation is not None and self._prefill_perf is None:
                # llama.cpp counts every batch of several tokens as prompt evaluation, a verified draft's
                # too: the prompt's own counters are the ones read before the first token
                perf = llama_cpp.llama_perf_context(llm.ctx)
                self._prefill_perf = (perf.t_p_eval_ms, perf.n_p_eval)
            llama_cpp.llama_set_abort_callback(llm.ctx, NULL_ABORT, None)
            yield first
            yield from gen
        finally:
            gen.close()
            if chain is not None:
                chain.close()

    def _why_not_speculating(self, params: SamplingParams, grammar: str | None) -> str | None:
        """Why this answer, asked to speculate, cannot (speculative.OFF_*); None: it can, or was not asked."""
        if params.speculative == "off":
            return None
        if grammar is not None:
            return OFF_GRAMMAR
        if self._vision is not None:
            return OFF_IMAGES
        if params.logprobs is not None:
            return OFF_LOGPROBS
        if not can_roll_back(self._llm):
            return OFF_RECURRENT
        return None

    def speculation_off(self) -> str | None:
        return self._speculation_off

    def _drafter(self, tokens: list[int], params: SamplingParams) -> ModelDrafter | None:
        """The draft model's drafter for "draft" and "auto" when one is loaded; None: n-gram drafts (the
        mode reported as "ngram" when "draft" was asked for without a draft model)."""
        if self._draft is None or not drafts_with_model(params):
            return None
        return ModelDrafter(self._draft, tokens)

    def speculation(self) -> SpeculationCounts | None:
        return self._speculation

    def logprob(self, token: int, top: int) -> TokenLogprob | None:
        return token_logprob(self._llm.ctx, self._llm.n_vocab(), token, top, self._piece)

    def perf(self) -> tuple[float, int, float, int] | None:
        """llama.cpp's (prefill ms, tokens, decode ms, tokens): with speculation, what came after the
        prompt (verified drafts included, their rejected tokens too) is decode."""
        perf = llama_cpp.llama_perf_context(self._llm.ctx)
        if self._prefill_perf is None:
            return (perf.t_p_eval_ms, perf.n_p_eval, perf.t_eval_ms, perf.n_eval)
        t_prompt, n_prompt = self._prefill_perf
        after = (perf.t_p_eval_ms - t_prompt + perf.t_eval_ms, perf.n_p_eval - n_prompt + perf.n_eval)
        return (t_prompt, n_prompt, *after)

    def image_encode_ms(self) -> float | None:
        return self._vision[0].encode_ms if self._vision is not None else None

    def end(self, generated: list[int]) -> None:
        llama_cpp.llama_set_abort_callback(self._llm.ctx, NULL_ABORT, None)
        if self._answers is not None:
            self._answers.add(generated)


STEP = StepWanted()


class BatchSource:
    """A run of the batch decoder (batch_decode.py): it yields StepWanted whenever it waits for the
    decoder's next step (the caller steps once for all waiting runs, then resumes it). llama.cpp's
    counters are the whole batch's: none are given for a run."""

    def __init__(self, decoder: BatchDecoder, run: SlotRun, stopped: Callable[[], bool]) -> None:
        self._decoder = decoder
        self._run = run
        self._stopped = stopped
        self.reused = run.reused
        self.restored = run.restored

    @property
    def full(self) -> bool:
        return self._run.full

    def prefill(self) -> Iterator[PrefillProgress | StepWanted]:
        run = self._run
        total = run.pending_prefill
        shown = False
        while run.pending_prefill > 0 and not run.finished and not self._stopped():
            yield STEP
            done = total - run.pending_prefill
            if done and (shown or done < total):  # (a prompt evaluated in one step needs no progress)
                shown = True
                yield PrefillProgress(done, total, time.perf_counter_ns())
        if run.crowded:
            raise NoRoomInContext(
                f"The model's context ({self._decoder.llm.n_ctx():,} tokens) had no room left for this answer: "
                "the answers being generated at the same time hold all of it. Try again once they have finished, "
                "or load the model with a longer context or fewer parallel sequences."
            )

    def generate(self, tokens: list[int], grammar: str | None) -> Iterator[int | StepWanted]:
        assert grammar is None, "a generation under a grammar is never batched"
        run, decoder = self._run, self._decoder
        while True:
            while run.token is None:
                if run.finished:
                    return
                yield STEP
            token = run.token
            yield token
            decoder.accept(run, token)  # (only when the caller asks for the next one)

    def logprob(self, token: int, top: int) -> TokenLogprob | None:
        return None

    def perf(self) -> tuple[float, int, float, int] | None:
        return None

    def speculation(self) -> SpeculationCounts | None:
        return self._run.speculation

    def speculation_off(self) -> str | None:
        return self._run.speculation_off

    def image_encode_ms(self) -> float | None:
        return None

    def end(self, generated: list[int]) -> None:
        self._decoder.finish(self._run, generated)
