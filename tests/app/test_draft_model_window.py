"""A model's draft model in the window: the ⚙ load settings' "Draft model" (Choose… / None), saved per
model in model_settings.json and loaded with the model; a draft that cannot be used is said in the
banner while the model loads and answers without it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.storage.model_settings import ModelLoadSettings, ModelSettingsStore
from ember_chat.engine.storage.settings import Settings
from tests.helpers.gguf_factory import TinySpec, write_tiny_model
from tests.helpers.window import LOAD_TIMEOUT


def test_the_draft_model_is_saved_per_model_and_goes_into_the_load_config(tmp_path: Path) -> None:
    store = ModelSettingsStore(tmp_path / "model_settings.json")
    plain = ModelLoadSettings.from_settings(Settings())
    store.save("a.gguf", plain)
    with_draft = ModelLoadSettings(**plain.options(), draft_model=str(tmp_path / "small.gguf"))
    store.save("b.gguf", with_draft)
    saved = json.loads((tmp_path / "model_settings.json").read_text())
    assert "draft_model" not in saved["a.gguf"]  # (an entry without one is saved as before)
    assert store.get("a.gguf") == plain and store.get("b.gguf") == with_draft
    assert with_draft.config(tmp_path / "b.gguf").draft_model == tmp_path / "small.gguf"
    assert plain.config(tmp_path / "a.gguf").draft_model is None
    # a saved value that is no file's path costs that model's entry, said as a problem
    saved["b.gguf"]["draft_model"] = 7
    (tmp_path / "model_settings.json").write_text(json.dumps(saved))
    assert store.get("b.gguf") is None
    assert any("draft model" in problem for problem in store.take_problems())


def load_with(qtbot: QtBot, w: MainWindow, draft: str | None) -> None:
    with qtbot.waitSignal(w.load_settings_opened, timeout=LOAD_TIMEOUT):
        w.models.open_load_settings("tiny.gguf")
    dialog = w.models.load_settings
    dialog.n_ctx.setValue(512)
    dialog.set_draft_model(draft)
    assert dialog.draft_label.text() == (Path(draft).name if draft else "none")
    assert dialog.draft_clear.isEnabled() == (draft is not None)
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "ready", timeout=LOAD_TIMEOUT):
        assert dialog.submit(load_now=True, confirm=True)


def test_the_window_loads_the_chosen_draft_model_and_says_why_one_is_refused(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path
) -> None:
    spec = TinySpec(layers=1, extra_control_tokens=("<|x|>",))  # (smaller: its vocabulary is the reason)
    other_vocabulary = write_tiny_model(tmp_path / "other.gguf", spec)
    same_vocabulary = write_tiny_model(tmp_path / "same.gguf", TinySpec(seed=7))
    w = make_window()
    w.model_picker.setCurrentIndex(w.model_picker.findData("tiny.gguf"))
    load_with(qtbot, w, str(other_vocabulary))
    assert w.model.draft_model is None and w.model.n_ctx == 512  # loaded, without the draft
    assert "other.gguf" in w.banner.text() and "vocabulary" in w.banner.text()
    load_with(qtbot, w, str(same_vocabulary))
    assert w.model.draft_model == "same.gguf" and w.model.draft_refused is None
    w.close()
    again = make_window()  # saved per model: the next load takes it again
    with qtbot.waitSignal(again.model_state_changed, check_params_cb=lambda s: s == "ready", timeout=LOAD_TIMEOUT):
        again.models.load_model("tiny.gguf")
    assert again.model.draft_model == "same.gguf"


def test_the_window_s_api_server_loads_a_model_with_its_draft_model(tmp_path: Path) -> None:
    """A model the window's API server loads on demand gets its ⚙ draft model, as the window loads it."""
    from ember_chat.app.server.api_pool import window_catalog
    from ember_chat.engine.models.library import ModelLibrary

    folder = tmp_path / "models"
    folder.mkdir()
    write_tiny_model(folder / "big.gguf")
    write_tiny_model(folder / "plain.gguf")
    draft = write_tiny_model(tmp_path / "small.gguf", TinySpec(seed=7))
    store = ModelSettingsStore(tmp_path / "model_settings.json")
    settings = ModelLoadSettings.from_settings(Settings())
    store.save("big.gguf", ModelLoadSettings(**settings.options(), draft_model=str(draft)))
    library = ModelLibrary(folder, hf_cache=tmp_path / "hf", starters=())
    catalog = window_catalog(lambda: library, store, Settings)()
    big, plain = catalog["big.gguf"], catalog["plain.gguf"]
    assert isinstance(big, LoadConfig) and isinstance(plain, LoadConfig)
    assert big.draft_model == draft and plain.draft_model is None
