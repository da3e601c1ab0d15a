"""Hugging Face Hub look-ups: search GGUF repos, list a repo's GGUF files grouped by quantization.

Search and metadata go through `huggingface_hub.HfApi` with the endpoint and token passed explicitly
(environment variables are read once at import, see the notes). The byte transfer itself is
`engine.models.downloader`. Library and network failures become typed `HubError`s with a clear message.
"""

from __future__ import annotations

import os
import re
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit

for _var, _value in (
    ("HF_HUB_DISABLE_TELEMETRY", "1"),
    ("HF_HUB_DISABLE_XET", "1"),
    ("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1"),
):
    os.environ.setdefault(_var, _value)

import httpx2  # noqa: E402
from huggingface_hub import HfApi  # noqa: E402
from huggingface_hub import errors as hf_errors  # noqa: E402

from ember_chat.engine.core.network_words import network_failure  # noqa: E402
from ember_chat.engine.errors import HubAuthError, HubError, HubNotFound, HubOffline  # noqa: E402
from ember_chat.engine.models.hub_http import hub_http_client  # noqa: E402
from ember_chat.engine.models.projector import is_projector_name, pair_files  # noqa: E402

__all__ = ["HubAuthError", "HubClient", "HubError", "HubNotFound", "HubOffline"]

DEFAULT_ENDPOINT = "https://huggingface.co"
PROBE_TIMEOUT_S = 4.0

_SPLIT = re.compile(r"^(?P<stem>.+)-(?P<part>\d{5})-of-(?P<total>\d{5})\.gguf$", re.I)
_QUANT = re.compile(r"(?<![A-Za-z0-9])(I?Q\d(?:_[A-Z0-9]+)*|F16|F32|BF16|TQ\d_\d|MXFP4(?:_MOE)?)(?![A-Za-z0-9])", re.I)


@dataclass(frozen=True)
class RepoSummary:
    id: str
    downloads: int
    likes: int
    last_modified: datetime | None
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class HubFile:
    path: str
    size: int
    sha256: str | None  # the LFS sha256; None for small non-LFS files


@dataclass(frozen=True)
class ModelVariant:
    """One downloadable model: a single .gguf, or a split set (name-0000k-of-0000n.gguf)."""

    name: str
    quantization: str
    files: tuple[HubFile, ...]
    mmproj: HubFile | None = None  # its projector (images), downloaded with it

    @property
    def download_files(self) -> tuple[HubFile, ...]:
        """What downloading this model fetches: its files and its projector (each verified)."""
        return (*self.files, self.mmproj) if self.mmproj else self.files

    @property
    def vision(self) -> bool:
        return self.mmproj is not None

    @property
    def size(self) -> int:
        return sum(f.size for f in self.download_files)


@dataclass(frozen=True)
class RepoFiles:
    repo_id: str
    commit: str
    variants: tuple[ModelVariant, ...]
    gated: bool = False
    gguf: dict[str, Any] = field(default_factory=dict)  # the Hub's parsed header summary, if any
    header: dict[str, Any] = field(default_factory=dict)  # key/values read from a file's first bytes


def quantization_of(filename: str) -> str:
    """'Qwen2.5-7B-Instruct-Q4_K_M.gguf' → 'Q4_K_M' (the last quant-looking token of the name)."""
    stem = filename.rsplit("/", 1)[-1]
    m = _SPLIT.match(stem)
    stem = m.group("stem") if m else stem.removesuffix(".gguf")
    found = _QUANT.findall(stem.replace(".", "-"))
    return found[-1].upper() if found else "unknown"


def group_variants(files: list[HubFile]) -> list[ModelVariant]:
    """GGUF files as downloadable models; split sets count as one, incomplete sets are dropped. A
    projector (mmproj) is not a model: it goes with the model it pairs with (`pair_files`)."""
    singles: list[ModelVariant] = []
    splits: dict[str, list[tuple[int, int, HubFile]]] = {}
    projectors = {f.path: f for f in files if is_projector_name(f.path)}
    for f in files:
        if not f.path.lower().endswith(".gguf") or f.path in projectors:
            continue
        base = f.path.rsplit("/", 1)[-1]
        m = _SPLIT.match(base)
        if m:
            key = f.path[: len(f.path) - len(base)] + m.group("stem")
            splits.setdefault(key, []).append((int(m.group("part")), int(m.group("total")), f))
        else:
            singles.append(ModelVariant(f.path, quantization_of(f.path), (f,)))
    for key, parts in splits.items():
        parts.sort(key=lambda p: p[0])
        total = parts[0][1]
        if [p[0] for p in parts] == list(range(1, total + 1)):
            singles.append(ModelVariant(key + ".gguf", quantization_of(parts[0][2].path), tuple(p[2] for p in parts)))
    if projectors:
        pairs = pair_files([*projectors, *(v.name for v in singles)])
        singles = [replace(v, mmproj=projectors.get(pairs.get(v.name, ""))) for v in singles]
    return sorted(singles, key=lambda v: (v.size, v.name))


