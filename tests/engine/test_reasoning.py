"""Reasoning models: thinking in one canonical form (`<think>…</think>` inline), whatever the model's
markers; control-token markers surviving detokenization; thinking kept out of the history sent back;
thinking tokens, time to the first answer token and the seed in the metrics."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ember_chat.engine.core.messages import ChatMessage
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.reasoning import (
    MarkerNormalizer,
    ThinkingStream,
    answer_only,
    prompt_opens_thinking,
    split_thinking,
)
from ember_chat.engine.inference.events import Finished, Token
from ember_chat.engine.inference.local.runtime import LocalRuntime
from ember_chat.engine.inference.prompt.templates import JinjaTemplate, template_message
from tests.helpers.gguf_factory import CHATML_TEMPLATE, TinySpec, any_of, says, write_tiny_model
from tests.helpers.reasoning_templates import QWEN3_STYLE
from tests.helpers.runtime_support import loaded


def test_split_thinking() -> None:
    s = split_thinking("<think>\nLet me see.\n</think>\n\nThe answer.")
    assert (s.thinking, s.answer, s.open) == ("Let me see.", "The answer.", False)
    assert split_thinking("<think>\nstill going").open
    assert split_thinking("Plain answer with <think> later").answer == "Plain answer with <think> later"
    assert answer_only("<think>x</think>y") == "y"
    assert prompt_opens_thinking("<｜Assistant｜><think>\n") and not prompt_opens_thinking("<|im_start|>assistant\n")


def _feed_all(n: MarkerNormalizer, pieces: list[str]) -> tuple[str, list[bool]]:
    out, flags = [], []
    for p in pieces:
        out.append(n.feed(p))
        flags.append(n.thinking)
    out.append(n.flush())
    return "".join(out), flags


def test_markers_split_over_pieces_are_normalized() -> None:
    text, flags = _feed_all(MarkerNormalizer(), ["<thi", "nk>\nhm", "m</th", "ink>\n\nYes", "."])
    assert text == "<think>\nhmm</think>\n\nYes."
    assert flags == [False, True, True, False, False]


def test_gpt_oss_channels_become_canonical() -> None:
    pieces = ["<|channel|>", "analysis", "<|message|>", "User asks.", "<|end|>", "<|start|>assistant",
              "<|channel|>final<|message|>", "Hello!"]  # fmt: skip
    text, _ = _feed_all(MarkerNormalizer(), pieces)
    assert text == "<think>User asks.</think>Hello!"
    assert split_thinking(text) == split_thinking("<think>User asks.</think>Hello!")


def test_gemma4_thought_channel_becomes_canonical() -> None:
    text, flags = _feed_all(MarkerNormalizer(), ["<|channel>", "thought\n", "Plan it.", "<channel|>", "Done."])
    assert text == "<think>\nPlan it.</think>Done."
    assert flags == [False, True, True, False, False]
    assert split_thinking(text).thinking == "Plan it." and split_thinking(text).answer == "Done."


def test_prompt_opened_thinking_gets_its_marker() -> None:
    text, flags = _feed_all(MarkerNormalizer(opened_by_prompt=True), ["Okay", ", so", "</think>", "Paris."])
    assert text == "<think>\nOkay, so</think>Paris." and flags[0]
    assert split_thinking(text).answer == "Paris."


@pytest.mark.parametrize("cut", range(1, 30))
def test_thinking_stream_splits_at_any_cut(cut: int) -> None:
    text = "<think>\nStep one.\nStep two.</think>\n\nThe answer is 4."
    stream = ThinkingStream()
    parts = [stream.feed(text[:cut]), stream.feed(text[cut:]), stream.flush()]
    thinking = "".join(p[0] for p in parts)
    answer = "".join(p[1] for p in parts)
    assert thinking == "Step one.\nStep two." and answer == "The answer is 4."


def test_thinking_stream_without_thinking() -> None:
    stream = ThinkingStream()
    assert stream.feed("Just ") == ("", "Just ") and stream.feed("text") == ("", "text")


def test_history_sent_back_leaves_thinking_out_unless_the_template_asks() -> None:
    answer = ChatMessage("assistant", "<think>\nprivate thoughts\n</think>\n\nHello there.")
    assert template_message(answer) == {
        "role": "assistant", "content": "Hello there.", "reasoning_content": "private thoughts",
        "thinking": "private thoughts",  # the name gpt-oss's template reads
    }  # fmt: skip
    chatml = JinjaTemplate(CHATML_TEMPLATE, "<s>", "</s>")
    rendered = chatml.render([ChatMessage("user", "hi"), answer, ChatMessage("user", "and?")])
    assert "private thoughts" not in rendered and "Hello there." in rendered
    keeps = JinjaTemplate(
        "{% for m in messages %}{% if m.reasoning_content %}[{{ m.reasoning_content }}]{% endif %}"
        "{{ m.content }}|{% endfor %}",
        "<s>",
        "</s>",
    )
    assert keeps.render([ChatMessage("user", "hi"), answer]) == "hi|[private thoughts]Hello there.|"


R1_STYLE = CHATML_TEMPLATE.replace("'<|im_start|>assistant\n'", "'<|im_start|>assistant\n<think>\n'")
assert R1_STYLE != CHATML_TEMPLATE


# What the scripted reasoning model says to anything: two thinking tokens, the closing marker, a
# two-token answer, the end of its turn.
THOUGHTS = says("▁hello", "▁world", "</think>", "▁Ember", "!", "</s>")


@pytest.fixture(scope="module")
def think_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = TinySpec(think_tokens=True, chat_template=R1_STYLE, script=THOUGHTS)
    return write_tiny_model(tmp_path_factory.mktemp("think") / "tiny-think.gguf", spec)


@pytest.fixture
def think_runtime(think_model: Path) -> Iterator[LocalRuntime]:
    with loaded(think_model, n_ctx=512) as rt:
        yield rt


@pytest.fixture(scope="module")
def flat_think_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A reasoning model that says any of six tokens at every step, all equally likely."""
    spec = TinySpec(
        think_tokens=True, chat_template=R1_STYLE, script=any_of("▁hello", "▁world", "▁Ember", "!", "?", ".")
    )
    return write_tiny_model(tmp_path_factory.mktemp("think") / "tiny-flat-think.gguf", spec)


