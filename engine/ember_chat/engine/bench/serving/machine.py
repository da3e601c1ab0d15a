"""Was this machine busy while a load ran? The share of its CPU (all cores) that other programs used
during the run, from /proc/stat's busy time less this process's own CPU time (the load generator, and
Ember's server when the target is local:MODEL) and the server's, when the process listening on the
target's loopback port can be found. A server that shares the machine with a browser build or a second
benchmark measures slower than it is: the result says so instead of passing the figures off as the
machine's. Linux only (elsewhere, and for a target on another machine, nothing is measured)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

BUSY_NOTE_SHARE = 0.10  # the share of the CPU used by others above which the plain answer says so
PROC = Path("/proc")


def _ticks() -> float:
    try:
        return float(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError, AttributeError):
        return 100.0


def machine_cpu_s() -> tuple[float, float] | None:
    """(CPU seconds busy, CPU seconds in all) over all cores since boot, from /proc/stat; None elsewhere."""
    try:
        fields = (PROC / "stat").read_text(encoding="ascii").split("\n", 1)[0].split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    # user nice system idle iowait irq softirq steal (guest time is already inside user)
    values = [int(v) for v in fields[1:9]]
    total = sum(values)
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    tick = _ticks()
    return (total - idle) / tick, total / tick


def own_cpu_s() -> float:
    times = os.times()
    return times.user + times.system


def listening_pids(port: int) -> list[int]:
    """The processes (other than this one) with a socket listening on this TCP port, those whose /proc
    entries this user can read."""
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (PROC / "net" / table).read_text(encoding="ascii").splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if len(parts) > 9 and parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(parts[9])
    if not inodes:
        return []
    wanted = {f"socket:[{inode}]" for inode in inodes}
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if any(os.readlink(fd) in wanted for fd in (entry / "fd").iterdir()):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def process_cpu_s(pid: int) -> float:
    try:
        stat = (PROC / str(pid) / "stat").read_text(encoding="ascii")
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _ticks()  # (utime, stime: fields 14 and 15)


@dataclass
class CpuMeter:
    """Start before a load, read after: the share of the machine's CPU other programs used between."""

    server_pids: tuple[int, ...] = ()
    _machine: tuple[float, float] | None = None
    _own: float = 0.0
    _server: float = 0.0

    def start(self) -> CpuMeter:
        self._machine = machine_cpu_s()
        self._own = own_cpu_s()
        self._server = sum(process_cpu_s(p) for p in self.server_pids)
        return self

    def others_share(self) -> float | None:
        now = machine_cpu_s()
        if now is None or self._machine is None:
            return None
        busy, total = now[0] - self._machine[0], now[1] - self._machine[1]
        if total <= 0:
            return None
        mine = own_cpu_s() - self._own
        server = sum(process_cpu_s(p) for p in self.server_pids) - self._server
        return min(1.0, max(0.0, (busy - mine - server) / total))


def busy_note(share: float | None) -> str | None:
    if share is None or share < BUSY_NOTE_SHARE:
        return None
    return f"busy: {share * 100:.0f} % of the CPU was used by other programs during this load"
