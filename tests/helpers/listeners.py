"""The one engine-service listener of the tests that wait for a model: `gate` is set when it has loaded,
and a load that failed fails the test with the engine's sentence."""

from __future__ import annotations

import threading

from ember_chat.engine.inference.backend import ModelDescription
from ember_chat.engine.inference.service.engine import ServiceListener


class Loaded(ServiceListener):
    def __init__(self) -> None:
        self.gate = threading.Event()

    def loaded(self, model: ModelDescription) -> None:
        self.gate.set()

    def load_failed(self, message: str) -> None:
        raise AssertionError(message)
