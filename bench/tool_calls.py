"""Tool-call reliability and the cost of the call's grammar, through Ember's runtime and real llama.cpp.

Per family format (Hermes/Qwen, Llama 3.x, Mistral, gpt-oss: the real templates in tests/templates on
a tiny random-weight model, which cannot call a tool by itself, so every token of its call comes through
the grammar), N turns at temperature 1 with tool_choice required: how many calls were read, how many
were valid for their tool's schema (the window and the API never run or return an invalid one). Then
the real Gemma 3 270M (`gemma-3-270m`; its template has no tools: Hermes words) calling a tool, and its
decode speed under the call's grammar against free text of the same length. Prints JSON:

    python -m bench.tool_calls --json
    python -m bench.tool_calls --turns 50 --json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
from pathlib import Path

from ember_chat.engine.core.json_schema import schema_errors
from ember_chat.engine.core.params import LoadConfig, SamplingParams, default_threads
from ember_chat.engine.core.tools import ToolCall, ToolRequest, ToolSpec
from ember_chat.engine.inference.events import Finished
from ember_chat.engine.inference.local.runtime import LocalRuntime
from ember_chat.engine.inference.prompt.templates import ChatMessage

TEMPLATES = Path(__file__).resolve().parent.parent / "tests" / "templates"
FAMILIES = {
    "hermes (Qwen2.5)": "Qwen-Qwen2.5-7B-Instruct.jinja",
    "hermes (Qwen3, thinking)": "Qwen-Qwen3-0.6B.jinja",
    "llama3 (Llama 3.1)": "meta-llama-Llama-3.1-8B-Instruct.jinja",
    "mistral (Nemo)": "mistralai-Mistral-Nemo-Instruct-2407.jinja",
    "gpt-oss": "openai-gpt-oss-120b.jinja",
}
WEATHER = ToolSpec(
    "get_weather",
    "The weather in a city for some days.",
    {
        "type": "object",
        "properties": {
            "city": {"type": "string", "pattern": "^[A-Za-z ]{1,16}$"},
            "days": {"type": "integer", "minimum": 1, "maximum": 14},
            "unit": {"enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city", "days", "unit"],
        "additionalProperties": False,
    },
)
CLOCK = ToolSpec("now", "The time now.", {"type": "object", "properties": {}, "additionalProperties": False})
TOOLS = (WEATHER, CLOCK)
ASK = [ChatMessage("user", "What is the weather in Paris for the next 3 days, in celsius?")]


def turn(rt: LocalRuntime, request: ToolRequest, params: SamplingParams) -> Finished:
    done = [e for e in rt.chat(ASK, params, tools=request) if isinstance(e, Finished)]
    return done[-1]


def valid(call: object) -> bool:
    if not isinstance(call, ToolCall):
        return False
    spec = next((t for t in TOOLS if t.name == call.name), None)
    return spec is not None and not schema_errors(call.arguments, spec.parameters, "arguments")


def family_row(model: Path, turns: int, threads: int) -> dict[str, object]:
    rt = LocalRuntime()
    rt.load(LoadConfig(model, n_ctx=4096, threads=threads))
    try:
        calls = valid_calls = ended_with_calls = 0
        tokens = []
        for seed in range(1, turns + 1):
            request = ToolRequest(TOOLS, "required", parallel=False)  # (a random model never closes a list of calls)
            done = turn(rt, request, SamplingParams(temperature=1.0, seed=seed, max_tokens=600))
            calls += len(done.tool_calls)
            valid_calls += sum(valid(c) for c in done.tool_calls)
            ended_with_calls += done.reason == "tool_calls"
            tokens.append(done.metrics.output_tokens)
        return {
            "turns": turns,
            "turns_ending_in_calls": ended_with_calls,
            "calls": calls,
            "valid_calls": valid_calls,
            "invalid_calls": calls - valid_calls,
            "median_call_tokens": statistics.median(tokens),
        }
    finally:
        rt.close()


def starter_row(turns: int, threads: int) -> dict[str, object]:
    from ember_chat.engine.models.starter import GEMMA_ALIAS, starter_model_path

    rt = LocalRuntime()
    with tempfile.TemporaryDirectory() as tmp:
        rt.load(LoadConfig(starter_model_path(Path(tmp), GEMMA_ALIAS), n_ctx=4096, threads=threads))
        try:
            valid_calls, grammar_tps, free_tps, arguments = 0, [], [], []
            for seed in range(1, turns + 1):
                params = SamplingParams(temperature=0.7, seed=seed, max_tokens=200)
                done = turn(rt, ToolRequest(TOOLS, "get_weather", parallel=False), params)
                valid_calls += sum(valid(c) for c in done.tool_calls)
                arguments.append(done.tool_calls[0].arguments if done.tool_calls else None)
                n = done.metrics.output_tokens
                # free text of the same length, same prompt (KV reuse alike): the grammar's cost per token
                free = turn(rt, ToolRequest(TOOLS, "none"), SamplingParams(max_tokens=n, ignore_eos=True, seed=seed))
                grammar_tps.append(done.metrics.decode_tokens_per_s or 0.0)
                free_tps.append(free.metrics.decode_tokens_per_s or 0.0)
        finally:
            rt.close()
    return {
        "turns": turns,
        "valid_calls": valid_calls,
        "first_arguments": arguments[:3],
        "decode_tokens_per_s_under_call_grammar": round(statistics.median(grammar_tps), 1),
        "decode_tokens_per_s_free_text": round(statistics.median(free_tps), 1),
        "grammar_decode_ratio": round(statistics.median(grammar_tps) / statistics.median(free_tps), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from tests.helpers.gguf_factory import TinySpec, write_tiny_model

    families = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, file in FAMILIES.items():
            source = (TEMPLATES / file).read_text(encoding="utf-8")
            model = write_tiny_model(Path(tmp) / f"{file}.gguf", TinySpec(chat_template=source, context=4096))
            families[name] = family_row(model, args.turns, args.threads)
    result = {
        "benchmark": "tool_calls",
        "machine": platform.machine(),
        "threads": args.threads,
        "families_tiny_random_model": families,
        "starter": starter_row(max(3, args.turns // 4), args.threads),
    }
    print(json.dumps(result, indent=None if args.json else 1))


if __name__ == "__main__":
    main()
