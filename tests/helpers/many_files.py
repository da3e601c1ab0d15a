"""A folder of very many tiny files, written fast (a project's source of 100,000+ files: issue 34), and
this process's peak resident memory over a stretch of work (Linux: /proc/self)."""

from __future__ import annotations

import os
from pathlib import Path

PER_FOLDER = 50


def make_files(root: Path, count: int) -> None:
    """`count` tiny .txt files ("note <i>"), PER_FOLDER per folder, the folders nested three deep
    (root/a000/b00/c00 ...)."""
    for n in range(0, count, PER_FOLDER):
        f = n // PER_FOLDER
        folder = root / f"a{f // 400:03}" / f"b{f // 20 % 20:02}" / f"c{f % 20:02}"
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(n, min(n + PER_FOLDER, count)):
            fd = os.open(folder / f"note{i}.txt", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, b"note %d\n" % i)
            os.close(fd)


def memory_mb(field: str) -> float:
    """A memory line of /proc/self/status (VmRSS: resident now, VmHWM: the peak since the last
    `reset_peak_rss`), in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024  # (always in kB)
    raise RuntimeError(f"/proc/self/status has no {field}")


def reset_peak_rss() -> None:
    """Start VmHWM again from the resident memory now (the kernel's clear_refs 5)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