def test_control_token_markers_survive_detokenization(think_runtime: LocalRuntime) -> None:
    ids = think_runtime.tokenize("<think>x</think>", special=True)
    assert len(think_runtime.tokenize("<think>", special=True)) == 1  # a single control token
    assert think_runtime._piece(ids[0]) == b"<think>" and think_runtime._piece(ids[-1]) == b"</think>"


def test_prompt_that_opens_thinking_marks_the_output_and_metrics(think_runtime: LocalRuntime) -> None:
    events = list(think_runtime.chat([ChatMessage("user", "hi")], SamplingParams(max_tokens=12, seed=7)))
    fin = events[-1]
    assert isinstance(fin, Finished) and fin.reason == "stop"
    # the prompt opened the thinking: the stored answer says so
    assert fin.text == "<think>\n hello world</think> Ember!"
    assert (split_thinking(fin.text).thinking, split_thinking(fin.text).answer) == (" hello world", " Ember!")
    tokens = [e for e in events if isinstance(e, Token) and e.count]
    assert [t.thinking for t in tokens] == [True, True, True, False, False]  # (the closing marker is thinking)
    assert (fin.metrics.thinking_tokens, fin.metrics.output_tokens) == (3, 5)
    assert fin.metrics.ttfat_s is not None and fin.metrics.ttfat_s >= fin.metrics.ttft_s
    assert fin.metrics.seed == 7 and "seed 7" in fin.metrics.summary_line()


def test_an_answer_cut_while_thinking_is_all_thinking(think_runtime: LocalRuntime) -> None:
    events = list(think_runtime.chat([ChatMessage("user", "hi")], SamplingParams(max_tokens=2)))
    fin = events[-1]
    assert isinstance(fin, Finished) and fin.reason == "length"
    assert fin.text == "<think>\n hello world" and split_thinking(fin.text).open
    assert [t.thinking for t in events if isinstance(t, Token) and t.count] == [True, True]
    assert (fin.metrics.thinking_tokens, fin.metrics.output_tokens) == (2, 2)
    assert fin.metrics.ttfat_s is None  # no answer token: no time to the first one


def test_the_seed_used_reproduces_the_answer(flat_think_model: Path) -> None:
    with loaded(flat_think_model, n_ctx=512) as rt:

        def run(seed: int | None) -> Finished:
            params = SamplingParams(temperature=1.0, max_tokens=16, seed=seed)
            fin = list(rt.chat([ChatMessage("user", "tell me")], params))[-1]
            rt.reset_cache()
            assert isinstance(fin, Finished) and fin.metrics.output_tokens == 16
            return fin

        first = run(None)
        assert isinstance(first.metrics.seed, int)  # a random seed, recorded
        assert run(first.metrics.seed).text == first.text
        # the seed decides: six equally likely tokens at every step, so two seeds part ways
        assert run(1).text == run(1).text != run(2).text


def test_continuing_inside_thinking_stays_thinking(think_runtime: LocalRuntime) -> None:
    partial = ChatMessage("assistant", "<think>\nfirst thoughts")
    events = list(think_runtime.chat([ChatMessage("user", "hi"), partial], SamplingParams(max_tokens=6, seed=1)))
    tokens = [e for e in events if isinstance(e, Token) and e.count]
    fin = events[-1]
    assert isinstance(fin, Finished)
    assert fin.text == " hello world</think> Ember!"  # the continuation does not open the thinking again
    assert [t.thinking for t in tokens] == [True, True, True, False, False]
    assert fin.metrics.thinking_tokens == 3


NO_SYSTEM = (
    "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
    "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n"
)
BROKEN_AT_RENDER = "{{ messages[99].content }}"
BROKEN_AT_COMPILE = "{% for m in messages %}{{ m.content | no_such_filter }}{% endfor %}"


