"""Ember's engine: local inference, model files, chat store, settings. Never imports Qt."""

__version__ = "0.1.0"
