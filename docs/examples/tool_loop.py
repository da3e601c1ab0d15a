"""The `openai` client's tool-calling loop against Ember's API server (`ember-chat serve`).

    ember-chat serve --model ~/.local/share/Ember/models/<a model>.gguf
    python docs/examples/tool_loop.py --base-url http://127.0.0.1:8080/v1 "What is 17.5 * 4, and what time is it?"

The model asks for calls; this script runs them (two small tools of its own), sends each result back
as a `tool` message, and asks again until the model answers in words. With a model that cannot call
tools by itself (a base model such as gemma-3-270m), `--first-choice required` makes its first turn a
call: Ember's grammar holds the call to the tool's JSON schema.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from typing import Any

import openai

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "multiply",
            "description": "Multiply two numbers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "current_time",
            "description": "The local date and time now.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]


def run_tool(name: str, arguments: dict[str, Any]) -> str:
    if name == "multiply":
        return str(float(arguments["a"]) * float(arguments["b"]))
    if name == "current_time":
        return dt.datetime.now().isoformat(timespec="seconds")
    return f"Error: there is no tool named {name!r}."


def tool_loop(
    client: openai.OpenAI, model: str, question: str, first_choice: str = "auto", max_rounds: int = 5
) -> tuple[str, list[tuple[str, dict[str, Any], str]]]:
    """The model's final answer, and the calls it made: (name, arguments, result)."""
    messages: list[Any] = [{"role": "user", "content": question}]
    made: list[tuple[str, dict[str, Any], str]] = []
    for round_ in range(max_rounds):
        response = client.chat.completions.create(
            model=model,
            messages=messages,
            tools=TOOLS,
            tool_choice=first_choice if round_ == 0 else "auto",
            parallel_tool_calls=not (round_ == 0 and first_choice == "required"),  # one forced call, not a row
            max_tokens=200,
        )
        message = response.choices[0].message
        if not message.tool_calls:
            return message.content or "", made
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            arguments = json.loads(call.function.arguments)
            result = run_tool(call.function.name, arguments)
            made.append((call.function.name, arguments, result))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return f"(the model was still calling tools after {max_rounds} rounds)", made


def main() -> None:
    parser = argparse.ArgumentParser(description="The openai client's tool loop against ember-chat serve.")
    parser.add_argument("question")
    parser.add_argument("--base-url", default="http://127.0.0.1:8080/v1")
    parser.add_argument("--api-key", default="none", help="the server's key, if it was started with one")
    parser.add_argument("--model", help="the model's name (default: the one the server serves)")
    parser.add_argument("--first-choice", default="auto", choices=["auto", "required"])
    args = parser.parse_args()
    client = openai.OpenAI(base_url=args.base_url, api_key=args.api_key)
    model = args.model or client.models.list().data[0].id
    answer, made = tool_loop(client, model, args.question, args.first_choice)
    for name, arguments, result in made:
        print(f"called {name}({json.dumps(arguments)}) -> {result}")
    print(answer)


if __name__ == "__main__":
    main()
