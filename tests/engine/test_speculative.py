"""Prompt-lookup speculative decoding (engine/inference/llama/speculative.py): the n-gram drafter finds the
continuation of the history's last tokens and adapts its draft length; verified in one llama_decode per
step, the tokens are exactly plain greedy decoding's (generate_greedy), on the tiny generated model and on
the real chat starter, on a prompt the model copies (drafts accepted) and on a free one; the KV cache and
llama-cpp-python's record of it stay consistent for the next turn's prefix reuse and after a cancel."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import llama_cpp
import pytest

from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.inference.events import Finished
from ember_chat.engine.inference.kv.prefix import common_prefix
from ember_chat.engine.inference.llama.batch_decode import BatchDecoder
from ember_chat.engine.inference.llama.greedy import generate_greedy
from ember_chat.engine.inference.llama.loader import NULL_ABORT, open_llama
from ember_chat.engine.inference.llama.logit_bias import LogitBias
from ember_chat.engine.inference.llama.speculative import (
    AUTO_MIN_STEPS,
    K_MAX,
    K_MIN,
    PLAIN_PROBE,
    NgramDrafter,
    SpeculationCounts,
    generate_speculative,
)
from ember_chat.engine.inference.local.runtime import LocalRuntime
from ember_chat.engine.inference.local.sources import Seq0Source
from tests.helpers.batch_runs import batch_tokens
from tests.helpers.cli import cli
from tests.helpers.gguf_factory import write_tiny_mamba, write_tiny_model
from tests.helpers.kv_checks import assert_cache_matches_record

PASSAGE = (
    "The lighthouse keeper climbed the spiral stairs every evening at dusk, lit the great lamp, "
    "and wrote the weather, the ships he saw and the state of the sea in a leather-bound log."
)
COPY_PROMPT = f"Repeat this text exactly.\nText: {PASSAGE}\nRepeated: {PASSAGE}\nText: {PASSAGE}\nRepeated:"
FREE_PROMPT = "Once upon a time, in a small village by the sea, there lived an old fisherman who"
N = 48


def take(gen: Iterator[int], n: int) -> list[int]:
    try:
        return list(itertools.islice(gen, n))
    finally:
        gen.close()  # type: ignore[attr-defined]


def test_the_drafter_proposes_what_followed_the_last_tokens_most_recently() -> None:
    drafter = NgramDrafter([1, 2, 3, 4, 5, 9, 1, 2, 3, 6, 7, 8, 1, 2, 3], k=4)
    # "1 2 3" was last followed by "6 7 8 1" (the most recent earlier occurrence, not the first)
    assert drafter.propose() == [6, 7, 8, 1]
    assert drafter.propose(limit=2) == [6, 7]
    drafter.append(6)  # "2 3 6" → followed by 7 8 1 2 3 (the draft may run into the history's end)
    assert drafter.propose() == [7, 8, 1, 2]
    drafter.append(42)  # a token never seen before: nothing to draft
    assert drafter.propose() == []
    assert NgramDrafter([]).propose() == [] and NgramDrafter([5]).propose() == []


def test_the_drafter_prefers_the_longest_matching_ngram() -> None:
    # the last token 3 was most recently followed by 8, but "1 2 3" (3 tokens) by 4
    drafter = NgramDrafter([1, 2, 3, 4, 4, 3, 8, 8, 1, 2, 3], k=2)
    assert drafter.propose() == [4, 4]


def test_the_draft_length_grows_on_full_acceptance_and_shrinks_on_rejection() -> None:
    drafter = NgramDrafter([], k=4)
    drafter.feedback(4, 4)
    assert drafter.k == 8
    for _ in range(5):
        drafter.feedback(drafter.k, drafter.k)
    assert drafter.k == K_MAX
    drafter.feedback(16, 3)
    assert drafter.k == 8
    for _ in range(6):
        drafter.feedback(drafter.k, 0)
    assert drafter.k == K_MIN
    drafter.feedback(0, 0)  # nothing drafted: nothing learnt
    assert drafter.k == K_MIN


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[llama_cpp.Llama]:
    path = write_tiny_model(tmp_path_factory.mktemp("spec") / "tiny.gguf")
    model = open_llama(LoadConfig(path, n_ctx=1024, n_batch=64, parallel=1, threads=1))
    yield model
    model.close()


@pytest.fixture(scope="module")
def starter(chat_starter_model: Path) -> Iterator[llama_cpp.Llama]:
    model = open_llama(LoadConfig(chat_starter_model, n_ctx=1024, n_batch=64, parallel=1, threads=1))
    yield model
    model.close()


def greedy(llm: llama_cpp.Llama, tokens: list[int], n: int, bias: LogitBias | None = None) -> list[int]:
    llm.reset()
    return take(generate_greedy(llm, tokens, bias), n)


def speculative(
    llm: llama_cpp.Llama, tokens: list[int], n: int, bias: LogitBias | None = None
) -> tuple[list[int], SpeculationCounts]:
    counts = SpeculationCounts()
    return take(generate_speculative(llm, tokens, bias, counts), n), counts


def test_the_tiny_model_decodes_the_same_tokens_with_speculation(tiny: llama_cpp.Llama) -> None:
    for text in (COPY_PROMPT, FREE_PROMPT):
        tokens = tiny.tokenize(text.encode())
        expected = greedy(tiny, tokens, N)
        tiny.reset()
        got, counts = speculative(tiny, tokens, N)
        assert got == expected, text
        assert counts.drafted > 0 and 0 <= counts.accepted <= counts.drafted  # (verified steps ran)
        assert_cache_matches_record(tiny)


@pytest.mark.parametrize("text", [COPY_PROMPT, FREE_PROMPT])
def test_the_chat_starter_decodes_the_same_tokens_with_speculation(starter: llama_cpp.Llama, text: str) -> None:
    tokens = starter.tokenize(text.encode())
    expected = greedy(starter, tokens, N)
    starter.reset()
    got, counts = speculative(starter, tokens, N)
    assert got == expected
    assert_cache_matches_record(starter)
    if text == COPY_PROMPT:
        assert counts.accepted > 0, counts  # the passage is copied: its drafts are accepted
        assert starter.detokenize(got).decode().strip().startswith("The lighthouse keeper")


def test_a_logit_bias_is_applied_to_every_verified_position(starter: llama_cpp.Llama) -> None:
    tokens = starter.tokenize(COPY_PROMPT.encode())
    plain = greedy(starter, tokens, 12)
    bias = LogitBias(((plain[3], -100.0),), starter.n_vocab())  # ban a token the copy needs
    expected = greedy(starter, tokens, N, bias)
    assert plain[3] not in expected
    starter.reset()
    assert speculative(starter, tokens, N, bias)[0] == expected


def test_a_second_turn_reuses_the_speculative_turns_cache(starter: llama_cpp.Llama) -> None:
    tokens = starter.tokenize(COPY_PROMPT.encode())
    starter.reset()
    first, _ = speculative(starter, tokens, N)
    assert_cache_matches_record(starter)
    follow = [*tokens, *first, *starter.tokenize(b"\nText: The sea", add_bos=False)]
    held = starter.input_ids[: starter.n_tokens].tolist()
    assert common_prefix(held, follow) >= len(tokens) + len(first) - 1  # the answer is in the cache
    expected = greedy(starter, follow, N)  # (from a fresh cache)
    starter.reset()
    speculative(starter, tokens, N)
    llama_cpp.llama_perf_context_reset(starter.ctx)
    got, _ = speculative(starter, follow, N)
    assert got == expected
    perf = llama_cpp.llama_perf_context(starter.ctx)
    assert perf.n_p_eval + perf.n_eval < len(follow)  # the shared prefix was not evaluated again


def test_a_cancel_mid_stream_leaves_the_cache_consistent(starter: llama_cpp.Llama) -> None:
    tokens = starter.tokenize(COPY_PROMPT.encode())
    expected = greedy(starter, tokens, N)
    for cut in (1, 5, 17):
        starter.reset()
        got, _ = speculative(starter, tokens, cut)  # closed after `cut` tokens, within a verified run
        assert got == expected[:cut]
        assert_cache_matches_record(starter)
        # it holds what was given (accepted draft tokens after the last one given are dropped)
        held = starter.input_ids[: starter.n_tokens].tolist()
        assert len(tokens) + cut - 1 <= len(held) <= len(tokens) + cut and held == [*tokens, *expected][: len(held)]
        assert take(generate_greedy(starter, tokens), N) == expected  # the next eval works, as a fresh run
        starter.reset()
        speculative(starter, tokens, cut)
        assert take(generate_greedy(starter, [*tokens, *expected[:cut]]), N - cut) == expected[cut:]


def test_no_draft_goes_past_the_context(tmp_path: Path) -> None:
    path = write_tiny_model(tmp_path / "tiny.gguf")
    llm = open_llama(LoadConfig(path, n_ctx=256, n_batch=64, parallel=1, threads=1))
    try:
        tokens = llm.tokenize(f"{FREE_PROMPT}\n{FREE_PROMPT}".encode())  # (a byte-level vocabulary: ~150 tokens)
        room = llm.n_ctx() - len(tokens)
        expected = greedy(llm, tokens, room)
        llm.reset()
        got, counts = speculative(llm, tokens, room)
        assert got == expected and counts.drafted > 0
        assert llm.n_tokens <= llm.n_ctx()
        assert_cache_matches_record(llm)
    finally:
        llm.close()


def test_speculation_is_auto_by_default_and_a_sampling_option() -> None:
    assert SamplingParams().speculative == "auto"
    assert "speculative" not in SamplingParams().to_dict()  # (saved chats stay as they were)
    for mode in ("off", "ngram", "draft"):
        chosen = SamplingParams(temperature=0.0, speculative=mode)
        assert SamplingParams.from_dict(chosen.to_dict()) == chosen
    with pytest.raises(InvalidParameter, match="speculative"):
        SamplingParams(speculative="medusa")


class WrongDrafter:
    """Drafts a token the model never chooses next (the one it chose last), and makes the clock say a
    verify step took twice a plain step: the drafts cost and never pay."""

    def __init__(self, clock: StepClock) -> None:
        self.clock = clock
        self.last = -1

    def append(self, token: int) -> None:
        self.last = token

    def propose(self, limit: int | None = None) -> list[int]:
        self.clock.step = 2.0
        return [self.last, self.last]

    def feedback(self, drafted: int, accepted: int) -> None:
        self.clock.step = 1.0


class StepClock:
    """A clock that advances `step` at each reading: a step timed between two readings lasts `step`."""

    def __init__(self) -> None:
        self.now = 0.0
        self.step = 1.0

    def __call__(self) -> float:
        self.now += self.step / 2
        return self.now


def test_auto_stops_drafting_for_the_answer_once_drafts_do_not_pay(tiny: llama_cpp.Llama) -> None:
    tokens = tiny.tokenize(FREE_PROMPT.encode())
    expected = greedy(tiny, tokens, N)
    for auto in (True, False):
        tiny.reset()
        clock, counts = StepClock(), SpeculationCounts()
        gen = generate_speculative(tiny, tokens, None, counts, WrongDrafter(clock), auto=auto, clock=clock)
        got = take(gen, N)
        assert got == expected  # (the output never depends on the drafts)
        assert counts.plain_steps >= PLAIN_PROBE and counts.verify_speedup() is not None
        if auto:  # judged after AUTO_MIN_STEPS verify steps, then plain steps to the end
            assert counts.stopped and counts.verify_steps == AUTO_MIN_STEPS
            assert counts.plain_steps == N - 1 - AUTO_MIN_STEPS and counts.verify_speedup() < 1
        else:  # asked for by name: it drafts to the end
            assert not counts.stopped and counts.verify_steps > AUTO_MIN_STEPS
        assert counts.accepted == 0 and counts.drafted == 2 * counts.verify_steps
        assert_cache_matches_record(tiny)


def test_the_speedup_is_the_answers_time_without_speculation_over_its_time_with_it() -> None:
    counts = SpeculationCounts(accepted=30, plain_steps=10, plain_s=1.0, verify_steps=10, verify_s=2.0)
    # 10 plain + 10 verify steps made 50 tokens in 3.0 s; at 0.1 s a token they take 5.0 s without
    assert counts.speedup() == pytest.approx(5.0 / 3.0)
    assert counts.verify_speedup() == pytest.approx(4.0 / 2.0)  # 40 tokens in 2.0 s vs 4.0 s
    assert SpeculationCounts(verify_steps=3, verify_s=1.0).speedup() is None  # (no plain step timed)


def test_auto_on_a_copying_prompt_keeps_drafting_and_measures_its_speedup(starter: llama_cpp.Llama) -> None:
    tokens = starter.tokenize(COPY_PROMPT.encode())
    expected = greedy(starter, tokens, N)
    starter.reset()
    counts = SpeculationCounts(mode="auto")
    assert take(generate_speculative(starter, tokens, None, counts, auto=True), N) == expected
    assert counts.accepted > 0 and counts.plain_steps >= PLAIN_PROBE
    assert counts.speedup() is not None and counts.speedup() > 0


def seq0_tokens(
    llm: llama_cpp.Llama, tokens: list[int], params: SamplingParams, n: int
) -> tuple[list[int], Seq0Source]:
    llm.reset()
    source = Seq0Source(llm, tokens, params, 0, lambda: False, NULL_ABORT, lambda t: llm.detokenize([t]))
    return take(source.generate(tokens, None), n), source


def test_the_single_sequence_path_speculates_when_asked_for(starter: llama_cpp.Llama) -> None:
    tokens = starter.tokenize(COPY_PROMPT.encode())
    expected, plain = seq0_tokens(starter, tokens, SamplingParams(temperature=0.0, speculative="off"), N)
    assert plain.speculation() is None
    got, source = seq0_tokens(starter, tokens, SamplingParams(temperature=0.0, speculative="ngram"), N)
    counts = source.speculation()
    assert got == expected and counts is not None and counts.accepted > 0
    # log-probabilities are read from the last evaluated row: no speculation with them
    _, with_logprobs = seq0_tokens(starter, tokens, SamplingParams(temperature=0.0, speculative="ngram", logprobs=2), 4)
    assert with_logprobs.speculation() is None and with_logprobs.speculation_off() == "logprobs"
    assert plain.speculation_off() is None and source.speculation_off() is None  # ("off" asked for nothing)


def test_run_speculative_ngram_prints_the_same_answer_and_its_counts(chat_starter_model: Path, tmp_path: Path) -> None:
    def run(mode: str) -> tuple[str, dict[str, object]]:
        out = cli("run", "--model", str(chat_starter_model), "--mode", "complete", "--prompt", COPY_PROMPT,
                  "--temperature", "0", "--max-tokens", "40", "--ctx", "1024", "--threads", "1", "--json",
                  "--speculative", mode, data_dir=tmp_path)  # fmt: skip
        assert out.returncode == 0, out.stderr
        *text, last = out.stdout.rstrip("\n").split("\n")
        return "\n".join(text), json.loads(last)

    off_text, off = run("off")
    on_text, on = run("ngram")
    assert on_text == off_text and "lighthouse" in on_text
    assert off["speculative_drafted"] is None and off["speculative_accepted"] is None
    assert isinstance(on["speculative_accepted"], int) and isinstance(on["speculative_drafted"], int)
    assert 0 < on["speculative_accepted"] <= on["speculative_drafted"]
    assert on["output_tokens"] == off["output_tokens"] == 40


@pytest.fixture(scope="module")
def batched(chat_starter_model: Path) -> Iterator[llama_cpp.Llama]:
    model = open_llama(LoadConfig(chat_starter_model, n_ctx=1024, n_batch=64, parallel=2, threads=1))
    yield model
    model.close()


@pytest.fixture
def decoder(batched: llama_cpp.Llama) -> Iterator[BatchDecoder]:
    dec = BatchDecoder(batched, 2, None, None)
    yield dec
    dec.close()
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(batched.ctx), True)


def test_a_run_alone_in_the_batch_decoder_speculates_and_gives_the_same_tokens(
    batched: llama_cpp.Llama, decoder: BatchDecoder
) -> None:
    tokens = batched.tokenize(COPY_PROMPT.encode())
    ([expected], [plain]) = batch_tokens(decoder, [tokens], SamplingParams(temperature=0.0, speculative="off"), N)
    assert plain.speculation is None
    for mode in ("ngram", "auto"):
        decoder.evict_all()  # (from an empty slot, as the first run)
        ([got], [run]) = batch_tokens(decoder, [tokens], SamplingParams(temperature=0.0, speculative=mode), N)
        assert got == expected, mode
        counts = run.speculation
        assert counts is not None and counts.mode == mode and counts.plain_steps >= PLAIN_PROBE
        assert counts.accepted > 0 and counts.verify_steps > 0 and counts.speedup() is not None


def test_draft_in_the_batch_decoder_drafts_n_grams_and_says_so(batched: llama_cpp.Llama, decoder: BatchDecoder) -> None:
    tokens = batched.tokenize(COPY_PROMPT.encode())
    _, [run] = batch_tokens(decoder, [tokens], SamplingParams(temperature=0.0, speculative="draft"), 24)
    assert run.speculation is not None and run.speculation.mode == "ngram"  # (as the single path says it)


def test_a_recurrent_models_lone_batched_run_decodes_without_drafts(tmp_path: Path) -> None:
    """A Mamba's memory cannot drop a rejected draft's cells: its batched runs decode as with "off"
    (a draft's rejected tokens left in its state failed the next llama_decode)."""
    llm = open_llama(
        LoadConfig(write_tiny_mamba(tmp_path / "mamba.gguf"), n_ctx=512, n_batch=64, parallel=2, threads=1)
    )
    tokens = llm.tokenize(("the sea is wide and the boats are small but the sailors sing " * 3).encode())
    outs: list[list[int]] = []
    try:
        for mode in ("off", "auto", "ngram"):
            dec = BatchDecoder(llm, 2, None, None)
            try:
                ([got], [run]) = batch_tokens(dec, [tokens], SamplingParams(temperature=0.0, speculative=mode), 32)
            finally:
                dec.close()
                llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(llm.ctx), True)
            assert run.speculation is None, mode
            outs.append(got)
    finally:
        llm.close()
    assert outs[1] == outs[0] and outs[2] == outs[0]


