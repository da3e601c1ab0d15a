#!/usr/bin/env bash
# Build the distributable desktop app into dist/ember-chat/ (a folder with the `ember-chat` executable):
#   bash packaging/build.sh && bash packaging/smoke.sh dist/ember-chat
# 1. llama-cpp-python compiled for any x86-64 CPU of the last decade (GGML_NATIVE=OFF: the AVX2/FMA/F16C
#    baseline, not this machine's CPU), and NumPy without a BLAS library (llama-cpp-python and gguf only
#    use its arrays, never its linear algebra: 27 MB of OpenBLAS less), built once and cached outside
#    the checkout;
# 2. a build virtualenv with a regular (non-editable) install of Ember and that wheel;
# 3. PyInstaller with the checked-in spec (which leaves out what Ember does not use);
# 4. debug symbols stripped from the binaries where that is safe;
# 5. the size per component (dist/bundle-sizes.md), failing over either budget: 180 MB for the app without the
#    starter models and the voice runtime, VOICE_BUDGET_MB for the voice runtime (speech to text, microphone
#    and read-aloud).
set -euo pipefail
cd "$(dirname "$0")/.."
LLAMA_VERSION="$(grep -o 'llama-cpp-python==[0-9.]*' pyproject.toml | head -1 | cut -d= -f3)"
NUMPY_VERSION=2.4.6
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/ember-chat-build/wheels-portable"
mkdir -p "$CACHE"
python3 -m venv .venv-build
if ! ls "$CACHE"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
    echo "build: compiling llama-cpp-python $LLAMA_VERSION for any x86-64 CPU (about 15 minutes on 2 cores)"
    # --no-cache-dir: pip's own cache would hand back a build for this machine's CPU
    CMAKE_ARGS="-DGGML_NATIVE=OFF" .venv-build/bin/pip wheel "llama-cpp-python==$LLAMA_VERSION" --no-deps \
        --no-cache-dir -w "$CACHE"
fi
if ! ls "$CACHE"/numpy-"$NUMPY_VERSION"-*.whl >/dev/null 2>&1; then
    echo "build: compiling NumPy $NUMPY_VERSION without BLAS (about 6 minutes on 2 cores)"
    .venv-build/bin/pip wheel "numpy==$NUMPY_VERSION" --no-deps --no-binary numpy --no-cache-dir -w "$CACHE" \
        -Csetup-args=-Dblas=none -Csetup-args=-Dlapack=none -Csetup-args=-Dallow-noblas=true
fi
.venv-build/bin/pip install -q --force-reinstall --no-deps "$CACHE"/llama_cpp_python-"$LLAMA_VERSION"-*.whl \
    "$CACHE"/numpy-"$NUMPY_VERSION"-*.whl
.venv-build/bin/pip install -q --force-reinstall --no-deps .
.venv-build/bin/pip install -q ".[starter,package]"  # the rest; llama-cpp-python is already the portable one
.venv-build/bin/pyinstaller --noconfirm --clean --distpath dist --workpath build/pyinstaller packaging/ember.spec

# Stripping the patchelf-ed manylinux libraries (numpy.libs, PySide6's ICU data) breaks them: only these.
# The voice runtime's (checked: the stripped copies load and transcribe): CTranslate2's Python extension
# (68 MB with its debug info, 1.3 MB without) and library (81 -> 75 MB), tokenizers (11 -> 8 MB), PyAV's
# extensions (31 -> 5 MB; its FFmpeg libraries in av.libs come stripped).
INTERNAL=dist/ember-chat/_internal
for f in "$INTERNAL"/libpython3*.so* "$INTERNAL"/llama_cpp/lib/*.so* "$INTERNAL"/python3*/lib-dynload/*.so \
         "$INTERNAL"/cryptography/hazmat/bindings/_rust*.so "$INTERNAL"/yaml/_yaml*.so \
         "$INTERNAL"/numpy/_core/_multiarray_umath*.so "$INTERNAL"/PySide6/Qt/lib/libicuuc.so* \
         "$INTERNAL"/PySide6/Qt/lib/libicui18n.so* \
         "$INTERNAL"/ctranslate2/_ext*.so "$INTERNAL"/ctranslate2.libs/libctranslate2-*.so* \
         "$INTERNAL"/libctranslate2-*.so* "$INTERNAL"/tokenizers/tokenizers*.so "$INTERNAL"/av/*.so \
         "$INTERNAL"/av/*/*.so; do
    [ -f "$f" ] && strip --strip-unneeded "$f"
done
echo "Built dist/ember-chat/ember-chat"
# Its size, what each component weighs (the README's table; one measure, the files' bytes), and the budgets:
# the build fails over 180 MB without the starter models and the voice runtime, over VOICE_BUDGET_MB for the
# voice runtime, or when a library in the bundle needs one a rule in the spec left out.
.venv-build/bin/python packaging/bundle_sizes.py dist/ember-chat --budget-mb "${BUNDLE_BUDGET_MB:-180}" \
    --voice-budget-mb "${VOICE_BUDGET_MB:-190}" | tee dist/bundle-sizes.md
