"""Drafts from a small model (engine/inference/llama/draft_model.py): a same-vocabulary pair generated here
and the chat starter as its own draft decode exactly plain greedy decoding's tokens (the starter accepts
every draft); a draft with another vocabulary, a damaged file or a larger file is refused with its reason
while the model loads and answers without it; a cancel mid-stream leaves both KV caches consistent; the
single-sequence path, the batch routing, `run --draft-model` and `serve --draft-model` use it."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import llama_cpp
import openai
import pytest

from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.inference.events import Finished
from ember_chat.engine.inference.llama.batch_decode import BatchDecoder
from ember_chat.engine.inference.llama.draft_model import (
    DraftFileUnreadable,
    DraftModel,
    DraftRefused,
    DraftTooLarge,
    DraftVocabularyMismatch,
    ModelDrafter,
    open_draft_model,
)
from ember_chat.engine.inference.llama.greedy import generate_greedy
from ember_chat.engine.inference.llama.loader import NULL_ABORT, open_llama
from ember_chat.engine.inference.llama.logit_bias import generate_sampler
from ember_chat.engine.inference.llama.speculative import SpeculationCounts, generate_speculative
from ember_chat.engine.inference.local.runtime import LocalRuntime
from ember_chat.engine.inference.local.sources import Seq0Source
from tests.helpers.batch_runs import batch_tokens
from tests.helpers.cli import cli
from tests.helpers.gguf_factory import TinySpec, write_tiny_model
from tests.helpers.kv_checks import assert_cache_matches_record
from tests.helpers.peer_servers import ember_server

PASSAGE = (
    "The lighthouse keeper climbed the spiral stairs every evening at dusk, lit the great lamp, "
    "and wrote the weather, the ships he saw and the state of the sea in a leather-bound log."
)
PROMPT = f"Repeat this text exactly.\nText: {PASSAGE}\nRepeated:"
FREE_PROMPT = "Once upon a time, in a small village by the sea, there lived an old fisherman who"
N = 40
GREEDY = SamplingParams(temperature=0.0, max_tokens=24, speculative="draft")


def take(gen: Iterator[int], n: int) -> list[int]:
    try:
        return list(itertools.islice(gen, n))
    finally:
        gen.close()  # type: ignore[attr-defined]


def config(path: Path, **more: object) -> LoadConfig:
    return LoadConfig(path, n_ctx=512, n_batch=64, parallel=1, threads=1, **more)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two tiny models with the same tokenizer and different weights (another seed)."""
    folder = tmp_path_factory.mktemp("pair")
    return write_tiny_model(folder / "target.gguf"), write_tiny_model(folder / "draft.gguf", TinySpec(seed=7))


@pytest.fixture(scope="module")
def starter_pair(chat_starter_model: Path) -> Iterator[tuple[llama_cpp.Llama, DraftModel]]:
    target = open_llama(config(chat_starter_model))
    draft = open_draft_model(chat_starter_model, target, config(chat_starter_model))
    yield target, draft
    draft.close()
    target.close()


def greedy(llm: llama_cpp.Llama, tokens: list[int], n: int) -> list[int]:
    llm.reset()
    return take(generate_greedy(llm, tokens), n)


def drafted(llm: llama_cpp.Llama, draft: DraftModel, tokens: list[int], n: int) -> tuple[list[int], SpeculationCounts]:
    llm.reset()
    counts = SpeculationCounts(mode="draft")
    return take(generate_speculative(llm, tokens, None, counts, ModelDrafter(draft, tokens)), n), counts


def test_a_same_vocabulary_pair_decodes_plain_greedy_tokens(tiny_pair: tuple[Path, Path]) -> None:
    target_path, draft_path = tiny_pair
    target = open_llama(config(target_path))
    draft = open_draft_model(draft_path, target, config(target_path))
    try:
        for text in (PROMPT, FREE_PROMPT):
            tokens = target.tokenize(text.encode())
            expected = greedy(target, tokens, N)
            got, counts = drafted(target, draft, tokens, N)
            assert got == expected, text
            assert counts.drafted > 0 and 0 <= counts.accepted <= counts.drafted
            assert_cache_matches_record(target)
            assert_cache_matches_record(draft.llm)
    finally:
        draft.close()
        target.close()