def test_runs_sharing_a_step_do_not_draft(batched: llama_cpp.Llama, decoder: BatchDecoder) -> None:
    prompts = [batched.tokenize(COPY_PROMPT.encode()), batched.tokenize(FREE_PROMPT.encode())]
    _, runs = batch_tokens(decoder, prompts, SamplingParams(temperature=0.0, speculative="ngram"), 24)
    assert all(r.speculation is not None and r.speculation.drafted == 0 for r in runs)


def test_llama_cpp_s_prefill_counters_are_the_prompt_s_with_speculation(chat_starter_model: Path) -> None:
    """llama.cpp counts a verified draft (several tokens in one batch) as prompt evaluation: the answer's
    llama_prefill_* are read before its first token, and what came after is decode."""
    runtime = LocalRuntime()
    try:
        runtime.load(LoadConfig(chat_starter_model, n_ctx=1024, threads=1, parallel=1))
        params = SamplingParams(temperature=0.0, max_tokens=N, speculative="ngram")
        fin = next(e for e in runtime.complete(COPY_PROMPT, params) if isinstance(e, Finished))
    finally:
        runtime.close()
    m = fin.metrics
    assert m.speculative_drafted and m.speculative_accepted  # (it drafted, and drafts were accepted)
    assert m.llama_prefill_tokens == m.prompt_tokens - m.prompt_tokens_reused
    # every step after the prompt: one token per plain step, the last token and the draft per verify step
    assert m.llama_decode_tokens is not None and m.llama_decode_tokens >= m.output_tokens - 1