def test_a_template_without_system_role_gets_the_system_prompt_in_the_first_message() -> None:
    from ember_chat.engine.inference.prompt.templates import BuiltinTemplate, render_chat

    messages = [ChatMessage("system", "Be terse."), ChatMessage("user", "hi")]
    text, notice = render_chat(JinjaTemplate(NO_SYSTEM, "<s>", "</s>"), messages, BuiltinTemplate("chatml"))
    assert "<|im_start|>user\nBe terse.\n\nhi<|im_end|>" in text and "system" not in text
    assert notice is not None and "no system role" in notice


@pytest.mark.parametrize("template", [BROKEN_AT_RENDER, BROKEN_AT_COMPILE], ids=["render", "compile"])
def test_a_template_that_cannot_render_falls_back_with_a_clear_message(tmp_path: Path, template: str) -> None:
    from ember_chat.engine.inference.events import TemplateFallback

    path = write_tiny_model(tmp_path / "broken.gguf", TinySpec(chat_template=template, script=says("▁hello", "▁world")))
    with loaded(path) as rt:
        events = list(rt.chat([ChatMessage("system", "x"), ChatMessage("user", "hi")], SamplingParams(max_tokens=3)))
    notices = [e for e in events if isinstance(e, TemplateFallback)]
    assert len(notices) == 1 and "chatml" in notices[0].message  # llama's built-in format: ChatML
    fin = events[-1]  # the chat still works
    assert isinstance(fin, Finished) and fin.text == " hello world hello" and fin.metrics.output_tokens == 3


def test_the_thinking_switch_reaches_templates_that_have_one(tmp_path: Path) -> None:
    hi = [ChatMessage("user", "hi")]
    t = JinjaTemplate(QWEN3_STYLE, "<s>", "</s>")
    assert t.thinking_switch
    assert t.render(hi).endswith("<|im_start|>assistant\n")  # the template's default: thinking on
    assert t.render(hi, thinking=True).endswith("<|im_start|>assistant\n")
    assert t.render(hi, thinking=False).endswith("<think>\n\n</think>\n\n")
    assert not JinjaTemplate(CHATML_TEMPLATE, "<s>", "</s>").thinking_switch
    path = write_tiny_model(
        tmp_path / "switch.gguf", TinySpec(chat_template=QWEN3_STYLE, script=says("▁hello", "▁world"))
    )
    with loaded(path) as rt:
        assert rt.description is not None and rt.description.thinking_switch
        fin = list(rt.chat(hi, SamplingParams(max_tokens=3, thinking=False)))[-1]
        assert isinstance(fin, Finished) and fin.text == " hello world hello"
        assert fin.metrics.thinking_tokens == 0  # the template closed the thinking: all answer
        # the model was given the prompt with the thinking closed (and a BOS)
        assert fin.metrics.prompt_tokens == 1 + len(rt.tokenize(t.render(hi, thinking=False), special=True))
        assert fin.metrics.prompt_tokens > 1 + len(rt.tokenize(t.render(hi), special=True))
    with pytest.raises(Exception, match="thinking"):
        SamplingParams(thinking="yes")  # type: ignore[arg-type]


END_OF_TURN = ("<|eot_id|>", "<end_of_turn>", "<|end|>", "<|endoftext|>", "<|return|>")


def test_every_end_of_turn_token_of_the_vocab_stops_generation(tmp_path: Path) -> None:
    """Model families end their turns with different tokens; llama.cpp marks each as end-of-generation
    from the vocabulary, and the runtime stops at any of them before it becomes text."""
    import llama_cpp

    for end in ("<|im_end|>", "</s>", *END_OF_TURN):
        # a model that says " hello world" and then ends its turn with this token
        spec = TinySpec(extra_control_tokens=END_OF_TURN, script=says("▁hello", "▁world", end))
        with loaded(write_tiny_model(tmp_path / "eog.gguf", spec)) as rt:
            ids = rt.tokenize(end, special=True)
            assert len(ids) == 1 and llama_cpp.llama_vocab_is_eog(rt._vocab, ids[0]), end
            # a chat answer never contains one: generation ends there
            fin = list(rt.chat([ChatMessage("user", "hi")], SamplingParams(max_tokens=40)))[-1]
            assert (fin.reason, fin.text, fin.metrics.output_tokens) == ("stop", " hello world", 2), end
            # (the model did say it: generating past it shows it)
            forced = list(rt.chat([ChatMessage("user", "hi")], SamplingParams(max_tokens=3, ignore_eos=True)))[-1]
            assert (forced.reason, forced.text) == ("length", " hello world" + end), end


def test_bos_is_never_doubled(tmp_path: Path) -> None:
    """A template that writes the BOS token itself (Llama 3, Gemma) and one that does not (ChatML)
    both give a prompt with exactly one BOS."""
    with_bos = "{{ bos_token }}" + CHATML_TEMPLATE
    for template in (with_bos, CHATML_TEMPLATE):
        path = write_tiny_model(tmp_path / "bos.gguf", TinySpec(chat_template=template))
        with loaded(path) as rt:
            text = rt.template().render([ChatMessage("user", "hi")])
            tokens = rt._prompt_tokens(text, special=True)
            bos = rt._require().token_bos()
            assert tokens[0] == bos and tokens.count(bos) == 1, template[:20]