def _proxy_note(url: str) -> str:
    """', through the proxy HOST:PORT' when the environment sends `url` through one (never its
    credentials), so an unreachable proxy is not mistaken for an unreachable Hub."""
    u = urlsplit(url)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(u.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(u.hostname or ""):
        return ""
    p = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    try:
        return f", through the proxy {p.hostname}{f':{p.port}' if p.port else ''}"
    except ValueError:  # a malformed port
        return ", through a proxy"


T = TypeVar("T")


class HubClient:
    def __init__(self, endpoint: str = DEFAULT_ENDPOINT, token: str | None = None) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.token = token or None
        self._api = HfApi(endpoint=self.endpoint, token=self.token or False)

    def _probe(self, what: str) -> None:
        """A quick HTTP request first, through the downloads' client and so through the proxy the
        environment names: offline is said in seconds, not after the library's ~23 s of connection
        retries. Any answer, whatever its status, means the Hub is reachable."""
        try:
            with hub_http_client(PROBE_TIMEOUT_S) as client:
                client.head(self.endpoint + "/")
        except (httpx2.TransportError, OSError) as exc:
            raise self._offline(what, exc) from exc

    def _offline(self, what: str, exc: BaseException) -> HubOffline:
        return HubOffline(
            f"{what}: cannot reach {self.endpoint}: {network_failure(exc)}{_proxy_note(self.endpoint)}. "
            "You seem to be offline; installed models keep working."
        )

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        self._probe(what)
        try:
            return fn()
        except hf_errors.GatedRepoError as exc:
            raise HubAuthError(
                f"{what}: this repository is gated. Accept its licence on the Hub, then add a Hugging Face "
                "token (Models ▸ Model Manager ▸ Token…)."
            ) from exc
        except hf_errors.RepositoryNotFoundError as exc:
            if self.token:
                raise HubNotFound(f"{what}: no such repository (or your token cannot see it).") from exc
            raise HubNotFound(f"{what}: no such repository. If it is private, add a Hugging Face token first.") from exc
        except (hf_errors.RevisionNotFoundError, hf_errors.EntryNotFoundError) as exc:
            raise HubNotFound(f"{what}: not found on the Hub.") from exc
        except hf_errors.HfHubHTTPError as exc:
            status = getattr(getattr(exc, "response", None), "status_code", None)
            if status in (401, 403):
                raise HubAuthError(f"{what}: the Hub refused the request ({status}). Check your token.") from exc
            raise HubError(f"{what}: the Hub answered with an error ({status or exc}). Try again later.") from exc
        except Exception as exc:
            # Connection refused, DNS, TLS, timeouts: OSErrors, or the HTTP client's own transport errors.
            if isinstance(exc, OSError) or exc.__class__.__module__.startswith("httpx"):
                raise self._offline(what, exc) from exc
            raise

    def search(self, query: str, limit: int = 30) -> list[RepoSummary]:
        def run() -> list[RepoSummary]:
            found = self._api.list_models(search=query or None, filter="gguf", sort="downloads", limit=limit)
            return [
                RepoSummary(
                    id=m.id,
                    downloads=int(m.downloads or 0),
                    likes=int(m.likes or 0),
                    last_modified=m.last_modified,
                    tags=tuple(m.tags or ()),
                )
                for m in found
            ]

        return self._call(f"Searching the Hub for '{query}'", run)

    def files(self, repo_id: str, revision: str | None = None) -> RepoFiles:
        def run() -> RepoFiles:
            info = self._api.model_info(repo_id, revision=revision, files_metadata=True)
            files = [
                HubFile(s.rfilename, int(s.size or (s.lfs.size if s.lfs else 0)), s.lfs.sha256 if s.lfs else None)
                for s in info.siblings or []
            ]
            return RepoFiles(
                repo_id=info.id,
                commit=info.sha or "",
                variants=tuple(group_variants(files)),
                gated=bool(info.gated),
                gguf=dict(info.gguf or {}),
            )

        return self._call(f"Listing the files of {repo_id}", run)

    def listing(self, repo_id: str, revision: str | None = None) -> tuple[str, list[HubFile]]:
        """(the commit, every file of the repository with its size and LFS sha256): a model that is
        not one GGUF file (a Whisper model's several files)."""

        def run() -> tuple[str, list[HubFile]]:
            info = self._api.model_info(repo_id, revision=revision, files_metadata=True)
            files = [
                HubFile(s.rfilename, int(s.size or (s.lfs.size if s.lfs else 0)), s.lfs.sha256 if s.lfs else None)
                for s in info.siblings or []
            ]
            return info.sha or "", files

        return self._call(f"Listing the files of {repo_id}", run)

    def with_header(self, files: RepoFiles) -> RepoFiles:
        """Read the GGUF header of the repo's smallest file (its first 2 MB, one Range request) so the
        fit estimate uses the real layer and head counts. Best effort: without it, sizes still work."""
        from dataclasses import replace

        from ember_chat.engine.errors import EmberError
        from ember_chat.engine.models.downloader import Downloader, DownloadSpec
        from ember_chat.engine.models.gguf_inspect import header_metadata_prefix

        if not files.variants:
            return files
        first = files.variants[0].files[0]
        try:
            prefix = Downloader(self.endpoint, self.token, timeout=10, retries=1).read_prefix(
                DownloadSpec(files.repo_id, first.path, files.commit or "main")
            )
        except (EmberError, OSError, ValueError):
            return files
        return replace(files, header=header_metadata_prefix(prefix))