def test_auto_stopped_compares_the_drafts_it_would_make_and_resumes_when_they_would_pay() -> None:
    counts = SpeculationCounts(mode="auto", plain_steps=PLAIN_PROBE, plain_s=1.0)  # a plain step: 0.5 s
    for _ in range(AUTO_MIN_STEPS):
        counts.verify_step(2.0, 2, 0, auto=True)  # one token per 2 s: slower than plain steps
    assert counts.stopped and counts.stops == 1 and not counts.drafting
    counts.shadow([5, 6, 7, 8])
    for token in (5, 6, 7, 9):  # three matched, then the shadow draft is wrong: dropped
        counts.chosen(token)
    assert counts.stopped
    counts.shadow([1, 2, 3, 4])
    for token in (1, 2, 3, 4):  # 7 of 8 compared tokens matched: the answer copies now
        counts.chosen(token)
    assert not counts.stopped and counts.drafting
    counts.verify_step(2.0, 2, 0, auto=True)  # judged again only after AUTO_MIN_STEPS new verify steps
    assert not counts.stopped
    assert (counts.verify_steps, counts.drafted, counts.accepted) == (AUTO_MIN_STEPS + 1, 10, 0)  # (totals kept)


def test_auto_stopped_resumes_on_a_real_answer_that_starts_copying(starter: llama_cpp.Llama) -> None:
    # a drafter wrong at first (auto stops), then the n-gram drafts of a copied passage (it resumes)
    tokens = starter.tokenize(COPY_PROMPT.encode())
    expected = greedy(starter, tokens, N)

    slow = StepClock()

    class WrongAtFirst(NgramDrafter):
        def propose(self, limit: int | None = None) -> list[int]:
            wrong = len(self.history) < len(tokens) + 12
            slow.step = 2.0 if wrong else 1.0  # (a wrong draft's step takes two plain steps' time)
            return [self.history[-1]] * 2 if wrong else super().propose(limit)

    starter.reset()
    counts = SpeculationCounts(mode="auto")
    got = take(generate_speculative(starter, tokens, None, counts, WrongAtFirst(tokens), auto=True, clock=slow), N)
    assert got == expected
    assert counts.stops >= 1 and counts.accepted > 0 and not counts.stopped


