"""`ember-chat models ps`: the models a running Ember server has loaded (its `GET /api/models`), as
`ollama ps` shows them: name, state, who loaded it, memory, context, idle time and time to live."""

from __future__ import annotations

import argparse
import json
import os
import urllib.error
import urllib.request
from typing import Any

from ember_chat.engine.errors import EmberError
from ember_chat.engine.serve.config import DEFAULT_PORT

COLUMNS = ("NAME", "STATE", "LOADED BY", "MEMORY", "CONTEXT", "IDLE", "UNLOADS")


def add_parser(msub: argparse._SubParsersAction) -> None:
    ps = msub.add_parser("ps", help="models a running Ember server has loaded")
    ps.add_argument("--url", default=f"http://127.0.0.1:{DEFAULT_PORT}", help="the server (default: %(default)s)")
    ps.add_argument("--api-key-env", metavar="VAR", help="the server's API key is in this environment variable")
    ps.add_argument("--all", action="store_true", help="also the installed models that are not loaded")
    ps.add_argument("--json", action="store_true")


def fetch_table(url: str, api_key: str | None, timeout_s: float = 10.0) -> list[dict[str, Any]]:
    request = urllib.request.Request(url.rstrip("/").removesuffix("/v1") + "/api/models")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            data = json.load(answer)
    except urllib.error.HTTPError as exc:
        try:
            said = json.load(exc).get("error", {}).get("message")
        except (ValueError, AttributeError):
            said = None
        raise EmberError(f"The server at {url} answered {exc.code}: {said or exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise EmberError(f"No Ember server answers at {url} ({reason}). Start one with `ember-chat serve`.") from None
    except ValueError:
        raise EmberError(f"The server at {url} did not answer with Ember's model table.") from None
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, list):
        raise EmberError(f"The server at {url} did not answer with Ember's model table.")
    return [m for m in models if isinstance(m, dict)]


def _size(n: object) -> str:
    if not isinstance(n, int) or n <= 0:
        return "—"
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def _duration(s: object) -> str:
    if not isinstance(s, int | float):
        return "—"
    if s < 60:
        return f"{s:.0f} s"
    return f"{s / 60:.0f} min" if s < 3600 else f"{s / 3600:.1f} h"


def _unloads(row: dict[str, Any]) -> str:
    if row.get("loaded_by") in ("window", "serve"):
        return "never (pinned)"
    if row.get("busy"):
        return "in use"
    ttl, idle = row.get("ttl_s"), row.get("idle_s")
    if not isinstance(ttl, int | float):
        return "never"
    return f"in {_duration(max(0.0, ttl - (idle or 0.0)))}"


def run(args: argparse.Namespace) -> int:
    api_key = os.environ.get(args.api_key_env) if args.api_key_env else None
    if args.api_key_env and not api_key:
        raise EmberError(f"The environment variable {args.api_key_env} is not set.")
    rows = fetch_table(args.url, api_key)
    if not args.all:
        rows = [r for r in rows if r.get("state") != "not loaded"]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("No model is loaded." + ("" if args.all else " (--all lists the installed ones.)"))
        return 0
    table = [COLUMNS] + [
        (str(r.get("name")), str(r.get("state")), str(r.get("loaded_by") or "—"), _size(r.get("memory_bytes")),
         str(r.get("n_ctx") or "—"), _duration(r.get("idle_s")), _unloads(r) if r.get("state") == "loaded" else "—")
        for r in rows
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in table) for i in range(len(COLUMNS))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0