def test_a_sampled_answer_drafted_by_a_draft_model_is_the_one_without(tiny_pair: tuple[Path, Path]) -> None:
    """The draft model's greedy draft is verified by the target's own sampler chain (speculative.py): with a
    seed, the tokens decoding without speculation draws."""
    target_path, draft_path = tiny_pair
    target = open_llama(config(target_path))
    draft = open_draft_model(draft_path, target, config(target_path))
    params = SamplingParams(temperature=0.9, top_k=20, top_p=0.9, min_p=0.02, seed=4)
    try:
        for text in (PROMPT, FREE_PROMPT):
            tokens = target.tokenize(text.encode())
            target.reset()
            target.set_seed(4)
            expected = take(generate_plain_sampled(target, tokens, params), N)
            target.reset()
            target.set_seed(4)
            counts = SpeculationCounts(mode="draft")
            chain = generate_sampler(target, params)
            try:
                drafter = ModelDrafter(draft, tokens)
                got = take(generate_speculative(target, tokens, None, counts, drafter, sampler=chain.sampler), N)
            finally:
                chain.close()
            assert got == expected, text
            assert counts.drafted > 0 and 0 <= counts.accepted <= counts.drafted
            assert_cache_matches_record(target)
    finally:
        draft.close()
        target.close()


def generate_plain_sampled(llm: llama_cpp.Llama, tokens: list[int], params: SamplingParams) -> Iterator[int]:
    """Llama.generate's own sampled tokens (the path without speculation) for these parameters."""
    return llm.generate(
        tokens, temp=params.temperature, top_k=params.top_k, top_p=params.top_p, min_p=params.min_p,
        repeat_penalty=params.repeat_penalty,
    )  # fmt: skip


@pytest.mark.parametrize("text", [PROMPT, FREE_PROMPT])
def test_the_chat_starter_as_its_own_draft_accepts_every_draft(
    starter_pair: tuple[llama_cpp.Llama, DraftModel], text: str
) -> None:
    target, draft = starter_pair
    tokens = target.tokenize(text.encode())
    expected = greedy(target, tokens, N)
    got, counts = drafted(target, draft, tokens, N)
    assert got == expected
    assert counts.drafted > 0 and counts.accepted == counts.drafted  # (100 %: the same model drafts)
    assert_cache_matches_record(target)
    assert_cache_matches_record(draft.llm)


def test_the_prompt_goes_into_the_draft_model_before_the_first_token(
    starter_pair: tuple[llama_cpp.Llama, DraftModel],
) -> None:
    target, draft = starter_pair
    tokens = target.tokenize(PROMPT.encode())
    draft.llm.reset()
    drafter = ModelDrafter(draft, tokens)
    drafter.prepare()  # (Seq0Source does it before the answer starts)
    assert draft.llm.n_tokens == len(tokens)
    assert_cache_matches_record(draft.llm)
    drafter.append(tokens[-1])  # the answer's first token: the first proposal evaluates it alone, then drafts
    evaluated = draft.llm.n_tokens
    proposal = drafter.propose(limit=3)
    assert len(proposal) == 3 and draft.llm.n_tokens == evaluated + 1 + 2  # (the last drafted is not evaluated)


