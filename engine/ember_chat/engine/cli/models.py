"""`ember-chat models ...`: list, search, files, download, import, rm, token (and ps: models_ps.py)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ember_chat.engine.cli.common import load_settings
from ember_chat.engine.models.library import ModelLibrary
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.storage.secrets import TokenStore

if TYPE_CHECKING:
    from ember_chat.engine.models.downloader import Progress


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def _print_json(data: object) -> None:
    print(json.dumps(data, indent=2, default=str))


def run(args: argparse.Namespace, paths: AppPaths) -> int:
    # The Hub client, the downloader and the fit estimate are imported by the commands that use them:
    # `models list` stays light.
    cmd = args.models_command
    if cmd == "ps":  # (asks a running server; nothing here is read)
        from ember_chat.engine.cli import models_ps

        return models_ps.run(args)
    settings = load_settings(paths)
    endpoint = settings.hub_endpoint()
    library = ModelLibrary(settings.models_folder(paths.default_models_dir))
    tokens = TokenStore()
    if cmd == "list":
        entries = library.entries()
        rows = []
        for e in entries:
            row: dict[str, object] = {
                "name": e.name,
                "size": e.size,
                "location": e.location,
                "source_repo": e.source_repo,
                "modified": datetime.fromtimestamp(e.modified).isoformat(timespec="seconds") if e.modified else None,
                "path": str(e.path) if e.path else None,
                "mmproj": str(e.mmproj) if e.mmproj else None,  # its projector: it sees images
                "vision": e.vision,
                "description": e.starter.description if e.starter else None,  # which starter is which
            }
            if e.path is not None:
                try:
                    info = e.info().summary()
                    row.update(
                        {
                            k: info[k]
                            for k in (
                                "architecture",
                                "parameter_count",
                                "quantization",
                                "context_length",
                                "has_chat_template",
                            )
                        }
                    )
                except Exception as exc:  # a damaged file is listed, with why
                    row["error"] = str(exc)
                row["vision_needs_projector"] = e.vision_needs_projector
            rows.append(row)
        if args.json:
            _print_json(rows)
        else:
            if not rows:
                print("No models yet. Try: ember-chat models search llama")
            for r in rows:
                quant = r.get("quantization") or ""
                sees = (
                    "  vision"
                    if r["vision"]
                    else "  vision needs the projector file"
                    if r.get("vision_needs_projector")
                    else ""
                )
                said = f"  {r['description']}" if r["description"] else ""
                print(f"{r['name']:60} {quant:8} {_human(int(r['size'])):>9}  {r['location']}{said}{sees}")
        return 0
    from ember_chat.engine.models.hub import HubClient

    if cmd == "search":
        found = HubClient(endpoint, tokens.get()).search(args.query, limit=args.limit)
        if args.json:
            _print_json(
                [
                    {"id": r.id, "downloads": r.downloads, "likes": r.likes, "last_modified": r.last_modified}
                    for r in found
                ]
            )
        else:
            for r in found:
                when = r.last_modified.date().isoformat() if r.last_modified else ""
                print(f"{r.id:60} {r.downloads:>10,} downloads {r.likes:>6,} likes  {when}")
        return 0
    if cmd == "files":
        from ember_chat.engine.models.fit import estimate_fit, free_vram_bytes, recommend

        hub = HubClient(endpoint, tokens.get())
        files = hub.with_header(hub.files(args.repo))
        vram = free_vram_bytes()
        rows = []
        for v in files.variants:
            fit = estimate_fit(
                v.size, args.ctx, free_vram=vram, meta=files.header, gpu_layers=settings.gpu_layers,
                kv_type=settings.kv_cache_type,
            )  # fmt: skip
            rows.append(
                {
                    "name": v.name,
                    "quantization": v.quantization,
                    "size": v.size,
                    "files": [f.path for f in v.files],
                    "mmproj": v.mmproj.path if v.mmproj else None,  # downloaded with it: vision
                    "fit": fit.label,
                }
            )
        best = recommend([(r["quantization"], r["fit"]) for r in rows])  # type: ignore[misc]
        for r in rows:
            r["recommended"] = r["quantization"] == best
        if args.json:
            _print_json({"repo": files.repo_id, "commit": files.commit, "variants": rows})
        else:
            for r in rows:
                mark = " ← recommended" if r["recommended"] else ""
                print(f"{r['quantization']:9} {_human(int(r['size'])):>9}  {r['fit']:9} {r['name']}{mark}")
        return 0
    if cmd == "download":
        from ember_chat.engine.models.downloader import Downloader, DownloadSpec

        downloader = Downloader(endpoint, tokens.get())
        bar = _ProgressBar(args.file)
        path = downloader.fetch(
            DownloadSpec(args.repo, args.file, args.revision), library.models_dir, on_progress=bar.update
        )
        bar.finish()
        print(f"Installed {path}")
        return 0
    if cmd == "import":
        entry = library.import_file(Path(args.path), copy=not args.in_place)
        print(f"Imported {entry.name}")
        return 0
    if cmd == "rm":
        library.delete(args.name)
        print(f"Removed {args.name}")
        return 0
    if cmd == "token":
        if args.clear:
            tokens.clear()
            print("Token removed from the keychain.")
        else:
            tokens.set(sys.stdin.readline())
            print("Token saved in the OS keychain.")
        return 0
    raise AssertionError(cmd)


class _ProgressBar:
    def __init__(self, name: str) -> None:
        self.name = name
        self.tty = sys.stderr.isatty()

    def update(self, p: Progress) -> None:
        pct = 100 * p.done / p.total if p.total else 0
        width = 30
        filled = int(width * pct / 100)
        eta = f"{p.eta_s:.0f}s" if p.eta_s is not None else "?"
        line = (
            f"{self.name}: [{'#' * filled}{'.' * (width - filled)}] {pct:5.1f}% "
            f"{_human(p.done)}/{_human(p.total)} {_human(p.speed_bps)}/s ETA {eta}"
        )
        print(("\r" if self.tty else "") + line, end="" if self.tty else "\n", file=sys.stderr, flush=True)

    def finish(self) -> None:
        if self.tty:
            print(file=sys.stderr)
