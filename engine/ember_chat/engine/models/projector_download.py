"""Getting the projector of an installed vision model that lacks one ("vision needs the projector
file"): from the model's own Hub repository, the mmproj that pairs with it (the Hub pairing of
`hub.group_variants`, not a second one), saved beside the model file, where the library finds it.

Each way this cannot be done is a `ProjectorUnavailable` in plain words; the Hub's own errors
(offline, not found, gated) pass through as they are."""

from __future__ import annotations

from pathlib import Path

from ember_chat.engine.errors import EmberError
from ember_chat.engine.models.downloader import DownloadSpec
from ember_chat.engine.models.hub import HubClient, RepoFiles
from ember_chat.engine.models.library import ModelEntry
from ember_chat.engine.models.projector import choose_projector


class ProjectorUnavailable(EmberError):
    """There is no projector Ember can download for this model (the message says what to do)."""


def repo_path_of(entry: ModelEntry, models_dir: Path) -> str | None:
    """The model file's path inside its repository, for a model Ember downloaded into
    models_dir/owner/name/; None for any other model."""
    if entry.path is None or entry.source_repo is None or entry.location != "models folder":
        return None
    folder = Path(models_dir) / entry.source_repo
    try:
        return entry.path.relative_to(folder).as_posix()
    except ValueError:
        return None


def check_downloadable(entry: ModelEntry, models_dir: Path) -> str:
    """The model's path in its repository, or `ProjectorUnavailable` saying why Ember cannot get its
    projector and what the user can do (no network: call it anywhere)."""
    folder = entry.path.parent if entry.path is not None else Path(models_dir)
    if entry.location == "Hugging Face cache" and entry.source_repo:
        raise ProjectorUnavailable(
            f"{entry.name} lives in the Hugging Face cache, which Ember does not change. Download its "
            f"projector (an mmproj-*.gguf file of {entry.source_repo}) with `hf download`, or put one in "
            f"{folder}, beside the model file."
        )
    rel = repo_path_of(entry, models_dir)
    if rel is None:
        raise ProjectorUnavailable(
            f"Ember does not know which Hub repository {entry.name} came from, so it cannot download its "
            f"projector. Put the model's projector file (an mmproj-*.gguf from the same repository) in "
            f"{folder}, beside the model file, and it sees images."
        )
    return rel


def pick_projector(files: RepoFiles, model_in_repo: str) -> DownloadSpec | None:
    """The download of the projector that pairs with `model_in_repo` in the repository's files, saved
    beside it; None when the repository has none for it."""
    variant = next((v for v in files.variants if any(f.path == model_in_repo for f in v.files)), None)
    mmproj = variant.mmproj if variant is not None else None
    if mmproj is None and variant is None:  # the file is not in the repository any more (renamed)
        known = {v.mmproj.path: v.mmproj for v in files.variants if v.mmproj is not None}
        chosen = choose_projector(model_in_repo.rsplit("/", 1)[-1], sorted(known))
        mmproj = known.get(chosen) if chosen else None
    if mmproj is None:
        return None
    folder = model_in_repo.rsplit("/", 1)[0] + "/" if "/" in model_in_repo else ""
    beside = folder + mmproj.path.rsplit("/", 1)[-1]
    return DownloadSpec(
        files.repo_id,
        mmproj.path,
        files.commit or "main",
        mmproj.size,
        mmproj.sha256,
        save_as=None if beside == mmproj.path else beside,
    )


def projector_download(entry: ModelEntry, models_dir: Path, hub: HubClient) -> DownloadSpec:
    """What to queue so that `entry` gets its projector beside it (lists its repository on the Hub:
    call it off the GUI thread). Raises `ProjectorUnavailable` or the Hub's error."""
    rel = check_downloadable(entry, models_dir)
    assert entry.source_repo is not None  # (checked)
    spec = pick_projector(hub.files(entry.source_repo), rel)
    if spec is None:
        raise ProjectorUnavailable(
            f"{entry.source_repo} has no projector file (mmproj) for {Path(rel).name}, so this copy cannot "
            "see images. Look for the model's mmproj-*.gguf in another repository and put it beside the "
            "model file."
        )
    return spec
