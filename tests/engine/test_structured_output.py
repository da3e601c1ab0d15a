"""Structured output: grammars from response_format / grammar / json_schema, checked on entry, and
real llama.cpp generation constrained by them (the tiny model, and the starter)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.inference.events import Finished
from ember_chat.engine.inference.grammar.json_check import json_problem
from ember_chat.engine.inference.grammar.structured import parse_schema_text, response_format_grammar
from ember_chat.engine.inference.prompt.templates import ChatMessage
from tests.helpers.cli import cli
from tests.helpers.json_schemas import PERSON
from tests.helpers.remote_support import HI, Backends, drain
from tests.helpers.runtime_support import loaded
from tests.helpers.sse_server import DONE, FakeOpenAI, chunk

pytestmark = pytest.mark.usefixtures("no_thread_left")


def test_response_format_maps_to_grammars() -> None:
    assert response_format_grammar(None) is None
    assert response_format_grammar({"type": "text"}) is None
    any_json = response_format_grammar({"type": "json_object"})
    assert any_json is not None and "root" in any_json and "object" in any_json
    wrapped = response_format_grammar({"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}})
    assert wrapped is not None and '\\"name\\"' in wrapped and '\\"age\\"' in wrapped
    assert response_format_grammar(None, json_schema=PERSON) == wrapped  # llama.cpp's json_schema field
    assert response_format_grammar(None, grammar='root ::= "yes" | "no"') == 'root ::= "yes" | "no"'


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (({"type": "xml"},), "must be text, json_object or json_schema"),
        (({"type": "json_schema"},), "needs"),
        (({"type": "json_schema", "json_schema": {"schema": {"type": "martian"}}},), "cannot be used"),
        (({"type": "json_schema", "json_schema": {"schema": 5}},), "must be a JSON object"),
        (({"type": "json_schema", "json_schema": {"schema": {"$ref": "#/defs/x"}}},), "cannot be used"),
        ((None, 'root ::= "unclosed'), "not valid GBNF"),
        ((None, "other ::= [a-z]"), "not valid GBNF"),
        (({"type": "json_object"}, 'root ::= "x"'), "only one of response_format and grammar"),
    ],
)
def test_bad_formats_say_what_is_wrong(args: tuple, words: str) -> None:
    with pytest.raises(InvalidParameter, match=words):
        response_format_grammar(*args)


def test_a_typed_schema_is_checked_on_entry() -> None:
    assert parse_schema_text("  ") is None
    assert parse_schema_text(json.dumps(PERSON)) == PERSON
    with pytest.raises(InvalidParameter, match=r"not valid JSON \(line 1, column 2"):
        parse_schema_text("{type: 1}")
    with pytest.raises(InvalidParameter, match="cannot be used"):
        parse_schema_text('{"type": "martian"}')


def test_the_small_validator() -> None:
    person = {"name": "Ada", "age": 36, "tags": ["a"]}
    assert json_problem(json.dumps(person), PERSON) is None
    assert json_problem(json.dumps(person), None) is None
    assert json_problem("{not json", None) == "not JSON"
    assert json_problem('{"name": "Ada", "tags": []}', PERSON) == "the JSON lacks required 'age'"
    assert json_problem('{"name": "Ada", "age": 3.5, "tags": []}', PERSON) == "age must be integer, got number"
    assert json_problem('{"name": "Ada", "age": 3, "tags": ["c"]}', PERSON) == 'tags[0] must be one of ["a", "b"]'
    assert json_problem('{"name": "Ada", "age": 3, "tags": [], "x": 1}', PERSON) == "the JSON has no property 'x'"
    assert (
        json_problem("[1, true]", {"type": "array", "items": {"type": "number"}}) == "[1] must be number, got boolean"
    )
    assert json_problem('{"name": "Ada 2", "age": 3, "tags": []}', PERSON) == "name does not match ^[A-Za-z ]{1,12}$"
    assert json_problem('"ab"', {"type": "string", "maxLength": 1}) == "the JSON is longer than 1 characters"


def test_sampling_params_check_the_grammar() -> None:
    with pytest.raises(InvalidParameter, match="grammar must be GBNF text"):
        SamplingParams(grammar=" ")
    params = SamplingParams(grammar='root ::= "a"')
    assert SamplingParams.from_dict(params.to_dict()) == params
    assert "grammar" not in SamplingParams().to_dict()  # saved chats stay as they were


def _answer(rt: object, params: SamplingParams, text: str = "Describe a person.") -> Finished:
    events = list(rt.chat([ChatMessage("user", text)], params))  # type: ignore[attr-defined]
    done = events[-1]
    assert isinstance(done, Finished)
    return done


def test_the_tiny_model_answers_in_json_matching_the_schema(tiny_model: Path) -> None:
    grammar = response_format_grammar({"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}})
    with loaded(tiny_model, n_ctx=1024) as rt:
        free = _answer(rt, SamplingParams(temperature=0.0, max_tokens=40))
        assert json_problem(free.text, PERSON) is not None  # unconstrained, the tiny model babbles
        for seed in (1, 2, 3):
            done = _answer(rt, SamplingParams(temperature=1.0, seed=seed, max_tokens=400, grammar=grammar))
            assert done.reason == "stop", done.text
            assert json_problem(done.text, PERSON) is None, done.text
        # the KV prefix is still reused by a constrained follow-up
        again = list(rt.chat([ChatMessage("user", "Describe a person.")], SamplingParams(temperature=0.0,
                     max_tokens=400, grammar=grammar)))  # fmt: skip
        assert again[0].prompt_tokens_reused > 0  # type: ignore[attr-defined]


def test_response_format_in_the_params_constrains_and_is_checked(tiny_model: Path) -> None:
    schema_format = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}
    with loaded(tiny_model, n_ctx=1024) as rt:
        done = _answer(rt, SamplingParams(temperature=1.0, seed=4, max_tokens=400, response_format=schema_format))
        assert json_problem(done.text, PERSON) is None, done.text
        assert done.metrics.json_check == "valid"
        assert "valid JSON" in done.metrics.summary_line()
        any_json = {"type": "json_object"}
        cut = _answer(rt, SamplingParams(temperature=1.0, seed=4, max_tokens=5, response_format=any_json))
        assert cut.reason == "length" and cut.metrics.json_check == "not JSON"
        assert "not valid JSON: not JSON" in cut.metrics.summary_line()
        free = _answer(rt, SamplingParams(temperature=0.0, max_tokens=5))
        assert free.metrics.json_check is None and "JSON" not in free.metrics.summary_line()
        with pytest.raises(InvalidParameter, match="cannot be used"):
            _answer(rt, SamplingParams(response_format={"type": "json_schema", "json_schema": {"schema": {"type": 3}}}))
    with pytest.raises(InvalidParameter, match="response_format must be"):
        SamplingParams(response_format={"type": "yaml"})
    params = SamplingParams(response_format=schema_format)
    assert SamplingParams.from_dict(params.to_dict()) == params  # (saved with a chat's parameters)


def test_a_remote_server_gets_response_format_as_it_is(server: FakeOpenAI, backends: Backends) -> None:
    server.stream([chunk('{"name": "Ada", '), chunk('"age": 36, "tags": []}'), chunk(finish="stop"), DONE])
    backend = backends.make(server)
    schema_format = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}
    _, fin = drain(backend.chat(HI, SamplingParams(response_format=schema_format)))
    assert server.generate_requests()[-1].body["response_format"] == schema_format
    assert "grammar" not in server.generate_requests()[-1].body
    assert fin.metrics.json_check == "valid"
    _, fin = drain(backend.chat(HI, SamplingParams(response_format={"type": "json_object"}, grammar='root ::= "{}"')))
    assert server.generate_requests()[-1].body["grammar"] == 'root ::= "{}"'
    _, fin = drain(backend.chat(HI, SamplingParams()))
    assert {"response_format", "grammar"}.isdisjoint(server.generate_requests()[-1].body)
    assert fin.metrics.json_check is None


def test_a_yes_no_grammar_forces_the_answer(tiny_model: Path) -> None:
    with loaded(tiny_model) as rt:
        with pytest.raises(InvalidParameter, match="not valid GBNF"):  # never reaches llama.cpp's sampler
            _answer(rt, SamplingParams(grammar="root ::= ("))
        done = _answer(rt, SamplingParams(temperature=1.0, seed=5, max_tokens=20, grammar='root ::= "yes" | "no"'))
        assert done.text in ("yes", "no")


def test_the_starter_answers_in_json(starter_model: Path) -> None:
    """The real Gemma 3 270M (a base model) under both formats. (Free JSON has no length bound: greedily
    it lists fields for thousands of tokens, so that case samples, with a fixed seed.)"""
    schema_format = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}
    with loaded(starter_model, n_ctx=1024) as rt:
        cases = (
            (schema_format, PERSON, {"temperature": 0.0}),
            (schema_format, PERSON, {"temperature": 0.7, "seed": 1}),
            ({"type": "json_object"}, None, {"temperature": 0.7, "seed": 1}),
        )
        for fmt, schema, sampling in cases:
            params = SamplingParams(max_tokens=300, grammar=response_format_grammar(fmt), **sampling)
            done = _answer(rt, params, "A JSON person:")
            assert done.reason == "stop", done.text
            assert isinstance(json.loads(done.text), dict)
            assert json_problem(done.text, schema) is None, done.text


# ----- the command line
def _cli_answer(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_cli_json_schema_and_json_object(tiny_model: Path, tmp_path: Path) -> None:
    schema_file = tmp_path / "person.json"
    schema_file.write_text(json.dumps(PERSON))
    base = ("run", "--model", str(tiny_model), "--prompt", "A person?", "--ctx", "1024", "--threads", "1",
            "--temperature", "1", "--max-tokens", "400")  # fmt: skip
    out = cli(*base, "--seed", "3", "--json-schema", str(schema_file))
    assert json_problem(_cli_answer(out), PERSON) is None, out.stdout
    assert "valid JSON" in out.stderr  # the metrics line
    out = cli(*base, "--seed", "3", "--json-object")  # (any JSON has no length bound: a seed where it ends)
    assert isinstance(json.loads(_cli_answer(out)), dict), out.stdout
    bad = tmp_path / "bad.json"
    bad.write_text('{"type": "martian"}')
    out = cli(*base, "--json-schema", str(bad))
    assert out.returncode != 0 and "cannot be used to constrain the answer" in out.stderr
    assert "Traceback" not in out.stderr
    out = cli(*base, "--json-schema", str(tmp_path / "missing.json"))
    assert out.returncode != 0 and "missing.json" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.slow
def test_cli_gemma_answers_the_schema(tmp_path: Path) -> None:
    schema_file = tmp_path / "person.json"
    schema_file.write_text(json.dumps(PERSON))
    out = cli("run", "--model", "gemma-3-270m", "--prompt", "A JSON person:", "--temperature", "0",
              "--max-tokens", "200", "--json-schema", str(schema_file), data_dir=tmp_path)  # fmt: skip
    answer = _cli_answer(out)
    assert json_problem(answer, PERSON) is None, answer
    assert "valid JSON" in out.stderr


def test_a_thinking_switch_is_turned_off_under_a_grammar(tmp_path: Path) -> None:
    """A grammar constrains the answer from its first token: a template with a thinking switch (Qwen3)
    is rendered with the thinking closed, or the JSON would be written as thoughts."""
    from tests.helpers.gguf_factory import TinySpec, says, write_tiny_model
    from tests.helpers.reasoning_templates import QWEN3_STYLE

    path = write_tiny_model(tmp_path / "q3.gguf", TinySpec(chat_template=QWEN3_STYLE, script=says("▁hello")))
    hi = [ChatMessage("user", "hi")]
    with loaded(path) as rt:
        closed = rt.template().render(hi, thinking=False)
        done = list(rt.chat(hi, SamplingParams(max_tokens=20, grammar='root ::= "{}"')))[-1]
        assert (done.text, done.metrics.thinking_tokens) == ("{}", 0)
        assert done.metrics.prompt_tokens == 1 + len(rt.tokenize(closed, special=True))
        fmt = {"type": "json_object"}
        done = list(rt.chat(hi, SamplingParams(max_tokens=20, thinking=True, response_format=fmt)))[-1]
        assert done.metrics.thinking_tokens == 0 and done.metrics.prompt_tokens == 1 + len(
            rt.tokenize(closed, special=True)
        )


def test_a_json_answer_cut_short_is_not_continued_into_garbage(tiny_model: Path) -> None:
    """The grammar starts at the beginning of the answer: a continued JSON answer would get a second
    document after the cut one. Continuing is refused with a sentence that says what to do instead."""
    partial = [ChatMessage("user", "A person?"), ChatMessage("assistant", '{"name": "Ad')]
    with loaded(tiny_model) as rt:
        with pytest.raises(InvalidParameter, match=r"cannot be continued.*larger max tokens"):
            list(rt.chat(partial, SamplingParams(max_tokens=5, response_format={"type": "json_object"})))
        done = list(rt.chat(partial, SamplingParams(max_tokens=3)))[-1]  # free text continues as before
        assert isinstance(done, Finished)
