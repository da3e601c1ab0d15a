"""The local runtime against real llama.cpp: loading, greedy exactness, stop, templates, context,
KV-cache reuse and metrics cross-checked with llama.cpp's own counters."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

import llama_cpp
import numpy as np
import pytest

from ember_chat.engine.core.params import LoadConfig, SamplingParams
from ember_chat.engine.errors import (
    ContextOverflowError,
    InvalidParameter,
    LoadCancelled,
    ModelFileError,
    ModelLoadError,
    NoModelLoaded,
)
from ember_chat.engine.inference.events import ContextTrimmed, Finished, PromptReady, Token
from ember_chat.engine.inference.llama.loader import plain_llama
from ember_chat.engine.inference.local.runtime import LocalRuntime
from ember_chat.engine.inference.prompt.templates import BuiltinTemplate, ChatMessage, JinjaTemplate
from tests.helpers.gguf_factory import Script, TinySpec, any_of, says, write_tiny_model

GREEDY = SamplingParams(temperature=0.0, max_tokens=24)

# Scripted models (tests/helpers/gguf_factory.py): what they say to any prompt is known in advance.
ENDLESS = says("▁hello", "▁world", "!")  # " hello world! hello world! …", never an end of turn
ENDS = says("▁hello", "▁world", "</s>")  # " hello world", then the end of its turn
# "日", "語", "😀", "é": two of them spelled byte by byte, so characters are split over tokens
MULTIBYTE = says("<0xE6>", "<0x97>", "<0xA5>", "語", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>", "é", "</s>")
FLAT = any_of("▁hello", "▁world", "▁Ember", "!", "?", ".", ",", "▁the")  # eight equally likely tokens

Scripted = Callable[[Script], Path]


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> Scripted:
    """The path of a model that says `script` (one file per script)."""
    folder = tmp_path_factory.mktemp("scripted")
    made: dict[str, Path] = {}

    def make(script: Script) -> Path:
        key = repr(script)
        if key not in made:
            made[key] = write_tiny_model(folder / f"{len(made)}.gguf", TinySpec(script=script))
        return made[key]

    return make


def run(events) -> tuple[list[Token], Finished, list[object]]:
    tokens, other, finished = [], [], None
    for ev in events:
        if isinstance(ev, Token):
            tokens.append(ev)
        elif isinstance(ev, Finished):
            finished = ev
        else:
            other.append(ev)
    assert finished is not None
    return tokens, finished, other


def reference_greedy(path: Path, prompt_tokens: list[int], n: int, n_ctx: int) -> list[int]:
    """llama.cpp greedy decoding without Ember: decode, take the argmax of the logits, repeat."""
    llm = plain_llama(
        path, n_ctx=n_ctx, n_threads=2, n_threads_batch=2, flash_attn=LoadConfig(path).flash_attn, verbose=False
    )
    try:
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        out: list[int] = []
        llm.eval(prompt_tokens)
        for _ in range(n):
            logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
            tok = int(np.argmax(logits))
            if llama_cpp.llama_vocab_is_eog(vocab, tok):
                break
            out.append(tok)
            llm.eval([tok])
        return out
    finally:
        llm.close()


# ----- loading


def test_load_reports_progress_and_info(runtime: LocalRuntime, tiny_model: Path) -> None:
    seen: list[float] = []
    info = runtime.load(LoadConfig(tiny_model, n_ctx=512, threads=2), progress=seen.append)
    assert runtime.loaded and info.architecture == "llama"
    assert seen and seen[-1] == pytest.approx(1.0) and seen == sorted(seen)
    assert runtime.n_ctx == 512 and runtime.backend == "CPU"


def test_load_can_be_cancelled(runtime: LocalRuntime, starter_model: Path) -> None:
    cancel = threading.Event()

    def on_progress(fraction: float) -> None:
        if fraction > 0.0:
            cancel.set()

    with pytest.raises(LoadCancelled):
        runtime.load(LoadConfig(starter_model, n_ctx=512), progress=on_progress, cancel=cancel)
    assert not runtime.loaded


def test_bad_files_are_typed_errors_before_llama_cpp(runtime: LocalRuntime, tmp_path: Path) -> None:
    (tmp_path / "bad.gguf").write_bytes(b"not a model at all" * 10)
    with pytest.raises(ModelFileError):
        runtime.load(LoadConfig(tmp_path / "bad.gguf"))
    with pytest.raises(ModelFileError):
        runtime.load(LoadConfig(tmp_path / "missing.gguf"))
    assert not runtime.loaded


def test_file_llama_cpp_rejects_is_a_load_error(runtime: LocalRuntime, tmp_path: Path) -> None:
    from tests.helpers.gguf_factory import TinySpec, write_tiny_model

    # A valid header that llama.cpp refuses: heads do not divide the embedding size.
    path = write_tiny_model(tmp_path / "odd.gguf", TinySpec(heads=3, kv_heads=3, dim=64))
    with pytest.raises(ModelLoadError, match="could not load"):
        runtime.load(LoadConfig(path, n_ctx=256))
    assert not runtime.loaded


def test_close_unloads_and_generation_needs_a_model(runtime: LocalRuntime, tiny_model: Path) -> None:
    runtime.load(LoadConfig(tiny_model, n_ctx=256))
    runtime.close()
    assert not runtime.loaded
    with pytest.raises(NoModelLoaded):
        list(runtime.complete("hi", GREEDY))


def test_invalid_load_config() -> None:
    with pytest.raises(InvalidParameter, match="flash attention"):
        LoadConfig(Path("x.gguf"), kv_cache_type="q8_0", flash_attn=False)
    with pytest.raises(InvalidParameter, match="context length"):
        LoadConfig(Path("x.gguf"), n_ctx=10)


# ----- sampling


@pytest.mark.parametrize(
    "kwargs",
    [
        {"temperature": -1},
        {"temperature": float("nan")},
        {"top_k": -1},
        {"top_p": 1.5},
        {"min_p": -0.1},
        {"repeat_penalty": 0},
        {"seed": -5},
        {"max_tokens": 0},
        {"stop": ("",)},
        {"stop": "abc"},
        {"top_k": 2.5},
    ],
)
def test_invalid_sampling_params(kwargs: dict) -> None:
    with pytest.raises(InvalidParameter):
        SamplingParams(**kwargs)


def test_greedy_matches_llama_cpp_argmax_tiny(runtime: LocalRuntime, tiny_model: Path) -> None:
    runtime.load(LoadConfig(tiny_model, n_ctx=512, threads=2))
    prompt = "hello world, the naïve café"
    _tokens, fin, _ = run(runtime.complete(prompt, SamplingParams(temperature=0.0, max_tokens=40)))
    ids = runtime.tokenize(prompt, add_bos=True)
    expected = reference_greedy(tiny_model, ids, 40, 512)
    assert fin.metrics.output_tokens >= len(expected)
    # compare token ids: the history Ember keeps for KV reuse holds exactly the ids it sampled
    assert runtime._recent and runtime._recent[0][1][len(ids) :] == expected


def test_greedy_matches_llama_cpp_argmax_starter(runtime: LocalRuntime, starter_model: Path) -> None:
    runtime.load(LoadConfig(starter_model, n_ctx=512, threads=2))
    prompt = "The three primary colours are"
    _, fin, _ = run(runtime.complete(prompt, SamplingParams(temperature=0.0, max_tokens=32)))
    ids = runtime.tokenize(prompt, add_bos=True)
    expected = reference_greedy(starter_model, ids, 32, 512)
    assert runtime._recent
    assert runtime._recent[0][1][len(ids) :] == expected
    assert fin.text.strip()


def test_seeded_sampling_is_reproducible(runtime: LocalRuntime, scripted: Scripted) -> None:
    runtime.load(LoadConfig(scripted(FLAT), n_ctx=512))
    params = SamplingParams(temperature=1.0, seed=1234, max_tokens=30)
    a = run(runtime.complete("hello", params))[1]
    b = run(runtime.complete("hello", params))[1]
    c = run(runtime.complete("hello", SamplingParams(temperature=1.0, seed=99, max_tokens=30)))[1]
    assert a.metrics.output_tokens == b.metrics.output_tokens == c.metrics.output_tokens == 30
    assert a.text == b.text
    assert a.text != c.text  # eight equally likely tokens at every step: another seed, another answer


def test_max_tokens_and_stream_equals_final_text(runtime: LocalRuntime, scripted: Scripted) -> None:
    runtime.load(LoadConfig(scripted(ENDLESS), n_ctx=512))
    tokens, fin, _ = run(runtime.complete("the world", SamplingParams(temperature=0.0, max_tokens=50)))
    assert "".join(t.text for t in tokens) == fin.text == " hello world!" * 16 + " hello world"
    assert fin.reason == "length" and fin.metrics.output_tokens == 50


@pytest.mark.parametrize("temperature", [0.0, 1.5])
def test_multibyte_utf8_streams_intact(runtime: LocalRuntime, scripted: Scripted, temperature: float) -> None:
    runtime.load(LoadConfig(scripted(MULTIBYTE), n_ctx=1024))
    tokens, fin, _ = run(runtime.complete("Say it:", SamplingParams(temperature=temperature, seed=3, max_tokens=60)))
    assert fin.reason == "stop" and fin.text == "日語😀é"
    # a character split over tokens arrives whole, with its last byte; the tokens before it show nothing
    assert [t.text for t in tokens] == ["", "", "日", "語", "", "", "", "😀", "é"]


def test_stop_strings_are_not_shown(runtime: LocalRuntime, scripted: Scripted) -> None:
    runtime.load(LoadConfig(scripted(ENDLESS), n_ctx=512))
    free = run(runtime.complete("hello", SamplingParams(temperature=0.0, max_tokens=40)))[1].text
    assert free.startswith(" hello world! hello")
    stop = "lo w"  # across two tokens: " hel|lo" of " hello", " w|orld" of " world"
    tokens, fin, _ = run(runtime.complete("hello", SamplingParams(temperature=0.0, max_tokens=40, stop=(stop,))))
    assert fin.reason == "stop_string"
    assert fin.text == " hel"
    assert "".join(t.text for t in tokens) == fin.text


@pytest.mark.parametrize("end", ["</s>", "<|im_end|>"])
def test_natural_stop_on_end_of_turn(runtime: LocalRuntime, scripted: Scripted, end: str) -> None:
    script = ENDS if end == "</s>" else says("▁hello", "▁world", end)
    runtime.load(LoadConfig(scripted(script), n_ctx=512))
    for params in (SamplingParams(temperature=0.0, max_tokens=400), SamplingParams(temperature=2.0, seed=5)):
        fin = run(runtime.complete("hi", params))[1]
        assert (fin.reason, fin.text, fin.metrics.output_tokens) == ("stop", " hello world", 2)


def test_ignore_eos_generates_exactly_max_tokens(runtime: LocalRuntime, scripted: Scripted) -> None:
    runtime.load(LoadConfig(scripted(ENDS), n_ctx=512))
    assert run(runtime.complete("hi", SamplingParams(temperature=2.0, seed=1, max_tokens=400)))[1].reason == "stop"
    _, forced, _ = run(runtime.complete("hi", SamplingParams(temperature=2.0, seed=1, max_tokens=400, ignore_eos=True)))
    assert forced.reason == "length" and forced.metrics.output_tokens == 400
    assert forced.text.startswith(" hello world</s> hello world</s>")  # past the end of its turn


# ----- stop


def test_stop_from_another_thread_during_decode(runtime: LocalRuntime, starter_model: Path) -> None:
    runtime.load(LoadConfig(starter_model, n_ctx=512, threads=2))
    stopper = threading.Thread(target=runtime.request_stop)
    seen = 0
    fin = None
    for ev in runtime.complete("Once upon a time", SamplingParams(temperature=0.0, max_tokens=200)):
        if isinstance(ev, Token):
            seen += 1
            if seen == 5:
                stopper.start()
                stopper.join()
        elif isinstance(ev, Finished):
            fin = ev
    assert fin is not None and fin.reason == "cancelled"
    assert fin.metrics.output_tokens == 5  # no token after the one during which stop was pressed
    # still usable afterwards
    _, again, _ = run(runtime.complete("Once upon a time", SamplingParams(temperature=0.0, max_tokens=5)))
    assert again.reason == "length" and again.metrics.output_tokens == 5


def test_stop_during_long_prompt_evaluation(runtime: LocalRuntime, starter_model: Path) -> None:
    runtime.load(LoadConfig(starter_model, n_ctx=4096, threads=2))
    prompt = "The history of the world is long. " * 350  # ~2,800 tokens: seconds of prefill here
    events = []
    for ev in runtime.complete(prompt, SamplingParams(temperature=0.0, max_tokens=10)):
        events.append(ev)
        if isinstance(ev, PromptReady):  # evaluation of the long prompt starts when the loop resumes
            stopper = threading.Thread(target=runtime.request_stop)  # as the Stop button does
            stopper.start()
            stopper.join()
    fin = events[-1]
    assert isinstance(fin, Finished) and fin.reason == "cancelled"
    assert fin.metrics.output_tokens == 0  # the prompt never finished evaluating
    assert fin.metrics.e2e_s < 3.0
    _, again, _ = run(runtime.complete("Hello", SamplingParams(temperature=0.0, max_tokens=3)))
    assert again.metrics.output_tokens == 3


# ----- templates


def test_template_choice(runtime: LocalRuntime, tiny_model: Path, tiny_model_no_template: Path) -> None:
    runtime.load(LoadConfig(tiny_model, n_ctx=256))
    t = runtime.template()
    assert isinstance(t, JinjaTemplate)
    assert t.render([ChatMessage("user", "hi")]) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert runtime.template("llama3").name == "llama3"
    with pytest.raises(InvalidParameter, match="unknown chat template"):
        runtime.template("no-such-template")
    runtime.load(LoadConfig(tiny_model_no_template, n_ctx=256))
    fallback = runtime.template()
    assert isinstance(fallback, BuiltinTemplate) and fallback.name == "chatml"


def test_gemma_without_template_uses_gemma_turns(runtime: LocalRuntime, starter_model: Path) -> None:
    runtime.load(LoadConfig(starter_model, n_ctx=1024))
    t = runtime.template()
    assert t.name == "gemma"
    text = t.render([ChatMessage("system", "Be brief."), ChatMessage("user", "Hi")])
    assert text == "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n"
    _tokens, fin, _ = run(
        runtime.chat([ChatMessage("user", "Name a colour.")], SamplingParams(temperature=0, max_tokens=16))
    )
    assert fin.metrics.output_tokens > 0 and fin.text.strip()


# ----- context


def test_long_conversation_drops_oldest_turns(runtime: LocalRuntime, tiny_model: Path) -> None:
    runtime.load(LoadConfig(tiny_model, n_ctx=256))
    msgs = [ChatMessage("system", "sys")]
    for i in range(30):
        msgs += [
            ChatMessage("user", f"question {i} hello world"),
            ChatMessage("assistant", f"answer {i} the"),
        ]
    msgs.append(ChatMessage("user", "last one"))
    _tokens, fin, other = run(runtime.chat(msgs, SamplingParams(temperature=0, max_tokens=16)))
    trimmed = [e for e in other if isinstance(e, ContextTrimmed)]
    assert trimmed and trimmed[0].dropped_messages > 0
    assert fin.metrics.dropped_messages == trimmed[0].dropped_messages
    assert fin.metrics.prompt_tokens + 16 <= 256 + 1


def test_single_message_larger_than_context(runtime: LocalRuntime, tiny_model: Path) -> None:
    runtime.load(LoadConfig(tiny_model, n_ctx=256))
    with pytest.raises(ContextOverflowError, match="longer context"):
        list(runtime.chat([ChatMessage("user", "hello " * 400)], GREEDY))
    with pytest.raises(ContextOverflowError):
        list(runtime.complete("hello " * 400, GREEDY))
    assert run(runtime.complete("hello", GREEDY))[1].metrics.output_tokens > 0  # still fine


def test_generation_stops_when_context_is_full(runtime: LocalRuntime, scripted: Scripted) -> None:
    runtime.load(LoadConfig(scripted(ENDLESS), n_ctx=256))
    fin = run(runtime.complete("hello world", SamplingParams(temperature=1.0, seed=1, max_tokens=500)))[1]
    assert fin.reason == "context_full"
    assert fin.metrics.context_used == fin.metrics.prompt_tokens + fin.metrics.output_tokens == runtime.n_ctx


@pytest.mark.parametrize("reason", ["length", "stop"])
def test_follow_up_turns_prefill_only_new_tokens(runtime: LocalRuntime, scripted: Scripted, reason: str) -> None:
    """Each answer is cut at max_tokens (`length`), or ends its turn (`stop`) before it."""
    runtime.load(LoadConfig(scripted(ENDLESS if reason == "length" else ENDS), n_ctx=2048))
    template = runtime.template()
    msgs = [ChatMessage("system", "You are terse.")]
    prev_text = None
    for turn in range(10):
        msgs.append(ChatMessage("user", f"turn {turn}: hello world"))
        prompt = template.render(msgs)
        # (speculation off: the last token given may be an accepted draft token, already evaluated, and
        # then one token fewer is new; test_speculative checks a second turn's reuse with it)
        _, fin, _ = run(runtime.chat(msgs, SamplingParams(temperature=0, max_tokens=12, speculative="off")))
        assert fin.reason == reason
        m = fin.metrics
        if prev_text is None:
            assert m.prompt_tokens_reused == 0
        else:
            new_tokens = len(runtime.tokenize(prompt[len(prev_text) :], special=True))
            # An answer cut at max_tokens ends with a sampled token that was never evaluated; it is
            # evaluated with the new message. After a natural end of turn nothing is carried over.
            new_tokens += 1 if reason == "length" else 0
            assert m.prompt_tokens - m.prompt_tokens_reused == new_tokens
            # llama.cpp's own counter agrees: only the new tokens were evaluated
            assert m.llama_prefill_tokens == new_tokens
        prev_text = prompt + fin.text
        msgs.append(ChatMessage("assistant", fin.text))


# ----- metrics and logging


def test_metrics_cross_checked_with_llama_perf(runtime: LocalRuntime, starter_model: Path) -> None:
    runtime.load(LoadConfig(starter_model, n_ctx=1024, threads=2))
    prompt = "Here is a long story about a dragon who lived in the mountains. " * 4
    # (speculation off: a verified draft's rejected tokens are llama.cpp decode tokens too)
    _, fin, _ = run(runtime.complete(prompt, SamplingParams(temperature=0.0, max_tokens=48, speculative="off")))
    m = fin.metrics
    assert m.output_tokens == 48 and fin.reason == "length"
    assert m.llama_prefill_tokens == m.prompt_tokens - m.prompt_tokens_reused
    assert m.llama_decode_tokens == m.output_tokens - 1  # the last sampled token is never evaluated
    llama_decode_tps = m.llama_decode_tokens / (m.llama_decode_ms / 1e3)
    llama_prefill_tps = m.llama_prefill_tokens / (m.llama_prefill_ms / 1e3)
    assert 0.7 < m.decode_tokens_per_s / llama_decode_tps <= 1.05
    assert 0.5 < m.prefill_tokens_per_s / llama_prefill_tps <= 1.05
    assert m.ttft_s * 1e3 >= m.llama_prefill_ms
    assert m.itl_p50_ms <= m.itl_p95_ms <= m.itl_p99_ms
    assert m.tpot_ms == pytest.approx(1e3 / m.decode_tokens_per_s)
    assert m.e2e_s >= m.ttft_s
    assert m.context_used == m.prompt_tokens + m.output_tokens and m.n_ctx == 1024
    assert (m.model, m.quantization, m.backend, m.threads, m.gpu_layers) == (
        "Gemma 3 270M (base model)",  # its one display name (engine/models/names.py)
        "Q4_K_M",
        "CPU",
        2,
        0,
    )


def test_llama_log_goes_to_python_logging(
    runtime: LocalRuntime, tiny_model: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="ember.llama"):
        runtime.load(LoadConfig(tiny_model, n_ctx=256))
    records = [r for r in caplog.records if r.name == "ember.llama"]
    assert records, "llama.cpp's load log should arrive in Python logging"
    assert any("llama_model_loader" in r.getMessage() or "print_info" in r.getMessage() for r in records)
    assert all(r.levelno < logging.ERROR for r in records)  # a clean load logs no errors
