"""Secrets (the Hugging Face token, remote servers' API keys, the local API server's key), kept only
in the OS keychain through `keyring` — never in a file or a log."""

from __future__ import annotations

import contextlib

import keyring

from ember_chat.engine.errors import SecretStoreError

SERVICE = "ember-chat"
HF_TOKEN = "huggingface-token"
API_SERVER_KEY = "api-server-key"


def _lower(what: str) -> str:
    """Lower-case the first letter only, mid-sentence: "the API key" (`str.lower` gives "the api key")."""
    return what[:1].lower() + what[1:]


class SecretStore:
    """Named secrets in the OS keychain. One that cannot be written is a clear error, never a
    fallback to a file. Reading: `read` tells "no secret stored" (None) from "the keychain cannot be
    read" (SecretStoreError), for secrets whose absence would open something (the API server's
    key); `get` reads both as None, for secrets Ember can do without (a token, a remote's key)."""

    def __init__(self, service: str = SERVICE) -> None:
        self.service = service

    def read(self, key: str, what: str = "The secret") -> str | None:
        """The stored secret, None when none is stored; SecretStoreError when the keychain cannot be read."""
        try:
            return keyring.get_password(self.service, key) or None
        except Exception as exc:  # no keychain (headless, locked, no D-Bus), or a backend failure
            raise SecretStoreError(
                f"The system keychain could not be read ({exc or type(exc).__name__}), so {_lower(what)} is unknown."
            ) from exc

    def get(self, key: str) -> str | None:
        """The stored secret, or None when none is stored or the keychain cannot be read."""
        try:
            return self.read(key)
        except SecretStoreError:
            return None

    def set(self, key: str, value: str, what: str = "The secret") -> None:
        value = value.strip()
        if not value:
            self.clear(key)
            return
        try:
            keyring.set_password(self.service, key, value)
        except Exception as exc:  # any backend failure: say so, never fall back to a file
            raise SecretStoreError(
                f"The system keychain is not available ({exc}); {_lower(what)} was not saved. Ember never "
                "writes secrets to a file."
            ) from exc

    def clear(self, key: str) -> None:
        with contextlib.suppress(Exception):
            keyring.delete_password(self.service, key)


class TokenStore:
    """The Hugging Face token."""

    def __init__(self, service: str = SERVICE) -> None:
        self.secrets = SecretStore(service)
        self.service = service

    def get(self) -> str | None:
        return self.secrets.get(HF_TOKEN)

    def set(self, token: str) -> None:
        self.secrets.set(HF_TOKEN, token, "The token")

    def clear(self) -> None:
        self.secrets.clear(HF_TOKEN)