def test_auto_stopped_long_ago_resumes_on_recent_matches_alone() -> None:
    counts = SpeculationCounts(mode="auto", plain_steps=PLAIN_PROBE, plain_s=1.0)
    for _ in range(AUTO_MIN_STEPS):
        counts.verify_step(2.0, 2, 0, auto=True)
    assert counts.stopped
    for _ in range(100):  # a long stretch of prose: every shadow draft wrong at its first token
        counts.shadow([1])
        counts.chosen(2)
    assert counts.stopped
    for token in range(3, 3 + 3 * 4 * 8):  # then it copies: the shadow drafts match, 4 tokens each
        if not counts.stopped:
            break
        counts.shadow([token])
        counts.chosen(token)
    assert not counts.stopped, "a copy after 100 wrong shadow tokens must resume within a few dozen tokens"


SAMPLED = (
    SamplingParams(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, seed=7),
    SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=3, repeat_penalty=1.1, presence_penalty=0.2),
    SamplingParams(temperature=0.0, repeat_penalty=1.3),  # (greedy through the chain: penalties on)
    SamplingParams(temperature=0.7, seed=11, logit_bias=((13, -100.0),)),
)


@pytest.mark.parametrize("params", SAMPLED, ids=["top-k-p", "penalties", "greedy-penalised", "logit-bias"])
def test_sampled_tokens_are_verified_several_at_a_time_and_are_the_same_as_without(
    starter: llama_cpp.Llama, params: SamplingParams
) -> None:
    """Each verified row's token is drawn by the request's own chain, one draw per token given, so with
    a seed the answer is the one decoding without speculation gives (hence its distribution too)."""
    tokens = starter.tokenize(COPY_PROMPT.encode())
    for seed in (params.seed, (params.seed or 0) + 100):
        off = replace(params, seed=seed, speculative="off")
        starter.set_seed(seed if seed is not None else 0)
        expected, plain = seq0_tokens(starter, tokens, off, N)
        assert plain.speculation() is None
        starter.set_seed(seed if seed is not None else 0)
        got, source = seq0_tokens(starter, tokens, replace(off, speculative="ngram"), N)
        counts = source.speculation()
        assert got == expected, seed
        assert counts is not None and counts.verify_steps > 0 and counts.accepted > 0
        assert source.speculation_off() is None
        assert_cache_matches_record(starter)


