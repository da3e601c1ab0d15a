"""A keyring backend for tests only: a JSON file in the test sandbox, so CLI subprocesses share it.
(Ember itself never writes a token to a file: it uses the OS keychain through `keyring`.)"""

from __future__ import annotations

import json
import os
from pathlib import Path

from keyring.backend import KeyringBackend
from keyring.errors import KeyringLocked


class FileTestKeyring(KeyringBackend):
    priority = 1  # type: ignore[assignment]

    def _path(self) -> Path:
        return Path(os.environ["EMBER_TEST_KEYRING"])

    def _load(self) -> dict[str, str]:
        try:
            return json.loads(self._path().read_text())
        except (OSError, ValueError):
            return {}

    def get_password(self, service: str, username: str) -> str | None:
        return self._load().get(f"{service}/{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        data = self._load()
        data[f"{service}/{username}"] = password
        self._path().write_text(json.dumps(data))

    def delete_password(self, service: str, username: str) -> None:
        data = self._load()
        data.pop(f"{service}/{username}", None)
        self._path().write_text(json.dumps(data))


class UnreadableKeyring(KeyringBackend):
    """A keychain that cannot be read or written (locked, no D-Bus): every call raises."""

    priority = 1  # type: ignore[assignment]

    def get_password(self, service: str, username: str) -> str | None:
        raise KeyringLocked("the keychain is locked")

    def set_password(self, service: str, username: str, password: str) -> None:
        raise KeyringLocked("the keychain is locked")

    def delete_password(self, service: str, username: str) -> None:
        raise KeyringLocked("the keychain is locked")
