"""The Parameters tab's "Think before answering" (issue 28, item 14): for a model that cannot think it
was ticked and greyed, which reads as "on". Greyed is now always unticked, with a tooltip that says
why; the chat's own choice comes back when a model that can think is loaded again. Real window, real
tiny models (one with a ChatML template, one with Qwen3's thinking switch)."""

from __future__ import annotations

from collections.abc import Callable

from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.engine.storage.paths import AppPaths
from tests.helpers.gguf_factory import TinySpec, write_tiny_model
from tests.helpers.reasoning_templates import QWEN3_STYLE
from tests.helpers.window import load


def test_the_think_box_is_unticked_and_says_why_for_a_model_that_cannot_think(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> None:
    write_tiny_model(paths.default_models_dir / "switch.gguf", TinySpec(chat_template=QWEN3_STYLE))
    w = make_window()
    think = w.side.params.think
    assert not think.isEnabled() and not think.isChecked()  # no model yet: off, not "on and greyed"
    assert "No model is loaded" in think.toolTip()
    load(qtbot, w, "tiny.gguf")  # ChatML: no thinking switch
    assert not think.isEnabled() and not think.isChecked()
    assert "cannot think" in think.toolTip() and "thinking switch" in think.toolTip()
    assert w.side.params.params().thinking is None  # (the engine is not asked either way)
    w.models.reload_models()
    load(qtbot, w, "switch.gguf")
    assert think.isEnabled() and think.isChecked() and w.side.params.params().thinking is True
    assert "cannot" not in think.toolTip()
    think.setChecked(False)  # the user turns it off for this chat
    load(qtbot, w, "tiny.gguf")
    assert not think.isEnabled() and not think.isChecked()
    load(qtbot, w, "switch.gguf")
    assert think.isEnabled() and not think.isChecked()  # the choice was kept, not the greyed look
    assert w.side.params.params().thinking is False
    think.setChecked(True)
    load(qtbot, w, "tiny.gguf")
    load(qtbot, w, "switch.gguf")
    assert think.isChecked() and w.side.params.params().thinking is True
    with qtbot.waitSignal(w.model_state_changed, check_params_cb=lambda s: s == "none", timeout=60_000):
        w.models.unload_model()
    assert not think.isEnabled() and not think.isChecked() and "No model is loaded" in think.toolTip()