def test_a_stop_during_the_draft_models_prompt_evaluation_stops_it(
    starter_pair: tuple[llama_cpp.Llama, DraftModel],
) -> None:
    """The answer's abort callback is on while the draft model evaluates the prompt (a long one takes as
    long as the answer's own prefill): a Stop there stops it, and the next answer finds its cache usable."""
    target, draft = starter_pair
    tokens = target.tokenize(PROMPT.encode())
    draft.llm.reset()
    calls: list[int] = []

    def stop_now(_data: object) -> bool:
        calls.append(1)
        return True

    abort = llama_cpp.ggml_abort_callback(stop_now)
    with pytest.raises(RuntimeError):
        ModelDrafter(draft, tokens).prepare(abort)
    assert calls and draft.llm.n_tokens == 0  # (llama.cpp asked, and the evaluation stopped)
    drafter = ModelDrafter(draft, tokens)
    drafter.prepare()  # (the callback is off again: the next evaluation runs, from a consistent cache)
    assert draft.llm.n_tokens == len(tokens)
    assert_cache_matches_record(draft.llm)
    called = len(calls)
    drafter.append(tokens[-1])
    assert len(drafter.propose(limit=3)) == 3 and len(calls) == called  # (the callback is no longer asked)


def test_a_cancel_mid_stream_leaves_both_caches_consistent(starter_pair: tuple[llama_cpp.Llama, DraftModel]) -> None:
    target, draft = starter_pair
    tokens = target.tokenize(PROMPT.encode())
    expected = greedy(target, tokens, N)
    for cut in (1, 5, 17):
        got, _ = drafted(target, draft, tokens, cut)  # closed after `cut` tokens, within a verified run
        assert got == expected[:cut]
        assert_cache_matches_record(target)
        assert_cache_matches_record(draft.llm)
        # the next turn goes on from both caches as they are (prefix reuse on each)
        follow = [*tokens, *expected[:cut]]
        counts = SpeculationCounts(mode="draft")
        gen = generate_speculative(target, follow, None, counts, ModelDrafter(draft, follow))
        assert take(gen, N - cut) == expected[cut:]
        assert counts.accepted == counts.drafted > 0


def test_the_single_path_drafts_with_the_draft_model_and_falls_back_to_ngrams_without_one(
    starter_pair: tuple[llama_cpp.Llama, DraftModel],
) -> None:
    target, draft = starter_pair
    tokens = target.tokenize(PROMPT.encode())
    expected = greedy(target, tokens, N)

    def seq0(params: SamplingParams, with_draft: DraftModel | None) -> tuple[list[int], SpeculationCounts | None]:
        target.reset()
        piece = lambda t: target.detokenize([t])  # noqa: E731
        source = Seq0Source(target, tokens, params, 0, lambda: False, NULL_ABORT, piece, draft=with_draft)
        return take(source.generate(tokens, None), N), source.speculation()

    for mode in ("draft", "auto"):
        got, counts = seq0(SamplingParams(temperature=0.0, speculative=mode), draft)
        assert got == expected and counts is not None and counts.mode == mode
        assert counts.accepted == counts.drafted > 0  # (the starter drafts for itself: all accepted)
    # "draft" without a draft model: n-gram drafts, said as the mode used
    got, counts = seq0(SamplingParams(temperature=0.0, speculative="draft"), None)
    assert got == expected and counts is not None and counts.mode == "ngram"
    # "ngram" by name keeps n-grams with a draft model loaded (the passage is copied: n-grams accept some)
    got, counts = seq0(SamplingParams(temperature=0.0, speculative="ngram"), draft)
    assert got == expected and counts is not None and counts.mode == "ngram"


def answer(rt: LocalRuntime, params: SamplingParams = GREEDY) -> Finished:
    *_, finished = rt.complete(PROMPT, params)
    assert isinstance(finished, Finished) and finished.error is None
    return finished


def refused_while_the_model_answers(target: Path, draft: Path, kind: type[DraftRefused], *reason: str) -> None:
    """The draft is refused with `kind` naming `reason`, and the target loaded through the runtime answers
    without it, as it does with no draft at all."""
    with pytest.raises(kind) as refused:
        model = open_llama(config(target))
        try:
            open_draft_model(draft, model, config(target))
        finally:
            model.close()
    message = str(refused.value)
    assert draft.name in message and all(words in message for words in reason), message
    rt = LocalRuntime()
    try:
        plain = answer_once(rt, config(target))
        description = rt.load(config(target, draft_model=draft))
        assert description.draft_model is None and description.draft_refused == message
        finished = answer(rt)
        assert finished.text == plain and finished.metrics.speculative_mode == "ngram"  # (no draft model)
    finally:
        rt.close()


