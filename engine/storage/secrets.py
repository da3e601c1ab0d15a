"""The Hugging Face token, kept only in the OS keychain through `keyring` — never in a file or a log."""

from __future__ import annotations

import contextlib

import keyring

from engine.errors import EmberError

SERVICE = "ember-chat"
HF_TOKEN = "huggingface-token"


class SecretStoreError(EmberError):
    pass


class TokenStore:
    def __init__(self, service: str = SERVICE) -> None:
        self.service = service

    def get(self) -> str | None:
        try:
            return keyring.get_password(self.service, HF_TOKEN) or None
        except Exception:  # no keychain (headless, locked, no D-Bus): behave as "no token"
            return None

    def set(self, token: str) -> None:
        token = token.strip()
        if not token:
            self.clear()
            return
        try:
            keyring.set_password(self.service, HF_TOKEN, token)
        except Exception as exc:  # any backend failure: say so, never fall back to a file
            raise SecretStoreError(
                f"The system keychain is not available ({exc}); the token was not saved. Ember never writes "
                "tokens to a file."
            ) from exc

    def clear(self) -> None:
        with contextlib.suppress(Exception):
            keyring.delete_password(self.service, HF_TOKEN)
