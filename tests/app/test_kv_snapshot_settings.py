"""Issue 20, the settings side of KV snapshots and batched decoding: the disk cap of saved conversation
caches (a setting, 0: off) and the `parallel` load parameter flowing from the settings into the
LoadConfig a model is loaded with, like the other load settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtWidgets import QSpinBox
from pytestqt.qtbot import QtBot

from ember_chat.app.models.load_panel import LoadSettingsDialog
from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.models.gguf_inspect import inspect_gguf
from ember_chat.engine.storage.model_settings import ModelLoadSettings, ModelSettingsStore
from ember_chat.engine.storage.settings import Settings, SettingsFile


def test_the_snapshot_cap_is_a_setting_with_a_range_and_survives_a_restart(tmp_path: Path) -> None:
    assert Settings().kv_snapshot_cap_mb == 2048
    described = Settings.describe()["kv_snapshot_cap_mb"]
    assert (described["min"], described["max"]) == (0, 1_000_000) and "0: off" in described["description"]
    with pytest.raises(InvalidParameter):
        Settings(kv_snapshot_cap_mb=-1)
    f = SettingsFile(tmp_path / "settings.json")
    f.save(Settings(kv_snapshot_cap_mb=0))
    assert f.load().kv_snapshot_cap_mb == 0
    f.path.write_text(json.dumps({"kv_snapshot_cap_mb": "lots"}))  # hand-edited: the default, and said
    assert f.load().kv_snapshot_cap_mb == 2048
    assert any("kv_snapshot_cap_mb" in p for p in f.take_problems())


def test_parallel_flows_from_the_settings_into_the_load_config_like_the_other_load_settings(tmp_path: Path) -> None:
    assert Settings().parallel == 4
    described = Settings.describe()["parallel"]
    assert (described["min"], described["max"]) == (1, 16)
    with pytest.raises(InvalidParameter):
        Settings(parallel=0)
    store = ModelSettingsStore(tmp_path / "model_settings.json")
    model = tmp_path / "m.gguf"
    assert store.effective("m.gguf", Settings(parallel=2)).config(model).parallel == 2  # no own settings
    own = ModelLoadSettings.from_settings(Settings())
    store.save("m.gguf", ModelLoadSettings(**{**own.options(), "parallel": 1}))  # the model's own (the ⚙ panel) win
    assert store.effective("m.gguf", Settings(parallel=8)).config(model).parallel == 1
    f = SettingsFile(tmp_path / "settings.json")
    f.save(Settings(parallel=6))
    assert f.load().parallel == 6


def test_the_load_panel_has_parallel_sequences_and_saves_them(qtbot: QtBot, tiny_model: Path) -> None:
    dialog = LoadSettingsDialog(
        "tiny", inspect_gguf(tiny_model), ModelLoadSettings.from_settings(Settings(parallel=3)),
        free_ram=8 << 30, free_vram=None, gpu_offload=False,
    )  # fmt: skip
    qtbot.addWidget(dialog)
    spin = dialog.inputs["parallel"]
    assert isinstance(spin, QSpinBox) and (spin.minimum(), spin.maximum(), spin.value()) == (1, 16, 3)
    assert spin.accessibleName() == "Parallel sequences" and "one at a time" in spin.toolTip()
    spin.setValue(2)
    with qtbot.waitSignal(dialog.saved) as saved:
        assert dialog.submit(load_now=False)
    assert saved.args[0].parallel == 2 and saved.args[0].config(tiny_model).parallel == 2