def answer_once(rt: LocalRuntime, how: LoadConfig) -> str:
    rt.load(how)
    return answer(rt, SamplingParams(temperature=0.0, max_tokens=24, speculative="off")).text


def test_a_draft_with_another_vocabulary_is_refused(tmp_path: Path) -> None:
    target = write_tiny_model(tmp_path / "deeper.gguf", TinySpec(layers=3))  # (larger: the size is no reason)
    bigger = write_tiny_model(tmp_path / "more-tokens.gguf", TinySpec(extra_control_tokens=("<|x|>",)))
    refused_while_the_model_answers(target, bigger, DraftVocabularyMismatch, "vocabulary", "tokens")
    # the same number of tokens, one of them another text: the hash of the pieces tells them apart
    other = tmp_path / "other-tokens.gguf"
    write_tiny_model(other, TinySpec(extra_control_tokens=("<|y|>",)))
    same_size = tmp_path / "same-size.gguf"
    write_tiny_model(same_size, TinySpec(extra_control_tokens=("<|x|>",)))
    refused_while_the_model_answers(same_size, other, DraftVocabularyMismatch, "another tokenizer")


def test_a_damaged_draft_file_is_refused(tiny_pair: tuple[Path, Path], tmp_path: Path) -> None:
    target, draft = tiny_pair
    damaged = tmp_path / "damaged.gguf"
    damaged.write_bytes(draft.read_bytes()[: draft.stat().st_size // 2])
    refused_while_the_model_answers(target, damaged, DraftFileUnreadable, "was not loaded")
    refused_while_the_model_answers(target, tmp_path / "missing.gguf", DraftFileUnreadable, "cannot be read")


def test_a_draft_larger_than_the_model_is_refused(tiny_pair: tuple[Path, Path], tmp_path: Path) -> None:
    target, _ = tiny_pair
    larger = write_tiny_model(tmp_path / "larger.gguf", TinySpec(dim=128, ff=256))
    refused_while_the_model_answers(target, larger, DraftTooLarge, "larger than the model")


def test_a_loaded_draft_is_described_and_its_requests_stay_batched(tiny_pair: tuple[Path, Path]) -> None:
    """A draft model does not take requests out of the batch decoder (a lone run drafts with it there):
    loaded with `serve --draft-model --parallel 4`, requests are still answered together."""
    target, draft = tiny_pair
    rt = LocalRuntime()
    try:
        description = rt.load(LoadConfig(target, n_ctx=512, threads=1, parallel=2, draft_model=draft))
        assert description.draft_model == draft.name and description.draft_refused is None
        assert rt.batch_slots > 1
        for mode in ("draft", "auto", "ngram", "off"):
            assert rt.can_batch(SamplingParams(temperature=0.0, speculative=mode), None, None)
            assert rt.can_batch(SamplingParams(temperature=0.7, speculative=mode), None, None)
        finished = answer(rt)
        assert finished.metrics.speculative_mode == "draft" and finished.metrics.speculative_drafted
        rt.close()
        assert not rt.loaded and rt.description is None
        rt.load(LoadConfig(target, n_ctx=512, threads=1, parallel=2))  # (loaded again without one)
        assert rt.description is not None and rt.description.draft_model is None
        assert rt.can_batch(SamplingParams(temperature=0.0, speculative="draft"), None, None)
    finally:
        rt.close()


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_a_lone_run_in_the_batch_decoder_drafts_with_the_draft_model(
    chat_starter_model: Path, temperature: float
) -> None:
    """The chat starter drafting for itself in the batch decoder: the tokens those of "off" (seeded when
    sampled), every draft accepted when greedy (a sampled token is not always the draft's greedy one)."""
    target = open_llama(LoadConfig(chat_starter_model, n_ctx=1024, n_batch=64, parallel=2, threads=1))
    draft = open_draft_model(chat_starter_model, target, config(chat_starter_model))
    tokens = target.tokenize(PROMPT.encode())
    params = SamplingParams(temperature=temperature, seed=9)
    try:
        outs = {}
        for mode in ("off", "draft", "auto"):
            dec = BatchDecoder(target, 2, None, None)
            dec.draft = draft
            try:
                ([outs[mode]], [run]) = batch_tokens(dec, [tokens], replace(params, speculative=mode), N)
            finally:
                dec.close()
                llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(target.ctx), True)
            if mode != "off":
                counts = run.speculation
                assert counts is not None and counts.mode == mode
                assert counts.drafted > 0 and 0 < counts.accepted <= counts.drafted
                if not temperature:
                    assert counts.accepted == counts.drafted  # (100 %: the same model's greedy choice)
        assert outs["draft"] == outs["off"] and outs["auto"] == outs["off"]
        assert_cache_matches_record(draft.llm)
    finally:
        draft.close()
        target.close()


def test_run_draft_model_prints_the_same_answer_and_its_counts(chat_starter_model: Path, tmp_path: Path) -> None:
    def run(*more: str) -> tuple[str, dict[str, object], str]:
        out = cli("run", "--model", str(chat_starter_model), "--mode", "complete", "--prompt", PROMPT,
                  "--temperature", "0", "--max-tokens", "32", "--ctx", "1024", "--threads", "1", "--json",
                  *more, data_dir=tmp_path)  # fmt: skip
        assert out.returncode == 0, out.stderr
        *text, last = out.stdout.rstrip("\n").split("\n")
        return "\n".join(text), json.loads(last), out.stderr

    off_text, off, _ = run("--speculative", "off")
    assert off["speculative_drafted"] is None
    on_text, on, _ = run("--speculative", "draft", "--draft-model", str(chat_starter_model))
    assert on_text == off_text and "lighthouse" in on_text
    assert on["speculative_mode"] == "draft"
    assert isinstance(on["speculative_drafted"], int) and on["speculative_drafted"] > 0
    assert on["speculative_accepted"] == on["speculative_drafted"]  # (the starter drafts for itself)
    # a draft that cannot be used: said on stderr, and the answer comes without it
    damaged = tmp_path / "damaged.gguf"
    damaged.write_bytes(b"GGUF" + b"\0" * 64)
    refused_text, _, stderr = run("--speculative", "draft", "--draft-model", str(damaged))
    assert refused_text == off_text
    assert "damaged.gguf" in stderr and "runs without it" in stderr, stderr


def test_serve_draft_model_drafts_for_a_request_that_asks_and_batches_the_others(chat_starter_model: Path) -> None:
    """serve --draft-model (the starter for itself) at the default --parallel: a greedy request for "draft"
    drafts with the model (alone in the batch decoder); "off" answers the same."""

    def complete(client: openai.OpenAI, mode: str) -> tuple[str, dict[str, object]]:
        reply = client.completions.create(
            model="", prompt=PROMPT, temperature=0, max_tokens=32, extra_body={"ember": {"speculative": mode}}
        )
        return reply.choices[0].text, (reply.model_extra or {})["ember"]

    extra = ("--draft-model", str(chat_starter_model))
    with (
        ember_server(chat_starter_model, n_ctx=1024, extra=extra) as base_url,
        openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=600) as client,
    ):
        complete(client, "off")  # (both answers compared reuse the cached prompt: test_api_speculative's MAX_TOKENS)
        text, ember = complete(client, "draft")
        plain, off = complete(client, "off")
    assert text == plain and "lighthouse" in text
    assert ember["speculative_mode"] == "draft" and off["speculative_drafted"] is None
    assert isinstance(ember["speculative_drafted"], int) and ember["speculative_drafted"] > 0
    assert ember["speculative_accepted"] == ember["speculative_drafted"]
