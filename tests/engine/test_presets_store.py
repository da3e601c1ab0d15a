"""Presets and the prompt library on disk (presets.json): a real file, written atomically, read
afresh when another program changed it, a damaged file set aside, bad imports refused in words."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.storage.presets import (
    DEFAULT_PRESET_ID,
    Preset,
    PresetError,
    PresetLibrary,
    model_key,
)
from ember_chat.engine.storage.settings import Settings


def test_a_fresh_library_has_the_built_in_default_that_mirrors_the_app_defaults(tmp_path: Path) -> None:
    lib = PresetLibrary(tmp_path)
    assert [p.id for p in lib.presets()] == [DEFAULT_PRESET_ID]
    default = lib.get(DEFAULT_PRESET_ID)
    assert default is not None and default.builtin and default.name == "Default"
    assert lib.default_id == DEFAULT_PRESET_ID and lib.default() == default
    settings = Settings(temperature=0.2, max_tokens=300, system_prompt="Be brief.")
    assert default.sampling(settings.sampling_params()) == settings.sampling_params()  # nothing changed
    assert default.system_prompt_over(settings.system_prompt) == "Be brief."
    assert not (tmp_path / "presets.json").exists()  # nothing written until something is saved


def test_presets_are_saved_atomically_and_read_back_by_another_library(tmp_path: Path) -> None:
    lib = PresetLibrary(tmp_path)
    coder = lib.create_from("Coder", "You write Python.", {"temperature": 0.1, "max_tokens": 2048}, thinking=False)
    poet = lib.create_from("poet", "Answer in verse.", {"temperature": 1.2}, None)
    assert coder.id != poet.id and coder.created_at > 0 and coder.updated_at >= coder.created_at
    assert [p.name for p in lib.presets()] == ["Default", "Coder", "poet"]  # Default first, then by name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["presets.json"]  # no temporary file left

    again = PresetLibrary(tmp_path)  # another program (the CLI, the API server) reads the same file
    assert again.get(coder.id) == coder
    applied = again.get(coder.id).sampling(SamplingParams())  # type: ignore[union-attr]
    assert (applied.temperature, applied.max_tokens, applied.thinking, applied.top_k) == (0.1, 2048, False, 40)

    lib.save(Preset(coder.id, "Coder 2", "You write Rust.", {"top_k": 5}, None, coder.created_at, 0))
    assert again.get(coder.id).name == "Coder 2"  # type: ignore[union-attr]  # the change is seen (file changed)
    assert [p.name for p in again.search("rust")] == ["Coder 2"]  # name or prompt, any case
    assert [p.name for p in again.search("POE")] == ["poet"]

    copy = lib.duplicate(poet.id)
    assert copy.id != poet.id and copy.name == "poet (copy)" and copy.params == poet.params
    lib.delete(poet.id)
    assert lib.get(poet.id) is None and PresetLibrary(tmp_path).get(copy.id) is not None
    with pytest.raises(PresetError, match="Default"):
        lib.delete(DEFAULT_PRESET_ID)


def test_new_chat_and_model_defaults(tmp_path: Path) -> None:
    lib = PresetLibrary(tmp_path)
    short = lib.create_from("Short", "", {"max_tokens": 3}, None)
    long = lib.create_from("Long", "Explain at length.", {"max_tokens": 4000}, True)
    lib.default_id = long.id
    lib.set_model_default("starter", short.id)
    reread = PresetLibrary(tmp_path)
    assert reread.default_id == long.id and reread.default() == long
    assert reread.model_default("starter") == short and reread.model_default("other.gguf") is None
    assert reread.for_model("starter") == short and reread.for_model("other.gguf") == long
    assert reread.for_model(None) == long
    lib.set_model_default("starter", None)
    assert PresetLibrary(tmp_path).model_default("starter") is None
    lib.set_model_default("starter", short.id)
    lib.delete(long.id)  # the default goes back to the built-in one; nothing points at a deleted preset
    lib.delete(short.id)
    reread = PresetLibrary(tmp_path)
    assert reread.default_id == DEFAULT_PRESET_ID and reread.model_default("starter") is None
    with pytest.raises(PresetError):
        lib.set_model_default("starter", "no-such-id")


def test_invalid_values_are_refused_in_words(tmp_path: Path) -> None:
    lib = PresetLibrary(tmp_path)
    with pytest.raises(PresetError, match="temperature must be between 0 and 5"):
        lib.create_from("Hot", "", {"temperature": 9}, None)
    with pytest.raises(PresetError, match="unknown parameter"):
        lib.create_from("X", "", {"warmth": 1}, None)
    with pytest.raises(PresetError, match="name"):
        lib.create_from("  ", "", {}, None)


def test_a_damaged_file_is_set_aside_with_a_message_and_never_crashes(tmp_path: Path) -> None:
    (tmp_path / "presets.json").write_text("{not json", encoding="utf-8")
    lib = PresetLibrary(tmp_path)
    assert [p.id for p in lib.presets()] == [DEFAULT_PRESET_ID]
    problems = lib.take_problems()
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("presets.damaged-")]
    assert len(aside) == 1 and aside[0].read_text() == "{not json"
    assert len(problems) == 1 and str(aside[0]) in problems[0] and "presets" in problems[0]
    lib.create_from("Kept", "", {}, None)  # saving works again, into a new file
    assert [p.name for p in PresetLibrary(tmp_path).presets()] == ["Default", "Kept"]


def test_an_invalid_entry_costs_only_itself_and_stays_in_the_file(tmp_path: Path) -> None:
    good = {"id": "a1", "name": "Good", "system_prompt": "", "params": {"top_p": 0.5}, "thinking": None,
            "created_at": 1.0, "updated_at": 1.0}  # fmt: skip
    bad = {"id": "b2", "name": "Bad", "params": {"temperature": "hot"}}
    (tmp_path / "presets.json").write_text(json.dumps({"presets": [good, bad]}), encoding="utf-8")
    lib = PresetLibrary(tmp_path)
    assert [p.name for p in lib.presets()] == ["Default", "Good"]
    problems = lib.take_problems()
    assert len(problems) == 1 and "Bad" in problems[0] and "temperature" in problems[0]
    lib.create_from("New", "", {}, None)
    kept = json.loads((tmp_path / "presets.json").read_text())["presets"]
    assert bad in kept  # for the user to fix


def test_export_and_import_json(tmp_path: Path) -> None:
    lib = PresetLibrary(tmp_path / "a")
    one = lib.create_from("Translator", "Translate to French.", {"temperature": 0.0}, None)
    two = lib.create_from("Summariser", "Summarise.", {"max_tokens": 200}, False)
    text = lib.export_json([one.id, two.id])
    assert json.loads(text)["presets"][0]["name"] == "Translator"

    other = PresetLibrary(tmp_path / "b")
    imported = other.import_json(text)
    assert [p.name for p in imported] == ["Translator", "Summariser"]
    assert [p.name for p in other.presets()] == ["Default", "Summariser", "Translator"]
    assert other.get(imported[1].id).params == {"max_tokens": 200}  # type: ignore[union-attr]
    again = other.import_json(text)  # the same ids again: new ids, nothing replaced
    assert {p.id for p in again}.isdisjoint({p.id for p in imported}) and len(other.presets()) == 5
    assert other.import_json(json.dumps({"presets": [{"name": "Bare"}]}))[0].name == "Bare"  # a hand-written one


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "no presets"),
        ('{"presets": [{"name": "X", "params": {"temperature": -1}}]}', "preset 1 (“X”): temperature"),
        ('{"presets": [{"system_prompt": "hi"}]}', "preset 1: it has no name"),
        ("", "empty"),
    ],
)
def test_bad_import_json_is_refused_with_a_clear_message_and_imports_nothing(
    tmp_path: Path, text: str, words: str
) -> None:
    lib = PresetLibrary(tmp_path)
    lib.create_from("Mine", "", {}, None)
    before = (tmp_path / "presets.json").read_bytes()
    with pytest.raises(PresetError) as err:
        lib.import_json(text)
    assert words in str(err.value) and "Traceback" not in str(err.value)
    assert (tmp_path / "presets.json").read_bytes() == before


def test_a_failed_save_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lib = PresetLibrary(tmp_path)
    lib.create_from("One", "", {}, None)

    def full_disk(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(PresetError, match=r"could not be saved \(No space left on device\)"):
        lib.create_from("Two", "", {}, None)
    monkeypatch.undo()
    assert [p.name for p in PresetLibrary(tmp_path).presets()] == ["Default", "One"]
    assert [p.name for p in lib.presets()] == ["Default", "One"]  # the library itself did not keep it either


def test_a_model_has_one_key_in_the_window_the_cli_and_the_api(tmp_path: Path) -> None:
    models = tmp_path / "models"
    (models / "org" / "repo").mkdir(parents=True)
    inside = models / "org" / "repo" / "tiny.gguf"
    inside.write_bytes(b"GGUF")
    outside = tmp_path / "elsewhere.gguf"
    outside.write_bytes(b"GGUF")
    assert model_key("org/repo/tiny.gguf", models) == "org/repo/tiny.gguf"  # the picker's name
    assert model_key(str(inside), models) == "org/repo/tiny.gguf"  # the same file by its path
    assert model_key(str(outside), models) == str(outside.resolve())
    assert model_key("starter", models) == "starter"
    assert model_key("remote:lab/qwen3", models) == "remote:lab/qwen3"
