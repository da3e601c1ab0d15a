"""What a serving run's context says of the model it measured: the file, its SHA-256, its quantisation,
the engine's version, the threads and load settings.

A model on this machine (local:MODEL, the window's own): the file's sha256 — a starter's from its
`.verified` marker (models/starter.py), else read once and kept in `model-hashes.json` in the data
folder under the file's path, size and mtime, so a second run does not read gigabytes again — and the
quantisation the GGUF's header gives (as the Model Manager shows it). A server elsewhere: what it says of
itself — llama-server's /props (`model_path`, `model_ftype`, `build_info`), vLLM's /v1/models (`root`) —
and the hash said to be unknown: the file is the server's."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import httpx2

from ember_chat.engine.models.starter import sha256_file, verified_sha256

HASH_CACHE = "model-hashes.json"
CACHE_MAX_BYTES = 1 << 20  # (a cache grown past this, or damaged, is started again)
CACHE_MAX_ENTRIES = 200
PROPS_MAX_BYTES = 1 << 20  # (llama-server's /props carries the chat template: tens of kB)
REMOTE_HASH = "unknown (the file is the server's)"
_lock = threading.Lock()  # (the window's runs and a knob sweep's targets hash on worker threads)


def _read_cache(cache_file: Path) -> dict[str, Any]:
    try:
        if cache_file.stat().st_size > CACHE_MAX_BYTES:
            return {}
        data = json.loads(cache_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def model_sha256(path: Path, data_dir: Path) -> str:
    """The file's sha256, read at most once per path, size and mtime (kept in data_dir/HASH_CACHE)."""
    known = verified_sha256(Path(path), data_dir / "models")  # (the marker names the path as it was loaded)
    if known is not None:
        return known
    path = Path(path).resolve()
    st = path.stat()
    cache_file = data_dir / HASH_CACHE
    stamp = {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    with _lock:
        entry = _read_cache(cache_file).get(str(path))
        if isinstance(entry, dict) and {k: entry.get(k) for k in stamp} == stamp:
            sha = entry.get("sha256")
            if isinstance(sha, str) and len(sha) == 64:
                return sha
    sha = sha256_file(path)  # (outside the lock: gigabytes take seconds)
    with _lock:
        cache = _read_cache(cache_file)
        cache.pop(str(path), None)
        cache[str(path)] = {**stamp, "sha256": sha}
        kept = dict(list(cache.items())[-CACHE_MAX_ENTRIES:])  # (the newest: the file keeps its size)
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
            part = cache_file.with_name(f"{cache_file.name}.{os.getpid()}.part")
            part.write_text(json.dumps(kept), encoding="utf-8")
            os.replace(part, cache_file)
        except OSError:
            pass  # (a data folder it cannot write to: hashed again next time, nothing lost)
    return sha


def local_facts(
    path: Path | None,
    quant: str | None,
    data_dir: Path,
    threads: int | None = None,
    settings: dict[str, object] | None = None,
) -> dict[str, object]:
    """The context's facts of a model file loaded here."""
    import llama_cpp

    from ember_chat.engine import __version__

    facts: dict[str, object] = {"engine_version": f"ember-chat {__version__}, llama-cpp-python {llama_cpp.__version__}"}
    if path is not None:
        facts["model_file"] = str(path)
        try:
            facts["model_sha256"] = model_sha256(path, data_dir)
        except OSError as exc:
            facts["model_sha256"] = f"unknown (the file cannot be read: {exc.strerror or exc})"
    if quant:
        facts["quant"] = quant
    if threads:
        facts["threads"] = threads
    if settings:
        facts["load_settings"] = {k: str(v) if isinstance(v, Path) else v for k, v in settings.items()}
    return facts


def _text(value: object, limit: int = 300) -> str | None:
    return value[:limit] if isinstance(value, str) and value.strip() else None


def _json(base_url: str, path: str, api_key: str | None) -> dict[str, Any] | None:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with httpx2.stream("GET", f"{base_url}{path}", headers=headers, timeout=5.0) as reply:
            if reply.status_code != 200:
                return None
            body = b""
            for chunk in reply.iter_bytes():
                body += chunk
                if len(body) > PROPS_MAX_BYTES:
                    return None
        data = json.loads(body)
    except (httpx2.HTTPError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def remote_facts(base_url: str, model: str, api_key: str | None) -> dict[str, object]:
    """The context's facts of a model served elsewhere, as far as the server says them (each bounded)."""
    from ember_chat.engine.models.hub import quantization_of

    facts: dict[str, object] = {"model_sha256": REMOTE_HASH}
    root = base_url.removesuffix("/v1")
    props = _json(root, "/props", api_key) or {}  # (llama-server)
    file = _text(props.get("model_path"))
    if file is None:  # (vLLM names the model's path or repository as its `root`)
        listed = (_json(base_url, "/models", api_key) or {}).get("data")
        entry = next((m for m in listed if isinstance(m, dict) and m.get("id") == model), None) if isinstance(
            listed, list) else None  # fmt: skip
        file = _text(entry.get("root")) if entry is not None else None
    if file is not None:
        facts["model_file"] = f"{file} (on the server)"
    ftype = _text(props.get("model_ftype"), 40)
    named = quantization_of(file or model)
    if ftype is not None:
        facts["quant"] = ftype
    elif named != "unknown":
        facts["quant"] = f"{named} (from the file's name)"
    if (build := _text(props.get("build_info"), 80)) is not None:
        facts["engine_version"] = f"llama-server {build}"
    if isinstance(props.get("total_slots"), int):
        facts["load_settings"] = {"parallel": props["total_slots"]}
    return facts
