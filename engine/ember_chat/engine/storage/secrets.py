"""Secrets (the Hugging Face token, remote servers' API keys, the local API server's key), kept only
in the OS keychain through `keyring` — never in a file or a log."""

from __future__ import annotations

import contextlib

import keyring

from ember_chat.engine.errors import EmberError

SERVICE = "ember-chat"
HF_TOKEN = "huggingface-token"
API_SERVER_KEY = "api-server-key"


class SecretStoreError(EmberError):
    pass


class SecretStore:
    """Named secrets in the OS keychain. A keychain that cannot be read reads as "no secret"; one
    that cannot be written is a clear error, never a fallback to a file."""

    def __init__(self, service: str = SERVICE) -> None:
        self.service = service

    def get(self, key: str) -> str | None:
        try:
            return keyring.get_password(self.service, key) or None
        except Exception:  # no keychain (headless, locked, no D-Bus): behave as "no secret"
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
                f"The system keychain is not available ({exc}); {what.lower()} was not saved. Ember never "
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
