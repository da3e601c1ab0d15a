"""Download throughput and resume overhead against the local Hub server (loopback).

In one run, alternating: a ~200 MB file through Ember's downloader (Range, sha256, fsync, atomic
rename) and through a plain HTTP GET written to disk. Prints JSON with the throughput ratio (budget
>= 0.9) and the extra bytes transferred when the connection drops at 50 % and the download resumes
(budget <= 1 %).

    python -m bench.download --json
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from ember_chat.engine.models.downloader import Downloader, DownloadSpec

REPO, NAME = "bench/big-GGUF", "big-Q4_K_M.gguf"


def plain_get(url: str, out: Path) -> float:
    """The baseline: one GET, straight to a file."""
    t0 = time.perf_counter()
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname or "", u.port, timeout=30)
    conn.request("GET", u.path + (f"?{u.query}" if u.query else ""))
    resp = conn.getresponse()
    buf = bytearray(1 << 20)
    with out.open("wb") as fh:
        while n := resp.readinto(buf):
            fh.write(memoryview(buf)[:n])
        fh.flush()
        os.fsync(fh.fileno())
    conn.close()
    return time.perf_counter() - t0


def ember_get(hub: ServerProcess, folder: Path) -> float:
    t0 = time.perf_counter()
    Downloader(hub.hub_url).fetch(DownloadSpec(REPO, NAME), folder)
    return time.perf_counter() - t0


SERVER = """
import os, sys
from tests.helpers.hub_server import FakeHub
hub = FakeHub().start()
hub.add_repo(sys.argv[3], {sys.argv[4]: os.urandom(int(sys.argv[1]))})
print(hub.hub_url, flush=True)
for line in sys.stdin:
    cmd, *arg = line.split()
    if cmd == "rate":
        hub.faults.rate_bps = float(arg[0])
    elif cmd == "drop":
        hub.faults.drop_after, hub.faults.drop_count = int(arg[0]), 1
        hub.bytes_sent = 0
    elif cmd == "sent":
        pass
    print(hub.bytes_sent, flush=True)
hub.stop()
"""


class ServerProcess:
    """The local Hub in its own process, so it does not share the client's GIL (less noise)."""

    def __init__(self, size: int) -> None:
        root = str(Path(__file__).resolve().parent.parent)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(size), root, REPO, NAME],
            cwd=root,  # (`-c` puts the working folder on the path: `tests` is found there)
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.hub_url = self.proc.stdout.readline().strip()

    def command(self, line: str) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        if self.proc.stdout:
            self.proc.stdout.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--link-mbps", type=float, default=0, help="pace the server like a link (MB/s; 0: loopback)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    size = args.mb * 1_000_000
    hub = ServerProcess(size)
    cdn_url = Downloader(hub.hub_url).resolve(DownloadSpec(REPO, NAME)).url
    if args.link_mbps:
        hub.command(f"rate {args.link_mbps * 1e6}")
    ember_s, plain_s = [], []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            for i in range(args.runs):
                plain_s.append(plain_get(cdn_url, root / f"plain-{i}.bin"))
                (root / f"plain-{i}.bin").unlink()
                ember_s.append(ember_get(hub, root / f"ember-{i}"))
                for p in (root / f"ember-{i}").rglob("*.gguf"):
                    p.unlink()
            # resume after a dropped connection at 50 %
            hub.command(f"drop {size // 2}")
            path = Downloader(hub.hub_url, backoff_s=0.05).fetch(DownloadSpec(REPO, NAME), root / "resume")
            assert path.stat().st_size == size
            extra = hub.command("sent") - size
    finally:
        hub.stop()
    mb = size / 1e6
    result = {
        "file_mb": args.mb,
        "ember_mb_per_s": round(mb / statistics.median(ember_s), 1),
        "plain_get_mb_per_s": round(mb / statistics.median(plain_s), 1),
        "throughput_ratio": round(statistics.median(plain_s) / statistics.median(ember_s), 3),
        "resume_extra_bytes": extra,
        "resume_extra_percent": round(100 * extra / size, 3),
        "runs": args.runs,
        "link": f"{args.link_mbps:g} MB/s" if args.link_mbps else "loopback, unpaced",
    }
    print(json.dumps(result) if args.json else result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
