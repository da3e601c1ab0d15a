#!/usr/bin/env bash
# Build the installable desktop app into dist/ember-chat/ (a folder with the `ember-chat` executable).
# For a bundle that runs on other CPUs, build llama-cpp-python with CMAKE_ARGS="-DGGML_NATIVE=OFF" first.
set -euo pipefail
cd "$(dirname "$0")/.."
# A regular (non-editable) install in a build virtualenv of its own: PyInstaller then sees the real
# ember_chat package in site-packages.
python3 -m venv .venv-build
.venv-build/bin/pip install ".[starter,package]"
.venv-build/bin/pyinstaller --noconfirm --clean --distpath dist --workpath build/pyinstaller packaging/ember.spec
echo "Built dist/ember-chat/ember-chat"
