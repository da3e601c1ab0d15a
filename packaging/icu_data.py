"""A smaller ICU data library for the bundle: the collation data and ICU's own tables, not every locale's texts.

Qt Core links ICU, whose data library (libicudata.so.73 in the PySide6 wheel) is 31 MB: one symbol,
`icudt73_dat`, holding a package of ~3,900 items. Qt asks ICU for four things (the ICU functions
libQt6Core.so imports): collation (`ucol_*`: QCollator, which the file dialogs sort names with), case
mapping (`u_strToUpper/Lower`: ICU's code, no data), time zone display names (`ucal_*`; Ember shows
none) and legacy text codecs (`ucnv_*`: QStringConverter for encodings other than UTF and Latin-1;
Ember decodes files in Python). So the bundle keeps the collation tree (`coll/`) and the top-level
tables ICU reads for any locale (likely subtags, plurals, time zone rules, normalisation, aliases),
and leaves out the converters' mapping tables (*.cnv), the locales' display texts (curr/, lang/,
region/, unit/, zone/, the top-level locale bundles), transliteration, number spelling and the
line-break dictionaries: about 5 MB instead of 31. A lookup that finds no data fails in ICU as
"missing resource" and Qt falls back (a time zone without a display name, a codec not available),
a locale without its collation tailoring sorts by the root order.

The package format (ICU's "CmnD" common data): the data header, a table of contents (a count, then
for each item the offsets of its name and data from the start of the table), the names, and the
items, each aligned to 16 bytes; the names stay in the original (sorted) order, as ICU looks them up
by binary search.
"""

import re
import struct
import subprocess
from pathlib import Path

ICU_DATA_SYMBOL = "icudt73_dat"
ICU_DATA_SONAME = "libicudata.so.73"
# locale display texts, transliteration, number spelling, line-break dictionaries: Qt asks ICU for none
DROPPED_TREES = ("brkitr/", "curr/", "lang/", "rbnf/", "region/", "translit/", "unit/", "zone/")
LOCALE_BUNDLE = re.compile(r"[a-z]{2,3}(_[A-Za-z0-9]+)*\.res")  # af.res, zh_Hant_TW.res (not root.res)


def kept(name: str) -> bool:
    """Whether the item `name` (e.g. "coll/de.res", "zoneinfo64.res") goes into the bundle's data."""
    if name.startswith(DROPPED_TREES) or name.endswith(".cnv"):
        return False
    return "/" in name or not LOCALE_BUNDLE.fullmatch(name)


def read_symbol(library: Path, symbol: str) -> bytes:
    """The bytes of the data symbol `symbol` in the shared library `library` (from nm and readelf)."""
    fields = subprocess.run(["nm", "-D", "-S", "--defined-only", str(library)], capture_output=True, text=True,
                            check=True).stdout.split()  # fmt: skip
    at = fields.index(symbol)
    address, size = int(fields[at - 3], 16), int(fields[at - 2], 16)
    sections = subprocess.run(["readelf", "-SW", str(library)], capture_output=True, text=True, check=True).stdout
    for line in sections.splitlines():
        parts = line.split("]", 1)[-1].split()
        if len(parts) > 4 and parts[1] in ("PROGBITS", "NOBITS"):
            start, offset, length = int(parts[2], 16), int(parts[3], 16), int(parts[4], 16)
            if start <= address < start + length:
                with open(library, "rb") as f:
                    f.seek(offset + address - start)
                    return f.read(size)
    raise ValueError(f"{symbol} lies in no section of {library}")


def items(package: bytes) -> tuple[bytes, list[tuple[str, bytes]]]:
    """The header and the (name, data) items of an ICU common data package (little-endian)."""
    header_size = struct.unpack_from("<H", package, 0)[0]
    if package[2:4] != b"\xda\x27" or package[12:16] != b"CmnD":
        raise ValueError("not an ICU common data package")
    toc = header_size
    count = struct.unpack_from("<I", package, toc)[0]
    entries = [struct.unpack_from("<II", package, toc + 4 + 8 * i) for i in range(count)]
    ends = [data for _, data in entries[1:]] + [len(package) - toc]
    found = []
    for (name_at, data_at), end in zip(entries, ends, strict=True):
        name = package[toc + name_at : package.index(b"\0", toc + name_at)].decode("ascii")
        found.append((name, package[toc + data_at : toc + end]))
    return package[:header_size], found


def package(header: bytes, chosen: list[tuple[str, bytes]]) -> bytes:
    """An ICU common data package of these items, in this order."""

    def pad(size: int) -> int:
        return -size % 16

    names = b""
    name_offsets = []
    table = 4 + 8 * len(chosen)
    for name, _ in chosen:
        name_offsets.append(table + len(names))
        names += name.encode("ascii") + b"\0"
    names += b"\0" * pad(table + len(names))
    data = b""
    data_offsets = []
    for _, item in chosen:
        data_offsets.append(table + len(names) + len(data))
        data += item + b"\0" * pad(len(item))
    toc = struct.pack("<I", len(chosen)) + b"".join(
        struct.pack("<II", n, d) for n, d in zip(name_offsets, data_offsets, strict=True)
    )
    return header + toc + names + data


def smaller_icu_data(original: Path, folder: Path) -> Path:
    """Build `folder`/libicudata.so.73 holding the kept items of `original`'s data; returns its path."""
    header, found = items(read_symbol(original, ICU_DATA_SYMBOL))
    prefix = found[0][0].split("/", 1)[0] + "/"  # "icudt73l/": every name carries the package's name
    chosen = [(name, data) for name, data in found if kept(name.removeprefix(prefix))]
    folder.mkdir(parents=True, exist_ok=True)
    dat = folder / f"{prefix[:-1]}.dat"
    dat.write_bytes(package(header, chosen))
    source = folder / "icudata.S"
    source.write_text(
        f".section .rodata\n.globl {ICU_DATA_SYMBOL}\n.type {ICU_DATA_SYMBOL}, @object\n.balign 16\n"
        f'{ICU_DATA_SYMBOL}:\n.incbin "{dat}"\n.size {ICU_DATA_SYMBOL}, .-{ICU_DATA_SYMBOL}\n'
        '.section .note.GNU-stack,"",@progbits\n'
    )
    library = folder / ICU_DATA_SONAME
    subprocess.run(["cc", "-shared", "-nostdlib", f"-Wl,-soname,{ICU_DATA_SONAME}", "-o", str(library), str(source)],
                   check=True)  # fmt: skip
    return library


if __name__ == "__main__":  # python packaging/icu_data.py LIBICUDATA OUT_FOLDER: build it alone, to try it
    import sys

    built = smaller_icu_data(Path(sys.argv[1]), Path(sys.argv[2]))
    print(f"{built}: {built.stat().st_size / 1e6:.1f} MB (was {Path(sys.argv[1]).stat().st_size / 1e6:.1f} MB)")
