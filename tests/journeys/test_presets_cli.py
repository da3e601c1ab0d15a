"""A model's default preset where no window is: `ember-chat serve` (the LM Studio #1030 class: a model
used through the API gets its default preset; the request's own fields win) and `ember-chat run`
(`--preset NAME` too; the flags given win). Real subprocesses, the real `openai` client, a tiny GGUF."""

from __future__ import annotations

from pathlib import Path

import openai

from ember_chat.engine.storage.presets import PresetLibrary, model_key
from tests.helpers.presets_cli import metrics_of, run_cli, serving

PIRATE = "You are a pirate captain. Answer every question as a pirate would, with many nautical words, arr."


def test_a_model_served_through_the_api_gets_its_default_preset_and_the_request_wins(
    tiny_model: Path, tmp_path: Path
) -> None:
    lib = PresetLibrary(tmp_path / "config")
    short = lib.create_from("Short pirate", PIRATE, {"max_tokens": 3, "temperature": 0.0}, None)
    lib.set_model_default(model_key(str(tiny_model)), short.id)
    with serving(tmp_path, "--model", str(tiny_model)) as (url, line):
        assert "Short pirate" in line  # the terminal says which preset the API answers with
        with openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=60) as client:
            model = client.models.list().data[0].id
            plain = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}])
            assert plain.choices[0].finish_reason == "length" and plain.usage is not None
            assert plain.usage.completion_tokens == 3  # the preset's max tokens, not the API's 1,024
            own = client.chat.completions.create(
                model=model,
                messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
                max_tokens=6,
            )
            assert own.usage is not None and own.usage.completion_tokens == 6  # the request's own max tokens
            # the preset's system prompt was in the first prompt and not in the second (the request's own)
            assert plain.usage.prompt_tokens - own.usage.prompt_tokens >= len(PIRATE) // 2
            streamed = client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "Hi"}], stream=True,
                stream_options={"include_usage": True},
            )  # fmt: skip
            usage = [c.usage for c in streamed if c.usage is not None]
            assert usage[0].completion_tokens == 3 and usage[0].prompt_tokens == plain.usage.prompt_tokens

        lib.set_model_default(model_key(str(tiny_model)), None)  # changed while it serves: seen at once
        with openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=60) as client:
            after = client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=5, temperature=0
            )
            assert after.usage is not None and after.usage.prompt_tokens < plain.usage.prompt_tokens


def test_serve_with_a_preset_named_on_the_command_line(tiny_model: Path, tmp_path: Path) -> None:
    lib = PresetLibrary(tmp_path / "config")
    lib.create_from("Four", "", {"max_tokens": 4, "temperature": 0.0}, None)
    with serving(tmp_path, "--model", str(tiny_model), "--preset", "four") as (url, line):
        assert "Four" in line
        with openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=60) as client:
            out = client.completions.create(model=client.models.list().data[0].id, prompt="hello")
            assert out.usage is not None and out.usage.completion_tokens == 4


def test_run_applies_the_models_default_preset_a_named_one_and_the_flags_given_win(
    tiny_model: Path, tmp_path: Path
) -> None:
    lib = PresetLibrary(tmp_path / "config")
    seven = lib.create_from("Seven", PIRATE, {"max_tokens": 7, "temperature": 0.0}, None)
    lib.create_from("Two", "", {"max_tokens": 2, "temperature": 0.0}, None)
    lib.set_model_default(model_key(str(tiny_model)), seven.id)

    by_default = metrics_of(run_cli(tmp_path, "--model", str(tiny_model), "--prompt", "Hi"))
    assert by_default["output_tokens"] == 7  # the model's default preset (the CLI's own default is 256)
    flag = metrics_of(run_cli(tmp_path, "--model", str(tiny_model), "--prompt", "Hi", "--max-tokens", "5"))
    assert flag["output_tokens"] == 5  # a flag given wins
    own_system = metrics_of(run_cli(tmp_path, "--model", str(tiny_model), "--prompt", "Hi", "--system", "Hi."))
    assert int(by_default["prompt_tokens"]) - int(own_system["prompt_tokens"]) >= len(PIRATE) // 2  # type: ignore[call-overload]
    named = metrics_of(run_cli(tmp_path, "--model", str(tiny_model), "--prompt", "Hi", "--preset", "Two"))
    assert named["output_tokens"] == 2

    missing = run_cli(tmp_path, "--model", str(tiny_model), "--prompt", "Hi", "--preset", "Nope")
    assert missing.returncode == 2 and "No preset is called “Nope”" in missing.stderr
    assert "Seven" in missing.stderr and "Traceback" not in missing.stderr  # it lists the ones there are
