"""A regular (non-editable) install works: the wheel holds everything under the `ember_chat`
namespace (code and the model catalog), nothing under generic top-level names, and installed into a
fresh virtualenv it opens the Model Manager with its catalog. No network: the wheel is built with the
test environment's setuptools, and the fresh virtualenv borrows the test environment's dependencies
(a .pth file) while Ember itself is installed from the wheel alone."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # real servers or a fresh virtualenv: seconds each

ROOT = Path(__file__).resolve().parent.parent

OPEN_MODEL_MANAGER = """
import os, sys, tempfile
d = tempfile.mkdtemp()
os.environ.update(QT_QPA_PLATFORM="offscreen", EMBER_DATA_DIR=d + "/data", EMBER_CONFIG_DIR=d + "/config")
import ember_chat.app, ember_chat.engine
for part in (ember_chat.app, ember_chat.engine):  # the installed copy, not the checkout
    assert "site-packages" in part.__file__, part.__file__
from PySide6.QtWidgets import QApplication
app = QApplication([])
from ember_chat.app.main import build_window
w = build_window()
mm = w.models.model_manager()
mm.show()
app.processEvents()
rows = mm.repos.rowCount()
w.close()
print("catalog rows", rows)
sys.exit(0 if rows > 0 else 1)
"""


def test_the_wheel_installs_and_opens_the_model_manager(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    offline = ["--no-index", "--no-deps", "-q"]
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-build-isolation", *offline, "-w",
                    str(wheels)], check=True, timeout=600)  # fmt: skip
    wheel = next(wheels.glob("ember_chat-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "ember_chat/resources/catalog.json" in names and "ember_chat/engine/serve/server.py" in names
    tops = {n.split("/")[0] for n in names}
    assert tops <= {"ember_chat", next(t for t in tops if t.endswith(".dist-info"))}  # no generic top-level names
    engine = ROOT / "engine" / "ember_chat" / "engine"
    engine_files = {p.relative_to(engine).as_posix() for p in engine.rglob("*.py")}
    assert {f"ember_chat/engine/{f}" for f in engine_files} <= set(names)  # every sub-package is listed

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    ours = sysconfig.get_path("purelib")  # the test environment's packages (its editable Ember is a finder
    Path(site, "test-dependencies.pth").write_text(ours + "\n")  # hook, which a .pth path never runs)
    subprocess.run([str(python), "-m", "pip", "install", *offline, str(wheel)], check=True, timeout=900)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    out = subprocess.run([str(python), "-c", OPEN_MODEL_MANAGER], capture_output=True, text=True, env=env,
                         timeout=300, cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    version = subprocess.run([str(venv / "bin" / "ember-chat"), "--version"], capture_output=True, text=True,
                             env=env, timeout=120, cwd=tmp_path)  # fmt: skip
    assert version.returncode == 0 and version.stdout.startswith("ember-chat ")
