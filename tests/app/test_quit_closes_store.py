"""Quitting the real app (`main()`, in its own process) closes the chat store once the window has shut
down, so the privacy sweep of what was deleted this session runs at quit (the tests' fixtures close the
store themselves; the app did not): a file attached only to a deleted message leaves the disk."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

ROOT = REPO

DRIVER = textwrap.dedent(
    """
    import hashlib, sys
    from pathlib import Path
    from ember_chat.app import main as m
    from ember_chat.engine.attachments.kinds import AttachmentKind, Extracted

    real_build = m.build_window
    blob = []

    def build(*args, **kwargs):
        w = real_build(*args, **kwargs)
        c = w.store.create_conversation("Private")
        q = w.store.add_message(c.id, "user", "my notes")
        w.store.add_message(c.id, "assistant", "noted", q.id)
        data = b"the tax return"
        att = w.attach.store.save(Extracted("tax.txt", AttachmentKind.TEXT, "text/plain", len(data),
                                            hashlib.sha256(data).hexdigest(), text=data.decode()))
        w.attach.store.link(q.id, [att.id])
        blob.append(w.attach.store.blob_path(att.sha256))
        w.chats.reload_conversations()
        w.chats.organise.delete_message(q.id)  # the message's Delete (undoable until the app quits)
        assert blob[0].exists()
        return w

    m.build_window = build
    rc = m.main(["--quit-when-ready"])
    print("blob left:", blob[0].exists())
    sys.exit(rc)
    """
)


@pytest.mark.slow
def test_quitting_the_app_sweeps_what_was_deleted_this_session(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "QT_QPA_PLATFORM": "offscreen",
        "EMBER_DATA_DIR": str(tmp_path / "data"),
        "EMBER_CONFIG_DIR": str(tmp_path / "config"),
    }
    out = subprocess.run([sys.executable, "-c", DRIVER], env=env, timeout=120, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "blob left: False" in out.stdout, out.stdout + out.stderr


RELOAD_DRIVER = textwrap.dedent(
    """
    import sys
    from PySide6.QtCore import QTimer
    from ember_chat.app import main as m

    real_build = m.build_window
    seen = []

    def build(*args, **kwargs):
        w = real_build(*args, **kwargs)
        panel = w.side.params

        def on_state(state):
            if state == "ready":
                QTimer.singleShot(0, after_load)  # (what the panel holds once every handler of the load ran)

        def after_load():
            seen.append(round(panel.temperature.value(), 2))
            if len(seen) == 1:
                def again():
                    panel.temperature.setValue(0.9)  # the user's own value, in the new chat
                    w.models.load_model(sys.argv[1])  # the model loaded again

                again()
            else:
                w.close()

        w.model_state_changed.connect(on_state)
        return w

    m.build_window = build
    rc = m.main(["--model", sys.argv[1], "--temperature", "0.1"])
    print("temperatures at each load:", seen)
    sys.exit(rc)
    """
)


@pytest.mark.slow
def test_the_command_lines_values_apply_to_the_first_load_only(tmp_path: Path, tiny_model: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "QT_QPA_PLATFORM": "offscreen",
        "EMBER_DATA_DIR": str(tmp_path / "data"),
        "EMBER_CONFIG_DIR": str(tmp_path / "config"),
    }
    out = subprocess.run(
        [sys.executable, "-c", RELOAD_DRIVER, str(tiny_model)], env=env, timeout=120, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert "temperatures at each load: [0.1, 0.9]" in out.stdout, out.stdout + out.stderr
