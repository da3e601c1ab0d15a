"""A Whisper model on the local Hub server (tests/helpers/hub_server.py): the shipped tiny.en's files
served as another model's repository (model.bin in LFS with its sha256, the rest as small files), so
the Model Manager's speech downloads run offline against real bytes that CTranslate2 loads."""

from __future__ import annotations

from ember_chat.engine.speech.models import shipped_folder
from tests.helpers.hub_server import FakeHub, Repo

BASE_EN_REPO = "Systran/faster-whisper-base.en"  # (its real repository id: speech.models' base.en)


def whisper_files() -> dict[str, bytes]:
    """The shipped model's files, and a preprocessor_config.json as the Hub's repositories carry."""
    folder = shipped_folder()
    files = {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}
    files.setdefault("preprocessor_config.json", b'{"feature_size": 80, "sampling_rate": 16000}')
    files["README.md"] = b"# not downloaded: faster-whisper takes only the model's files"
    return files


def add_whisper_repo(hub: FakeHub, repo_id: str = BASE_EN_REPO) -> Repo:
    return hub.add_repo(repo_id, whisper_files(), downloads=1000)