def test_a_sampled_run_alone_in_the_batch_decoder_speculates_and_gives_the_same_tokens(
    batched: llama_cpp.Llama, decoder: BatchDecoder
) -> None:
    tokens = batched.tokenize(COPY_PROMPT.encode())
    params = SamplingParams(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, repeat_penalty=1.05)
    ([expected], [plain]) = batch_tokens(decoder, [tokens], replace(params, speculative="off"), N)
    ([got], [run]) = batch_tokens(decoder, [tokens], replace(params, speculative="ngram"), N)
    assert plain.speculation is None
    assert got == expected and run.speculation is not None and run.speculation.accepted > 0


def test_a_grammar_decodes_without_speculation_and_says_why(starter: llama_cpp.Llama) -> None:
    tokens = starter.tokenize(COPY_PROMPT.encode())
    starter.reset()
    params = SamplingParams(temperature=0.0, speculative="auto")
    source = Seq0Source(starter, tokens, params, 0, lambda: False, NULL_ABORT, lambda t: starter.detokenize([t]))
    got = take(source.generate(tokens, 'root ::= [a-z ]+ "."'), 6)
    assert len(got) == 6 and source.speculation() is None and source.speculation_off() == "grammar"


def test_a_recurrent_model_says_why_it_did_not_speculate(tmp_path: Path) -> None:
    llm = open_llama(
        LoadConfig(write_tiny_mamba(tmp_path / "mamba.gguf"), n_ctx=512, n_batch=64, parallel=2, threads=1)
    )
    tokens = llm.tokenize(("the sea is wide and the boats are small but the sailors sing " * 3).encode())
    try:
        sampled = SamplingParams(temperature=0.9, seed=5, speculative="auto")
        llm.set_seed(5)
        expected, plain = seq0_tokens(llm, tokens, replace(sampled, speculative="off"), 24)
        llm.set_seed(5)
        got, source = seq0_tokens(llm, tokens, sampled, 24)
        assert got == expected and plain.speculation_off() is None and source.speculation_off() == "recurrent"
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(llm.ctx), True)
        dec = BatchDecoder(llm, 2, None, None)
        try:
            run = dec.start(tokens, sampled, 5)
            assert run.speculation is None and run.speculation_off == "recurrent"
        finally:
            dec.close()
    finally:
        llm.close()
