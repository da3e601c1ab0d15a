"""Where Ember keeps its files: platformdirs locations, overridable for tests and portable installs.

`EMBER_DATA_DIR` and `EMBER_CONFIG_DIR` override the platform defaults; the models folder is a
setting (default: `<data dir>/models`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

APP_NAME = "Ember"
# The saved conversation caches (KV snapshots, engine/inference/kv/snapshots.py) in the data folder, and
# their files' endings (a whole file, one being written): named here, where the privacy sweep (privacy.py),
# which removes them when chats are deleted for good, can read them too.
KV_SNAPSHOT_FOLDER = "kv-snapshots"
KV_SNAPSHOT_SUFFIX = ".kvsnap"
KV_SNAPSHOT_TMP_SUFFIX = ".kvsnap-tmp"
# A project's knowledge index (engine/projects/index.py) lives in `<data dir>/projects/<folder id>/`: named
# here, where the privacy sweep (privacy.py), which removes those of projects deleted for good, reads it too.
PROJECTS_FOLDER = "projects"


@dataclass(frozen=True)
class AppPaths:
    data_dir: Path
    config_dir: Path

    @classmethod
    def default(cls) -> AppPaths:
        data = os.environ.get("EMBER_DATA_DIR") or platformdirs.user_data_dir(APP_NAME, appauthor=False)
        config = os.environ.get("EMBER_CONFIG_DIR") or platformdirs.user_config_dir(APP_NAME, appauthor=False)
        return cls(Path(data), Path(config))

    @property
    def default_models_dir(self) -> Path:
        return self.data_dir / "models"

    @property
    def database(self) -> Path:
        return self.data_dir / "chats.sqlite3"

    def project_folder(self, folder_id: int) -> Path:
        """Where the knowledge index of the project of this chat-list folder is kept (Ember's own files only)."""
        return self.data_dir / PROJECTS_FOLDER / str(int(folder_id))

    @property
    def settings_file(self) -> Path:
        return self.config_dir / "settings.json"

    @property
    def model_settings_file(self) -> Path:
        return self.config_dir / "model_settings.json"

    @property
    def connections_file(self) -> Path:
        return self.config_dir / "connections.json"
