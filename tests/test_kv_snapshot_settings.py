"""Issue 20, the settings side of KV snapshots and batched decoding: the disk cap of saved conversation
caches (a setting, 0: off) and the `parallel` load parameter flowing from the settings into the
LoadConfig a model is loaded with, like the other load settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ember_chat.engine.errors import InvalidParameter
from ember_chat.engine.storage.model_settings import ModelSettingsStore
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
