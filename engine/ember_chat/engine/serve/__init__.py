"""Ember's OpenAI-compatible API server: wire format, guards, and the HTTP server over the engine service."""
