"""Per-model load settings: the ⚙ panel with its live memory estimate, saved per model, applied on load,
shown in the badge; "auto" GPU layers from the GGUF header and free VRAM."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from pytestqt.qtbot import QtBot

from ember_chat.app.models.load_panel import LoadSettingsDialog
from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.inference.llama.loader import gpu_offload_supported
from ember_chat.engine.models.gguf_inspect import inspect_gguf
from ember_chat.engine.storage.model_settings import (
    AUTO_GPU_LAYERS,
    ModelLoadSettings,
    ModelSettingsStore,
    auto_gpu_layers,
)
from ember_chat.engine.storage.settings import Settings
from tests.helpers.window import LOAD_TIMEOUT


def test_store_round_trip_and_damage(tmp_path: Path) -> None:
    store = ModelSettingsStore(tmp_path / "model_settings.json")
    assert store.get("m.gguf") is None
    own = ModelLoadSettings(
        n_ctx=1024,
        threads=2,
        threads_batch=4,
        gpu_layers=AUTO_GPU_LAYERS,
        n_batch=256,
        flash_attn=True,
        kv_cache_type="q8_0",
        use_mmap=False,
        use_mlock=True,
    )
    store.save("m.gguf", own)
    assert store.get("m.gguf") == own and store.effective("x.gguf", Settings()).n_ctx == Settings().context_length
    (tmp_path / "model_settings.json").write_text("{not json")
    assert store.get("m.gguf") is None  # a damaged file: the global settings apply


def test_auto_gpu_layers_from_the_header(starter_model: Path) -> None:
    info = inspect_gguf(starter_model)
    layers = info.metadata["gemma3.block_count"]
    assert auto_gpu_layers(info, 4096, "f16", None) == 0  # no GPU
    assert auto_gpu_layers(info, 4096, "f16", 64 << 30) == layers  # plenty: all of them
    some = auto_gpu_layers(info, 4096, "f16", 150 << 20)
    assert 0 < some < layers
    assert auto_gpu_layers(info, 4096, "q4_0", 150 << 20) >= some  # a smaller cache leaves room for more
    own = ModelLoadSettings(n_ctx=4096, threads=2, threads_batch=2, gpu_layers=AUTO_GPU_LAYERS, n_batch=512)
    cfg = own.config(starter_model, info, 64 << 30)
    assert cfg.gpu_layers == layers


def test_the_panel_estimates_warns_and_saves(qtbot: QtBot, starter_model: Path) -> None:
    info = inspect_gguf(starter_model)
    current = ModelLoadSettings.from_settings(Settings())
    dialog = LoadSettingsDialog("gemma-3-270m", info, current, free_ram=8 << 30, free_vram=None)
    qtbot.addWidget(dialog)
    assert "fits" in dialog.estimate.text() and "VRAM" not in dialog.estimate.text()
    dialog.free_ram = 300 << 20
    dialog.n_ctx.setValue(32768)  # the estimate follows the change
    assert "will not fit" in dialog.estimate.text()
    saved: list[tuple[ModelLoadSettings, bool]] = []
    dialog.saved.connect(lambda s, now: saved.append((s, now)))
    assert not dialog.submit(load_now=False, confirm=False) and not saved  # asked first; declined
    assert dialog.flash.isChecked()  # (on by default)
    dialog.flash.setChecked(False)
    dialog.kv.setCurrentText("q8_0")
    assert not dialog.save_button.isEnabled() and "needs flash attention" in dialog.estimate.text()
    dialog.flash.setChecked(True)
    assert dialog.save_button.isEnabled()
    assert dialog.submit(load_now=True, confirm=True)
    assert saved[0][1] is True and saved[0][0].kv_cache_type == "q8_0" and saved[0][0].n_ctx == 32768


def test_a_model_loads_with_its_own_settings(qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    w = make_window()
    w.model_picker.setCurrentIndex(w.model_picker.findData("tiny.gguf"))
    with qtbot.waitSignal(w.load_settings_opened, timeout=LOAD_TIMEOUT):  # once the header is read
        w.models.open_load_settings()
    dialog = w.models.load_settings
    dialog.n_ctx.setValue(512)
    dialog.threads.setValue(1)
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "ready", timeout=LOAD_TIMEOUT):
        assert dialog.submit(load_now=True, confirm=True)
    assert w.model.n_ctx == 512 and "1 thread " in w.model_bar.badge.text() and "512 ctx" in w.model_bar.badge.text()
    w.close()
    again = make_window()  # saved per model: the next start loads it the same way
    with qtbot.waitSignal(again.model_state_changed, check_params_cb=lambda s: s == "ready", timeout=LOAD_TIMEOUT):
        again.models.load_model("tiny.gguf")
    assert again.model.n_ctx == 512 and again.model.threads == 1
    again.models.open_load_settings("remote:lab/x")
    assert "Choose a model on this computer" in again.banner.text()


def test_the_panel_warns_past_the_trained_context_and_about_gpu_layers_without_gpu(
    qtbot: QtBot, make_window: Callable[..., MainWindow], tiny_model: Path
) -> None:
    info = inspect_gguf(tiny_model)
    assert info.context_length == 2048
    current = replace(ModelLoadSettings.from_settings(Settings()), n_ctx=1024, gpu_layers=0)
    dialog = LoadSettingsDialog("tiny", info, current, free_ram=8 << 30, free_vram=None, gpu_offload=True)
    qtbot.addWidget(dialog)
    dialog.show()
    assert not dialog.ctx_warning.isVisible() and not dialog.gpu_note.isVisible()
    dialog.n_ctx.setValue(2048)
    assert not dialog.ctx_warning.isVisible()
    dialog.n_ctx.setValue(4096)
    assert dialog.ctx_warning.isVisible() and "2,048 tokens this model was trained for" in dialog.ctx_warning.text()
    dialog.gpu_layers.setValue(-1)
    assert not dialog.gpu_note.isVisible()  # a GPU build: layers do something
    cpu_only = LoadSettingsDialog("tiny", info, current, free_ram=8 << 30, free_vram=8 << 30, gpu_offload=False)
    qtbot.addWidget(cpu_only)
    cpu_only.show()
    assert not cpu_only.gpu_note.isVisible()  # 0 layers: nothing to say
    cpu_only.gpu_layers.setValue(-1)
    assert cpu_only.gpu_note.isVisible() and "No effect" in cpu_only.gpu_note.text()
    assert "VRAM" not in cpu_only.estimate.text()  # nothing goes to the GPU, whatever it has free
    # in the window: the tiny model (trained for 2,048) at the default 4,096, on this machine's build
    w = make_window()
    w.model_picker.setCurrentIndex(w.model_picker.findData("tiny.gguf"))
    w.settings = w.settings.with_changes(gpu_layers=-1)
    with qtbot.waitSignal(w.load_settings_opened, timeout=LOAD_TIMEOUT):
        w.models.open_load_settings()
    shown = w.models.load_settings
    assert shown.n_ctx.value() > 2048 and shown.ctx_warning.isVisible()
    assert shown.gpu_note.isVisible() == (not gpu_offload_supported())
